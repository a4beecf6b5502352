//! The claim controller (crossplane `internal/controller/apiextensions/claim`): one per XRD that offers
//! claims, started as a child of the term by the XRD controller.
//!
//! Each reconcile binds a namespaced claim to a cluster-scoped legacy XR: hold the finalizer
//! `finalizer.apiextensions.crossplane.io`; refuse an XR bound to another claim; hand the XR's refs
//! back to the claim (`spec.resourceRef`, composition refs) **before** server-side applying the XR
//! (`<claim>-<suffix>`, the claim's spec, labels `crossplane.io/claim-name`/`-namespace`,
//! `spec.claimRef`); copy the XR's status and conditions back (`Ready` is `Waiting` until the XR is
//! Ready); once it is, copy the XR's connection Secret into the claim's namespace. Deleting a claim
//! deletes its XR with the claim's `compositeDeletePolicy` (`Foreground` waits for the XR to go).
//! Changes to XRs reconcile their claims at once. Every write goes through the term's fenced client.
//! Metrics, the backoff (1–30 s), upstream's 1-minute timeout and the work queue are the manager's
//! [`ControllerBuilder`]'s.
//!
//! That is the server-side sync, upstream's default. With `--enable-ssa-claims=false` the claim and
//! its XR are synced client-side instead ([`csa`]), and the server-side sync upgrades the managed
//! fields of an XR the client-side one wrote before applying it ([`managed_fields`]).

pub mod connection;
pub mod csa;
pub mod managed_fields;
pub mod sync;

use std::sync::Arc;
use std::time::Duration;

use apis::apiextensions::labels::FINALIZER_CLAIM;
use apis::condition::Condition;
use apis::meta::ANNOTATION_PAUSED;
use kube::api::{DeleteParams, DynamicObject, Patch, PatchParams, PostParams, PropagationPolicy};
use kube::core::ApiResource;
use kube::runtime::controller::Action;
use kube::runtime::reflector::ObjectRef;
use kube::runtime::{Controller, watcher};
use kube::{Api, ResourceExt};
use manager::controller::ControllerBuilder;
use manager::controller::backoff::{Backoff, jittered};
use manager::{BoxError, ReconcileMetrics, TermContext};
use serde_json::{Value, json};

use crate::composite::render;
use crate::composite::status;
use crate::error::{Error, is_not_found};

/// The field manager of the claim controller's writes (upstream's `FieldOwnerXR`).
pub const FIELD_MANAGER: &str = "apiextensions.crossplane.io/claim";

/// Whether upstream's `--enable-ssa-claims` is on (the default, as upstream): claims and XRs are then
/// synced by server-side apply, else client-side ([`csa`]).
pub fn ssa_enabled(given: &[manager::config::compat::Given]) -> bool {
    given
        .iter()
        .find(|g| g.name == "enable-ssa-claims")
        .is_none_or(|g| g.value != "false")
}

/// What a claim controller needs to know about its XRD.
#[derive(Debug, Clone)]
pub struct ClaimController {
    /// The claim API resource (the referenceable version).
    pub claim: ApiResource,
    /// The XR API resource (the referenceable version).
    pub composite: ApiResource,
    /// Whether the XRD enforces a Composition (the claim's `compositionRef` is then not propagated).
    pub enforced_composition: bool,
    /// Whether the claim and its XR are synced by server-side apply (`--enable-ssa-claims`), else
    /// client-side.
    pub ssa: bool,
    /// How often a bound, ready claim is looked at again.
    pub poll: Duration,
    /// The controller's name in metrics and logs, `claim/<xrd>`.
    pub name: String,
    /// Where reconcile metrics go.
    pub metrics: ReconcileMetrics,
}

/// How long one reconcile may run (upstream's `reconcileTimeout`).
const TIMEOUT: Duration = Duration::from_secs(60);

struct Ctx {
    client: kube::Client,
    def: ClaimController,
}

