//! The usage reconciler (upstream's `internal/controller/protection/usage`), one controller per
//! flavor over the same steps:
//!
//! - **Live.** Keep the finalizer `usage.apiextensions.crossplane.io`; resolve a `resourceSelector` of
//!   `of` and `by` to a `resourceRef` and write it into the spec ([`super::selector`]); keep the
//!   `crossplane.io/usage-details` annotation; label the used resource `crossplane.io/in-use: "true"`
//!   (which sends its deletions to the webhook); make the using resource an owner of the Usage, so the
//!   Usage goes when its user goes. Then `Ready=True` (`Available`) and `Synced=True`.
//! - **Deleted.** A composed Usage (label `crossplane.io/composite`, which the XR removes before it
//!   deletes a Usage it no longer wants) waits while its user still exists. Then the in-use label comes off
//!   the used resource unless another Usage protects it, the finalizer comes off, and with
//!   `replayDeletion` a deletion the webhook refused is issued again with its propagation policy.
//!
//! A failure sets `Synced=False` (`ReconcileError`) with what went wrong in words (a kind this cluster
//! does not serve, a user that does not exist, a refusal from the apiserver) and is retried with
//! backoff.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use apis::apiextensions::labels::LABEL_COMPOSITE;
use apis::condition::{self, Condition};
use apis::protection::{
    ANNOTATION_DELETION_ATTEMPT, ANNOTATION_USAGE_DETAILS, FINALIZER, LABEL_IN_USE, UsageSpec,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::api::{DeleteParams, ListParams, Patch, PatchParams, PropagationPolicy};
use kube::core::DynamicObject;
use kube::runtime::controller::Action;
use kube::runtime::{Controller, watcher};
use kube::{Api, ResourceExt};
use manager::controller::ControllerBuilder;
use manager::{BoxError, ReconcileMetrics, TermContext};
use serde_json::{Value, json};

use super::finder::{Finder, Target};
use super::model::{Flavor, Found};
use super::selector::{self, Candidate};
use crate::composite::discovery::{Discovery, Kind};
use crate::error::{Error, is_not_found};

/// How often a deleted, composed Usage looks again for its user.
const WAIT_FOR_USER: Duration = Duration::from_secs(5);

/// What every flavor's controller shares.
struct Ctx {
    client: kube::Client,
    flavor: Flavor,
    finder: Finder,
    discovery: Discovery,
    poll: Duration,
}

/// Runs the three controllers (Usage, ClusterUsage, legacy Usage) until the term ends. `selector`
/// limits the Usages watched (test isolation); `poll` is how often a Ready Usage is checked again.
pub async fn run(
    ctx: TermContext,
    selector: Option<String>,
    poll: Duration,
    metrics: ReconcileMetrics,
) -> Result<(), BoxError> {
    let runs = Flavor::ALL.map(|flavor| {
        let client = ctx.client().clone();
        let selector = selector.clone();
        let metrics = metrics.clone();
        let token = ctx.token().clone();
        async move {
            let ar = flavor.resource();
            let api: Api<DynamicObject> = Api::all_with(client.clone(), &ar);
            let mut wc = watcher::Config::default();
            if let Some(s) = &selector {
                wc = wc.labels(s);
            }
            let shared = Arc::new(Ctx {
                client: client.clone(),
                flavor,
                finder: Finder::new(client, selector),
                discovery: Discovery::default(),
                poll,
            });
            ControllerBuilder::new(flavor.controller_name(), Controller::new_with(api, wc, ar))
                .metrics(&metrics)
                .run(&token, reconcile, shared)
                .await;
        }
    });
    let [a, b, c] = runs;
    tokio::join!(a, b, c);
    Ok(())
}

/// The Usage's own API.
fn usage_api(ctx: &Ctx, obj: &DynamicObject) -> Api<DynamicObject> {
    let ar = ctx.flavor.resource();
    match obj.namespace().filter(|_| ctx.flavor.namespaced()) {
        Some(ns) => Api::namespaced_with(ctx.client.clone(), &ns, &ar),
        None => Api::all_with(ctx.client.clone(), &ar),
    }
}

async fn reconcile(obj: Arc<DynamicObject>, ctx: Arc<Ctx>) -> Result<Action, Error> {
    let deleting = obj.metadata.deletion_timestamp.is_some();
    let result = match Found::parse(ctx.flavor, &obj) {
        Ok(found) if deleting => release(&obj, &found, &ctx).await,
        Ok(found) => protect(&obj, &found, &ctx).await,
        Err(e) => Err(Error::Message(e)),
    };
    match &result {
        Ok(_) if deleting => {}
        Ok(_) => {
            set_conditions(
                &obj,
                &ctx,
                [Condition::available(), Condition::reconcile_success()],
            )
            .await?;
        }
        Err(e) if e.is_not_leader() || e.is_conflict() => {}
        Err(e) if !deleting => {
            // Best effort: the error itself is what the controller reports and retries.
            if let Err(status) = set_conditions(&obj, &ctx, [Condition::reconcile_error(e)]).await {
                tracing::debug!(error = %status, "cannot record the usage's error in its status");
            }
        }
        Err(_) => {}
    }
    result
}

/// Sets `conditions` on the Usage's status unless they are already there.
async fn set_conditions(
    obj: &DynamicObject,
    ctx: &Ctx,
    conditions: impl IntoIterator<Item = Condition>,
) -> Result<(), Error> {
    let mut current: Vec<Condition> = obj
        .data
        .pointer("/status/conditions")
        .cloned()
        .and_then(|c| serde_json::from_value(c).ok())
        .unwrap_or_default();
    let generation = obj.metadata.generation;
    let changed = condition::set(
        &mut current,
        conditions
            .into_iter()
            .map(|c| c.with_observed_generation(generation)),
    );
    if changed {
        let patch = json!({"status": {"conditions": current}});
        usage_api(ctx, obj)
            .patch_status(&obj.name_any(), &PatchParams::default(), &Patch::Merge(&patch))
            .await?;
    }
    Ok(())
}

/// A resolved reference: the kind's API, and the object's name and namespace.
struct Resolved {
    kind: Kind,
    api_version: String,
    name: String,
    namespace: Option<String>,
}

impl Resolved {
    fn api(&self, client: &kube::Client) -> Api<DynamicObject> {
        match &self.namespace {
            Some(ns) => Api::namespaced_with(client.clone(), ns, &self.kind.resource),
            None => Api::all_with(client.clone(), &self.kind.resource),
        }
    }

    fn describe(&self) -> String {
        match &self.namespace {
            Some(ns) => format!("{} {ns}/{}", self.kind.resource.kind, self.name),
            None => format!("{} {}", self.kind.resource.kind, self.name),
        }
    }
}

/// The kind of `field` (`spec.of` or `spec.by`), through discovery, in words when it is not served.
async fn kind_of(ctx: &Ctx, field: &str, api_version: &str, kind: &str) -> Result<Kind, Error> {
    if api_version.is_empty() || kind.is_empty() {
        return Err(Error::Message(format!("{field} needs an apiVersion and a kind")));
    }
    ctx.discovery
        .resolve(&ctx.client, api_version, kind)
        .await
        .map_err(|_| {
            Error::Message(format!(
                "{field} names kind {kind} of apiVersion {api_version}, which this cluster does not serve: \
                 check the apiVersion and kind, or install the CRD that defines it"
            ))
        })
}

/// Picks the object a selector selects, in `namespace` (cluster-wide for a cluster-scoped kind).
async fn select(
    ctx: &Ctx,
    usage: &DynamicObject,
    kind: &Kind,
    namespace: Option<&str>,
    labels: &BTreeMap<String, String>,
    match_controller: bool,
) -> Result<Candidate, Error> {
    let api: Api<DynamicObject> = match namespace.filter(|_| kind.namespaced) {
        Some(ns) => Api::namespaced_with(ctx.client.clone(), ns, &kind.resource),
        None => Api::all_with(ctx.client.clone(), &kind.resource),
    };
    let mut lp = ListParams::default();
    if !labels.is_empty() {
        lp = lp.labels(&selector::label_selector(labels));
    }
    let list = api.list(&lp).await.map_err(|e| {
        Error::Message(format!(
            "cannot list {} to resolve the selector: {}",
            kind.resource.plural,
            crate::error::explain(&e)
        ))
    })?;
    let candidates: Vec<Candidate> = list
        .items
        .iter()
        .map(|o| Candidate {
            name: o.name_any(),
            namespace: o.namespace(),
            labels: o.labels().clone(),
            controller: selector::controller_uid(o.owner_references()),
        })
        .collect();
    let usage_controller = selector::controller_uid(usage.owner_references());
    let controller = match_controller.then_some(usage_controller.as_deref());
    selector::pick(&kind.resource.kind, &candidates, labels, controller)
        .cloned()
        .map_err(Error::Message)
}

/// Resolves `spec.of`, writing a selected object into the spec.
async fn resolve_of(ctx: &Ctx, usage: &DynamicObject, found: &Found) -> Result<Resolved, Error> {
    let of = &found.spec.of;
    let kind = kind_of(ctx, "spec.of", &of.api_version, &of.kind).await?;
    let own_ns = found.namespace.clone();
    if let Some(r) = of.resource_ref.as_ref().filter(|r| !r.name.is_empty()) {
        let namespace = kind
            .namespaced
            .then(|| r.namespace.clone().or(own_ns.clone()))
            .flatten();
        return Ok(Resolved {
            kind,
            api_version: of.api_version.clone(),
            name: r.name.clone(),
            namespace,
        });
    }
    let Some(sel) = &of.resource_selector else {
        return Err(Error::Message(
            "spec.of needs a resourceRef or a resourceSelector".to_owned(),
        ));
    };
    let ns = sel.namespace.clone().or(own_ns.clone());
    let picked = select(
        ctx,
        usage,
        &kind,
        ns.as_deref(),
        &sel.match_labels,
        sel.match_controller_ref == Some(true),
    )
    .await
    .map_err(|e| {
        Error::Message(format!(
            "cannot resolve the selector at spec.of.resourceSelector: {e}"
        ))
    })?;
    let mut reference = json!({"name": picked.name});
    if picked.namespace.is_some() && picked.namespace != own_ns {
        reference["namespace"] = json!(picked.namespace);
    }
    patch_usage(ctx, usage, json!({"spec": {"of": {"resourceRef": reference}}})).await?;
    Ok(Resolved {
        kind,
        api_version: of.api_version.clone(),
        name: picked.name,
        namespace: picked.namespace,
    })
}

/// Resolves `spec.by` (always cluster-scoped or in the Usage's namespace), writing a selected object
/// into the spec.
async fn resolve_by(
    ctx: &Ctx,
    usage: &DynamicObject,
    spec: &UsageSpec,
    namespace: Option<&str>,
) -> Result<Option<Resolved>, Error> {
    let Some(by) = &spec.by else {
        return Ok(None);
    };
    let kind = kind_of(ctx, "spec.by", &by.api_version, &by.kind).await?;
    let ns = namespace.filter(|_| kind.namespaced).map(str::to_owned);
    let name = match by.resource_ref.as_ref().filter(|r| !r.name.is_empty()) {
        Some(r) => r.name.clone(),
        None => {
            let Some(sel) = &by.resource_selector else {
                return Err(Error::Message(
                    "spec.by needs a resourceRef or a resourceSelector".to_owned(),
                ));
            };
            let picked = select(
                ctx,
                usage,
                &kind,
                ns.as_deref(),
                &sel.match_labels,
                sel.match_controller_ref == Some(true),
            )
            .await
            .map_err(|e| {
                Error::Message(format!(
                    "cannot resolve the selector at spec.by.resourceSelector: {e}"
                ))
            })?;
            patch_usage(
                ctx,
                usage,
                json!({"spec": {"by": {"resourceRef": {"name": picked.name}}}}),
            )
            .await?;
            picked.name
        }
    };
    Ok(Some(Resolved {
        kind,
        api_version: by.api_version.clone(),
        name,
        namespace: ns,
    }))
}

/// A merge patch of the Usage.
async fn patch_usage(ctx: &Ctx, usage: &DynamicObject, patch: Value) -> Result<(), Error> {
    usage_api(ctx, usage)
        .patch(&usage.name_any(), &PatchParams::default(), &Patch::Merge(&patch))
        .await?;
    Ok(())
}

/// The live Usage: finalizer, references, details, the in-use label and the owner reference.
async fn protect(usage: &DynamicObject, found: &Found, ctx: &Ctx) -> Result<Action, Error> {
    if !usage.finalizers().iter().any(|f| f == FINALIZER) {
        let mut finalizers = usage.finalizers().to_vec();
        finalizers.push(FINALIZER.to_owned());
        patch_usage(
            ctx,
            usage,
            json!({"metadata": {"finalizers": finalizers, "resourceVersion": usage.resource_version()}}),
        )
        .await?;
    }
    let used = resolve_of(ctx, usage, found).await?;
    let by = resolve_by(ctx, usage, &found.spec, found.namespace.as_deref()).await?;

    // The details name what was resolved.
    let mut resolved = found.clone();
    if let Some(r) = resolved.spec.of.resource_ref.as_mut() {
        r.name.clone_from(&used.name);
    } else {
        resolved.spec.of.resource_ref = Some(apis::protection::NamespacedResourceRef {
            name: used.name.clone(),
            namespace: used
                .namespace
                .clone()
                .filter(|n| Some(n) != found.namespace.as_ref()),
        });
    }
    if let (Some(b), Some(r)) = (resolved.spec.by.as_mut(), by.as_ref()) {
        b.resource_ref = Some(apis::protection::ResourceRef { name: r.name.clone() });
    }
    let details = super::message::details(&resolved);
    if usage.annotations().get(ANNOTATION_USAGE_DETAILS) != Some(&details) {
        patch_usage(
            ctx,
            usage,
            json!({"metadata": {"annotations": {ANNOTATION_USAGE_DETAILS: details}}}),
        )
        .await?;
    }

    let used_api = used.api(&ctx.client);
    let Some(object) = used_api.get_opt(&used.name).await? else {
        return Err(Error::Message(format!(
            "the used resource {} does not exist",
            used.describe()
        )));
    };
    if object.labels().get(LABEL_IN_USE).map(String::as_str) != Some("true") {
        let patch = json!({"metadata": {"labels": {LABEL_IN_USE: "true"}}});
        used_api
            .patch(&used.name, &PatchParams::default(), &Patch::Merge(&patch))
            .await?;
        tracing::info!(used = %used.describe(), usage = %found.name, "labelled the used resource in use");
    }

    if let Some(by) = by {
        let Some(user) = by.api(&ctx.client).get_opt(&by.name).await? else {
            return Err(Error::Message(format!(
                "the using resource {} does not exist",
                by.describe()
            )));
        };
        let uid = user.uid().unwrap_or_default();
        if !usage.owner_references().iter().any(|o| o.uid == uid) {
            let mut owners = usage.owner_references().to_vec();
            owners.push(OwnerReference {
                api_version: by.api_version.clone(),
                kind: by.kind.resource.kind.clone(),
                name: by.name.clone(),
                uid,
                ..OwnerReference::default()
            });
            patch_usage(ctx, usage, json!({"metadata": {"ownerReferences": owners}})).await?;
        }
    }
    Ok(Action::requeue(ctx.poll))
}

/// The deleted Usage: wait for a composed Usage's user, release the used resource, drop the finalizer,
/// replay a refused deletion.
async fn release(usage: &DynamicObject, found: &Found, ctx: &Ctx) -> Result<Action, Error> {
    if !usage.finalizers().iter().any(|f| f == FINALIZER) {
        return Ok(Action::await_change());
    }
    let composed = usage.labels().get(LABEL_COMPOSITE).is_some_and(|v| !v.is_empty());
    if composed
        && let Some(by) = &found.spec.by
        && let Some(r) = by.resource_ref.as_ref().filter(|r| !r.name.is_empty())
        && let Ok(kind) = kind_of(ctx, "spec.by", &by.api_version, &by.kind).await
    {
        let user = Resolved {
            namespace: found.namespace.clone().filter(|_| kind.namespaced),
            kind,
            api_version: by.api_version.clone(),
            name: r.name.clone(),
        };
        if user.api(&ctx.client).get_opt(&user.name).await?.is_some() {
            tracing::debug!(usage = %found.name, user = %user.describe(), "waiting for the using resource to be deleted");
            return Ok(Action::requeue(WAIT_FOR_USER));
        }
    }

    let mut replay: Option<(Api<DynamicObject>, String, String)> = None;
    if let Some(r) = found.spec.of.resource_ref.as_ref().filter(|r| !r.name.is_empty())
        && let Ok(kind) = kind_of(ctx, "spec.of", &found.spec.of.api_version, &found.spec.of.kind).await
    {
        let used = Resolved {
            namespace: kind
                .namespaced
                .then(|| r.namespace.clone().or(found.namespace.clone()))
                .flatten(),
            kind,
            api_version: found.spec.of.api_version.clone(),
            name: r.name.clone(),
        };
        let api = used.api(&ctx.client);
        if let Some(object) = api.get_opt(&used.name).await? {
            let target = Target {
                api_version: &used.api_version,
                kind: &used.kind.resource.kind,
                name: &used.name,
                namespace: used.namespace.as_deref(),
            };
            let others = ctx.finder.usages_of(target).await?;
            if others.len() < 2 && object.labels().contains_key(LABEL_IN_USE) {
                let patch = json!({"metadata": {"labels": {LABEL_IN_USE: null}}});
                api.patch(&used.name, &PatchParams::default(), &Patch::Merge(&patch))
                    .await?;
                tracing::info!(used = %used.describe(), usage = %found.name, "removed the in-use label");
            }
            if found.spec.replay_deletion == Some(true)
                && let Some(policy) = object.annotations().get(ANNOTATION_DELETION_ATTEMPT)
            {
                replay = Some((api, used.name.clone(), policy.clone()));
            }
        }
    }

    let finalizers: Vec<&String> = usage.finalizers().iter().filter(|f| *f != FINALIZER).collect();
    patch_usage(
        ctx,
        usage,
        json!({"metadata": {"finalizers": finalizers, "resourceVersion": usage.resource_version()}}),
    )
    .await?;

    if let Some((api, name, policy)) = replay {
        let propagation = match policy.as_str() {
            "Foreground" => Some(PropagationPolicy::Foreground),
            "Orphan" => Some(PropagationPolicy::Orphan),
            _ => Some(PropagationPolicy::Background),
        };
        let dp = DeleteParams {
            propagation_policy: propagation,
            ..DeleteParams::default()
        };
        match api.delete(&name, &dp).await {
            Ok(_) => {
                tracing::info!(name = %name, policy = %policy, "replayed the deletion of the used resource")
            }
            Err(e) if is_not_found(&e) => {}
            Err(e) => tracing::warn!(
                name = %name, error = %crate::error::explain(&e),
                "cannot replay the deletion of the used resource"
            ),
        }
    }
    Ok(Action::await_change())
}
