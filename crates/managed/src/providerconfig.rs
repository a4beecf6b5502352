//! The ProviderConfig controller: counts a config's ProviderConfigUsages into `status.users`, holds the
//! finalizer `in-use.crossplane.io`, and blocks the config's deletion while usages exist
//! (crossplane-runtime's `providerconfig` reconciler).
//!
//! It works on dynamic objects, so one implementation serves every provider's `ProviderConfig` and
//! `ClusterProviderConfig` kinds. Usages without a controller reference are stale and deleted.

use std::sync::Arc;
use std::time::Duration;

use apis::meta::{FINALIZER_IN_USE, LABEL_PROVIDER_CONFIG, LABEL_PROVIDER_CONFIG_KIND};
use apis::{Condition, ConditionStatus};
use kube::api::{ApiResource, DeleteParams, DynamicObject, ListParams, Patch, PatchParams};
use kube::runtime::controller::Action;
use kube::runtime::reflector::ObjectRef;
use kube::runtime::{Controller, watcher};
use kube::{Api, Resource, ResourceExt};
use manager::controller::{ControllerBuilder, ReconcileError};
use manager::fence::is_not_leader;
use manager::{Fence, Manager, TermContext};
use serde_json::json;

use manager::controller::event::{EventType, Recorder};

/// Condition type set while deletion is blocked.
pub const TYPE_TERMINATING: &str = "Terminating";
/// Its reason.
pub const REASON_IN_USE: &str = "InUse";

/// One ProviderConfig kind and the usage kind that counts for it.
#[derive(Debug, Clone)]
pub struct ProviderConfigKind {
    /// The config kind.
    pub config: ApiResource,
    /// Whether configs of this kind are namespaced.
    pub config_namespaced: bool,
    /// The usage kind.
    pub usage: ApiResource,
    /// Whether usages are namespaced.
    pub usage_namespaced: bool,
    /// Usages name their config's kind in `crossplane.io/provider-config-kind` (typed references).
    pub kind_label: bool,
}