/// Runs the controller for one claim kind until `ctx` is cancelled.
pub async fn run(ctx: TermContext, def: ClaimController) -> Result<(), BoxError> {
    let client = ctx.client().clone();
    let claims: Api<DynamicObject> = Api::all_with(client.clone(), &def.claim);
    let xrs: Api<DynamicObject> = Api::all_with(client.clone(), &def.composite);
    let resource = def.claim.clone();
    tracing::info!(kind = %resource.kind, "claim controller started");
    let state = Arc::new(Ctx { client, def });
    let controller = Controller::new_with(claims, watcher::Config::default(), resource.clone());
    let claim_type = resource.clone();
    let xr_type = state.def.composite.clone();
    let controller = controller.watches_with(xrs, xr_type, watcher::Config::default(), move |xr| {
        let r = xr.data.pointer("/spec/claimRef")?;
        let name = r.get("name")?.as_str()?;
        let ns = r.get("namespace")?.as_str()?;
        Some(ObjectRef::new_with(name, claim_type.clone()).within(ns))
    });
    let (name, metrics) = (state.def.name.clone(), state.def.metrics.clone());
    ControllerBuilder::new(name, controller)
        .backoff(Backoff::new(Duration::from_secs(1), Duration::from_secs(30)))
        .timeout(TIMEOUT)
        .metrics(&metrics)
        .run(ctx.token(), reconcile, state)
        .await;
    tracing::info!(kind = %resource.kind, "claim controller stopped");
    Ok(())
}

impl Ctx {
    fn claim_api(&self, ns: &str) -> Api<DynamicObject> {
        Api::namespaced_with(self.client.clone(), ns, &self.def.claim)
    }

    fn xr_api(&self) -> Api<DynamicObject> {
        Api::all_with(self.client.clone(), &self.def.composite)
    }

    /// Writes the claim's status when it changes: `overlay` merged in, `conditions` set.
    async fn write_status(
        &self,
        claim: &DynamicObject,
        claim_json: &Value,
        overlay: Option<&Value>,
        conditions: Vec<Condition>,
    ) -> Result<(), Error> {
        let Some(st) = status::next(claim_json, overlay, conditions) else {
            return Ok(());
        };
        let patch = json!({"apiVersion": claim_json["apiVersion"], "kind": claim_json["kind"], "status": st});
        match self
            .claim_api(&claim.namespace().unwrap_or_default())
            .patch_status(&claim.name_any(), &PatchParams::default(), &Patch::Merge(&patch))
            .await
        {
            Ok(_) => Ok(()),
            Err(e) if is_not_found(&e) => Ok(()),
            Err(e) => Err(e.into()),
        }
    }
}

async fn reconcile(claim: Arc<DynamicObject>, ctx: Arc<Ctx>) -> Result<Action, Error> {
    let claim_json = serde_json::to_value(&*claim)?;
    if claim.annotations().get(ANNOTATION_PAUSED).map(String::as_str) == Some("true") {
        ctx.write_status(&claim, &claim_json, None, vec![Condition::reconcile_paused()])
            .await?;
        return Ok(Action::await_change());
    }
    let bound_name = claim_json
        .pointer("/spec/resourceRef/name")
        .and_then(Value::as_str)
        .filter(|n| !n.is_empty())
        .map(str::to_owned);
    let xr = match &bound_name {
        Some(n) => ctx.xr_api().get_opt(n).await?,
        None => None,
    };
    let mut xr = xr;
    let mut xr_json = xr.as_ref().map(serde_json::to_value).transpose()?;
    if let Some(x) = &xr_json
        && let Some(r) = x.pointer("/spec/claimRef")
        && *r != sync::claim_ref(&claim_json)
    {
        let msg = format!(
            "cannot bind claim to composite resource {}: it is bound to claim {}/{}",
            x.pointer("/metadata/name")
                .and_then(Value::as_str)
                .unwrap_or_default(),
            r.get("namespace").and_then(Value::as_str).unwrap_or_default(),
            r.get("name").and_then(Value::as_str).unwrap_or_default(),
        );
        ctx.write_status(&claim, &claim_json, None, vec![Condition::reconcile_error(msg)])
            .await?;
        return Ok(Action::await_change());
    }

    // Before the server-side sync applies an XR the client-side sync wrote, its managed fields are
    // upgraded (once), so that fields later dropped from the claim leave the XR.
    if ctx.def.ssa
        && let Some(x) = &xr_json
        && let Some(upgraded) = upgrade_managed_fields(&claim, &claim_json, x, &ctx).await?
    {
        xr_json = Some(serde_json::to_value(&upgraded)?);
        xr = Some(upgraded);
    }

    if claim.metadata.deletion_timestamp.is_some() {
        return delete(&claim, &claim_json, xr.as_ref(), &ctx).await;
    }

    match bind(&claim, &claim_json, xr_json.as_ref(), &ctx).await {
        Ok(action) => Ok(action),
        Err(e) if e.is_not_leader() || e.is_conflict() => Err(e),
        Err(e) => {
            ctx.write_status(&claim, &claim_json, None, vec![Condition::reconcile_error(&e)])
                .await?;
            Err(e)
        }
    }
}

