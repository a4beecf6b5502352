//! The `pkg.crossplane.io` API, as far as composition functions need it: Function and FunctionRevision
//! (v1, also served as v1beta1), and the annotations that point a Function at an endpoint that is already running.

pub mod function;

pub use function::{
    ANNOTATION_RUNTIME, ANNOTATION_RUNTIME_DEVELOPMENT_TARGET, Function, FunctionRevision,
    FunctionRevisionSpec, FunctionRevisionStatus, FunctionSpec, FunctionStatus, LABEL_PACKAGE,
    RUNTIME_DEVELOPMENT, function_crd, function_revision_crd,
};

/// The API group.
pub const GROUP: &str = "pkg.crossplane.io";
