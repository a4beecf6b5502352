//! The XRD controller (crossplane `internal/controller/apiextensions/definition`): XRD → composite CRD →
//! a composite controller, started as a child of the term.
//!
//! Per XRD: hold the finalizer `defined.apiextensions.crossplane.io`; apply the rendered CRD (controlled
//! by the XRD); wait for it to be Established, and for RBAC to let this replica watch the XRs (a
//! SelfSubjectAccessReview: the RBAC manager's per-XRD role must be aggregated first, or the watch would
//! only collect 403s); start (or, when the XRD's generation changed, restart) the child
//! `composite/<xrd>`; set `Established=True/WatchingCompositeResource`. An XRD that offers claims
//! (`LegacyCluster` with `claimNames`; upstream's `offered` controller) also gets its claim CRD applied
//! and Established, and `Offered=True/WatchingCompositeResourceClaim`. On deletion:
//! `Established=False/TerminatingCompositeResource`, `Offered=False/TerminatingCompositeResourceClaim`,
//! delete all claims and then the claim CRD, delete all XRs and wait for them to go, stop the child,
//! delete the CRD, and drop the finalizer once the CRD is gone.
//!
//! A reconcile reads a CRD from the apiserver only when the cache of the CRDs' metadata (from the
//! metadata-only watch that reconciles an XRD when its CRDs change) shows it at a `resourceVersion` not
//! read before (module `seen`): what upstream reads from its informer's cache of whole CRDs.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use apis::apiextensions::labels::{
    FINALIZER_DEFINED, REASON_TERMINATING_CLAIM, REASON_TERMINATING_COMPOSITE, REASON_WATCHING_CLAIM,
    REASON_WATCHING_COMPOSITE, TYPE_ESTABLISHED, TYPE_OFFERED,
};
use apis::apiextensions::{CompositeResourceDefinition, DependentResourceType, XrdControllerStatus};
use apis::condition::{self, Condition, ConditionStatus};
use futures::FutureExt;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{DeleteParams, DynamicObject, ListParams, Patch, PatchParams};
use kube::core::{ApiResource, PartialObjectMeta};
use kube::runtime::controller::Action;
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::{Controller, WatchStreamExt, watcher};
use kube::{Api, Resource, ResourceExt};
use manager::controller::ControllerBuilder;
use manager::controller::backoff::Backoff;
use manager::{BoxError, ChildHandle, ReconcileMetrics, TermContext};
use serde_json::json;

use crate::claim;
use crate::composite::{self, CompositeController};
use crate::error::{Error, is_not_found};
use crate::xcrd;

mod seen;

/// The controller's field manager (kept: existing objects' managed fields name it).
pub const CONTROLLER: &str = "apiextensions.crossplane.io/definition";

/// The controller's name in metrics and logs, as upstream spells it.
pub const CONTROLLER_NAME: &str = "defined/compositeresourcedefinition.apiextensions.crossplane.io";

/// Options of the XRD controller.
#[derive(Clone)]
pub struct Options {
    /// Limits the XRDs watched (test isolation); `None` watches all.
    pub selector: Option<String>,
    /// Poll interval of the composite controllers.
    pub poll: Duration,
    /// Where reconcile metrics go.
    pub metrics: ReconcileMetrics,
    /// Composition-function clients, shared by every composite controller.
    pub functions: std::sync::Arc<composite::functions::Functions>,
    /// The watch circuit breaker's settings, for each composite controller's breaker.
    pub circuit: composite::circuit::Settings,
    /// Whether claim controllers sync claims and XRs by server-side apply (`--enable-ssa-claims`).
    pub ssa_claims: bool,
}

struct Child {
    generation: Option<i64>,
    handle: ChildHandle,
}

