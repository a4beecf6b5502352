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
