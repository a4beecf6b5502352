//! provider-nop: Crossplane's test provider. Its one managed resource, `NopResource`
//! (`nop.crossplane.io/v1alpha1`, cluster-scoped), orchestrates nothing: it sets the status conditions it
//! is told to at the times it is told to, and emits the connection details it is told to.
//!
//! - [`types`]: the `NopResource` kind, with upstream's fields;
//! - [`external`]: its external client (only `observe` does anything);
//! - [`setup`] registers the controller with a manager; `main.rs` hands it to [`managed::cli::main`].
#![forbid(unsafe_code)]

pub mod external;
pub mod types;

use std::time::Duration;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::CustomResourceExt;
use managed::{ManagedController, Options, ProviderDefaults, ProviderInfo};
use manager::{BinaryInfo, Defaults, Manager};

/// The provider's name, Lease and flag defaults (`--poll 10s`, `--max-reconcile-rate 1`, Lease 60 s/50 s).
pub const INFO: ProviderInfo = ProviderInfo {
    binary: BinaryInfo {
        name: "provider-nop",
        version: env!("CARGO_PKG_VERSION"),
    },
    lease: Defaults::new("crossplane-leader-election-provider-nop").timings(
        Duration::from_secs(60),
        Duration::from_secs(50),
        Duration::from_secs(2),
    ),
    defaults: ProviderDefaults {
        poll: Duration::from_secs(10),
        max_reconcile_rate: 1,
    },
    upstream_flags: &[],
};

/// Registers the NopResource controller.
pub fn setup(mgr: &mut Manager, options: &Options) {
    ManagedController::<types::NopResource, _>::new(external::NopConnector, options.clone()).register(mgr);
}

/// Every CRD of the provider.
pub fn crds() -> Vec<CustomResourceDefinition> {
    vec![types::NopResource::crd()]
}

/// The API access [`setup`]'s controllers need (rendered into the provider's ClusterRole by
/// `cargo xtask generate`): the NopResource controller and the runtime's connection Secrets and Events.
pub fn rbac_needs() -> Vec<manager::rbac::Rule> {
    let mut rules = managed::rbac::managed_needs::<types::NopResource>();
    rules.extend(managed::rbac::runtime_needs());
    manager::rbac::normalize(rules)
}
