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
use managed::provider::{Kinds, Provider};
use managed::{Options, ProviderDefaults, ProviderInfo};
use manager::{BinaryInfo, Defaults, Manager};

/// The provider's name, Lease and flag defaults (`--poll 10s`, `--max-reconcile-rate 1`, Lease 60 s/50 s).
pub const INFO: ProviderInfo = ProviderInfo {
    description: "Crossplane provider-nop, in Rust",
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

/// The provider: its binary and `cargo xtask generate` take everything from here.
pub const PROVIDER: Provider = Provider {
    info: INFO,
    setup,
    crds,
    rbac_needs,
};

/// The one list of the provider's managed kinds (no ProviderConfig, so no usage tracking).
fn kinds() -> Kinds<external::NopConnector> {
    Kinds::untracked().kind::<types::NopResource>()
}

/// Registers the NopResource controller.
pub fn setup(mgr: &mut Manager, options: &Options) {
    kinds().register(mgr, &external::NopConnector, |_| options.clone());
}

/// Every CRD of the provider.
pub fn crds() -> Vec<CustomResourceDefinition> {
    kinds().crds()
}

/// The API access [`setup`]'s controllers need (rendered into the provider's ClusterRole by
/// `cargo xtask generate`): the NopResource controller and the runtime's connection Secrets and Events.
pub fn rbac_needs() -> Vec<manager::controller::rbac::Rule> {
    let mut rules = kinds().needs();
    rules.extend(managed::rbac::runtime_needs());
    manager::controller::rbac::normalize(rules)
}
