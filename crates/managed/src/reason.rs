//! The Event reasons of the managed reconciler (crossplane-runtime's), published with
//! [`manager::controller::event::Recorder`].

/// Connect failed.
pub const CANNOT_CONNECT: &str = "CannotConnectToProvider";
/// Observe failed.
pub const CANNOT_OBSERVE: &str = "CannotObserveExternalResource";
/// Create failed.
pub const CANNOT_CREATE: &str = "CannotCreateExternalResource";
/// Update failed.
pub const CANNOT_UPDATE: &str = "CannotUpdateExternalResource";
/// Delete failed.
pub const CANNOT_DELETE: &str = "CannotDeleteExternalResource";
/// Publishing connection details failed.
pub const CANNOT_PUBLISH: &str = "CannotPublishConnectionDetails";
/// Initializing (e.g. the external name) failed.
pub const CANNOT_INITIALIZE: &str = "CannotInitializeManagedResource";
/// Writing the managed resource failed.
pub const CANNOT_UPDATE_MANAGED: &str = "CannotUpdateManagedResource";
/// The management policies are not supported.
pub const INVALID_POLICY: &str = "CannotUseInvalidManagementPolicy";
/// Created.
pub const CREATED: &str = "CreatedExternalResource";
/// Updated.
pub const UPDATED: &str = "UpdatedExternalResource";
/// Deleted.
pub const DELETED: &str = "DeletedExternalResource";
/// Created but not yet observable.
pub const PENDING: &str = "PendingExternalResource";
/// Paused.
pub const PAUSED: &str = "ReconciliationPaused";
