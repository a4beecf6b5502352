//! ProviderConfigUsage tracking: before connecting, the reconciler records that a managed resource uses
//! its ProviderConfig, so that the config cannot be deleted while in use.
//!
//! The usage is named after the resource's UID, lives in its namespace (cluster-scoped for cluster-scoped
//! resources), is labelled `crossplane.io/provider-config=<name>` (and `-kind=<kind>` for typed
//! references), and is controller-owned by the resource, so the garbage collector removes it with the
//! resource. It is written with server-side apply once per resource and config.

use std::collections::HashSet;
use std::sync::Mutex;

use apis::meta::{LABEL_PROVIDER_CONFIG, LABEL_PROVIDER_CONFIG_KIND};
use apis::providerconfig::UsageKind;
use kube::api::{ApiResource, DynamicObject, Patch, PatchParams};
use serde_json::json;

use crate::connection::controller_ref;
use crate::resource::Managed;

/// Tracking failed.
#[derive(Debug, thiserror::Error)]
pub enum TrackError {
    /// The resource names no ProviderConfig.
    #[error("no providerConfigRef set")]
    NoReference,
    /// The resource has no UID yet.
    #[error("the managed resource has no uid")]
    NoUid,
    /// The apply failed.
    #[error("cannot apply ProviderConfigUsage: {0}")]
    Apply(#[source] kube::Error),
}

impl TrackError {
    /// True when the fence refused the write.
    pub fn is_not_leader(&self) -> bool {
        matches!(self, Self::Apply(e) if manager::fence::is_not_leader(e))
    }
}

/// Writes ProviderConfigUsages of one provider's usage kind.
#[derive(Debug)]
pub struct UsageTracker {
    resource: ApiResource,
    namespaced: bool,
    field_manager: String,
    tracked: Mutex<HashSet<(String, String, Option<String>)>>,
}

impl UsageTracker {
    /// A tracker for the usage kind in `group`/`version`.
    pub fn new(group: &str, version: &str, namespaced: bool) -> Self {
        Self {
            resource: usage_api_resource(group, version),
            namespaced,
            field_manager: format!("managed/providerconfigusage.{group}"),
            tracked: Mutex::new(HashSet::new()),
        }
    }

    /// The usage kind as an [`ApiResource`].
    pub fn api_resource(&self) -> &ApiResource {
        &self.resource
    }

    /// Whether usages are namespaced.
    pub fn namespaced(&self) -> bool {
        self.namespaced
    }

    /// Records that `mr` uses its ProviderConfig.
    pub async fn track<K: Managed>(&self, client: &kube::Client, mr: &K) -> Result<(), TrackError> {
        let pc = mr
            .managed_spec()
            .provider_config_ref()
            .ok_or(TrackError::NoReference)?;
        let uid = mr.meta().uid.clone().ok_or(TrackError::NoUid)?;
        let key = (uid.clone(), pc.name.clone(), pc.kind.clone());
        {
            let tracked = self
                .tracked
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            if tracked.contains(&key) {
                return Ok(());
            }
        }
        let owner = controller_ref(mr).ok_or(TrackError::NoUid)?;
        let mut labels = serde_json::Map::new();
        labels.insert(LABEL_PROVIDER_CONFIG.to_owned(), json!(pc.name));
        let mut pc_ref = serde_json::Map::new();
        pc_ref.insert("name".to_owned(), json!(pc.name));
        if let Some(kind) = &pc.kind {
            labels.insert(LABEL_PROVIDER_CONFIG_KIND.to_owned(), json!(kind));
            pc_ref.insert("kind".to_owned(), json!(kind));
        }
        let namespace = if self.namespaced {
            mr.meta().namespace.clone()
        } else {
            None
        };
        let mut metadata = json!({
            "name": uid,
            "labels": labels,
            "ownerReferences": [owner],
        });
        if let Some(ns) = &namespace {
            metadata["namespace"] = json!(ns);
        }
        let body = json!({
            "apiVersion": self.resource.api_version,
            "kind": UsageKind::KIND,
            "metadata": metadata,
            "providerConfigRef": pc_ref,
            "resourceRef": {
                "apiVersion": K::api_version(&()),
                "kind": K::kind(&()),
                "name": mr.meta().name.clone().unwrap_or_default(),
                "uid": uid,
            },
        });
        let api = match &namespace {
            Some(ns) => kube::Api::<DynamicObject>::namespaced_with(client.clone(), ns, &self.resource),
            None => kube::Api::<DynamicObject>::all_with(client.clone(), &self.resource),
        };
        api.patch(
            &key.0,
            &PatchParams::apply(&self.field_manager).force(),
            &Patch::Apply(&body),
        )
        .await
        .map_err(TrackError::Apply)?;
        self.tracked
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .insert(key);
        Ok(())
    }
}

/// The [`ApiResource`] of a provider's `ProviderConfigUsage` kind.
pub fn usage_api_resource(group: &str, version: &str) -> ApiResource {
    ApiResource {
        group: group.to_owned(),
        version: version.to_owned(),
        api_version: format!("{group}/{version}"),
        kind: UsageKind::KIND.to_owned(),
        plural: UsageKind::PLURAL.to_owned(),
    }
}
