//! The composite-resource (XR) reconciler (crossplane `internal/controller/apiextensions/composite`).
//!
//! Modules, one concept each: [`fields`] (where Crossplane's fields live in an XR), [`select`]
//! (Composition and revision selection), [`discovery`] (kinds → API resources), [`pipeline`] (running
//! the Composition's pipeline with the built-in patch-and-transform engine), [`render`] (labels,
//! annotations, owner references and names of composed resources), [`status`] (Synced and Ready) and
//! [`reconciler`] (the controller).

pub mod discovery;
pub mod fields;
pub mod pipeline;
pub mod reconciler;
pub mod render;
pub mod select;
pub mod status;

pub use reconciler::{CompositeController, run};

/// The API access the composite controllers need beyond the XRs and composed resources, whose kinds are
/// only known at run time (they come through aggregated ClusterRoles): Compositions and their revisions,
/// read to select one.
pub fn rbac_needs() -> Vec<manager::rbac::Rule> {
    use apis::apiextensions::{Composition, CompositionRevision};
    use manager::rbac::{READ, Rule};
    vec![
        Rule::kind::<Composition>(&[""], READ),
        Rule::kind::<CompositionRevision>(&[""], READ),
    ]
}