struct Ctx {
    term: TermContext,
    /// The composite controllers' caches, kept for the term.
    caches: Arc<composite::cache::Caches>,
    client: kube::Client,
    options: Options,
    children: Mutex<HashMap<String, Child>>,
    /// The metadata of every CRD, from the watch that reconciles an XRD when its CRDs change.
    crds: Store<PartialObjectMeta<CustomResourceDefinition>>,
    /// What was last read of the CRDs this controller renders, by `resourceVersion`.
    seen: seen::Seen,
    /// How long to wait, per XRD, for RBAC to allow watching its composite resources.
    rbac_wait: Backoff,
    /// How long to wait, per XRD, before looking again at a CRD that is not Established yet. The
    /// controller owns the CRDs, so the change that establishes one reconciles its XRD at once; this
    /// is the fallback, and it backs off because every look is a reconcile of the XRD (reads, and a
    /// status patch); an apply of an unchanged CRD is skipped ([`crate::applied`]). At a fixed 500 ms,
    /// 500 new XRDs once kept the apiserver too busy to establish their CRDs for minutes.
    establish_wait: Backoff,
}

/// The fallback wait for a CRD to be Established: 500 ms doubling to 10 s.
fn establish_wait() -> Backoff {
    Backoff::new(Duration::from_millis(500), Duration::from_secs(10))
}

/// Runs the XRD controller until the term ends.
pub async fn run(term: TermContext, options: Options) -> Result<(), BoxError> {
    let client = term.client().clone();
    let api: Api<CompositeResourceDefinition> = Api::all(client.clone());
    let crds: Api<PartialObjectMeta<CustomResourceDefinition>> = Api::all(client.clone());
    let mut wc = watcher::Config::default();
    if let Some(s) = &options.selector {
        wc = wc.labels(s);
    }
    let token = term.token().clone();
    let metrics = options.metrics.clone();
    let caches = composite::cache::Caches::start(&term)?;
    // The CRDs' metadata is cached from the same metadata-only watch that `Controller::owns` would
    // start; managed fields are dropped, as nothing here reads them.
    let (crd_cache, crd_writer) = reflector::store();
    let crd_changes = watcher(crds, watcher::Config::default())
        .default_backoff()
        .modify(|crd| crd.metadata.managed_fields = None)
        .reflect(crd_writer)
        .touched_objects();
    let state = Arc::new(Ctx {
        caches,
        term,
        client,
        options,
        children: Mutex::new(HashMap::new()),
        crds: crd_cache,
        seen: seen::Seen::default(),
        rbac_wait: Backoff::default(),
        establish_wait: establish_wait(),
    });
    ControllerBuilder::new(CONTROLLER_NAME, Controller::new(api, wc).owns_stream(crd_changes))
        .metrics(&metrics)
        .run(&token, reconcile, state)
        .await;
    Ok(())
}

impl Ctx {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Child>> {
        self.children
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    async fn stop_child(&self, name: &str) {
        let child = self.lock().remove(name);
        if let Some(c) = child {
            c.handle.stop();
            c.handle.finished().await;
            tracing::info!(controller = %name, "stopped controller");
        }
    }

    /// Whether CRD `name`, rendered from `xrd` with the stamp `stamp`, is Established, when the cache
    /// shows it controlled by `xrd` at the `resourceVersion` at which it was last read holding that
    /// configuration; `None` when it must be read, as it is while the cache has not listed the CRDs
    /// yet (at the start of a term, or while its watch fails).
    fn known(&self, xrd: &CompositeResourceDefinition, name: &str, stamp: &str) -> Option<bool> {
        if !matches!(self.crds.wait_until_ready().now_or_never(), Some(Ok(()))) {
            return None;
        }
        let meta = self.crds.get(&ObjectRef::new(name))?;
        if !controlled_by(meta.owner_references(), xrd) {
            return None;
        }
        self.seen.established(name, &meta.resource_version()?, stamp)
    }

    /// Records what a read (or an apply's answer) showed of `crd`: whether the configuration stamped
    /// `stamp` held on it and, if so, whether it was Established.
    fn read(&self, crd: &CustomResourceDefinition, stamp: &str, holds: bool) {
        let name = crd.name_any();
        match crd.resource_version() {
            Some(version) if holds => self.seen.held(&name, &version, stamp, established(crd)),
            _ => self.seen.forget(&name),
        }
    }

