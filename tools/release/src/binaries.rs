//! One description of every binary that ships: [`deployed`] lists each Deployment with what its binary
//! exports (its info, Lease defaults, CRDs and RBAC needs), and everything else derives from it:
//! deploy/ and the Helm chart's keys ([`crate::generate`], [`crate::chart`]), the images `cargo xtask image`
//! builds ([`crate::image::BINARIES`]), the xpkg packages ([`crate::package`]), and the demo's and the node
//! scenarios' lists (the `e2e` crate). A new provider is its crate plus one line in [`deployed`].

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use manager::Defaults;
use manager::config::compat::Flag;
use manager::controller::rbac::Rule;

/// The description of the core's image (the core and the RBAC manager run it).
const CORE_DESCRIPTION: &str = "Crossplane core and RBAC manager, in Rust";

/// One deployed binary (a Deployment of its own).
pub struct Deployed {
    /// The base's directory under deploy/, and the name of its objects.
    pub name: &'static str,
    /// The image (and binary) it runs.
    pub image: &'static str,
    /// The cargo package that builds the image's binary.
    pub package: &'static str,
    /// One line on what the image is.
    pub description: &'static str,
    /// The container's arguments.
    pub args: &'static [&'static str],
    /// Lease name and timings.
    pub lease: Defaults,
    /// The needs its controllers declare.
    pub needs: fn() -> Vec<Rule>,
    /// Its CRDs.
    pub crds: fn() -> Vec<CustomResourceDefinition>,
    /// A provider: its kinds are aggregated into the core's role, so compositions can compose them.
    pub provider: bool,
    /// The flags of the upstream binary it replaces beyond the shared ones, accepted for compatibility
    /// (a provider's; the core's are tabled by command in [`crate::upstream`]).
    pub upstream_flags: &'static [Flag],
    /// The core: its ClusterRole aggregates, its declared needs are an aggregated part of it.
    pub core: bool,
}

impl Deployed {
    /// A provider: a Deployment of its own image, named after its binary, with no arguments.
    pub fn provider(p: &managed::provider::Provider) -> Self {
        Self {
            name: p.info.binary.name,
            image: p.info.binary.name,
            package: p.info.binary.name,
            description: p.info.description,
            args: &[],
            lease: p.info.lease,
            needs: p.rbac_needs,
            crds: p.crds,
            upstream_flags: p.info.upstream_flags,
            provider: true,
            core: false,
        }
    }
}

/// Every deployed binary, in deploy order.
pub fn deployed() -> Vec<Deployed> {
    vec![
        Deployed {
            name: "crossplane",
            image: "crossplane",
            package: "crossplane",
            description: CORE_DESCRIPTION,
            args: &["core", "start"],
            lease: crossplane::cli::CORE_DEFAULTS,
            needs: crossplane::core_rbac_needs,
            crds: crossplane::crds,
            upstream_flags: &[],
            provider: false,
            core: true,
        },
        Deployed {
            name: "crossplane-rbac-manager",
            image: "crossplane",
            package: "crossplane",
            description: CORE_DESCRIPTION,
            args: &["rbac", "start"],
            lease: crossplane::cli::RBAC_DEFAULTS,
            needs: crossplane::rbac_manager_rbac_needs,
            crds: Vec::new,
            upstream_flags: &[],
            provider: false,
            core: false,
        },
        // The providers: one line each. A new provider is its crate (a dependency of this one) plus a line.
        Deployed::provider(&provider_nop::PROVIDER),
        Deployed::provider(&provider_kubernetes::PROVIDER),
        Deployed::provider(&provider_sql::PROVIDER),
    ]
}
