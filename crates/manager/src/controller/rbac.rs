//! What a controller needs from the apiserver, declared in code: [`Rule`]s shaped like RBAC's
//! `PolicyRule` (API groups, resources, verbs). Binaries collect their controllers' rules into a
//! `rbac_needs()` function, and `cargo xtask generate` renders them as the binary's ClusterRole, so the
//! deployed RBAC cannot drift from the code.
//!
//! Nothing here is Crossplane-specific; the manager's own needs (the Lease and its events, namespaced)
//! are [`election_needs`].

use std::collections::{BTreeMap, BTreeSet};

use kube::Resource;

/// Read access: `get`, `list`, `watch`.
pub const READ: &[&str] = &["get", "list", "watch"];
/// Read access plus the writes a controller makes to objects it does not create: `patch`, `update`.
pub const READ_WRITE: &[&str] = &["get", "list", "watch", "patch", "update"];
/// Everything a controller does to objects it owns: read, `create`, `patch`, `update`, `delete`.
pub const OWN: &[&str] = &["get", "list", "watch", "create", "patch", "update", "delete"];

/// One declared need: `verbs` on `resources` (plural names, with `/status`-style subresources) in
/// `api_groups` (`""` is the core group).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Rule {
    /// API groups.
    pub api_groups: Vec<String>,
    /// Resources, as plurals (`secrets`, `leases`, `widgets/status`).
    pub resources: Vec<String>,
    /// Verbs (`get`, `list`, `watch`, `create`, `update`, `patch`, `delete`, …).
    pub verbs: Vec<String>,
    /// When not empty, only these object names (list and watch then need a `metadata.name` field
    /// selector).
    pub resource_names: Vec<String>,
}

impl Rule {
    /// `verbs` on `resources` of `group`.
    pub fn new(group: &str, resources: &[&str], verbs: &[&str]) -> Self {
        Self {
            api_groups: vec![group.to_owned()],
            resources: resources.iter().map(|r| (*r).to_owned()).collect(),
            verbs: verbs.iter().map(|v| (*v).to_owned()).collect(),
            resource_names: Vec::new(),
        }
    }

    /// This rule limited to the objects named `names`.
    pub fn named(mut self, names: &[&str]) -> Self {
        self.resource_names = names.iter().map(|n| (*n).to_owned()).collect();
        self
    }

    /// `verbs` on kind `K`, with each of `subresources` appended as `<plural>/<sub>` (`""` for the main
    /// resource).
    pub fn kind<K: Resource<DynamicType = ()>>(subresources: &[&str], verbs: &[&str]) -> Self {
        Self::plural(&K::group(&()), &K::plural(&()), subresources, verbs)
    }

    /// `verbs` on `plural` of `group`, with each of `subresources` appended (`""` for the main resource).
    pub fn plural(group: &str, plural: &str, subresources: &[&str], verbs: &[&str]) -> Self {
        let resources: Vec<String> = subresources
            .iter()
            .map(|s| {
                if s.is_empty() {
                    plural.to_owned()
                } else {
                    format!("{plural}/{s}")
                }
            })
            .collect();
        Self {
            api_groups: vec![group.to_owned()],
            resources,
            verbs: verbs.iter().map(|v| (*v).to_owned()).collect(),
            resource_names: Vec::new(),
        }
    }

    /// Whether this rule allows `verb` on `resource` in `group` (wildcards included) for any object name.
    pub fn allows(&self, group: &str, resource: &str, verb: &str) -> bool {
        let any = |set: &[String], want: &str| set.iter().any(|s| s == "*" || s == want);
        self.resource_names.is_empty()
            && any(&self.api_groups, group)
            && any(&self.resources, resource)
            && any(&self.verbs, verb)
    }
}

/// Whether any of `rules` allows `verb` on `resource` in `group`.
pub fn allows(rules: &[Rule], group: &str, resource: &str, verb: &str) -> bool {
    rules.iter().any(|r| r.allows(group, resource, verb))
}

/// Normalises `rules` into a deterministic list: verbs unioned per (group, resource, names) (`*` alone
/// when it is among them), resources
/// with identical verbs and names in one group merged, everything sorted and deduplicated.
pub fn normalize(rules: impl IntoIterator<Item = Rule>) -> Vec<Rule> {
    type Key = (String, Vec<String>);
    let mut per: BTreeMap<(String, String, Vec<String>), BTreeSet<String>> = BTreeMap::new();
    for r in rules {
        let mut names = r.resource_names.clone();
        names.sort();
        names.dedup();
        for g in &r.api_groups {
            for res in &r.resources {
                per.entry((g.clone(), res.clone(), names.clone()))
                    .or_default()
                    .extend(r.verbs.iter().cloned());
            }
        }
    }
    let mut merged: BTreeMap<(Key, Vec<String>), BTreeSet<String>> = BTreeMap::new();
    for ((group, resource, names), mut verbs) in per {
        // `*` covers every other verb.
        if verbs.contains("*") {
            verbs = BTreeSet::from(["*".to_owned()]);
        }
        merged
            .entry(((group, verbs.into_iter().collect()), names))
            .or_default()
            .insert(resource);
    }
    let mut out: Vec<Rule> = merged
        .into_iter()
        .map(|(((group, verbs), names), resources)| Rule {
            api_groups: vec![group],
            resources: resources.into_iter().collect(),
            verbs,
            resource_names: names,
        })
        .collect();
    out.sort();
    out
}

/// What leader election on the Lease `lease` needs in its namespace: `create` on Leases (which RBAC
/// cannot limit by name), `get`, `list`, `watch` and `update` on that one Lease (the elector lists and
/// watches it with a `metadata.name` field selector), Events about it (`events.k8s.io` and core,
/// `create`, `patch`), and `get`, `list`, `watch` on Pods, so that the leader can watch its own Pod and
/// leave as soon as it is deleted ([`crate::run::own_pod`]; RBAC cannot name a Pod that does not exist yet).
pub fn election_needs(lease: &str) -> Vec<Rule> {
    normalize([
        Rule::new("", &["pods"], &["get", "list", "watch"]),
        Rule::new("coordination.k8s.io", &["leases"], &["create"]),
        Rule::new(
            "coordination.k8s.io",
            &["leases"],
            &["get", "list", "watch", "update"],
        )
        .named(&[lease]),
        Rule::new("", &["events"], &["create", "patch"]),
        Rule::new("events.k8s.io", &["events"], &["create", "patch"]),
    ])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normalize_merges_and_sorts() {
        let rules = normalize([
            Rule::new("", &["secrets"], &["get"]),
            Rule::new("", &["configmaps"], &["get"]),
            Rule::new("", &["secrets"], &["get", "create"]),
        ]);
        assert_eq!(
            rules,
            [
                Rule::new("", &["configmaps"], &["get"]),
                Rule::new("", &["secrets"], &["create", "get"]),
            ]
        );
        assert!(allows(&rules, "", "secrets", "create"));
        assert!(!allows(&rules, "", "secrets", "delete"));
    }

    #[test]
    fn kind_rules_use_the_plural() {
        let r = Rule::kind::<k8s_openapi::api::core::v1::Secret>(&["", "status"], READ);
        assert_eq!(r.resources, ["secrets", "secrets/status"]);
        assert_eq!(r.api_groups, [""]);
    }
}
