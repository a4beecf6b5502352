//! Well-known labels, annotations, finalizers and condition names of composition (crossplane-runtime
//! `pkg/xcrd`, crossplane `apis/apiextensions/v1`).

/// The XRD finalizer: held until the composite CRD is gone.
pub const FINALIZER_DEFINED: &str = "defined.apiextensions.crossplane.io";
/// The XRD finalizer of an XRD that offers claims: held until the claim CRD is gone.
pub const FINALIZER_OFFERED: &str = "offered.apiextensions.crossplane.io";
/// The claim finalizer.
pub const FINALIZER_CLAIM: &str = "finalizer.apiextensions.crossplane.io";
/// The composite-resource finalizer.
pub const FINALIZER_COMPOSITE: &str = "composite.apiextensions.crossplane.io";

/// Label on composed resources (and the XR itself): the XR's name.
pub const LABEL_COMPOSITE: &str = "crossplane.io/composite";
/// Label on composed resources: the claim's name (legacy claims).
pub const LABEL_CLAIM_NAME: &str = "crossplane.io/claim-name";
/// Label on composed resources: the claim's namespace (legacy claims).
pub const LABEL_CLAIM_NAMESPACE: &str = "crossplane.io/claim-namespace";
/// Label on CompositionRevisions: the Composition's name.
pub const LABEL_COMPOSITION_NAME: &str = "crossplane.io/composition-name";
/// Label on CompositionRevisions: the first 63 hex characters of the Composition's hash.
pub const LABEL_COMPOSITION_HASH: &str = "crossplane.io/composition-hash";
/// Annotation on composed resources: the template (resource) name within the Composition.
pub const ANNOTATION_COMPOSITION_RESOURCE_NAME: &str = "crossplane.io/composition-resource-name";

/// XRD condition type `Established`.
pub const TYPE_ESTABLISHED: &str = "Established";
/// XRD condition type `Offered`.
pub const TYPE_OFFERED: &str = "Offered";
/// CompositionRevision condition type `ValidPipeline`.
pub const TYPE_VALID_PIPELINE: &str = "ValidPipeline";

/// Reason `WatchingCompositeResource` (Established=True).
pub const REASON_WATCHING_COMPOSITE: &str = "WatchingCompositeResource";
/// Reason `WatchingCompositeResourceClaim` (Offered=True).
pub const REASON_WATCHING_CLAIM: &str = "WatchingCompositeResourceClaim";
/// Reason `TerminatingCompositeResourceClaim` (Offered=False).
pub const REASON_TERMINATING_CLAIM: &str = "TerminatingCompositeResourceClaim";
/// Reason `TerminatingCompositeResource` (Established=False).
pub const REASON_TERMINATING_COMPOSITE: &str = "TerminatingCompositeResource";
