//! The composite controller: one per XRD, started as a child of the term by the XRD controller.
//!
//! Each reconcile: honour `crossplane.io/paused`; on deletion delete what was composed and drop the
//! finalizer; select the Composition and revision; run the pipeline; name and decorate the composed
//! resources; persist finalizer, label, refs and `resourceRefs` **before** creating anything;
//! garbage-collect composed resources no longer desired; server-side apply the rest; write `Synced` and
//! `Ready` (only when the status changed).
//!
//! Requeue: after a failure, exponential backoff 1–30 s (upstream's XR rate limiter); while anything
//! is unready, every 2 s; otherwise the poll interval (or the functions' response TTL, if shorter). A
//! reconcile is cut at upstream's 2 minutes plus 20 s for the status write. Metrics, backoff, timeout
//! and the work queue are the manager's [`ControllerBuilder`]'s.
//! Composed kinds are watched ([`super::watch`]): a change to a composed resource reconciles its XR at
//! once.

use std::sync::Arc;
use std::time::Duration;

use apis::apiextensions::CompositeResourceDefinitionSpec;
use apis::apiextensions::labels::{FINALIZER_COMPOSITE, LABEL_COMPOSITION_NAME};
use apis::condition::Condition;
use apis::meta::ANNOTATION_PAUSED;
use futures::StreamExt;
use kube::api::{DeleteParams, DynamicObject, Patch, PatchParams};
use kube::core::ApiResource;
use kube::runtime::controller::Action;
use kube::runtime::reflector::ObjectRef;
use kube::runtime::{Controller, watcher};
use kube::{Api, Resource, ResourceExt};
use manager::{BoxError, TermContext};
use serde_json::{Value, json};

use super::cache::Caches;
use super::circuit;
use super::discovery::Discovery;
use super::fields::Fields;
use super::functions::Functions;
use super::pipeline;
use super::render::{self};
use super::required::Required;
use super::status::{self};
use super::watch::ComposedWatches;
use crate::error::{Error, is_not_found};
use manager::ReconcileMetrics;
use manager::controller::ControllerBuilder;
use manager::controller::backoff::{Backoff, jittered};
use manager::controller::event::{EventType, Recorder as Events};

/// The field manager of XR writes.
pub const FIELD_MANAGER_COMPOSITE: &str = "apiextensions.crossplane.io/composite";
/// The field-manager prefix of composed-resource applies.
pub const FIELD_MANAGER_COMPOSED: &str = "apiextensions.crossplane.io/composed";

/// How long one reconcile may run: upstream's 2 minutes, plus 20 s for the status write.
const TIMEOUT: Duration = Duration::from_secs(140);

/// What a composite controller needs to know about its XRD.
#[derive(Debug, Clone)]
pub struct CompositeController {
    /// The XR API resource (the referenceable version).
    pub resource: ApiResource,
    /// The XRD's spec (defaults, enforced refs, scope).
    pub xrd: CompositeResourceDefinitionSpec,
    /// Poll interval for ready XRs.
    pub poll: Duration,
    /// The controller's name in metrics and logs, `composite/<xrd>`.
    pub name: String,
    /// Where reconcile metrics go.
    pub metrics: ReconcileMetrics,
    /// Composition-function clients.
    pub functions: Arc<Functions>,
    /// The watch circuit breaker's settings.
    pub circuit: circuit::Settings,
    /// The caches of Compositions, their revisions, Functions and their revisions, shared by every
    /// composite controller of the term.
    pub caches: Arc<Caches>,
}

/// What one composite controller's reconciles share.
pub(super) struct Ctx {
    pub(super) client: kube::Client,
    events: Events,
    pub(super) def: CompositeController,
    pub(super) discovery: Discovery,
    pub(super) watches: ComposedWatches,
    pub(super) required: Required,
    breaker: Arc<circuit::Breaker>,
}

