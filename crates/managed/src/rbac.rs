//! The API access the managed runtime's controllers need, as [`manager::controller::rbac::Rule`]s. A provider's
//! `rbac_needs()` adds these up for the kinds it registers.

use kube::Resource;
use manager::controller::rbac::{READ_WRITE, Rule};

use crate::providerconfig::ProviderConfigKind;

/// A [`ManagedController`](crate::ManagedController) over `K`: it watches `K`, patches its metadata and
/// spec and replaces its status. Its connection Secrets and Events are [`runtime_needs`].
pub fn managed_needs<K: Resource<DynamicType = ()>>() -> Vec<Rule> {
    vec![
        Rule::kind::<K>(&[""], READ_WRITE),
        Rule::kind::<K>(&["status"], &["get", "patch", "update"]),
    ]
}

/// Usage tracking for `K`: each ProviderConfigUsage names its `K` as blocking controller owner, which
/// needs `update` on `<plural>/finalizers` (the usages themselves are in [`provider_config_needs`]).
pub fn usage_needs<K: Resource<DynamicType = ()>>() -> Vec<Rule> {
    vec![Rule::kind::<K>(&["finalizers"], &["update"])]
}

/// A managed kind whose controller tracks ProviderConfig usages: [`managed_needs`] and [`usage_needs`].
pub fn managed_kind_needs<K: Resource<DynamicType = ()>>() -> Vec<Rule> {
    let mut rules = managed_needs::<K>();
    rules.extend(usage_needs::<K>());
    rules
}

/// A [`ProviderConfigController`](crate::ProviderConfigController) for `kind`: configs read and patched
/// (finalizer, status), usages read, applied by the usage tracker and deleted when stale.
pub fn provider_config_needs(kind: &ProviderConfigKind) -> Vec<Rule> {
    vec![
        Rule::plural(&kind.config.group, &kind.config.plural, &[""], READ_WRITE),
        Rule::plural(
            &kind.config.group,
            &kind.config.plural,
            &["status"],
            &["get", "patch", "update"],
        ),
        Rule::plural(
            &kind.usage.group,
            &kind.usage.plural,
            &[""],
            &["get", "list", "watch", "create", "patch", "update", "delete"],
        ),
    ]
}

/// What every managed controller shares: connection Secrets (read, create, replace) in any namespace and
/// core Events about managed resources in their namespace (or `default` for cluster-scoped ones).
pub fn runtime_needs() -> Vec<Rule> {
    vec![
        Rule::new("", &["secrets"], &["get", "create", "update"]),
        Rule::new("", &["events"], &["create"]),
    ]
}

/// Reading the credentials Secret a ProviderConfig names.
pub fn credentials_needs() -> Vec<Rule> {
    vec![Rule::new("", &["secrets"], &["get"])]
}
