//! Well-known annotations, labels and finalizers (crossplane-runtime `pkg/meta`).

/// The managed-resource finalizer.
pub const FINALIZER_MANAGED: &str = "finalizer.managedresource.crossplane.io";
/// The ProviderConfig finalizer, held while usages exist.
pub const FINALIZER_IN_USE: &str = "in-use.crossplane.io";

/// The name of the external resource.
pub const ANNOTATION_EXTERNAL_NAME: &str = "crossplane.io/external-name";
/// When the provider last began creating the external resource (RFC 3339).
pub const ANNOTATION_EXTERNAL_CREATE_PENDING: &str = "crossplane.io/external-create-pending";
/// When the provider last created the external resource (RFC 3339).
pub const ANNOTATION_EXTERNAL_CREATE_SUCCEEDED: &str = "crossplane.io/external-create-succeeded";
/// When creating the external resource last failed (RFC 3339).
pub const ANNOTATION_EXTERNAL_CREATE_FAILED: &str = "crossplane.io/external-create-failed";
/// `"true"` pauses reconciliation.
pub const ANNOTATION_PAUSED: &str = "crossplane.io/paused";
/// A per-resource poll interval (Go duration).
pub const ANNOTATION_POLL_INTERVAL: &str = "crossplane.io/poll-interval";
/// A token whose change asks for a reconcile.
pub const ANNOTATION_RECONCILE_REQUESTED_AT: &str = "crossplane.io/reconcile-requested-at";

/// The ProviderConfig a usage counts for.
pub const LABEL_PROVIDER_CONFIG: &str = "crossplane.io/provider-config";
/// The kind of that ProviderConfig (`ProviderConfig` or `ClusterProviderConfig`).
pub const LABEL_PROVIDER_CONFIG_KIND: &str = "crossplane.io/provider-config-kind";

/// The Secret type of connection secrets.
pub const SECRET_TYPE_CONNECTION: &str = "connection.crossplane.io/v1alpha1";
