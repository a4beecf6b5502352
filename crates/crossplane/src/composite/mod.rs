//! The composite-resource (XR) reconciler (crossplane `internal/controller/apiextensions/composite`).
//!
//! Modules, one concept each: [`cache`] (the caches of Compositions, their revisions, Functions and
//! their revisions that reconciles read), [`fields`] (where Crossplane's fields live in an XR), [`select`]
//! (Composition and revision selection), [`discovery`] (kinds → API resources), [`pipeline`] (running
//! the Composition's pipeline), [`builtin`] (the in-process patch-and-transform step), [`connection`]
//! (connection details read from composed resources and written for the XR), [`functions`]
//! (calling Functions over gRPC and reading what they require), [`pki`] (mTLS with functions), [`render`] (labels,
//! annotations, owner references and names of composed resources), [`status`] (Synced and Ready), [`watch`]
//! (realtime composition: watches on composed kinds), [`required`] (watches on what functions required), [`schemas`] (the OpenAPI schemas functions ask for), [`circuit`] (the watch circuit breaker and the
//! `Responsive` condition) and [`reconciler`] (the controller).

pub mod builtin;
pub mod cache;
pub mod capabilities;
pub mod circuit;
mod compose;
pub mod connection;
pub mod discovery;
pub mod fields;
pub mod functions;
pub mod kind_watch;
pub mod pipeline;
pub mod pki;
pub mod reconciler;
pub mod render;
pub mod required;
pub mod schemas;
pub mod select;
pub mod status;
pub mod watch;

pub use reconciler::{CompositeController, run};

/// The API access the composite controllers need beyond the XRs and composed resources, whose kinds are
/// only known at run time (they come through aggregated ClusterRoles): Compositions and their revisions,
/// read to select one.
pub fn rbac_needs() -> Vec<manager::controller::rbac::Rule> {
    use apis::apiextensions::{Composition, CompositionRevision};
    use apis::pkg::{Function, FunctionRevision};
    use k8s_openapi::api::core::v1::Secret;
    use manager::controller::rbac::{READ, Rule};
    vec![
        Rule::kind::<Composition>(&[""], READ),
        Rule::kind::<CompositionRevision>(&[""], READ),
        // Where Functions answer.
        Rule::kind::<Function>(&[""], READ),
        Rule::kind::<FunctionRevision>(&[""], READ),
        // Credentials handed to pipeline steps, composed resources' connection details (read), and the
        // XR's connection Secret (written).
        Rule::kind::<Secret>(&[""], manager::controller::rbac::OWN),
        // Events on XRs (function results, failed reconciles) in the XRs' namespaces, and in `default`
        // for cluster-scoped XRs.
        Rule::new("", &["events"], &["create", "patch"]),
    ]
}