/// Finalizer, XR, refs, status and connection Secret of a live claim.
async fn bind(
    claim: &DynamicObject,
    claim_json: &Value,
    xr: Option<&Value>,
    ctx: &Ctx,
) -> Result<Action, Error> {
    let ns = claim.namespace().unwrap_or_default();
    let claims = ctx.claim_api(&ns);
    let name = match xr
        .and_then(|x| x.pointer("/metadata/name"))
        .and_then(Value::as_str)
    {
        Some(n) => n.to_owned(),
        None => match claim_json
            .pointer("/spec/resourceRef/name")
            .and_then(Value::as_str)
            .filter(|n| !n.is_empty())
        {
            Some(n) => n.to_owned(),
            None => free_xr_name(ctx, &format!("{}-", claim.name_any())).await?,
        },
    };
    let desired = sync::desired_xr(
        claim_json,
        xr,
        &ctx.def.composite.api_version,
        &ctx.def.composite.kind,
        &name,
        ctx.def.enforced_composition,
    );

    // Finalizer and refs on the claim first, so a claim never loses track of an XR it created.
    let mut patch = xr
        .and_then(|x| sync::claim_spec_patch(claim_json, x, ctx.def.enforced_composition))
        .or_else(|| sync::claim_spec_patch(claim_json, &desired, false))
        .unwrap_or_else(|| json!({}));
    if !claim.finalizers().iter().any(|f| f == FINALIZER_CLAIM) {
        let mut f = claim.finalizers().to_vec();
        f.push(FINALIZER_CLAIM.to_owned());
        patch["metadata"] = json!({"finalizers": f});
    }
    let mut claim_now = claim_json.clone();
    if patch.as_object().is_some_and(|m| !m.is_empty()) {
        patch["metadata"]["resourceVersion"] = json!(claim.resource_version());
        patch["apiVersion"] = claim_json["apiVersion"].clone();
        patch["kind"] = claim_json["kind"].clone();
        let patched = claims
            .patch(&claim.name_any(), &PatchParams::default(), &Patch::Merge(&patch))
            .await?;
        claim_now = serde_json::to_value(&patched)?;
    }

    let applied = if ctx.def.ssa {
        let applied = ctx
            .xr_api()
            .patch(
                &name,
                &PatchParams::apply(FIELD_MANAGER).force(),
                &Patch::Apply(&desired),
            )
            .await?;
        serde_json::to_value(&applied)?
    } else {
        let applied = write_client_side(ctx, &name, desired, xr).await?;
        if let Some(p) = csa::claim_patch(&claim_now, &applied, ctx.def.enforced_composition) {
            let patched = claims
                .patch(&claim.name_any(), &PatchParams::default(), &Patch::Merge(&p))
                .await?;
            claim_now = serde_json::to_value(&patched)?;
        }
        applied
    };
    let claim_json = &claim_now;

    let overlay = sync::status_overlay(&applied);
    let conditions = sync::conditions(&applied);
    let ready = apis::condition::is_true(&status::current(&applied), "Ready");
    let mut overlay = overlay;
    if ready && connection::propagate(&ctx.client, claim_json, &applied).await? {
        overlay["connectionDetails"] =
            json!({"lastPublishedTime": jiff::Timestamp::now().strftime("%Y-%m-%dT%H:%M:%SZ").to_string()});
    }
    let overlay = (overlay.as_object().is_some_and(|m| !m.is_empty())).then_some(overlay);
    ctx.write_status(claim, claim_json, overlay.as_ref(), conditions)
        .await?;
    if ready {
        Ok(Action::requeue(jittered(ctx.def.poll, 0.1)))
    } else {
        // The XR watch brings the claim back as soon as the XR changes; this is a safety net.
        Ok(Action::requeue(Duration::from_secs(30)))
    }
}

/// The client-side sync's write of the XR (upstream's `APIPatchingApplicator`): create it, or merge
/// `desired` into it unless that changes nothing. Returns the XR as written (or read).
async fn write_client_side(
    ctx: &Ctx,
    name: &str,
    desired: Value,
    xr: Option<&Value>,
) -> Result<Value, Error> {
    let Some(x) = xr else {
        let obj: DynamicObject = serde_json::from_value(desired)?;
        let created = ctx.xr_api().create(&PostParams::default(), &obj).await?;
        return Ok(serde_json::to_value(&created)?);
    };
    match csa::xr_patch(desired, x) {
        None => Ok(x.clone()),
        Some(p) => {
            let patched = ctx
                .xr_api()
                .patch(name, &PatchParams::default(), &Patch::Merge(&p))
                .await?;
            Ok(serde_json::to_value(&patched)?)
        }
    }
}

