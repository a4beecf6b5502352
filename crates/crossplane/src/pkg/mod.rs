//! The package manager (upstream `internal/controller/pkg`): Providers, Functions and Configurations
//! installed from xpkg packages in an OCI registry.
//!
//! Modules, one concept each: [`kind`] (the three package kinds as one value), [`manager`] (package →
//! revision), [`revision`] (a revision's fetch, checks and install), [`establish`] (installing objects
//! with a dry run first and controller references), [`resolver`] (dependencies through the Lock),
//! [`constraint`] (semver constraints as packages write them), [`convert`] (a Provider's CRDs as
//! ManagedResourceDefinitions), [`fetch`] (the registry fetch with pull
//! secrets and ImageConfigs), [`image_config`] (which ImageConfig applies to an image: the longest
//! prefix), [`pull_secret`] (reading pull secrets), [`object`] (dynamic-object helpers) and [`runtime`] (each active Provider and Function
//! revision as a Deployment, HA by default, and the upgrade's handover). Every controller runs under
//! the core's Lease, started by [`run`] as one gated runnable. [`webhooks`] points a package's
//! webhooks (conversion, mutating, validating) at its runtime's Service with the core's CA.

pub mod constraint;
pub mod convert;
pub mod establish;
pub mod fetch;
pub mod image_config;
pub mod kind;
pub mod manager;
pub mod object;
pub mod pull_secret;
pub mod resolver;
pub mod revision;
pub mod runtime;
pub mod webhooks;

use std::sync::Arc;
use std::time::Duration;

use ::manager::controller::ControllerBuilder;
use ::manager::{BoxError, ReconcileMetrics, TermContext};
use apis::pkg::package::{TYPE_REVISION_HEALTHY, TYPE_RUNTIME_HEALTHY};
use kube::api::DynamicObject;
use kube::runtime::{Controller, watcher};
use kube::{Api, ResourceExt};

use self::fetch::Source;
use self::kind::Kind;

/// The Crossplane version this core stands for when a package's `crossplane.version` is checked.
pub const CROSSPLANE_VERSION: &str = "v2.3.4";

/// The controller's name in logs (one runnable for every package controller).
pub const CONTROLLER_NAME: &str = "packages.pkg.crossplane.io";

/// What the package controllers share.
pub struct Ctx {
    /// The term's client.
    pub client: kube::Client,
    /// The registry fetch.
    pub source: Source,
    /// Whether this core runs package runtimes, so Providers and Functions are healthy only with a
    /// healthy runtime.
    pub runtime: bool,
    /// The core's namespace, where runtimes run.
    pub namespace: String,
    /// The core's CA, loaded on first use by the runtime.
    pub pki: tokio::sync::OnceCell<crate::composite::pki::Pki>,
    /// Whether a Provider's managed-resource CRDs are installed as ManagedResourceDefinitions
    /// (`--enable-custom-to-managed-resource-conversion`, [`convert`]).
    pub convert: bool,
}

/// How the package manager runs.
#[derive(Clone)]
pub struct Options {
    /// Only packages and revisions matching this label selector (for tests sharing one apiserver).
    pub selector: Option<String>,
    /// Reconcile metrics.
    pub metrics: ReconcileMetrics,
    /// The core's namespace (pull secrets, runtimes).
    pub namespace: String,
    /// The user agent for registries.
    pub user_agent: String,
    /// Whether the core runs package runtimes (upstream `--package-runtime=Deployment`).
    pub runtime: bool,
    /// Registry hosts fetched from over plain HTTP besides loopback ones (`--plain-http-registry`).
    pub plain_http: Vec<String>,
    /// Whether a Provider's managed-resource CRDs are installed as ManagedResourceDefinitions
    /// (upstream's `--enable-custom-to-managed-resource-conversion`, default true).
    pub convert: bool,
}

/// The names of the TLS Secrets of package `name`: `<name>-tls-server`, `<name>-tls-client`, at most
/// 253 characters.
pub fn tls_secret_name(name: &str, which: &str) -> String {
    let suffix = format!("-tls-{which}");
    let head: String = name.chars().take(253 - suffix.len()).collect();
    format!("{head}{suffix}")
}

/// A revision's health: `Some(true)` when its objects are established (and, for a kind with a
/// runtime that this core runs, its runtime is healthy), `Some(false)` when either says it is not,
/// `None` while unknown.
pub fn health(kind: Kind, rev: &DynamicObject, runtime: bool) -> Option<bool> {
    let conds = object::conditions(rev);
    let get =
        |t: &str| apis::condition::get(&conds, t).map(|c| c.status == apis::condition::ConditionStatus::True);
    match get(TYPE_REVISION_HEALTHY) {
        Some(false) => Some(false),
        None => None,
        Some(true) if kind.has_runtime() && runtime => get(TYPE_RUNTIME_HEALTHY),
        Some(true) => Some(true),
    }
}

