//! What upstream's chart lets the core do by default (its `crossplane` ClusterRole's own rules), so that
//! Compositions written for upstream compose ConfigMaps, Secrets, Services, ServiceAccounts, CRDs and
//! Deployments here too, without the user granting anything. `cargo xtask generate` renders these with
//! the controllers' declared needs into `crossplane:system:aggregate-to-crossplane`, which the core's
//! aggregated ClusterRole `crossplane` collects with every other ClusterRole labelled
//! `rbac.crossplane.io/aggregate-to-crossplane: "true"` (the RBAC manager's per-XRD roles, the
//! providers' kinds, and whatever a user adds to let the core compose more kinds).
//!
//! One deliberate difference: upstream also grants every Lease in every namespace. Here the core gets
//! only its own Lease (the leader-election Role `manager::controller::rbac::election_needs` renders), so a core can
//! never write another binary's Lease, which the fence and the audit-log checker rely on.

use manager::controller::rbac::{OWN, Rule};

/// Every verb.
const ALL: &[&str] = &["*"];

/// Crossplane's own API groups, on which upstream's core may do everything.
const CROSSPLANE_GROUPS: [&str; 4] = [
    "apiextensions.crossplane.io",
    "ops.crossplane.io",
    "pkg.crossplane.io",
    "protection.crossplane.io",
];

/// Upstream's base rules for the core (cluster/charts/crossplane/templates/clusterrole.yaml), less the
/// Leases (see the module docs).
pub fn base_rules() -> Vec<Rule> {
    let mut rules = vec![
        Rule::new("", &["events"], &["create", "update", "patch", "delete"]),
        Rule::new(
            "apiextensions.k8s.io",
            &["customresourcedefinitions", "customresourcedefinitions/status"],
            ALL,
        ),
        Rule::new("", &["secrets"], OWN),
        Rule::new("", &["serviceaccounts", "services"], ALL),
        Rule::new("extensions", &["deployments"], OWN),
        Rule::new("apps", &["deployments"], OWN),
        Rule::new("", &["configmaps"], OWN),
        Rule::new(
            "admissionregistration.k8s.io",
            &["validatingwebhookconfigurations", "mutatingwebhookconfigurations"],
            OWN,
        ),
    ];
    rules.extend(CROSSPLANE_GROUPS.iter().map(|g| Rule::new(g, &["*"], ALL)));
    rules
}

#[cfg(test)]
mod tests {
    use super::*;
    use manager::controller::rbac::allows;

    #[test]
    fn grants_what_upstreams_scenarios_compose_but_no_leases() {
        let r = base_rules();
        for (group, resource) in [
            ("", "configmaps"),
            ("", "secrets"),
            ("", "services"),
            ("", "serviceaccounts"),
            ("apiextensions.k8s.io", "customresourcedefinitions"),
            ("apps", "deployments"),
        ] {
            assert!(allows(&r, group, resource, "create"), "{group}/{resource}");
        }
        assert!(allows(&r, "pkg.crossplane.io", "functions", "delete"));
        assert!(!allows(&r, "coordination.k8s.io", "leases", "update"));
        assert!(!allows(&r, "", "pods", "create"));
        assert!(!allows(&r, "rbac.authorization.k8s.io", "clusterroles", "create"));
    }
}
