//! provider-file: an example provider, written by following `docs/writing-a-provider.md`. Its one
//! managed kind, `File` (`file.example.crossplane-rs.io/v1alpha1`, cluster-scoped), keeps a file on the
//! provider's local disk: `<spec.forProvider.directory>/<external name>` holds `spec.forProvider.content`.
//! The external name defaults to the resource's name.
#![forbid(unsafe_code)]

pub mod external;

use std::time::Duration;

use apis::ResourceStatus;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use managed::provider::{Kinds, Provider};
use managed::{Options, ProviderDefaults, ProviderInfo};
use manager::{BinaryInfo, Defaults, Manager};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The API group.
pub const GROUP: &str = "file.example.crossplane-rs.io";

/// The desired state of a File.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct FileParameters {
    /// The absolute directory the file is kept in.
    pub directory: String,
    /// The file's content.
    #[serde(default)]
    pub content: String,
}

/// The observed state of a File.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct FileStatus {
    /// Conditions and observed generation.
    #[serde(flatten)]
    pub resource_status: ResourceStatus,
}

managed::managed_kind!(cluster File: "file.example.crossplane-rs.io", "v1alpha1", "File", "files", "file",
    "A file on the provider's disk.", FileSpec(FileParameters), "FileStatus");

/// Name, Lease and flag defaults (`--poll 1m`, `--max-reconcile-rate 10`, client-go's Lease timings).
pub const INFO: ProviderInfo = ProviderInfo {
    description: "A Crossplane provider of local files, in Rust (an example)",
    binary: BinaryInfo {
        name: "provider-file",
        version: env!("CARGO_PKG_VERSION"),
    },
    lease: Defaults::new("crossplane-leader-election-provider-file"),
    defaults: ProviderDefaults {
        poll: Duration::from_secs(60),
        max_reconcile_rate: 10,
    },
    upstream_flags: &[],
};

/// The provider: `main.rs` runs it, `cargo xtask generate` would render its CRDs and RBAC from it.
pub const PROVIDER: Provider = Provider {
    info: INFO,
    setup,
    crds,
    rbac_needs,
};

/// The one list of the provider's kinds. It has no ProviderConfig, so no usage tracking.
fn kinds() -> Kinds<external::FileConnector> {
    Kinds::untracked().kind::<File>()
}

/// Registers the File controller.
pub fn setup(mgr: &mut Manager, options: &Options) {
    kinds().register(mgr, &external::FileConnector, |_| options.clone());
}

/// Every CRD of the provider.
pub fn crds() -> Vec<CustomResourceDefinition> {
    kinds().crds()
}

/// The API access the controllers need: the File kind, and the runtime's Secrets and Events.
pub fn rbac_needs() -> Vec<manager::controller::rbac::Rule> {
    let mut rules = kinds().needs();
    rules.extend(managed::rbac::runtime_needs());
    manager::controller::rbac::normalize(rules)
}