/// Reconciling a config failed.
#[derive(Debug, thiserror::Error)]
pub enum ProviderConfigError {
    /// Listing usages failed.
    #[error("cannot list usages: {0}")]
    List(#[source] kube::Error),
    /// A write failed.
    #[error("cannot update ProviderConfig: {0}")]
    Write(#[source] kube::Error),
}

impl ReconcileError for ProviderConfigError {
    fn is_not_leader(&self) -> bool {
        match self {
            Self::List(e) | Self::Write(e) => is_not_leader(e),
        }
    }
}

struct Ctx {
    kind: ProviderConfigKind,
    client: kube::Client,
    fence: Fence,
    recorder: Recorder,
}

/// The controller for one ProviderConfig kind.
#[derive(Debug, Clone)]
pub struct ProviderConfigController {
    kind: ProviderConfigKind,
    name: String,
}

impl ProviderConfigController {
    /// A controller for `kind`.
    pub fn new(kind: ProviderConfigKind) -> Self {
        let name = format!(
            "providerconfig/{}.{}",
            kind.config.kind.to_lowercase(),
            kind.config.group
        );
        Self { kind, name }
    }

    /// The controller's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Registers the controller with `mgr` as a gated runnable.
    pub fn register(self, mgr: &mut Manager) {
        let name = self.name.clone();
        mgr.add_gated(name, move |ctx: TermContext| {
            let this = self.clone();
            async move { this.run(ctx).await }
        });
    }

    /// Runs for one term.
    pub async fn run(self, ctx: TermContext) -> Result<(), ProviderConfigError> {
        let client = ctx.client().clone();
        let kind = self.kind.clone();
        let configs: Api<DynamicObject> = Api::all_with(client.clone(), &kind.config);
        let usages: Api<DynamicObject> = Api::all_with(client, &kind.usage);
        let shared = Arc::new(Ctx {
            kind: kind.clone(),
            client: ctx.client().clone(),
            fence: ctx.fence().clone(),
            recorder: Recorder::new(self.name.clone(), ctx.term().identity.clone()),
        });
        let token = ctx.token().clone();
        let mapper_kind = kind.clone();
        let controller = Controller::new_with(
            configs,
            watcher::Config::default().any_semantic(),
            kind.config.clone(),
        )
        .watches_with(usages, kind.usage.clone(), watcher::Config::default(), move |u| {
            usage_owner(&mapper_kind, &u)
        });
        ControllerBuilder::new(self.name.clone(), controller)
            .run(&token, reconcile, shared)
            .await;
        Ok(())
    }
}

/// The config a usage counts for, if it is of this kind.
fn usage_owner(kind: &ProviderConfigKind, usage: &DynamicObject) -> Option<ObjectRef<DynamicObject>> {
    let labels = usage.labels();
    let name = labels.get(LABEL_PROVIDER_CONFIG)?;
    if kind.kind_label && labels.get(LABEL_PROVIDER_CONFIG_KIND) != Some(&kind.config.kind) {
        return None;
    }
    let r = ObjectRef::new_with(name, kind.config.clone());
    Some(if kind.config_namespaced {
        r.within(usage.namespace().as_deref()?)
    } else {
        r
    })
}

fn config_api(ctx: &Ctx, ns: Option<&str>) -> Api<DynamicObject> {
    let client = ctx.client.clone();
    match ns {
        Some(ns) if ctx.kind.config_namespaced => Api::namespaced_with(client, ns, &ctx.kind.config),
        _ => Api::all_with(client, &ctx.kind.config),
    }
}

async fn reconcile(pc: Arc<DynamicObject>, ctx: Arc<Ctx>) -> Result<Action, ProviderConfigError> {
    if ctx.fence.check().is_err() {
        return Ok(Action::await_change());
    }
    let name = pc.name_any();
    let ns = pc.namespace();
    let mut selector = format!("{LABEL_PROVIDER_CONFIG}={name}");
    if ctx.kind.kind_label {
        selector.push_str(&format!(",{LABEL_PROVIDER_CONFIG_KIND}={}", ctx.kind.config.kind));
    }
    let usage_client = ctx.client.clone();
    let usages: Api<DynamicObject> = match ns.as_deref() {
        Some(ns) if ctx.kind.config_namespaced && ctx.kind.usage_namespaced => {
            Api::namespaced_with(usage_client, ns, &ctx.kind.usage)
        }
        _ => Api::all_with(usage_client, &ctx.kind.usage),
    };
    let list = usages
        .list(&ListParams::default().labels(&selector))
        .await
        .map_err(ProviderConfigError::List)?;
    let mut users: i64 = 0;
    for u in &list.items {
        if u.owner_references().iter().any(|o| o.controller == Some(true)) {
            users += 1;
        } else {
            let api: Api<DynamicObject> = match u.namespace() {
                Some(uns) => Api::namespaced_with(ctx.client.clone(), &uns, &ctx.kind.usage),
                None => Api::all_with(ctx.client.clone(), &ctx.kind.usage),
            };
            if let Err(e) = api.delete(&u.name_any(), &DeleteParams::default()).await {
                tracing::debug!(error = %e, usage = %u.name_any(), "cannot delete stale usage");
            }
        }
    }

    let api = config_api(&ctx, ns.as_deref());
    let finalizers = pc.finalizers().to_vec();
    let has_finalizer = finalizers.iter().any(|f| f == FINALIZER_IN_USE);
    let status_users = pc
        .data
        .get("status")
        .and_then(|s| s.get("users"))
        .and_then(|u| u.as_i64());

    if pc.metadata.deletion_timestamp.is_some() {
        if users > 0 {
            let msg = format!("Cannot delete: {users} ProviderConfigUsage(s) still use this config");
            let cond =
                Condition::new(TYPE_TERMINATING, ConditionStatus::True, REASON_IN_USE).with_message(&msg);
            let mut conditions: Vec<Condition> = pc
                .data
                .get("status")
                .and_then(|s| s.get("conditions"))
                .and_then(|c| serde_json::from_value(c.clone()).ok())
                .unwrap_or_default();
            let changed = apis::condition::set(&mut conditions, [cond]);
            if changed || status_users != Some(users) {
                let patch = json!({ "status": { "users": users, "conditions": conditions } });
                api.patch_status(&name, &PatchParams::default(), &Patch::Merge(&patch))
                    .await
                    .map_err(ProviderConfigError::Write)?;
                let regarding = pc.object_ref(&ctx.kind.config);
                ctx.recorder
                    .publish(&ctx.client, &regarding, EventType::Warning, "InUse", &msg)
                    .await;
            }
            // Usages are watched; the poll is a safety net.
            return Ok(Action::requeue(Duration::from_secs(30)));
        }
        if has_finalizer {
            let kept: Vec<String> = finalizers.into_iter().filter(|f| f != FINALIZER_IN_USE).collect();
            let patch =
                json!({ "metadata": { "resourceVersion": pc.resource_version(), "finalizers": kept } });
            api.patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
                .await
                .map_err(ProviderConfigError::Write)?;
        }
        return Ok(Action::await_change());
    }

    if !has_finalizer {
        let mut all = finalizers;
        all.push(FINALIZER_IN_USE.to_owned());
        let patch = json!({ "metadata": { "resourceVersion": pc.resource_version(), "finalizers": all } });
        api.patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .map_err(ProviderConfigError::Write)?;
    }
    if status_users != Some(users) {
        let patch = json!({ "status": { "users": users } });
        api.patch_status(&name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .map_err(ProviderConfigError::Write)?;
    }
    Ok(Action::await_change())
}