/// Why a revision is unhealthy, from its conditions.
pub fn unhealthy_message(kind: Kind, rev: &DynamicObject) -> Option<String> {
    let _ = kind;
    [TYPE_REVISION_HEALTHY, TYPE_RUNTIME_HEALTHY]
        .into_iter()
        .filter(|t| !object::is_true(rev, t))
        .find_map(|t| object::message(rev, t))
}

/// Runs every package controller until the term ends.
pub async fn run(ctx: TermContext, options: Options) -> Result<(), BoxError> {
    let client = ctx.client().clone();
    let shared = Arc::new(Ctx {
        client: client.clone(),
        source: Source::new(&options.user_agent, &options.namespace, &options.plain_http)?,
        runtime: options.runtime,
        namespace: options.namespace.clone(),
        pki: tokio::sync::OnceCell::new(),
        convert: options.convert,
    });
    let mut wc = watcher::Config::default();
    if let Some(s) = &options.selector {
        wc = wc.labels(s);
    }
    let spawner = Spawner {
        term: &ctx,
        metrics: &options.metrics,
        shared: &shared,
    };
    let mut tasks = Vec::new();
    for kind in Kind::ALL {
        let pkgs: Api<DynamicObject> = Api::all_with(client.clone(), &kind.package());
        let revs: Api<DynamicObject> = Api::all_with(client.clone(), &kind.revision());
        let controller = Controller::new_with(pkgs, wc.clone(), kind.package()).owns_with(
            revs.clone(),
            kind.revision(),
            wc.clone(),
        );
        let controller = watch_image_configs(controller, &client, kind.package(), PACKAGE_IMAGES);
        let timeout = Duration::from_secs(60);
        tasks.push(spawner.spawn("packages", kind, controller, timeout, manager::reconcile));
        let controller = Controller::new_with(revs, wc.clone(), kind.revision());
        let controller = watch_image_configs(controller, &client, kind.revision(), REVISION_IMAGES);
        let timeout = Duration::from_secs(180);
        tasks.push(spawner.spawn("packagerevisions", kind, controller, timeout, revision::reconcile));
    }
    if options.runtime {
        for kind in Kind::ALL.into_iter().filter(|k| k.has_runtime()) {
            let controller = runtime_controller(kind, &client, &options.namespace, &wc);
            let timeout = Duration::from_secs(60);
            tasks.push(spawner.spawn("packageruntimes", kind, controller, timeout, runtime::reconcile));
        }
    }
    for t in tasks {
        let _ = t.await;
    }
    Ok(())
}

/// What every package controller of a term is spawned with.
struct Spawner<'a> {
    term: &'a TermContext,
    metrics: &'a ReconcileMetrics,
    shared: &'a Arc<Ctx>,
}

impl Spawner<'_> {
    /// Spawns `controller`, named `<resource>/<kind>.pkg.crossplane.io`, reconciling objects of
    /// `kind` with `reconcile` (each reconcile at most `timeout`) until the term ends.
    fn spawn<F, Fut>(
        &self,
        resource: &str,
        kind: Kind,
        controller: Controller<DynamicObject>,
        timeout: Duration,
        reconcile: F,
    ) -> tokio::task::JoinHandle<()>
    where
        F: Fn(Kind, Arc<DynamicObject>, Arc<Ctx>) -> Fut + Send + 'static,
        Fut: std::future::Future<Output = Result<kube::runtime::controller::Action, crate::error::Error>>
            + Send
            + 'static,
    {
        let name = format!("{resource}/{}.pkg.crossplane.io", kind.name().to_lowercase());
        let token = self.term.token().clone();
        let metrics = self.metrics.clone();
        let c = self.shared.clone();
        tokio::spawn(async move {
            ControllerBuilder::new(name, controller)
                .timeout(timeout)
                .metrics(&metrics)
                .run(&token, move |o, c| reconcile(kind, o, c), c)
                .await;
        })
    }
}