/// Runs the controller for one XR kind until `ctx` is cancelled.
pub async fn run(ctx: TermContext, def: CompositeController) -> Result<(), BoxError> {
    let client = ctx.client().clone();
    let api: Api<DynamicObject> = Api::all_with(client.clone(), &def.resource);
    let resource = def.resource.clone();
    tracing::info!(kind = %resource.kind, "composite controller started");
    let breaker = Arc::new(circuit::Breaker::new(def.circuit));
    let (watches, changed) = ComposedWatches::new(
        client.clone(),
        resource.clone(),
        def.xrd.scope.is_namespaced(),
        ctx.token().clone(),
        breaker.clone(),
    );
    let required = Required::new(
        client.clone(),
        ctx.token().clone(),
        watches.sender(),
        breaker.clone(),
    );
    let state = Arc::new(Ctx {
        watches,
        required,
        breaker,
        client,
        events: Events::new(FIELD_MANAGER_COMPOSITE, ctx.term().identity.clone()),
        def,
        discovery: Discovery::default(),
    });
    let controller = Controller::new_with(api, watcher::Config::default(), resource.clone());
    // A new revision of a Composition requeues the XRs that use it (upstream watches revisions too).
    // The revisions come from the cache the reconcile reads them from, once it holds them: the
    // reconcile they trigger finds the new revision.
    let store = controller.store();
    let legacy = state.def.xrd.scope.is_legacy();
    let dyntype = resource.clone();
    let revisions = tokio_stream_of(state.def.caches.revision_changes()).flat_map(move |rev| {
        let composition = rev.labels().get(LABEL_COMPOSITION_NAME).cloned();
        let xrs = store
            .state()
            .into_iter()
            .filter(|xr| {
                composition.is_some()
                    && Fields::new(&xr.data, legacy).composition_ref() == composition.as_deref()
            })
            .map(|xr| ObjectRef::from_obj_with(&*xr, dyntype.clone()))
            .collect::<Vec<_>>();
        futures::stream::iter(xrs)
    });
    let controller = controller
        .reconcile_on(revisions)
        // A change to a composed resource reconciles its XR now (realtime composition).
        .reconcile_on(tokio_stream_of(changed));
    let (name, metrics) = (state.def.name.clone(), state.def.metrics.clone());
    ControllerBuilder::new(name, controller)
        .backoff(Backoff::new(Duration::from_secs(1), Duration::from_secs(30)))
        .timeout(TIMEOUT)
        .metrics(&metrics)
        .run(ctx.token(), reconcile, state)
        .await;
    tracing::info!(kind = %resource.kind, "composite controller stopped");
    Ok(())
}

/// The receiver as a stream.
fn tokio_stream_of<T: Send + 'static>(
    mut rx: tokio::sync::mpsc::UnboundedReceiver<T>,
) -> impl futures::Stream<Item = T> + Send + 'static {
    futures::stream::poll_fn(move |cx| rx.poll_recv(cx))
}

pub(super) fn key(xr: &DynamicObject) -> String {
    format!("{}/{}", xr.namespace().unwrap_or_default(), xr.name_any())
}

impl Ctx {
    pub(super) fn xr_api(&self, ns: Option<&str>) -> Api<DynamicObject> {
        let c = self.client.clone();
        match ns {
            Some(ns) => Api::namespaced_with(c, ns, &self.def.resource),
            None => Api::all_with(c, &self.def.resource),
        }
    }

    /// Function results as Events on the XR (identical ones at most once a minute), and in the log.
    pub(super) async fn publish(&self, xr: &DynamicObject, events: &[pipeline::Event]) {
        let regarding = xr.object_ref(&self.def.resource);
        for e in events {
            let t = if e.warning {
                tracing::warn!(xr = %key(xr), reason = %e.reason, "{}", e.message);
                EventType::Warning
            } else {
                tracing::debug!(xr = %key(xr), reason = %e.reason, "{}", e.message);
                EventType::Normal
            };
            self.events
                .publish(&self.client, &regarding, t, &e.reason, &e.message)
                .await;
        }
    }

    /// A failed reconcile as a Warning Event on the XR.
    async fn publish_error(&self, xr: &DynamicObject, e: &Error) {
        let regarding = xr.object_ref(&self.def.resource);
        self.events
            .publish(
                &self.client,
                &regarding,
                EventType::Warning,
                "ReconcileError",
                &e.to_string(),
            )
            .await;
    }

    pub(super) fn legacy(&self) -> bool {
        self.def.xrd.scope.is_legacy()
    }

    async fn write_status(
        &self,
        xr: &DynamicObject,
        xr_json: &Value,
        status: Option<Value>,
    ) -> Result<(), Error> {
        let Some(status) = status else {
            return Ok(());
        };
        let patch = json!({"apiVersion": xr_json["apiVersion"], "kind": xr_json["kind"], "status": status});
        self.xr_api(xr.namespace().as_deref())
            .patch_status(&xr.name_any(), &PatchParams::default(), &Patch::Merge(&patch))
            .await?;
        Ok(())
    }

    pub(super) fn composed_api(&self, kind: &super::discovery::Kind, ns: Option<&str>) -> Api<DynamicObject> {
        let c = self.client.clone();
        match (kind.namespaced, ns) {
            (true, Some(ns)) => Api::namespaced_with(c, ns, &kind.resource),
            _ => Api::all_with(c, &kind.resource),
        }
    }
}

