//! The XRD controller (crossplane `internal/controller/apiextensions/definition`): XRD → composite CRD →
//! a composite controller, started as a child of the term.
//!
//! Per XRD: hold the finalizer `defined.apiextensions.crossplane.io`; apply the rendered CRD (controlled
//! by the XRD); wait for it to be Established, and for RBAC to let this replica watch the XRs (a
//! SelfSubjectAccessReview: the RBAC manager's per-XRD role must be aggregated first, or the watch would
//! only collect 403s); start (or, when the XRD's generation changed, restart) the child
//! `composite/<xrd>`; set `Established=True/WatchingCompositeResource`. On deletion:
//! `Established=False/TerminatingCompositeResource`, delete all XRs and wait for them to go, stop the
//! child, delete the CRD, and drop the finalizer once the CRD is gone.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use apis::apiextensions::labels::{
    FINALIZER_DEFINED, REASON_TERMINATING_COMPOSITE, REASON_WATCHING_COMPOSITE, TYPE_ESTABLISHED,
};
use apis::apiextensions::{CompositeResourceDefinition, DependentResourceType, XrdControllerStatus};
use apis::condition::{self, Condition, ConditionStatus};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{DeleteParams, DynamicObject, ListParams, Patch, PatchParams};
use kube::core::ApiResource;
use kube::runtime::controller::Action;
use kube::runtime::{Controller, watcher};
use kube::{Api, Resource, ResourceExt};
use manager::backoff::Backoff;
use manager::controller::ControllerBuilder;
use manager::{BoxError, ChildHandle, FencedClient, ReconcileMetrics, TermContext};
use serde_json::json;

use crate::composite::{self, CompositeController};
use crate::error::{Error, fenced_not_found, is_not_found};
use crate::metrics::Recorder;
use crate::xcrd;

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
}

struct Child {
    generation: Option<i64>,
    handle: ChildHandle,
}

struct Ctx {
    term: TermContext,
    client: FencedClient,
    options: Options,
    children: Mutex<HashMap<String, Child>>,
    /// How long to wait, per XRD, for RBAC to allow watching its composite resources.
    rbac_wait: Backoff,
}

