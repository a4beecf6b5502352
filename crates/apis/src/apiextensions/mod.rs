//! The `apiextensions.crossplane.io` API: CompositeResourceDefinition (v2), Composition (v1, mode
//! `Pipeline`), CompositionRevision (v1), EnvironmentConfig (v1beta1), the legacy Usage (v1alpha1, v1beta1),
//! ManagedResourceDefinition and ManagedResourceActivationPolicy (v1alpha1).
//!
//! Modules, one concept each: [`xrd`], [`composition`], [`revision`], [`environment`], [`usage`], [`mrd`],
//! [`activation`], and [`labels`] for the well-known
//! labels, annotations and finalizers of composition.

pub mod activation;
pub mod composition;
pub mod environment;
pub mod labels;
pub mod mrd;
pub mod revision;
pub mod usage;
pub mod xrd;

pub use composition::{
    Composition, CompositionMode, CompositionSpec, CompositionStatus, FunctionCredentials, FunctionReference,
    PipelineStep, SecretNamespacedReference, TypeReference,
};
pub use revision::{CompositionRevision, CompositionRevisionSpec, CompositionRevisionStatus};
pub use xrd::{
    CompositeResourceDefinition, CompositeResourceDefinitionSpec, CompositeResourceDefinitionStatus,
    CompositeResourceScope, CompositeResourceValidation, CompositeResourceVersion, CompositionUpdatePolicy,
    DependentResourceType, NameReference, XrdControllerStatus, XrdNames,
};

/// The API group.
pub const GROUP: &str = "apiextensions.crossplane.io";
