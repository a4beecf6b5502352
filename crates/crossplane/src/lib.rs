//! The crossplane-rs core: `crossplane core start` (XRDs, Compositions and their revisions, composite
//! resources composed by function pipelines: the built-in patch-and-transform and any function over
//! gRPC), `crossplane rbac start` (per-XRD ClusterRoles) and `crossplane render` (a pipeline without a
//! cluster).
//!
//! Modules, one concept each: [`cli`] (flags and the two entry points), [`xcrd`] (XRD → CRD),
//! [`definition`] (the XRD controller, which starts one composite controller per XRD as a child of the
//! term), [`revision`] (Composition → CompositionRevision), [`composite`] (the XR reconciler),
//! [`rbac`] (the RBAC manager), [`roles`] (the user-facing crossplane-admin/edit/view/browse roles),
//! [`init`] (`core init`, `rbac init`), [`pkg`] (the package manager), [`mrd`] (ManagedResourceDefinitions and activation policies), [`usage`] (Usages: deletion protection), [`ops`] (Operations, CronOperations, WatchOperations), [`upstream_flags`] (upstream's flags and what we do with
//! each), [`upstream_rbac`] (what upstream's core may do by default), [`render_command`] (`crossplane render`) and [`error`]. Controller wiring, backoff and
//! reconcile metrics are the manager's ([`manager::controller::ControllerBuilder`]).
#![forbid(unsafe_code)]

pub mod applied;
pub mod claim;
pub mod cli;
pub mod composite;
pub mod definition;
pub mod error;
pub mod init;
pub mod mrd;
pub mod ops;
pub mod pkg;
pub mod rbac;
pub mod render_command;
pub mod revision;
pub mod roles;
pub mod upstream_flags;
pub mod upstream_rbac;
pub mod usage;
pub mod xcrd;

pub use error::Error;

/// The core's CRDs: CompositeResourceDefinition, Composition, CompositionRevision, EnvironmentConfig and the legacy Usage, Usage and ClusterUsage
/// (`protection.crossplane.io`), Operation, CronOperation and WatchOperation (`ops.crossplane.io`), and the package
/// manager's `pkg.crossplane.io` kinds (Provider, Function, Configuration, their revisions,
/// DeploymentRuntimeConfig, ImageConfig, Lock).
pub fn crds()
-> Vec<k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition> {
    use apis::apiextensions::{Composition, CompositionRevision};
    use kube::CustomResourceExt;
    let mut crds = vec![
        apis::apiextensions::xrd::crd(),
        Composition::crd(),
        CompositionRevision::crd(),
        apis::apiextensions::environment::crd(),
        apis::apiextensions::usage::crd(),
        apis::apiextensions::mrd::crd(),
        apis::apiextensions::activation::ManagedResourceActivationPolicy::crd(),
    ];
    crds.extend(apis::protection::crds());
    crds.extend(apis::ops::crds());
    crds.extend(apis::pkg::crds());
    crds
}

/// What `crossplane core start` may do: its controllers' declared needs plus upstream's default rules
/// ([`upstream_rbac`]), rendered into its ClusterRole by `cargo xtask generate`; leader election's
/// namespaced needs come on top.
pub fn core_rbac_needs() -> Vec<manager::controller::rbac::Rule> {
    let mut rules = definition::rbac_needs();
    rules.extend(upstream_rbac::base_rules());
    rules.extend(revision::rbac_needs());
    rules.extend(composite::rbac_needs());
    rules.extend(claim::rbac_needs());
    rules.extend(init::rbac_needs());
    rules.extend(pkg::rbac_needs());
    rules.extend(mrd::rbac_needs());
    rules.extend(usage::rbac_needs());
    rules.extend(ops::rbac_needs());
    manager::controller::rbac::normalize(rules)
}

/// What `crossplane rbac start` needs.
pub fn rbac_manager_rbac_needs() -> Vec<manager::controller::rbac::Rule> {
    manager::controller::rbac::normalize(rbac::rbac_needs())
}
