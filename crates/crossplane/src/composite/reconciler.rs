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

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use apis::apiextensions::CompositeResourceDefinitionSpec;
use apis::apiextensions::CompositionRevision;
use apis::apiextensions::labels::{
    FINALIZER_COMPOSITE, LABEL_CLAIM_NAME, LABEL_CLAIM_NAMESPACE, LABEL_COMPOSITE, LABEL_COMPOSITION_NAME,
};
use apis::condition::Condition;
use apis::meta::ANNOTATION_PAUSED;
use composition::ObservedComposed;
use function::proto::v1;
use kube::api::{DeleteParams, DynamicObject, Patch, PatchParams};
use kube::core::ApiResource;
use kube::runtime::controller::Action;
use kube::runtime::reflector::ObjectRef;
use kube::runtime::{Controller, watcher};
use kube::{Api, Resource, ResourceExt};
use manager::{BoxError, TermContext};
use serde_json::{Value, json};

use super::builtin;
use super::circuit;
use super::connection;
use super::discovery::Discovery;
use super::fields::{Fields, ResourceRef};
use super::functions::{ClusterIo, Functions};
use super::pipeline;
use super::render::{self, Owner};
use super::required::{Dependency, Required};
use super::select::{self, XrType};
use super::status::{self, Outcome};
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
}

struct Ctx {
    client: kube::Client,
    events: Events,
    def: CompositeController,
    discovery: Discovery,
    watches: ComposedWatches,
    required: Required,
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
    let store = controller.store();
    let legacy = state.def.xrd.scope.is_legacy();
    let dyntype = resource.clone();
    let revisions: Api<CompositionRevision> = Api::all(state.client.clone());
    let controller = controller
        .watches(
            revisions,
            watcher::Config::default(),
            move |rev: CompositionRevision| {
                let composition = rev.labels().get(LABEL_COMPOSITION_NAME).cloned();
                store
                    .state()
                    .into_iter()
                    .filter(|xr| {
                        composition.is_some()
                            && Fields::new(&xr.data, legacy).composition_ref() == composition.as_deref()
                    })
                    .map(|xr| ObjectRef::from_obj_with(&*xr, dyntype.clone()))
                    .collect::<Vec<_>>()
            },
        )
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
fn tokio_stream_of(
    mut rx: tokio::sync::mpsc::UnboundedReceiver<ObjectRef<DynamicObject>>,
) -> impl futures::Stream<Item = ObjectRef<DynamicObject>> + Send + 'static {
    futures::stream::poll_fn(move |cx| rx.poll_recv(cx))
}

fn key(xr: &DynamicObject) -> String {
    format!("{}/{}", xr.namespace().unwrap_or_default(), xr.name_any())
}

impl Ctx {
    fn xr_api(&self, ns: Option<&str>) -> Api<DynamicObject> {
        let c = self.client.clone();
        match ns {
            Some(ns) => Api::namespaced_with(c, ns, &self.def.resource),
            None => Api::all_with(c, &self.def.resource),
        }
    }

