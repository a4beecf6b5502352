//! The crossplane-rs core: `crossplane core start` (XRDs, Compositions and their revisions, composite
//! resources with the built-in patch-and-transform function) and `crossplane rbac start` (per-XRD
//! ClusterRoles).
//!
//! Modules, one concept each: [`cli`] (flags and the two entry points), [`xcrd`] (XRD → CRD),
//! [`definition`] (the XRD controller, which starts one composite controller per XRD as a child of the
//! term), [`revision`] (Composition → CompositionRevision), [`composite`] (the XR reconciler),
//! [`rbac`] (the RBAC manager), [`backoff`] and [`error`].
#![forbid(unsafe_code)]

pub mod backoff;
pub mod cli;
pub mod composite;
pub mod definition;
pub mod error;
pub mod metrics;
pub mod rbac;
pub mod revision;
pub mod xcrd;

pub use error::Error;
