//! Crossplane API types as Rust types, shared by every provider and the core.
//!
//! Modules, one concept each:
//! - [`condition`]: the `Condition` type, the `Ready`/`Synced` constructors and crossplane-runtime's
//!   `SetConditions` rule;
//! - [`meta`]: well-known annotations, labels and finalizers;
//! - [`policy`]: `managementPolicies` and `deletionPolicy`, and which combinations are supported;
//! - [`reference`]: references to ProviderConfigs and Secrets;
//! - [`resource`]: the managed-resource spec (cluster-scoped legacy and namespaced v2 variants) and status;
//! - [`protection`]: Usage and ClusterUsage (`protection.crossplane.io`), deletion protection;
//! - [`ops`]: Operation, CronOperation and WatchOperation (`ops.crossplane.io`), day-two operations;
//! - [`providerconfig`]: the shapes of ProviderConfig and ProviderConfigUsage that each provider declares
//!   in its own API group.
//!
//! Wire format follows Crossplane v2 (`apis/core/v2` of crossplane/crossplane).
#![forbid(unsafe_code)]

pub mod apiextensions;
pub mod condition;
pub mod meta;
pub mod ops;
pub mod pkg;
pub mod policy;
pub mod protection;
pub mod providerconfig;
pub mod reference;
pub mod resource;
mod schema;

pub use condition::{Condition, ConditionStatus};
pub use policy::{DeletionPolicy, ManagementAction, ManagementPolicies};
pub use providerconfig::{
    CommonCredentialSelectors, CredentialsSource, ProviderConfigStatus, ProviderConfigUsageSpec,
    TypedReference, UsageKind, UsageProviderConfigRef, usage_crd,
};
pub use reference::{
    LocalSecretReference, ProviderConfigRef, ProviderConfigReference, SecretKeySelector, SecretReference,
    TypedProviderConfigReference,
};
pub use resource::{ManagedResourceSpec, ManagedSpec, ResourceSpec, ResourceStatus, SecretRef};
pub use schema::{embedded_resource, preserve_unknown_fields};
