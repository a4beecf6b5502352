//! The managed-resource reconciler shared by providers (crossplane-runtime's role).
//!
//! A provider supplies a kind implementing [`Managed`] and an [`ExternalConnector`] whose
//! [`ExternalClient`] observes, creates, updates and deletes the external resource. [`ManagedController`]
//! runs the reconciler for that kind as a leader-gated runnable of the `manager`; every write goes
//! through the term's fenced client.
//!
//! Reconcile order (crossplane-runtime `pkg/reconciler/managed`): paused (`crossplane.io/paused` or
//! `managementPolicies: []`) → unsupported policies → orphaning delete → external name → the safe-create
//! rule → ProviderConfigUsage → connect → observe → observe-only/creation-pending/deletion branches →
//! publish connection details and add the finalizer `finalizer.managedresource.crossplane.io` → create
//! (between the `external-create-pending` and `-succeeded`/`-failed` annotations) or late-initialize and
//! update → poll. The decisions are pure functions in [`decision`]; `Ready=True` is the provider's to set
//! in `observe`, the runtime sets only `Creating` and `Deleting`.
//!
//! Modules, one concept each: [`provider`] (a provider's descriptor and its one list of kinds),
//! [`resource`] (the kind, [`impl_managed!`] and [`managed_kind!`]), [`external`] (the provider's side), [`decision`],
//! [`meta`] (annotation and finalizer rules), [`reconciler`], [`controller`] (watch, predicate, queue), [`gate`] (a controller runs while its CRD is established),
//! [`connection`] (connection secrets), [`reason`] (Event reasons; the recorder is [`manager::controller::event`]), [`metrics`] (crossplane-runtime's
//! `crossplane_managed_resource_*` series), [`usage`] and [`providerconfig`] (usage tracking and
//! deletion protection), [`groups`] (a provider's cluster-scoped and namespaced API groups), [`ratelimit`], [`options`] and
//! [`cli`]. Backoff and poll jitter are the manager's ([`manager::controller::backoff`]).
#![forbid(unsafe_code)]

pub mod cli;
pub mod config_ref;
pub mod connection;
pub mod controller;
pub mod decision;
pub mod external;
pub mod gate;
pub mod groups;
pub mod meta;
pub mod metrics;
pub mod options;
pub mod provider;
pub mod providerconfig;
pub mod ratelimit;
pub mod rbac;
pub mod reason;
pub mod reconciler;
pub mod resource;
pub mod usage;

pub use cli::{ProviderArgs, ProviderDefaults, ProviderInfo};
pub use config_ref::{ConfigRef, ProviderConfigResource};
pub use controller::{ManagedController, controller_name};
pub use external::{
    ConnectionDetails, ExternalClient, ExternalConnector, ExternalCreation, ExternalDelete, ExternalError,
    ExternalObservation, ExternalUpdate,
};
pub use groups::ProviderGroups;
pub use metrics::ManagedMetrics;
pub use options::Options;
pub use providerconfig::{ProviderConfigController, ProviderConfigKind};
pub use ratelimit::GlobalRateLimiter;
pub use resource::Managed;
pub use usage::UsageTracker;

/// Re-exported for [`impl_managed!`] and providers.
pub use apis;
/// Re-exported for [`impl_managed!`].
pub use kube;
/// Re-exported for providers.
pub use manager;