async fn reconcile(xr: Arc<DynamicObject>, ctx: Arc<Ctx>) -> Result<Action, Error> {
    let xr_json = serde_json::to_value(&*xr)?;
    let target = circuit::key(xr.namespace().as_deref(), &xr.name_any());
    let responsive = ctx.breaker.condition(&target);
    let paused = xr.annotations().get(ANNOTATION_PAUSED).map(String::as_str) == Some("true");
    if paused {
        let st = status::next(&xr_json, None, [responsive, Condition::reconcile_paused()]);
        ctx.write_status(&xr, &xr_json, st).await?;
        return Ok(Action::await_change());
    }
    if xr.metadata.deletion_timestamp.is_some() {
        ctx.breaker.reset(&target);
        ctx.required.forget(xr.namespace().as_deref(), &xr.name_any());
        return delete(&xr, &xr_json, &ctx).await;
    }
    match super::compose::compose(&xr, &xr_json, &ctx).await {
        Ok(outcome) => {
            let mut conditions = status::all(&outcome.0);
            conditions.push(responsive);
            let st = status::next(&xr_json, outcome.1.as_ref(), conditions);
            ctx.write_status(&xr, &xr_json, st).await?;
            if outcome.0.unready.is_empty() && outcome.0.unsynced.is_empty() {
                let jitter = jittered(ctx.def.poll, 0.1);
                Ok(Action::requeue(outcome.0.ttl.map_or(jitter, |t| t.min(jitter))))
            } else {
                Ok(Action::requeue(Duration::from_secs(2)))
            }
        }
        Err(e) if e.is_not_leader() || e.is_conflict() => Err(e),
        Err(e) => {
            ctx.publish_error(&xr, &e).await;
            let st = status::next(&xr_json, None, [responsive, Condition::reconcile_error(&e)]);
            ctx.write_status(&xr, &xr_json, st).await?;
            Err(e)
        }
    }
}

/// Deleting: delete every composed resource this XR controls, then drop the finalizer.
async fn delete(xr: &DynamicObject, xr_json: &Value, ctx: &Ctx) -> Result<Action, Error> {
    if !xr.finalizers().iter().any(|f| f == FINALIZER_COMPOSITE) {
        return Ok(Action::await_change());
    }
    let st = status::next(
        xr_json,
        None,
        [Condition::deleting(), Condition::reconcile_success()],
    );
    ctx.write_status(xr, xr_json, st).await?;
    let uid = xr.uid().unwrap_or_default();
    // Every composed resource is asked to go, even when one refuses (one in use, whose deletion the
    // usage webhook refuses until its user is gone); the first refusal is returned afterwards, and
    // the XR keeps its finalizer until all have gone.
    let mut refused: Option<Error> = None;
    for r in Fields::new(xr_json, ctx.legacy()).resource_refs() {
        if r.name.is_empty() {
            continue;
        }
        let kind = ctx
            .discovery
            .resolve(&ctx.client, &r.api_version, &r.kind)
            .await?;
        let api = ctx.composed_api(&kind, r.namespace.as_deref().or(xr.namespace().as_deref()));
        match api.get_opt(&r.name).await? {
            // A resource with another owner too (a composed Usage, owned by its user) is left to the
            // garbage collector, which deletes it once every owner is gone, as upstream leaves all.
            Some(obj) if obj.owner_references().iter().any(|o| o.uid != uid) => {}
            Some(obj) if render::controlled_by(&serde_json::to_value(&obj)?, &uid) => {
                match api.delete(&r.name, &DeleteParams::background()).await {
                    Ok(_) => {}
                    Err(e) if is_not_found(&e) => {}
                    Err(e) if manager::fence::is_not_leader(&e) => return Err(e.into()),
                    Err(e) => {
                        refused.get_or_insert(e.into());
                    }
                }
            }
            _ => {}
        }
    }
    if let Some(e) = refused {
        return Err(e);
    }
    let finalizers: Vec<&String> = xr
        .finalizers()
        .iter()
        .filter(|f| *f != FINALIZER_COMPOSITE)
        .collect();
    let patch = json!({"metadata": {"finalizers": finalizers, "resourceVersion": xr.resource_version()}});
    match ctx
        .xr_api(xr.namespace().as_deref())
        .patch(&xr.name_any(), &PatchParams::default(), &Patch::Merge(&patch))
        .await
    {
        Ok(_) => Ok(Action::await_change()),
        Err(e) if is_not_found(&e) => Ok(Action::await_change()),
        Err(e) => Err(e.into()),
    }
}
