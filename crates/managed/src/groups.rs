//! A provider's two API groups in Crossplane v2's layout: the legacy cluster-scoped group
//! (`<name>.crossplane.io`) and the namespaced one (`<name>.m.crossplane.io`). Each group has its own
//! `ProviderConfigUsage` kind; the namespaced group also has a `ClusterProviderConfig`. This module
//! holds what follows from that layout, so a provider's `lib.rs` only lists its kinds.

use std::sync::Arc;

use apis::providerconfig::{UsageKind, usage_crd};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::Resource;
use kube::api::ApiResource;
use manager::controller::rbac::Rule;

use crate::options::Options;
use crate::providerconfig::ProviderConfigKind;
use crate::usage::{UsageTracker, usage_api_resource};

/// The cluster-scoped and the namespaced API group of one provider.
#[derive(Clone, Copy, Debug)]
pub struct ProviderGroups {
    /// The legacy cluster-scoped group, e.g. `kubernetes.crossplane.io`.
    pub cluster: &'static str,
    /// The namespaced group, e.g. `kubernetes.m.crossplane.io`.
    pub namespaced: &'static str,
    /// The version of both groups' `ProviderConfigUsage` kinds.
    pub usage_version: &'static str,
    /// The provider's short category, e.g. `kubernetes`.
    pub category: &'static str,
}

impl ProviderGroups {
    fn usage_kind(&self, namespaced: bool) -> UsageKind<'static> {
        UsageKind {
            group: if namespaced { self.namespaced } else { self.cluster },
            version: self.usage_version,
            namespaced,
            category: self.category,
        }
    }

    /// The CRDs of both groups' `ProviderConfigUsage` kinds (cluster-scoped first).
    pub fn usage_crds(&self) -> [CustomResourceDefinition; 2] {
        [
            usage_crd(self.usage_kind(false)),
            usage_crd(self.usage_kind(true)),
        ]
    }

    /// The ProviderConfig kinds: the legacy `ProviderConfig` (`Legacy`), and the namespaced group's
    /// `ProviderConfig` (`Pc`) and `ClusterProviderConfig` (`Cpc`), each with the usage kind that counts
    /// for it. The namespaced group's usages name their config's kind, as its references are typed.
    pub fn provider_config_kinds<Legacy, Pc, Cpc>(&self) -> Vec<ProviderConfigKind>
    where
        Legacy: Resource<DynamicType = ()>,
        Pc: Resource<DynamicType = ()>,
        Cpc: Resource<DynamicType = ()>,
    {
        vec![
            self.provider_config_kind::<Legacy>(false, false),
            self.provider_config_kind::<Pc>(true, true),
            self.provider_config_kind::<Cpc>(false, true),
        ]
    }

    fn provider_config_kind<K: Resource<DynamicType = ()>>(
        &self,
        config_namespaced: bool,
        in_namespaced_group: bool,
    ) -> ProviderConfigKind {
        let usage = self.usage_kind(in_namespaced_group);
        ProviderConfigKind {
            config: ApiResource::erase::<K>(&()),
            config_namespaced,
            usage: usage_api_resource(usage.group, usage.version),
            usage_namespaced: in_namespaced_group,
            kind_label: in_namespaced_group,
        }
    }

    /// `options` for the managed controllers of each group, `(cluster, namespaced)`: each tracks its
    /// ProviderConfig usages in its own group.
    pub fn options(&self, options: &Options) -> (Options, Options) {
        let with_usage = |namespaced: bool| {
            let kind = self.usage_kind(namespaced);
            let mut options = options.clone();
            options.usage = Some(Arc::new(UsageTracker::new(kind.group, kind.version, namespaced)));
            options
        };
        (with_usage(false), with_usage(true))
    }
}

/// Sums up a provider's API access: `managed` (from [`crate::rbac::managed_kind_needs`] for each of its
/// kinds), its ProviderConfig kinds, the credentials Secrets they name, and the runtime's connection
/// Secrets and Events, normalized.
pub fn provider_needs(managed: Vec<Rule>, provider_configs: &[ProviderConfigKind]) -> Vec<Rule> {
    let mut rules = managed;
    for kind in provider_configs {
        rules.extend(crate::rbac::provider_config_needs(kind));
    }
    rules.extend(crate::rbac::credentials_needs());
    rules.extend(crate::rbac::runtime_needs());
    manager::controller::rbac::normalize(rules)
}

#[cfg(test)]
mod tests {
    use super::*;

    const GROUPS: ProviderGroups = ProviderGroups {
        cluster: "example.crossplane.io",
        namespaced: "example.m.crossplane.io",
        usage_version: "v1alpha1",
        category: "example",
    };

    #[test]
    fn each_group_tracks_usages_in_its_own_group() {
        let (cluster, namespaced) = GROUPS.options(&Options::default());
        let cluster = cluster.usage.expect("cluster usage tracker");
        let namespaced = namespaced.usage.expect("namespaced usage tracker");
        assert_eq!(cluster.api_resource().group, "example.crossplane.io");
        assert!(!cluster.namespaced());
        assert_eq!(namespaced.api_resource().group, "example.m.crossplane.io");
        assert!(namespaced.namespaced());
    }

    #[test]
    fn usage_crds_are_one_per_group() {
        let [cluster, namespaced] = GROUPS.usage_crds();
        assert_eq!(cluster.spec.group, "example.crossplane.io");
        assert_eq!(cluster.spec.scope, "Cluster");
        assert_eq!(namespaced.spec.group, "example.m.crossplane.io");
        assert_eq!(namespaced.spec.scope, "Namespaced");
    }
}
