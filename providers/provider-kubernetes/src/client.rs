//! The Object's external client: the "external resource" is an object in the target cluster.
//!
//! - `observe` resolves references (on the local cluster), validates the manifest and defaults its name
//!   (and, for namespaced Objects, its namespace), reads the target object, records it in
//!   `status.atProvider.manifest`, decides whether it is up to date (every field of the manifest has the
//!   same value in the object), computes readiness by the chosen policy, and reads connection details;
//! - `create` and `update` server-side apply the manifest with force, as field manager
//!   `provider-kubernetes/<object-name>`;
//! - `delete` deletes with the chosen propagation policy.

use std::sync::Arc;
use std::time::Duration;

use apis::Condition;
use k8s_openapi::api::core::v1::Secret;
use kube::api::{
    ApiResource, DeleteParams, DynamicObject, GroupVersionKind, Patch, PatchParams, PropagationPolicy,
};
use kube::discovery::Scope;
use kube::{Api, ResourceExt};
use managed::{
    ConnectionDetails, ExternalClient, ExternalCreation, ExternalDelete, ExternalError, ExternalObservation,
    ExternalUpdate,
};
use serde_json::Value;

use crate::connector::DiscoveryCache;
use crate::manifest::{self, Desired};
use crate::object::ObjectKind;
use crate::types::{ConnectionDetail, DeletionPropagation, ReadinessPolicy, Reference};

/// How soon an Object that is not ready is observed again.
pub const NOT_READY_POLL: Duration = Duration::from_secs(30);

/// One reconcile's connection to the target cluster.
pub struct ObjectClient {
    local: kube::Client,
    target: kube::Client,
    target_key: String,
    discovery: Arc<DiscoveryCache>,
    desired: Option<Desired>,
    sanitize_secrets: bool,
}

impl ObjectClient {
    pub(crate) fn new(
        local: kube::Client,
        target: kube::Client,
        target_key: String,
        discovery: Arc<DiscoveryCache>,
    ) -> Self {
        Self {
            local,
            target,
            target_key,
            discovery,
            desired: None,
            sanitize_secrets: false,
        }
    }

    /// With `on`, an observed Secret's values are redacted in the status ([`redact_secret`]).
    pub(crate) fn sanitizing_secrets(mut self, on: bool) -> Self {
        self.sanitize_secrets = on;
        self
    }

    async fn resource(
        &self,
        client: &kube::Client,
        key: &str,
        api_version: &str,
        kind: &str,
    ) -> Result<(ApiResource, bool), ExternalError> {
        if let Some(hit) = self.discovery.get(key, api_version, kind) {
            return Ok(hit);
        }
        let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
        let gvk = GroupVersionKind::gvk(group, version, kind);
        let (ar, caps) = kube::discovery::pinned_kind(client, &gvk)
            .await
            .map_err(|e| ExternalError::wrap(format!("cannot find kind {kind} in {api_version}"), e))?;
        let found = (ar, caps.scope == Scope::Namespaced);
        self.discovery.put(key, api_version, kind, found.clone());
        Ok(found)
    }

    /// An API for `kind` in `namespace` on `client` (a client whose writes pass the term's fence).
    async fn api(
        &self,
        client: &kube::Client,
        key: &str,
        api_version: &str,
        kind: &str,
        namespace: Option<&str>,
    ) -> Result<Api<DynamicObject>, ExternalError> {
        let (ar, namespaced) = self.resource(client, key, api_version, kind).await?;
        let raw = client.clone();
        let api = match (namespaced, namespace) {
            (true, Some(ns)) => Api::namespaced_with(raw, ns, &ar),
            (true, None) => {
                return Err(ExternalError::new(format!(
                    "{kind} is namespaced but no namespace was given"
                )));
            }
            (false, _) => Api::all_with(raw, &ar),
        };
        Ok(api)
    }

    fn desired(&self) -> Result<&Desired, ExternalError> {
        self.desired
            .as_ref()
            .ok_or_else(|| ExternalError::new("internal error: no observed manifest"))
    }

    async fn target_api(&self, d: &Desired) -> Result<Api<DynamicObject>, ExternalError> {
        self.api(
            &self.target,
            &self.target_key,
            &d.api_version,
            &d.kind,
            d.namespace.as_deref(),
        )
        .await
    }