    async fn set_status(
        &self,
        xrd: &CompositeResourceDefinition,
        new: Vec<Condition>,
        controllers: Option<XrdControllerStatus>,
    ) -> Result<(), Error> {
        let mut status = xrd.status.clone().unwrap_or_default();
        let mut changed = condition::set(&mut status.conditions, new);
        if controllers.is_some() && status.controllers != controllers {
            status.controllers = controllers;
            changed = true;
        }
        if changed {
            let patch = json!({"status": status});
            Api::<CompositeResourceDefinition>::all(self.client.clone())
                .patch_status(&xrd.name_any(), &PatchParams::default(), &Patch::Merge(&patch))
                .await?;
        }
        Ok(())
    }
}

/// The XR API resource of the XRD's referenceable version.
pub fn xr_resource(xrd: &CompositeResourceDefinition) -> Option<ApiResource> {
    let v = xrd.spec.referenceable_version()?;
    let group = &xrd.spec.group;
    Some(ApiResource {
        group: group.clone(),
        version: v.name.clone(),
        api_version: format!("{group}/{}", v.name),
        kind: xrd.spec.names.kind.clone(),
        plural: xrd.spec.names.plural.clone(),
    })
}

async fn reconcile(xrd: Arc<CompositeResourceDefinition>, ctx: Arc<Ctx>) -> Result<Action, Error> {
    let name = xrd.name_any();
    let generation = xrd.meta().generation;

    if xrd.metadata.deletion_timestamp.is_some() {
        return delete(&xrd, &ctx).await;
    }

    let (mut crd, claim_crd) = render_crds(&xrd, &ctx).await?;
    ensure_finalizer(&xrd, &ctx).await?;
    let mut owner = xrd
        .controller_owner_ref(&())
        .ok_or_else(|| Error::Message("the XRD has no uid".into()))?;
    owner.block_owner_deletion = Some(true);
    crd.metadata.owner_references = Some(vec![owner]);
    if !apply_crd(&xrd, &ctx, &crd, "composite resource").await? {
        tracing::debug!(xrd = %name, "waiting for the composite CRD to be established");
        return Ok(Action::requeue(ctx.establish_wait.fail(&name)));
    }

    let resource = xr_resource(&xrd).ok_or_else(|| Error::Message("no referenceable version".into()))?;
    if let Some(wait) = start_composite_controller(&xrd, &ctx, &resource).await? {
        return Ok(wait);
    }
    let mut conditions = vec![
        Condition::new(TYPE_ESTABLISHED, ConditionStatus::True, REASON_WATCHING_COMPOSITE)
            .with_observed_generation(generation),
        Condition::reconcile_success(),
    ];
    if let Some(claim_crd) = &claim_crd {
        if !apply_crd(&xrd, &ctx, claim_crd, "composite resource claim").await? {
            tracing::debug!(xrd = %name, "waiting for the claim CRD to be established");
            return Ok(Action::requeue(ctx.establish_wait.fail(&name)));
        }
        start_claim_controller(&xrd, &ctx, &resource).await?;
        conditions.push(
            Condition::new(TYPE_OFFERED, ConditionStatus::True, REASON_WATCHING_CLAIM)
                .with_observed_generation(generation),
        );
    }
    let controllers = XrdControllerStatus {
        composite_resource_type: Some(DependentResourceType {
            api_version: resource.api_version.clone(),
            kind: resource.kind.clone(),
        }),
    };
    ctx.set_status(&xrd, conditions, Some(controllers)).await?;
    ctx.rbac_wait.succeed(&name);
    ctx.establish_wait.succeed(&name);
    Ok(Action::await_change())
}

/// The composite CRD and, when the XRD offers a claim, the claim's CRD; a schema that cannot be
/// rendered is a condition on the XRD.
async fn render_crds(
    xrd: &CompositeResourceDefinition,
    ctx: &Ctx,
) -> Result<(CustomResourceDefinition, Option<CustomResourceDefinition>), Error> {
    let rendered = xcrd::render(xrd)
        .map_err(|e| format!("cannot render composite resource CustomResourceDefinition: {e}"))
        .and_then(|crd| {
            xcrd::render_claim(xrd)
                .map(|claim| (crd, claim))
                .map_err(|e| format!("cannot render composite resource claim CustomResourceDefinition: {e}"))
        });
    match rendered {
        Ok(crds) => Ok(crds),
        Err(msg) => {
            ctx.set_status(xrd, vec![Condition::reconcile_error(&msg)], None)
                .await?;
            Err(Error::Message(msg))
        }
    }
}

/// Adds the XRD's finalizer unless it has it.
async fn ensure_finalizer(xrd: &CompositeResourceDefinition, ctx: &Ctx) -> Result<(), Error> {
    if xrd.finalizers().iter().any(|f| f == FINALIZER_DEFINED) {
        return Ok(());
    }
    let mut f = xrd.finalizers().to_vec();
    f.push(FINALIZER_DEFINED.to_owned());
    let patch = json!({"metadata": {"finalizers": f, "resourceVersion": xrd.resource_version()}});
    Api::<CompositeResourceDefinition>::all(ctx.client.clone())
        .patch(&xrd.name_any(), &PatchParams::default(), &Patch::Merge(&patch))
        .await?;
    Ok(())
}

/// Starts the child `composite/<xrd>` (or, when the XRD's generation changed or it ended, restarts
/// it); returns when to try again while RBAC does not yet allow watching the XRs.
async fn start_composite_controller(
    xrd: &CompositeResourceDefinition,
    ctx: &Ctx,
    resource: &ApiResource,
) -> Result<Option<Action>, Error> {
    let name = xrd.name_any();
    let generation = xrd.meta().generation;
    let restart = ctx
        .lock()
        .get(&name)
        .map(|c| c.generation != generation || c.handle.is_finished());
    match restart {
        Some(false) => {}
        Some(true) | None => {
            if !may_watch(&ctx.client, resource).await? {
                tracing::info!(xrd = %name, "waiting for RBAC to allow watching the composite resources");
                return Ok(Some(Action::requeue(ctx.rbac_wait.fail(&name))));
            }
            if restart == Some(true) {
                ctx.stop_child(&name).await;
            }
            let def = CompositeController {
                resource: resource.clone(),
                xrd: xrd.spec.clone(),
                poll: ctx.options.poll,
                functions: ctx.options.functions.clone(),
                circuit: ctx.options.circuit,
                caches: ctx.caches.clone(),
                name: format!("composite/{name}"),
                metrics: ctx.options.metrics.clone(),
            };
            let handle = ctx
                .term
                .spawn_child(format!("composite/{name}"), move |child| {
                    composite::run(child, def)
                })
                .map_err(|e| Error::Message(e.to_string()))?;
            tracing::info!(xrd = %name, kind = %resource.kind, "started composite controller");
            ctx.lock().insert(name.clone(), Child { generation, handle });
        }
    }
    Ok(None)
}

/// Starts (or, when the XRD's generation changed, restarts) the child `claim/<xrd>`.
async fn start_claim_controller(
    xrd: &CompositeResourceDefinition,
    ctx: &Ctx,
    composite: &ApiResource,
) -> Result<(), Error> {
    let child = format!("claim/{}", xrd.name_any());
    let generation = xrd.meta().generation;
    let restart = ctx
        .lock()
        .get(&child)
        .map(|c| c.generation != generation || c.handle.is_finished());
    if restart == Some(false) {
        return Ok(());
    }
    let claim = claim_resource(xrd).ok_or_else(|| Error::Message("no claim names".into()))?;
    if !may_watch(&ctx.client, &claim).await? {
        return Err(Error::Message(format!(
            "waiting for RBAC to allow watching the claims {}",
            claim.plural
        )));
    }
    if restart == Some(true) {
        ctx.stop_child(&child).await;
    }
    let def = claim::ClaimController {
        claim: claim.clone(),
        composite: composite.clone(),
        enforced_composition: xrd.spec.enforced_composition_ref.is_some(),
        ssa: ctx.options.ssa_claims,
        poll: ctx.options.poll,
        name: child.clone(),
        metrics: ctx.options.metrics.clone(),
    };
    let handle = ctx
        .term
        .spawn_child(child.clone(), move |c| claim::run(c, def))
        .map_err(|e| Error::Message(e.to_string()))?;
    tracing::info!(xrd = %xrd.name_any(), kind = %claim.kind, "started claim controller");
    ctx.lock().insert(child, Child { generation, handle });
    Ok(())
}

/// Applies `crd`, a CRD rendered from `xrd` (`what` names it in messages), refusing one that another
/// controller owns; whether it is Established.
async fn apply_crd(
    xrd: &CompositeResourceDefinition,
    ctx: &Ctx,
    crd: &CustomResourceDefinition,
    what: &str,
) -> Result<bool, Error> {
    let crds = Api::<CustomResourceDefinition>::all(ctx.client.clone());
    let name = crd.name_any();
    let config = crate::applied::stamp(serde_json::to_value(crd).map_err(|e| Error::Message(e.to_string()))?);
    let stamp = crate::applied::stamp_of(&config).unwrap_or_default().to_owned();
    if let Some(established) = ctx.known(xrd, &name, &stamp) {
        return Ok(established);
    }
    let existing = crds.get_opt(&name).await?;
    if let Some(existing) = &existing {
        if !controlled_by(existing.owner_references(), xrd) {
            let msg = format!(
                "cannot apply rendered {what} CustomResourceDefinition: {name} is not controlled by this XRD"
            );
            ctx.set_status(xrd, vec![Condition::reconcile_error(&msg)], None)
                .await?;
            return Err(Error::Message(msg));
        }
        // While the CRD waits to be Established, the XRD is reconciled on every change to it; applying
        // the same CRD again each time costs the apiserver a CRD's validation for nothing.
        let current = serde_json::to_value(existing).map_err(|e| Error::Message(e.to_string()))?;
        if crate::applied::unchanged(&config, &current) {
            ctx.read(existing, &stamp, true);
            return Ok(established(existing));
        }
        tracing::debug!(
            crd = %name,
            field = crate::applied::difference(&config, &current).as_deref().unwrap_or("the stamp"),
            "applying the rendered CRD again: a field it sets does not hold"
        );
    }
    let pp = PatchParams::apply(CONTROLLER).force();
    let applied = match crds.patch(&name, &pp, &Patch::Apply(&config)).await {
        Ok(c) => c,
        Err(e) if !manager::fence::is_not_leader(&e) => {
            let msg = format!(
                "cannot apply rendered {what} CustomResourceDefinition: {}",
                crate::error::explain(&e)
            );
            ctx.set_status(xrd, vec![Condition::reconcile_error(&msg)], None)
                .await?;
            return Err(Error::Message(msg));
        }
        Err(e) => return Err(e.into()),
    };
    let current = serde_json::to_value(&applied).map_err(|e| Error::Message(e.to_string()))?;
    ctx.read(&applied, &stamp, crate::applied::unchanged(&config, &current));
    Ok(established(&applied))
}

/// Whether `crd` is `Established=True`.
fn established(crd: &CustomResourceDefinition) -> bool {
    crd.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Established" && c.status == "True"))
}

/// Whether `owners`, a CRD's owner references, name `xrd` as its controller.
fn controlled_by(
    owners: &[k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference],
    xrd: &CompositeResourceDefinition,
) -> bool {
    let uid = xrd.uid();
    owners
        .iter()
        .any(|o| o.controller == Some(true) && Some(&o.uid) == uid.as_ref())
}

/// The claim API resource of the XRD's referenceable version, when it offers claims.
pub fn claim_resource(xrd: &CompositeResourceDefinition) -> Option<ApiResource> {
    let names = xrd.spec.offered_claim_names().ok()??;
    let mut r = xr_resource(xrd)?;
    r.kind = names.kind;
    r.plural = names.plural;
    Some(r)
}

/// Deletes every claim of `xrd` and then its claim CRD; whether the claim CRD is gone.
async fn redact_claims(xrd: &CompositeResourceDefinition, ctx: &Ctx) -> Result<bool, Error> {
    let (Some(crd_name), Some(resource)) = (xcrd::claim_crd_name(xrd), claim_resource(xrd)) else {
        return Ok(true);
    };
    let term = Condition::new(TYPE_OFFERED, ConditionStatus::False, REASON_TERMINATING_CLAIM);
    ctx.set_status(xrd, vec![term], None).await?;
    let crds = Api::<CustomResourceDefinition>::all(ctx.client.clone());
    let Some(crd) = crds.get_opt(&crd_name).await? else {
        ctx.stop_child(&format!("claim/{}", xrd.name_any())).await;
        return Ok(true);
    };
    if !controlled_by(crd.owner_references(), xrd) {
        return Ok(true);
    }
    if !delete_all(ctx, &resource).await? {
        tracing::info!(xrd = %xrd.name_any(), "waiting for claims to be deleted");
        return Ok(false);
    }
    ctx.stop_child(&format!("claim/{}", xrd.name_any())).await;
    match crds.delete(&crd_name, &DeleteParams::background()).await {
        Ok(_) => {}
        Err(e) if is_not_found(&e) => {}
        Err(e) => return Err(e.into()),
    }
    Ok(false)
}

/// Deletes every object of `resource` (in all namespaces); whether none was left.
async fn delete_all(ctx: &Ctx, resource: &ApiResource) -> Result<bool, Error> {
    let all = Api::<DynamicObject>::all_with(ctx.client.clone(), resource);
    // A CRD that is already going away serves no list: nothing is left to delete.
    let items = match all.list(&ListParams::default()).await {
        Ok(l) => l.items,
        Err(e) if is_not_found(&e) => Vec::new(),
        Err(e) => return Err(e.into()),
    };
    for obj in &items {
        if obj.metadata.deletion_timestamp.is_some() {
            continue;
        }
        let api = match obj.namespace() {
            Some(ns) => Api::<DynamicObject>::namespaced_with(ctx.client.clone(), &ns, resource),
            None => Api::<DynamicObject>::all_with(ctx.client.clone(), resource),
        };
        match api.delete(&obj.name_any(), &DeleteParams::background()).await {
            Ok(_) => {}
            Err(e) if is_not_found(&e) => {}
            Err(e) => return Err(e.into()),
        }
    }
    Ok(items.is_empty())
}

/// Whether this replica may list and watch the XRs of `resource`. The RBAC manager grants them per XRD
/// through a ClusterRole that Kubernetes aggregates into the core's; until that reaches the authorizer,
/// starting the composite controller would only collect 403s (a SelfSubjectAccessReview needs no RBAC).
async fn may_watch(client: &kube::Client, resource: &ApiResource) -> Result<bool, Error> {
    use k8s_openapi::api::authorization::v1::{
        ResourceAttributes, SelfSubjectAccessReview, SelfSubjectAccessReviewSpec,
    };
    let api: Api<SelfSubjectAccessReview> = Api::all(client.clone());
    for verb in ["list", "watch"] {
        let review = SelfSubjectAccessReview {
            spec: SelfSubjectAccessReviewSpec {
                resource_attributes: Some(ResourceAttributes {
                    group: Some(resource.group.clone()),
                    version: Some(resource.version.clone()),
                    resource: Some(resource.plural.clone()),
                    verb: Some(verb.to_owned()),
                    ..ResourceAttributes::default()
                }),
                ..SelfSubjectAccessReviewSpec::default()
            },
            ..SelfSubjectAccessReview::default()
        };
        let allowed = api
            .create(&kube::api::PostParams::default(), &review)
            .await?
            .status
            .is_some_and(|s| s.allowed);
        if !allowed {
            return Ok(false);
        }
    }
    Ok(true)
}

async fn delete(xrd: &CompositeResourceDefinition, ctx: &Ctx) -> Result<Action, Error> {
    let name = xrd.name_any();
    ctx.rbac_wait.succeed(&name);
    ctx.establish_wait.succeed(&name);
    ctx.seen.forget(&name);
    if let Some(claim_crd) = xcrd::claim_crd_name(xrd) {
        ctx.seen.forget(&claim_crd);
    }
    let term = Condition::new(
        TYPE_ESTABLISHED,
        ConditionStatus::False,
        REASON_TERMINATING_COMPOSITE,
    );
    ctx.set_status(xrd, vec![term], None).await?;
    if !redact_claims(xrd, ctx).await? {
        return Ok(Action::requeue(Duration::from_secs(1)));
    }
    let crds = Api::<CustomResourceDefinition>::all(ctx.client.clone());
    if crds.get_opt(&name).await?.is_none() {
        ctx.stop_child(&name).await;
        if xrd.finalizers().iter().any(|f| f == FINALIZER_DEFINED) {
            let f: Vec<&String> = xrd
                .finalizers()
                .iter()
                .filter(|f| *f != FINALIZER_DEFINED)
                .collect();
            let patch = json!({"metadata": {"finalizers": f, "resourceVersion": xrd.resource_version()}});
            match Api::<CompositeResourceDefinition>::all(ctx.client.clone())
                .patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
                .await
            {
                Ok(_) => {}
                Err(e) if is_not_found(&e) => {}
                Err(e) => return Err(e.into()),
            }
        }
        return Ok(Action::await_change());
    }
    if let Some(resource) = xr_resource(xrd)
        && !delete_all(ctx, &resource).await?
    {
        tracing::info!(xrd = %name, "waiting for composite resources to be deleted");
        return Ok(Action::requeue(Duration::from_secs(1)));
    }
    ctx.stop_child(&name).await;
    match crds.delete(&name, &DeleteParams::background()).await {
        Ok(_) => {}
        Err(e) if is_not_found(&e) => {}
        Err(e) => return Err(e.into()),
    }
    Ok(Action::requeue(Duration::from_secs(1)))
}

/// The API access this controller needs: XRDs (read, finalizer and status writes, and `update` on
/// `/finalizers` because the CRDs it renders name the XRD as blocking owner) and the CRDs it renders
/// (applied, read back and deleted). The XRs themselves are defined at run time: the RBAC manager grants
/// them per XRD through ClusterRoles labelled `rbac.crossplane.io/aggregate-to-crossplane`.
pub fn rbac_needs() -> Vec<manager::controller::rbac::Rule> {
    use manager::controller::rbac::{OWN, READ_WRITE, Rule};
    vec![
        Rule::kind::<CompositeResourceDefinition>(&[""], READ_WRITE),
        Rule::kind::<CompositeResourceDefinition>(&["status"], &["get", "patch", "update"]),
        Rule::kind::<CompositeResourceDefinition>(&["finalizers"], &["update"]),
        Rule::kind::<CustomResourceDefinition>(&[""], OWN),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_wait_for_an_established_crd_backs_off_to_ten_seconds_and_resets() {
        let wait = establish_wait();
        let delays: Vec<Duration> = (0..7).map(|_| wait.fail("x")).collect();
        assert_eq!(delays[0], Duration::from_millis(500));
        assert_eq!(delays[1], Duration::from_secs(1));
        assert_eq!(delays[5], Duration::from_secs(10));
        assert_eq!(delays[6], Duration::from_secs(10));
        wait.succeed("x");
        assert_eq!(wait.fail("x"), Duration::from_millis(500));
    }
}