/// The runtime controller of `kind`'s revisions: also reconciles a revision when its Deployment (in
/// the core's `namespace`) or the DeploymentRuntimeConfig it names changes, and a Provider revision
/// when one of its MRDs does.
fn runtime_controller(
    kind: Kind,
    client: &kube::Client,
    namespace: &str,
    wc: &watcher::Config,
) -> Controller<DynamicObject> {
    let revs: Api<DynamicObject> = Api::all_with(client.clone(), &kind.revision());
    let deployments: Api<k8s_openapi::api::apps::v1::Deployment> = Api::namespaced(client.clone(), namespace);
    // A revision is cluster-scoped and its Deployment namespaced: map the controller
    // reference to the revision's own (namespace-less) reference, which `owns` would not.
    let ar = kind.revision();
    let controller = Controller::new_with(revs, wc.clone(), kind.revision()).watches(
        deployments,
        watcher::Config::default(),
        move |d: k8s_openapi::api::apps::v1::Deployment| controlled_by(d.owner_references(), &ar),
    );
    // A changed DeploymentRuntimeConfig rebuilds the runtimes of the revisions naming it.
    let store = controller.store();
    let ar = kind.revision();
    let controller = controller.watches(
        Api::<apis::pkg::DeploymentRuntimeConfig>::all(client.clone()),
        watcher::Config::default(),
        move |drc| {
            let name = drc.name_any();
            store
                .state()
                .into_iter()
                .filter(|r| runtime::runtime_config_name(r) == name)
                .map(|r| kube::runtime::reflector::ObjectRef::from_obj_with(r.as_ref(), ar.clone()))
                .collect::<Vec<_>>()
        },
    );
    // An activated MRD starts its safe-start Provider revision's runtime.
    if kind == Kind::Provider {
        let ar = kind.revision();
        controller.watches_with(
            Api::<DynamicObject>::all_with(client.clone(), &crate::mrd::mrd_api()),
            crate::mrd::mrd_api(),
            wc.clone(),
            move |mrd: DynamicObject| controlled_by(mrd.owner_references(), &ar),
        )
    } else {
        controller
    }
}

/// The objects of API `ar` that `owners` names as controller.
fn controlled_by(
    owners: &[k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference],
    ar: &kube::api::ApiResource,
) -> Vec<kube::runtime::reflector::ObjectRef<DynamicObject>> {
    owners
        .iter()
        .filter(|o| o.controller == Some(true) && o.kind == ar.kind)
        .map(|o| kube::runtime::reflector::ObjectRef::new_with(&o.name, ar.clone()))
        .collect()
}

/// Where a package names its image: its source and its resolved source.
const PACKAGE_IMAGES: [&str; 2] = ["/spec/package", "/status/resolvedPackage"];
/// Where a revision names its image: its source and its resolved image.
const REVISION_IMAGES: [&str; 2] = ["/spec/image", "/status/resolvedImage"];

/// `controller` also reconciles, on a change to an ImageConfig with a pull secret or a rewrite, the
/// objects whose image (at `images`) it matches (upstream's `EnqueuePackagesForImageConfig`).
fn watch_image_configs(
    controller: Controller<DynamicObject>,
    client: &kube::Client,
    ar: kube::api::ApiResource,
    images: [&'static str; 2],
) -> Controller<DynamicObject> {
    let store = controller.store();
    controller.watches(
        Api::<apis::pkg::ImageConfig>::all(client.clone()),
        watcher::Config::default(),
        move |ic| {
            store
                .state()
                .into_iter()
                .filter(|o| {
                    image_config::affects(&ic.spec, images.iter().filter_map(|p| object::str_at(o, p)))
                })
                .map(|o| kube::runtime::reflector::ObjectRef::from_obj_with(o.as_ref(), ar.clone()))
                .collect::<Vec<_>>()
        },
    )
}

/// The API access the package manager needs.
pub fn rbac_needs() -> Vec<::manager::controller::rbac::Rule> {
    use ::manager::controller::rbac::{OWN, READ, Rule};
    let mut rules = Vec::new();
    for kind in Kind::ALL {
        let p = kind.package().plural;
        let r = kind.revision().plural;
        rules.push(Rule::plural(apis::pkg::GROUP, &p, &[""], OWN));
        rules.push(Rule::plural(
            apis::pkg::GROUP,
            &p,
            &["status"],
            &["get", "patch", "update"],
        ));
        rules.push(Rule::plural(apis::pkg::GROUP, &p, &["finalizers"], &["update"]));
        rules.push(Rule::plural(apis::pkg::GROUP, &r, &[""], OWN));
        rules.push(Rule::plural(
            apis::pkg::GROUP,
            &r,
            &["status"],
            &["get", "patch", "update"],
        ));
        rules.push(Rule::plural(apis::pkg::GROUP, &r, &["finalizers"], &["update"]));
    }
    rules.push(Rule::plural(apis::pkg::GROUP, "locks", &[""], OWN));
    rules.push(Rule::plural(
        apis::pkg::GROUP,
        "deploymentruntimeconfigs",
        &[""],
        READ,
    ));
    rules.push(Rule::plural(apis::pkg::GROUP, "imageconfigs", &[""], READ));
    rules.push(Rule::plural(
        "apiextensions.k8s.io",
        "customresourcedefinitions",
        &[""],
        OWN,
    ));
    rules.push(Rule::plural(
        "apiextensions.crossplane.io",
        "compositeresourcedefinitions",
        &[""],
        OWN,
    ));
    rules.push(Rule::plural(
        "apiextensions.crossplane.io",
        "compositions",
        &[""],
        OWN,
    ));
    rules.push(Rule::plural("", "secrets", &[""], READ));
    rules.extend(runtime::rbac_needs());
    rules
}
