//! Crossplane v2's managed resource definitions (upstream `internal/controller/apiextensions/managed`
//! and `activationpolicy`): a ManagedResourceDefinition (MRD) is a provider's managed-resource CRD
//! held back until it is activated, and a ManagedResourceActivationPolicy (MRAP) activates the MRDs
//! whose names match its patterns.
//!
//! Modules, one concept each: [`crd`] (an Active MRD's CRD, server-side applied, and its
//! establishment reported on the MRD) and [`policy`] (an MRAP sets `state: Active` on every MRD it
//! matches). Both run under the core's Lease, started by [`run`] as one gated runnable. The package
//! manager turns a Provider's managed-resource CRDs into MRDs ([`crate::pkg::convert`]).

pub mod crd;
pub mod policy;

use std::sync::Arc;
use std::time::Duration;

use ::manager::controller::ControllerBuilder;
use ::manager::{BoxError, ReconcileMetrics, TermContext};
use apis::apiextensions::activation::ManagedResourceActivationPolicy;
use apis::apiextensions::mrd::ManagedResourceDefinition;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{ApiResource, DynamicObject};
use kube::runtime::reflector::ObjectRef;
use kube::runtime::{Controller, watcher};
use kube::{Api, ResourceExt};

/// The controller's name in logs (one runnable for both controllers).
pub const CONTROLLER_NAME: &str = "managedresourcedefinitions.apiextensions.crossplane.io";

/// The MRD API.
pub fn mrd_api() -> ApiResource {
    ApiResource::erase::<ManagedResourceDefinition>(&())
}

/// The MRAP API.
pub fn mrap_api() -> ApiResource {
    ApiResource::erase::<ManagedResourceActivationPolicy>(&())
}

/// What the controllers share.
pub struct Ctx {
    /// The term's client.
    pub client: kube::Client,
    /// Only MRDs and MRAPs matching this label selector (for tests sharing one apiserver).
    pub selector: Option<String>,
}

/// Runs the MRD and MRAP controllers until the term ends.
pub async fn run(
    ctx: TermContext,
    selector: Option<String>,
    metrics: ReconcileMetrics,
) -> Result<(), BoxError> {
    let client = ctx.client().clone();
    let shared = Arc::new(Ctx {
        client: client.clone(),
        selector: selector.clone(),
    });
    let mut wc = watcher::Config::default();
    if let Some(s) = &selector {
        wc = wc.labels(s);
    }
    let mrds: Api<DynamicObject> = Api::all_with(client.clone(), &mrd_api());
    // An MRD's CRD has the MRD's name: any change to a CRD looks at the MRD of that name (one that
    // is not in the controller's cache is not reconciled).
    let controller = Controller::new_with(mrds.clone(), wc.clone(), mrd_api()).watches(
        Api::<CustomResourceDefinition>::all(client.clone()),
        watcher::Config::default(),
        |crd| Some(ObjectRef::new_with(&crd.name_any(), mrd_api())),
    );
    let token = ctx.token().clone();
    let m = metrics.clone();
    let c = shared.clone();
    let definitions = tokio::spawn(async move {
        ControllerBuilder::new(
            "managedresourcedefinitions.apiextensions.crossplane.io",
            controller,
        )
        .timeout(Duration::from_secs(60))
        .metrics(&m)
        .run(&token, crd::reconcile, c)
        .await;
    });
    let mraps: Api<DynamicObject> = Api::all_with(client.clone(), &mrap_api());
    let controller = Controller::new_with(mraps, wc.clone(), mrap_api());
    // Any MRD change looks at every policy: a new MRD may match one.
    let store = controller.store();
    let controller = controller.watches_with(mrds, mrd_api(), wc, move |_mrd| {
        store
            .state()
            .into_iter()
            .map(|p| ObjectRef::from_obj_with(p.as_ref(), mrap_api()))
            .collect::<Vec<_>>()
    });
    let token = ctx.token().clone();
    let c = shared.clone();
    let policies = tokio::spawn(async move {
        ControllerBuilder::new(
            "managedresourceactivationpolicies.apiextensions.crossplane.io",
            controller,
        )
        .timeout(Duration::from_secs(60))
        .metrics(&metrics)
        .run(&token, policy::reconcile, c)
        .await;
    });
    let _ = definitions.await;
    let _ = policies.await;
    Ok(())
}

/// The API access the controllers need.
pub fn rbac_needs() -> Vec<::manager::controller::rbac::Rule> {
    use ::manager::controller::rbac::{OWN, Rule};
    let group = apis::apiextensions::GROUP;
    let mut rules = Vec::new();
    for plural in [
        apis::apiextensions::mrd::PLURAL,
        apis::apiextensions::activation::PLURAL,
    ] {
        rules.push(Rule::plural(group, plural, &[""], OWN));
        rules.push(Rule::plural(
            group,
            plural,
            &["status"],
            &["get", "patch", "update"],
        ));
    }
    rules.push(Rule::plural(
        "apiextensions.k8s.io",
        "customresourcedefinitions",
        &[""],
        OWN,
    ));
    rules
}