    /// Function results as Events on the XR (identical ones at most once a minute), and in the log.
    async fn publish(&self, xr: &DynamicObject, events: &[pipeline::Event]) {
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

    fn legacy(&self) -> bool {
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

    fn composed_api(&self, kind: &super::discovery::Kind, ns: Option<&str>) -> Api<DynamicObject> {
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
    match compose(&xr, &xr_json, &ctx).await {
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

/// One compose; returns the outcome and the XR status overlay from To* patches.
async fn compose(xr: &DynamicObject, xr_json: &Value, ctx: &Ctx) -> Result<(Outcome, Option<Value>), Error> {
    let legacy = ctx.legacy();
    let fields = Fields::new(xr_json, legacy);
    let client = &ctx.client;
    let t = XrType {
        api_version: ctx.def.resource.api_version.clone(),
        kind: ctx.def.resource.kind.clone(),
    };
    let comp = select::composition(client, &fields, &ctx.def.xrd, &t).await?;
    let comp_name = comp.name_any();
    let rev = select::revision(client, &fields, &ctx.def.xrd, &comp_name).await?;
    let rev_name = rev.name_any();
    let uid = xr.uid().unwrap_or_default();
    let xr_ns = xr.namespace();

    // Observe what the XR composed.
    let mut observed: BTreeMap<String, ObservedComposed> = BTreeMap::new();
    let mut observed_refs: BTreeMap<String, ResourceRef> = BTreeMap::new();
    // Refs persisted for resources not created yet (a failed apply): their names are reused, so the
    // names stay stable while an apply keeps failing.
    let mut pending: Vec<ResourceRef> = Vec::new();
    for r in fields.resource_refs() {
        if r.name.is_empty() {
            continue;
        }
        let kind = ctx.discovery.resolve(client, &r.api_version, &r.kind).await?;
        let api = ctx.composed_api(&kind, r.namespace.as_deref().or(xr_ns.as_deref()));
        let Some(obj) = api.get_opt(&r.name).await? else {
            pending.push(r.clone());
            continue;
        };
        let v = serde_json::to_value(&obj)?;
        if !render::controlled_by(&v, &uid) {
            continue;
        }
        if let Some(t) = render::template_name(&v) {
            observed_refs.insert(t.to_owned(), r.clone());
            let connection_details = connection::read(client, &v).await?;
            observed.insert(
                t.to_owned(),
                ObservedComposed {
                    resource: v,
                    connection_details,
                },
            );
        }
    }

    let io = ClusterIo {
        client,
        discovery: &ctx.discovery,
        functions: &ctx.def.functions,
    };
    let observed_state = pipeline::Observed {
        composite: xr_json.clone(),
        composite_connection: connection::read(client, xr_json).await?,
        resources: observed,
    };
    let tag = format!("{}/{}", uid, xr.resource_version().unwrap_or_default());
    let run = match pipeline::run(&io, &rev.spec.pipeline, &observed_state, &tag).await {
        Ok(run) => run,
        Err(e) => {
            if let pipeline::PipelineError::Fatal { events, .. } = &e {
                ctx.publish(xr, events).await;
            }
            return Err(Error::Message(e.to_string()));
        }
    };
    ctx.publish(xr, &run.events).await;
    track_required(ctx, xr, &run.required).await?;
    let observed = observed_state.resources;
    let desired_resources: BTreeMap<String, (Value, bool)> = run
        .desired
        .resources
        .iter()
        .map(|(t, r)| {
            let ready = match r.ready() {
                v1::Ready::True => true,
                v1::Ready::False => false,
                // Unspecified: ready when the observed resource says so, as upstream.
                v1::Ready::Unspecified => observed.get(t).is_some_and(|o| {
                    status::current(&o.resource)
                        .iter()
                        .any(|c| c.type_ == "Ready" && c.status == apis::ConditionStatus::True)
                }),
            };
            (t.clone(), (builtin::json_of(Some(r)), ready))
        })
        .collect();

    // Name, decorate and locate every desired resource.
    let owner = Owner {
        api_version: xr_json["apiVersion"].as_str().unwrap_or_default().to_owned(),
        kind: xr_json["kind"].as_str().unwrap_or_default().to_owned(),
        name: xr.name_any(),
        uid: uid.clone(),
        namespace: xr_ns.clone(),
        labels: xr.labels().clone(),
    };
    let mut desired = Vec::new();
    let mut refs = Vec::new();
    for (template, (resource, ready)) in &desired_resources {
        let mut res = resource.clone();
        let api_version = res["apiVersion"].as_str().unwrap_or_default().to_owned();
        let kind_name = res["kind"].as_str().unwrap_or_default().to_owned();
        if api_version.is_empty() || kind_name.is_empty() {
            return Err(Error::Message(format!(
                "composed resource {template:?} has no apiVersion or kind"
            )));
        }
        let kind = ctx.discovery.resolve(client, &api_version, &kind_name).await?;
        let namespace = render::namespace_of(&res, template, &kind_name, kind.namespaced, xr_ns.as_deref())
            .map_err(Error::Message)?;
        ctx.watches.ensure(&kind.resource);
        let api = ctx.composed_api(&kind, namespace.as_deref());
        let reusable = pending
            .iter()
            .position(|r| r.api_version == api_version && r.kind == kind_name && r.namespace == namespace);
        // A name the Composition gives, unless it is the name the core generated before (functions
        // such as patch-and-transform hand the observed name back).
        let generated_before = observed.get(template).is_some_and(|o| {
            o.resource
                .pointer("/metadata/generateName")
                .and_then(Value::as_str)
                .is_some_and(|g| !g.is_empty())
        });
        let given = render::explicit_name(&res).filter(|_| !generated_before);
        let name = match (given, observed_refs.get(template), reusable) {
            (Some(n), _, _) => n.to_owned(),
            (None, Some(r), _) => r.name.clone(),
            (None, None, Some(i)) => pending.remove(i).name,
            (None, None, None) => free_name(&api, &format!("{}-", owner.name)).await?,
        };
        let generate_name = given.is_none();
        render::decorate(
            &mut res,
            &owner,
            template,
            &name,
            namespace.as_deref(),
            generate_name,
        );
        refs.push(ResourceRef {
            api_version,
            kind: kind_name,
            name: name.clone(),
            namespace,
        });
        desired.push((template.clone(), name, api, res, *ready));
    }

    // Persist finalizer, label, selection and resourceRefs before creating anything.
    let mut meta = json!({});
    if !xr.finalizers().iter().any(|f| f == FINALIZER_COMPOSITE) {
        let mut f = xr.finalizers().to_vec();
        f.push(FINALIZER_COMPOSITE.to_owned());
        meta["finalizers"] = json!(f);
    }
    if xr.labels().get(LABEL_COMPOSITE) != Some(&owner.name) {
        meta["labels"] = json!({ LABEL_COMPOSITE: owner.name });
    }
    let mut xp = json!({});
    if fields.composition_ref() != Some(comp_name.as_str()) {
        xp["compositionRef"] = json!({"name": comp_name});
    }
    if fields.composition_revision_ref() != Some(rev_name.as_str()) {
        xp["compositionRevisionRef"] = json!({"name": rev_name});
    }
    if fields.resource_refs() != refs {
        xp["resourceRefs"] = json!(refs);
    }
    // A legacy XR that names no connection Secret gets one in the Composition's
    // `writeConnectionSecretsToNamespace`, named by its UID, as upstream's configurator does.
    let mut xr_json = std::borrow::Cow::Borrowed(xr_json);
    if legacy
        && xr_json.pointer("/spec/writeConnectionSecretToRef").is_none()
        && let Some(ns) = &rev.spec.write_connection_secrets_to_namespace
    {
        let r = json!({"name": uid, "namespace": ns});
        xp["writeConnectionSecretToRef"] = r.clone();
        xr_json.to_mut()["spec"]["writeConnectionSecretToRef"] = r;
    }
    let xr_json = xr_json.as_ref();
    let meta_changed = meta.as_object().is_some_and(|m| !m.is_empty());
    let xp_changed = xp.as_object().is_some_and(|m| !m.is_empty());
    if meta_changed || xp_changed {
        let mut patch = if xp_changed {
            Fields::spec_patch(legacy, xp)
        } else {
            json!({})
        };
        meta["resourceVersion"] = json!(xr.resource_version());
        patch["metadata"] = meta;
        patch["apiVersion"] = xr_json["apiVersion"].clone();
        patch["kind"] = xr_json["kind"].clone();
        ctx.xr_api(xr_ns.as_deref())
            .patch(&owner.name, &PatchParams::default(), &Patch::Merge(&patch))
            .await?;
    }

    // Garbage-collect what is no longer desired.
    for (template, r) in &observed_refs {
        if desired_resources.contains_key(template) {
            continue;
        }
        let kind = ctx.discovery.resolve(client, &r.api_version, &r.kind).await?;
        let api = ctx.composed_api(&kind, r.namespace.as_deref().or(xr_ns.as_deref()));
        // As upstream, the labels that tie it to the XR go first: they tell a deletion by garbage
        // collection from the XR's own (a composed Usage waits for its user only in the latter).
        let unlabel = json!({"metadata": {"labels": {
            LABEL_COMPOSITE: null, LABEL_CLAIM_NAME: null, LABEL_CLAIM_NAMESPACE: null}}});
        match api
            .patch(&r.name, &PatchParams::default(), &Patch::Merge(&unlabel))
            .await
        {
            Ok(_) => {}
            Err(e) if is_not_found(&e) => continue,
            Err(e) => return Err(e.into()),
        }
        match api.delete(&r.name, &DeleteParams::background()).await {
            Ok(_) => tracing::info!(xr = %key(xr), resource = %r.name, "deleted unwanted composed resource"),
            Err(e) if is_not_found(&e) => {}
            Err(e) => return Err(e.into()),
        }
    }

    // Apply.
    let mut outcome = Outcome::default();
    let pp = PatchParams::apply(&format!("{FIELD_MANAGER_COMPOSED}/{uid}")).force();
    for (template, name, api, res, ready) in desired {
        match api.patch(&name, &pp, &Patch::Apply(&res)).await {
            Ok(_) => {}
            Err(kube::Error::Api(s)) if s.code == 422 => {
                tracing::warn!(xr = %key(xr), resource = %template, error = %s.message, "cannot apply composed resource");
                outcome.unsynced.push(template.clone());
            }
            Err(e) => return Err(e.into()),
        }
        if !ready {
            outcome.unready.push(template);
        }
    }
    let composite = run.desired.composite.as_ref();
    outcome.composite_ready = composite.map(|c| c.ready()).and_then(|r| match r {
        v1::Ready::True => Some(true),
        v1::Ready::False => Some(false),
        v1::Ready::Unspecified => None,
    });
    outcome.conditions = run.conditions;
    outcome.ttl = run.ttl;
    if let Some(c) = composite {
        let owner_ref = json!({"apiVersion": owner.api_version, "kind": owner.kind, "name": owner.name,
            "uid": owner.uid, "controller": true, "blockOwnerDeletion": true});
        connection::write(
            &ctx.client,
            xr_json,
            owner_ref,
            &c.connection_details,
            FIELD_MANAGER_COMPOSITE,
        )
        .await?;
    }
    let overlay = builtin::json_of(composite).get("status").cloned();
    Ok((outcome, overlay))
}

/// Records what the XR's functions required, so that a change to one of those resources reconciles it.
async fn track_required(
    ctx: &Ctx,
    xr: &DynamicObject,
    required: &[v1::ResourceSelector],
) -> Result<(), Error> {
    let mut deps = Vec::new();
    let mut kinds = Vec::new();
    for sel in required {
        let kind = ctx
            .discovery
            .resolve(&ctx.client, &sel.api_version, &sel.kind)
            .await?;
        let (name, labels) = match &sel.r#match {
            Some(v1::resource_selector::Match::MatchName(n)) => (Some(n.clone()), BTreeMap::new()),
            Some(v1::resource_selector::Match::MatchLabels(l)) => {
                (None, l.labels.clone().into_iter().collect())
            }
            None => continue,
        };
        deps.push(Dependency {
            api_version: sel.api_version.clone(),
            kind: sel.kind.clone(),
            namespace: sel.namespace.clone().filter(|_| kind.namespaced),
            name,
            labels,
        });
        kinds.push(kind.resource);
    }
    ctx.required.track(
        ObjectRef::from_obj_with(xr, ctx.def.resource.clone()),
        deps,
        &kinds,
    );
    Ok(())
}

/// A generated name no object of this kind has yet.
async fn free_name(api: &Api<DynamicObject>, prefix: &str) -> Result<String, Error> {
    for _ in 0..8 {
        let n = render::generate_name(prefix);
        match api.get_opt(&n).await {
            Ok(None) => return Ok(n),
            Ok(Some(_)) => {}
            Err(e) if is_not_found(&e) => return Ok(n),
            Err(e) => return Err(e.into()),
        }
    }
    Err(Error::Message(
        "cannot generate a free name for a composed resource".into(),
    ))
}