/// Takes the step of the managed-fields upgrade XR `xr` needs ([`managed_fields`]); the XR as patched,
/// or `None` when there was nothing to do (or it is gone). A conflict is retried; any other error is
/// shown on the claim.
async fn upgrade_managed_fields(
    claim: &DynamicObject,
    claim_json: &Value,
    xr: &Value,
    ctx: &Ctx,
) -> Result<Option<DynamicObject>, Error> {
    let step = managed_fields::step(xr, FIELD_MANAGER);
    let Some(patch) = managed_fields::patch(xr, &step) else {
        return Ok(None);
    };
    let name = xr
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or_default();
    match ctx
        .xr_api()
        .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
    {
        Ok(patched) => {
            tracing::info!(
                xr = name,
                ?step,
                "upgraded the composite resource's managed fields to server-side apply"
            );
            Ok(Some(patched))
        }
        Err(e) if is_not_found(&e) => Ok(None),
        Err(e) => {
            let e = Error::from(e);
            if e.is_conflict() || e.is_not_leader() {
                return Err(e);
            }
            let e = Error::Message(format!(
                "cannot upgrade composite resource's managed fields from client-side to server-side apply: {e}"
            ));
            ctx.write_status(claim, claim_json, None, vec![Condition::reconcile_error(&e)])
                .await?;
            Err(e)
        }
    }
}

/// Deleting: delete the XR with the claim's `compositeDeletePolicy`, then drop the finalizer.
async fn delete(
    claim: &DynamicObject,
    claim_json: &Value,
    xr: Option<&DynamicObject>,
    ctx: &Ctx,
) -> Result<Action, Error> {
    if !claim.finalizers().iter().any(|f| f == FINALIZER_CLAIM) {
        return Ok(Action::await_change());
    }
    ctx.write_status(claim, claim_json, None, vec![Condition::deleting()])
        .await?;
    let foreground = claim_json
        .pointer("/spec/compositeDeletePolicy")
        .and_then(Value::as_str)
        == Some("Foreground");
    if let Some(xr) = xr {
        if xr.metadata.deletion_timestamp.is_some() && foreground {
            return Ok(Action::requeue(Duration::from_secs(1)));
        }
        if xr.metadata.deletion_timestamp.is_none() {
            let dp = DeleteParams {
                propagation_policy: Some(if foreground {
                    PropagationPolicy::Foreground
                } else {
                    PropagationPolicy::Background
                }),
                ..DeleteParams::default()
            };
            match ctx.xr_api().delete(&xr.name_any(), &dp).await {
                Ok(_) => {}
                Err(e) if is_not_found(&e) => {}
                Err(e) => return Err(e.into()),
            }
        }
        if foreground {
            return Ok(Action::requeue(Duration::from_secs(1)));
        }
    }
    let finalizers: Vec<&String> = claim
        .finalizers()
        .iter()
        .filter(|f| *f != FINALIZER_CLAIM)
        .collect();
    let patch = json!({"apiVersion": claim_json["apiVersion"], "kind": claim_json["kind"],
        "metadata": {"finalizers": finalizers, "resourceVersion": claim.resource_version()}});
    match ctx
        .claim_api(&claim.namespace().unwrap_or_default())
        .patch(&claim.name_any(), &PatchParams::default(), &Patch::Merge(&patch))
        .await
    {
        Ok(_) => Ok(Action::await_change()),
        Err(e) if is_not_found(&e) => Ok(Action::await_change()),
        Err(e) => Err(e.into()),
    }
}

/// A generated XR name no XR has yet.
async fn free_xr_name(ctx: &Ctx, prefix: &str) -> Result<String, Error> {
    let api = ctx.xr_api();
    for _ in 0..8 {
        let n = render::generate_name(prefix);
        if api.get_opt(&n).await?.is_none() {
            return Ok(n);
        }
    }
    Err(Error::Message(
        "cannot generate a free name for the composite resource".into(),
    ))
}

/// The API access the claim controllers need beyond the claims and XRs (granted per XRD through
/// aggregated ClusterRoles): Secrets, to copy connection details into the claim's namespace.
pub fn rbac_needs() -> Vec<manager::controller::rbac::Rule> {
    use k8s_openapi::api::core::v1::Secret;
    use manager::controller::rbac::{OWN, Rule};
    vec![Rule::kind::<Secret>(&[""], OWN)]
}