    /// Resolves `references` into the manifest: every referenced object must exist; `patchesFrom` copies a
    /// field.
    async fn resolve<K: ObjectKind>(&self, mr: &K, manifest: &mut Value) -> Result<(), ExternalError> {
        for Reference {
            depends_on,
            patches_from,
            to_field_path,
        } in &mr.fields().references
        {
            let (dep, field) = match (depends_on, patches_from) {
                (_, Some(p)) => (&p.depends_on, Some(p.field_path.as_str())),
                (Some(d), None) => (d, None),
                (None, None) => continue,
            };
            let api_version = dep
                .api_version
                .as_deref()
                .unwrap_or(K::default_reference_api_version());
            let kind = dep.kind.as_deref().unwrap_or("Object");
            let ns = dep.namespace.clone().or_else(|| mr.default_manifest_namespace());
            let shown = format!("{kind} {}", dep.name);
            let api = self
                .api(&self.local, "local", api_version, kind, ns.as_deref())
                .await?;
            let obj = api
                .get_opt(&dep.name)
                .await
                .map_err(|e| ExternalError::wrap(format!("cannot resolve reference to {shown}"), e))?
                .ok_or_else(|| {
                    ExternalError::new(format!("cannot resolve reference to {shown}: not found"))
                })?;
            if let Some(path) = field {
                let value = serde_json::to_value(&obj)
                    .map_err(|e| ExternalError::wrap("cannot read reference", e))?;
                let v = manifest::get_path(&value, path)
                    .map_err(|e| ExternalError::new(e.to_string()))?
                    .cloned()
                    .ok_or_else(|| {
                        ExternalError::new(format!("cannot resolve reference to {shown}: {path} is not set"))
                    })?;
                let to = to_field_path.as_deref().unwrap_or(path);
                manifest::set_path(manifest, to, v).map_err(|e| ExternalError::new(e.to_string()))?;
            }
        }
        Ok(())
    }

    async fn connection_details(
        &self,
        details: &[ConnectionDetail],
    ) -> Result<ConnectionDetails, ExternalError> {
        let mut out = ConnectionDetails::new();
        for d in details {
            let (Some(kind), Some(name), Some(path), Some(key)) = (
                d.kind.as_deref(),
                d.name.as_deref(),
                d.field_path.as_deref(),
                d.to_connection_secret_key.as_deref(),
            ) else {
                return Err(ExternalError::new(
                    "connectionDetails entries need kind, name, fieldPath and toConnectionSecretKey",
                ));
            };
            let api_version = d.api_version.as_deref().unwrap_or("v1");
            let shown = format!("{kind} {name}");
            let value = if kind == "Secret" && api_version == "v1" {
                let ns = d.namespace.as_deref().unwrap_or("default");
                let secret = Api::<Secret>::namespaced(self.target.clone(), ns)
                    .get(name)
                    .await
                    .map_err(|e| {
                        ExternalError::wrap(format!("cannot get connection detail from {shown}"), e)
                    })?;
                // Secret data is decoded, so data.<key> yields the plain value.
                let data: serde_json::Map<String, Value> = secret
                    .data
                    .unwrap_or_default()
                    .into_iter()
                    .map(|(k, v)| (k, Value::String(String::from_utf8_lossy(&v.0).into_owned())))
                    .collect();
                let mut obj = serde_json::json!({ "data": data });
                obj["metadata"] = serde_json::to_value(&secret.metadata).unwrap_or(Value::Null);
                manifest::get_path(&obj, path)
                    .map_err(|e| ExternalError::new(e.to_string()))?
                    .cloned()
            } else {
                let api = self
                    .api(
                        &self.target,
                        &self.target_key,
                        api_version,
                        kind,
                        d.namespace.as_deref(),
                    )
                    .await?;
                let obj = api.get(name).await.map_err(|e| {
                    ExternalError::wrap(format!("cannot get connection detail from {shown}"), e)
                })?;
                let value = serde_json::to_value(&obj).unwrap_or(Value::Null);
                manifest::get_path(&value, path)
                    .map_err(|e| ExternalError::new(e.to_string()))?
                    .cloned()
            };
            let Some(value) = value else {
                return Err(ExternalError::new(format!(
                    "connection detail {path} of {shown} is not set"
                )));
            };
            let bytes = match value {
                Value::String(s) => s.into_bytes(),
                other => other.to_string().into_bytes(),
            };
            out.insert(key.to_owned(), bytes);
        }
        Ok(out)
    }

    async fn apply<K: ObjectKind>(&self, mr: &K) -> Result<(), ExternalError> {
        let d = self.desired()?;
        let api = self.target_api(d).await?;
        let params = PatchParams::apply(&format!("provider-kubernetes/{}", mr.name_any())).force();
        api.patch(&d.name, &params, &Patch::Apply(&d.object))
            .await
            .map_err(|e| ExternalError::fenced(format!("cannot apply {} {}", d.kind, d.name), e))?;
        Ok(())
    }
}

