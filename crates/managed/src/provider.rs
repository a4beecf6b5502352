//! A provider's descriptor: [`Kinds`], the one list of its managed kinds from which its controllers, CRDs
//! and RBAC needs derive, and [`Provider`], what its binary and `cargo xtask generate` need to know.
//!
//! ```text
//! fn kinds() -> Kinds<MyConnector> {
//!     Kinds::tracked().kind::<cluster::Widget>().kind::<namespaced::Widget>()
//! }
//! pub fn setup(mgr: &mut Manager, options: &Options) {
//!     kinds().register(mgr, &MyConnector::default(), |_group| options.clone());
//! }
//! pub fn crds() -> Vec<CustomResourceDefinition> { kinds().crds() }
//! pub fn rbac_needs() -> Vec<manager::controller::rbac::Rule> { kinds().needs() }
//! pub const PROVIDER: Provider = Provider { info: INFO, setup, crds, rbac_needs };
//! ```

use std::process::ExitCode;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::CustomResourceExt;
use manager::Manager;
use manager::controller::rbac::Rule;

use crate::cli::ProviderInfo;
use crate::controller::ManagedController;
use crate::external::ExternalConnector;
use crate::options::Options;
use crate::resource::Managed;

/// One managed kind of a provider.
struct Entry<C> {
    group: String,
    crd: fn() -> CustomResourceDefinition,
    needs: fn() -> Vec<Rule>,
    register: fn(&C, Options, &mut Manager),
}

/// The managed kinds of a provider, each with the connector type `C` that serves it.
pub struct Kinds<C> {
    entries: Vec<Entry<C>>,
    tracked: bool,
}

impl<C: Clone + 'static> Kinds<C> {
    /// Kinds whose resources track their ProviderConfig's usage (a `ProviderConfigUsage` names the
    /// resource as its owner, which needs `update` on `<plural>/finalizers`).
    pub fn tracked() -> Self {
        Self {
            entries: Vec::new(),
            tracked: true,
        }
    }

    /// Kinds without ProviderConfig usage tracking (a provider without ProviderConfigs).
    pub fn untracked() -> Self {
        Self {
            entries: Vec::new(),
            tracked: false,
        }
    }

    /// Adds kind `K`, served by `C`.
    #[must_use]
    pub fn kind<K>(mut self) -> Self
    where
        K: Managed + CustomResourceExt,
        C: ExternalConnector<K>,
    {
        self.entries.push(Entry {
            group: K::group(&()).into_owned(),
            crd: K::crd,
            needs: if self.tracked {
                crate::rbac::managed_kind_needs::<K>
            } else {
                crate::rbac::managed_needs::<K>
            },
            register: |connector, options, mgr| {
                ManagedController::<K, C>::new(connector.clone(), options).register(mgr);
            },
        });
        self
    }

    /// Registers one controller per kind, each with the options `options` gives for its API group.
    pub fn register(&self, mgr: &mut Manager, connector: &C, options: impl Fn(&str) -> Options) {
        for e in &self.entries {
            (e.register)(connector, options(&e.group), mgr);
        }
    }

    /// The kinds' CRDs, in order.
    pub fn crds(&self) -> Vec<CustomResourceDefinition> {
        self.entries.iter().map(|e| (e.crd)()).collect()
    }

    /// The API access the kinds' controllers need (not yet normalized).
    pub fn needs(&self) -> Vec<Rule> {
        let mut needs: Vec<Rule> = self.entries.iter().flat_map(|e| (e.needs)()).collect();
        if !needs.is_empty() {
            // Each controller waits for its kind's CRD ([`crate::gate`]).
            needs.push(Rule::plural(
                "apiextensions.k8s.io",
                "customresourcedefinitions",
                &[""],
                manager::controller::rbac::READ,
            ));
        }
        needs
    }
}

/// What a provider's binary and `cargo xtask generate` need to know of it: a provider is this constant,
/// a `main.rs` of one line (`PROVIDER.main()`) and one registry line in xtask.
#[derive(Debug, Clone, Copy)]
pub struct Provider {
    /// Name, version, Lease and flag defaults.
    pub info: ProviderInfo,
    /// Registers the provider's controllers.
    pub setup: fn(&mut Manager, &Options),
    /// Every CRD the provider serves.
    pub crds: fn() -> Vec<CustomResourceDefinition>,
    /// The API access its controllers need (rendered into its ClusterRole).
    pub rbac_needs: fn() -> Vec<Rule>,
}

impl Provider {
    /// Parses the flags, builds the manager, runs [`setup`](Self::setup)'s controllers until shutdown.
    pub fn main(&self) -> ExitCode {
        crate::cli::main(self.info, self.setup)
    }
}