/// Runs the XRD controller until the term ends.
pub async fn run(term: TermContext, options: Options) -> Result<(), BoxError> {
    let client = term.client().clone();
    let api: Api<CompositeResourceDefinition> = Api::all(client.kube().clone());
    let crds: Api<CustomResourceDefinition> = Api::all(client.kube().clone());
    let mut wc = watcher::Config::default();
    if let Some(s) = &options.selector {
        wc = wc.labels(s);
    }
    let token = term.token().clone();
    let metrics = options.metrics.clone();
    let state = Arc::new(Ctx {
        term,
        client,
        options,
        children: Mutex::new(HashMap::new()),
        rbac_wait: Backoff::default(),
    });
    ControllerBuilder::new(
        CONTROLLER_NAME,
        Controller::new(api, wc).owns(crds, watcher::Config::default()),
    )
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
            tracing::info!(xrd = %name, "stopped composite controller");
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
            self.client
                .all::<CompositeResourceDefinition>()
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
    let crds = ctx.client.all::<CustomResourceDefinition>();

    if xrd.metadata.deletion_timestamp.is_some() {
        return delete(&xrd, &ctx).await;
    }

    let crd = match xcrd::render(&xrd) {
        Ok(c) => c,
        Err(e) => {
            let msg = format!("cannot render composite resource CustomResourceDefinition: {e}");
            ctx.set_status(&xrd, vec![Condition::reconcile_error(&msg)], None)
                .await?;
            return Err(Error::Message(msg));
        }
    };
    if !xrd.finalizers().iter().any(|f| f == FINALIZER_DEFINED) {
        let mut f = xrd.finalizers().to_vec();
        f.push(FINALIZER_DEFINED.to_owned());
        let patch = json!({"metadata": {"finalizers": f, "resourceVersion": xrd.resource_version()}});
        ctx.client
            .all::<CompositeResourceDefinition>()
            .patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
            .await?;
    }
    let mut crd = crd;
    let mut owner = xrd
        .controller_owner_ref(&())
        .ok_or_else(|| Error::Message("the XRD has no uid".into()))?;
    owner.block_owner_deletion = Some(true);
    crd.metadata.owner_references = Some(vec![owner]);
    if let Some(existing) = crds.get_opt(&name).await? {
        let uid = xrd.uid();
        let foreign = existing
            .owner_references()
            .iter()
            .any(|o| o.controller == Some(true) && Some(&o.uid) != uid.as_ref());
        if foreign
            || existing
                .owner_references()
                .iter()
                .all(|o| o.controller != Some(true))
        {
            let msg = format!(
                "cannot apply rendered composite resource CustomResourceDefinition: {name} is not controlled by this XRD"
            );
            ctx.set_status(&xrd, vec![Condition::reconcile_error(&msg)], None)
                .await?;
            return Err(Error::Message(msg));
        }
    }
    let pp = PatchParams::apply(CONTROLLER).force();
    let applied = match crds.patch(&name, &pp, &Patch::Apply(&crd)).await {
        Ok(c) => c,
        Err(e) if !e.is_not_leader() => {
            let msg = format!("cannot apply rendered composite resource CustomResourceDefinition: {e}");
            ctx.set_status(&xrd, vec![Condition::reconcile_error(&msg)], None)
                .await?;
            return Err(Error::Message(msg));
        }
        Err(e) => return Err(e.into()),
    };
    let established = applied
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Established" && c.status == "True"));
    if !established {
        tracing::debug!(xrd = %name, "waiting for the composite CRD to be established");
        return Ok(Action::requeue(Duration::from_millis(500)));
    }

    let resource = xr_resource(&xrd).ok_or_else(|| Error::Message("no referenceable version".into()))?;
    let restart = ctx
        .lock()
        .get(&name)
        .map(|c| c.generation != generation || c.handle.is_finished());
    match restart {
        Some(false) => {}
        Some(true) | None => {
            if !may_watch(ctx.client.kube(), &resource).await? {
                tracing::info!(xrd = %name, "waiting for RBAC to allow watching the composite resources");
                return Ok(Action::requeue(ctx.rbac_wait.fail(&name)));
            }
            if restart == Some(true) {
                ctx.stop_child(&name).await;
            }
            let def = CompositeController {
                resource: resource.clone(),
                xrd: xrd.spec.clone(),
                poll: ctx.options.poll,
                functions: ctx.options.functions.clone(),
                recorder: Recorder::new(ctx.options.metrics.clone(), &format!("composite/{name}")),
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
    let est = Condition::new(TYPE_ESTABLISHED, ConditionStatus::True, REASON_WATCHING_COMPOSITE)
        .with_observed_generation(generation);
    let controllers = XrdControllerStatus {
        composite_resource_type: Some(DependentResourceType {
            api_version: resource.api_version.clone(),
            kind: resource.kind.clone(),
        }),
    };
    ctx.set_status(&xrd, vec![est, Condition::reconcile_success()], Some(controllers))
        .await?;
    ctx.rbac_wait.succeed(&name);
    Ok(Action::await_change())
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
    let term = Condition::new(
        TYPE_ESTABLISHED,
        ConditionStatus::False,
        REASON_TERMINATING_COMPOSITE,
    );
    ctx.set_status(xrd, vec![term], None).await?;
    let crds = ctx.client.all::<CustomResourceDefinition>();
    if crds.get_opt(&name).await?.is_none() {
        ctx.stop_child(&name).await;
        if xrd.finalizers().iter().any(|f| f == FINALIZER_DEFINED) {
            let f: Vec<&String> = xrd
                .finalizers()
                .iter()
                .filter(|f| *f != FINALIZER_DEFINED)
                .collect();
            let patch = json!({"metadata": {"finalizers": f, "resourceVersion": xrd.resource_version()}});
            match ctx
                .client
                .all::<CompositeResourceDefinition>()
                .patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
                .await
            {
                Ok(_) => {}
                Err(e) if fenced_not_found(&e) => {}
                Err(e) => return Err(e.into()),
            }
        }
        return Ok(Action::await_change());
    }
    if let Some(resource) = xr_resource(xrd) {
        let xrs = ctx.client.wrap(Api::<DynamicObject>::all_with(
            ctx.client.kube().clone(),
            &resource,
        ));
        // A CRD that is already going away serves no list: nothing is left to delete.
        let items = match xrs.list(&ListParams::default()).await {
            Ok(l) => l.items,
            Err(e) if is_not_found(&e) => Vec::new(),
            Err(e) => return Err(e.into()),
        };
        if !items.is_empty() {
            for xr in &items {
                if xr.metadata.deletion_timestamp.is_some() {
                    continue;
                }
                let api = match xr.namespace() {
                    Some(ns) => {
                        Api::<DynamicObject>::namespaced_with(ctx.client.kube().clone(), &ns, &resource)
                    }
                    None => Api::<DynamicObject>::all_with(ctx.client.kube().clone(), &resource),
                };
                match ctx
                    .client
                    .wrap(api)
                    .delete(&xr.name_any(), &DeleteParams::background())
                    .await
                {
                    Ok(_) => {}
                    Err(e) if fenced_not_found(&e) => {}
                    Err(e) => return Err(e.into()),
                }
            }
            tracing::info!(xrd = %name, remaining = items.len(), "waiting for composite resources to be deleted");
            return Ok(Action::requeue(Duration::from_secs(1)));
        }
    }
    ctx.stop_child(&name).await;
    match crds.delete(&name, &DeleteParams::background()).await {
        Ok(_) => {}
        Err(e) if fenced_not_found(&e) => {}
        Err(e) => return Err(e.into()),
    }
    Ok(Action::requeue(Duration::from_secs(1)))
}

/// The API access this controller needs: XRDs (read, finalizer and status writes, and `update` on
/// `/finalizers` because the CRDs it renders name the XRD as blocking owner) and the CRDs it renders
/// (applied, read back and deleted). The XRs themselves are defined at run time: the RBAC manager grants
/// them per XRD through ClusterRoles labelled `rbac.crossplane.io/aggregate-to-crossplane`.
pub fn rbac_needs() -> Vec<manager::rbac::Rule> {
    use manager::rbac::{OWN, READ_WRITE, Rule};
    vec![
        Rule::kind::<CompositeResourceDefinition>(&[""], READ_WRITE),
        Rule::kind::<CompositeResourceDefinition>(&["status"], &["get", "patch", "update"]),
        Rule::kind::<CompositeResourceDefinition>(&["finalizers"], &["update"]),
        Rule::kind::<CustomResourceDefinition>(&[""], OWN),
    ]
}