impl<K: ObjectKind> ExternalClient<K> for ObjectClient {
    async fn observe(&mut self, mr: &mut K) -> Result<ExternalObservation, ExternalError> {
        let mut manifest = mr.fields().for_provider.manifest.clone();
        if mr.meta().deletion_timestamp.is_none() {
            self.resolve(mr, &mut manifest).await?;
        }
        let mut desired = manifest::desired(&manifest, &mr.name_any(), None)
            .map_err(|e| ExternalError::new(e.to_string()))?;
        // Only namespaced kinds get the Object's namespace by default.
        let (_, namespaced) = self
            .resource(
                &self.target,
                &self.target_key,
                &desired.api_version,
                &desired.kind,
            )
            .await?;
        if namespaced
            && desired.namespace.is_none()
            && let Some(ns) = mr.default_manifest_namespace()
        {
            desired.set_namespace(&ns);
        }
        let api = self.target_api(&desired).await?;
        let shown = match &desired.namespace {
            Some(ns) => format!("{} {ns}/{}", desired.kind, desired.name),
            None => format!("{} {}", desired.kind, desired.name),
        };
        let observed = api
            .get_opt(&desired.name)
            .await
            .map_err(|e| ExternalError::wrap(format!("cannot get {shown}"), e))?;
        let up_to_date_against = desired.object.clone();
        self.desired = Some(desired);
        let Some(mut observed) = observed else {
            return Ok(ExternalObservation::default());
        };
        observed.managed_fields_mut().clear();
        let value =
            serde_json::to_value(&observed).map_err(|e| ExternalError::wrap("cannot encode object", e))?;
        let up_to_date = manifest::is_subset(&up_to_date_against, &value);
        let ready = match mr.fields().readiness.policy {
            ReadinessPolicy::SuccessfulCreate => up_to_date,
            ReadinessPolicy::DeriveFromObject => manifest::derive_from_object(&value),
            ReadinessPolicy::AllTrue => manifest::all_true(&value),
            ReadinessPolicy::DeriveFromCelQuery => {
                return Err(ExternalError::new(
                    "readiness policy DeriveFromCelQuery is not supported",
                ));
            }
        };
        let mut shown_value = value;
        if self.sanitize_secrets {
            redact_secret(&mut shown_value);
        }
        mr.set_observed(Some(shown_value));
        let ready_condition = if ready {
            Condition::available()
        } else {
            Condition::unavailable()
        };
        apis::condition::set(mr.conditions_mut(), [ready_condition]);
        let details = mr.fields().connection_details.clone();
        let connection_details = self.connection_details(&details).await?;
        Ok(ExternalObservation {
            resource_exists: true,
            resource_up_to_date: up_to_date,
            connection_details,
            poll_after: (!ready).then_some(NOT_READY_POLL),
            ..ExternalObservation::default()
        })
    }

    async fn create(&mut self, mr: &mut K) -> Result<ExternalCreation, ExternalError> {
        self.apply(mr).await?;
        Ok(ExternalCreation::default())
    }

    async fn update(&mut self, mr: &mut K) -> Result<ExternalUpdate, ExternalError> {
        self.apply(mr).await?;
        // The forced apply made the object match the manifest, which is all `SuccessfulCreate` asks
        // for: say so now rather than at the next observe, up to NOT_READY_POLL later.
        if mr.fields().readiness.policy == ReadinessPolicy::SuccessfulCreate {
            apis::condition::set(mr.conditions_mut(), [Condition::available()]);
        }
        Ok(ExternalUpdate::default())
    }

    async fn delete(&mut self, mr: &mut K) -> Result<ExternalDelete, ExternalError> {
        let d = self.desired()?;
        let api = self.target_api(d).await?;
        let policy = match mr
            .fields()
            .for_provider
            .deletion_propagation_policy
            .unwrap_or_default()
        {
            DeletionPropagation::Orphan => PropagationPolicy::Orphan,
            DeletionPropagation::Background => PropagationPolicy::Background,
            DeletionPropagation::Foreground => PropagationPolicy::Foreground,
        };
        let params = DeleteParams {
            propagation_policy: Some(policy),
            ..DeleteParams::default()
        };
        match api.delete(&d.name, &params).await {
            Ok(_) => Ok(ExternalDelete::default()),
            Err(kube::Error::Api(s)) if s.code == 404 => Ok(ExternalDelete::default()),
            Err(e) => Err(ExternalError::fenced(
                format!("cannot delete {} {}", d.kind, d.name),
                e,
            )),
        }
    }
}

/// What a redacted Secret value reads as in the status.
pub const REDACTED: &str = "REDACTED";

/// Replaces every value of a core `v1` Secret's `data` and `stringData` with [`REDACTED`], so that
/// `status.atProvider.manifest` carries its keys but none of its contents; any other object is left
/// as it is.
pub fn redact_secret(object: &mut Value) {
    if object["apiVersion"] != "v1" || object["kind"] != "Secret" {
        return;
    }
    for field in ["data", "stringData"] {
        if let Some(map) = object.get_mut(field).and_then(Value::as_object_mut) {
            for v in map.values_mut() {
                *v = Value::String(REDACTED.to_owned());
            }
        }
    }
}

#[cfg(test)]
mod redact_tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn a_secret_keeps_its_keys_and_loses_its_values() {
        let mut s = json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"},
                           "data": {"password": "aHVudGVyMg=="}, "stringData": {"user": "admin"}});
        redact_secret(&mut s);
        assert_eq!(s["data"], json!({"password": REDACTED}));
        assert_eq!(s["stringData"], json!({"user": REDACTED}));
        assert_eq!(s["metadata"]["name"], "s");
    }

    #[test]
    fn other_objects_are_untouched() {
        let cm = json!({"apiVersion": "v1", "kind": "ConfigMap", "data": {"k": "v"}});
        let mut c = cm.clone();
        redact_secret(&mut c);
        assert_eq!(c, cm);
        let other = json!({"apiVersion": "example.org/v1", "kind": "Secret", "data": {"k": "v"}});
        let mut o = other.clone();
        redact_secret(&mut o);
        assert_eq!(o, other);
    }
}
