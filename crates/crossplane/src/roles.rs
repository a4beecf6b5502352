//! The user-facing ClusterRoles that upstream's chart ships with the RBAC manager: `crossplane-admin`,
//! `crossplane-edit`, `crossplane-view` and `crossplane-browse`, each an aggregated role that collects every
//! ClusterRole labelled `rbac.crossplane.io/aggregate-to-<role>: "true"`, plus the base rules each one
//! starts from (`crossplane:aggregate-to-<role>`) and the binding of `crossplane-admin` to the group
//! `crossplane:masters`.
//!
//! The RBAC manager's per-XRD roles ([`crate::rbac::roles`]) carry the same labels, so binding a user to
//! `crossplane-edit` lets them create every XR kind as it is defined, with nothing else to grant.
//! `cargo xtask generate` renders these into `deploy/crossplane-roles/`.

use std::collections::BTreeMap;

use k8s_openapi::api::rbac::v1::{
    AggregationRule, ClusterRole, ClusterRoleBinding, PolicyRule, RoleRef, Subject,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use kube::api::ObjectMeta;

/// The label prefix that aggregates a ClusterRole into one of the user-facing roles.
pub const AGGREGATE_TO: &str = "rbac.crossplane.io/aggregate-to-";

/// The user-facing roles, most to least privileged.
pub const USER_ROLES: [&str; 4] = ["admin", "edit", "view", "browse"];

/// The group bound to `crossplane-admin`, as upstream.
pub const MASTERS_GROUP: &str = "crossplane:masters";

/// Crossplane's own API groups that every user-facing role grants access to.
const CROSSPLANE_GROUPS: [&str; 5] = [
    "apiextensions.crossplane.io",
    "pkg.crossplane.io",
    "secrets.crossplane.io",
    "protection.crossplane.io",
    "ops.crossplane.io",
];

const READ: [&str; 3] = ["get", "list", "watch"];
const ALL: [&str; 1] = ["*"];

fn rule(groups: &[&str], resources: &[&str], verbs: &[&str]) -> PolicyRule {
    let owned = |v: &[&str]| v.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
    PolicyRule {
        api_groups: Some(owned(groups)),
        resources: Some(owned(resources)),
        verbs: owned(verbs),
        ..PolicyRule::default()
    }
}

fn meta(name: &str, labels: &[(&str, &str)]) -> ObjectMeta {
    let all: BTreeMap<String, String> = [
        ("app.kubernetes.io/name", "crossplane-rbac-manager"),
        ("app.kubernetes.io/part-of", "crossplane-rs"),
    ]
    .iter()
    .chain(labels)
    .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
    .collect();
    ObjectMeta {
        name: Some(name.to_owned()),
        labels: Some(all),
        ..ObjectMeta::default()
    }
}

/// The base rules of one user-facing role (`crossplane:aggregate-to-<role>`).
fn base_rules(role: &str) -> Vec<PolicyRule> {
    let events = rule(&[""], &["events"], &READ);
    match role {
        "admin" => vec![
            events,
            rule(&[""], &["secrets", "namespaces"], &ALL),
            rule(&["rbac.authorization.k8s.io"], &["clusterroles", "roles"], &READ),
            rule(
                &["rbac.authorization.k8s.io"],
                &["clusterrolebindings", "rolebindings"],
                &ALL,
            ),
            rule(&CROSSPLANE_GROUPS, &["*"], &ALL),
            rule(&["apiextensions.k8s.io"], &["customresourcedefinitions"], &READ),
        ],
        "edit" => vec![
            events,
            rule(&[""], &["secrets"], &ALL),
            rule(&[""], &["namespaces"], &READ),
            rule(&CROSSPLANE_GROUPS, &["*"], &ALL),
        ],
        "view" => vec![
            events,
            rule(&[""], &["namespaces"], &READ),
            rule(&CROSSPLANE_GROUPS, &["*"], &READ),
        ],
        // browse: discover XRDs and Compositions, to pick one.
        _ => vec![events, rule(&["apiextensions.crossplane.io"], &["*"], &READ)],
    }
}

/// The aggregated role `crossplane-<role>` and its base rules `crossplane:aggregate-to-<role>`, for each of
/// [`USER_ROLES`].
pub fn user_roles() -> Vec<ClusterRole> {
    let mut out = Vec::new();
    for role in USER_ROLES {
        let label = format!("{AGGREGATE_TO}{role}");
        out.push(ClusterRole {
            metadata: meta(&format!("crossplane-{role}"), &[]),
            aggregation_rule: Some(AggregationRule {
                cluster_role_selectors: Some(vec![LabelSelector {
                    match_labels: Some(BTreeMap::from([(label.clone(), "true".to_owned())])),
                    ..LabelSelector::default()
                }]),
            }),
            ..ClusterRole::default()
        });
        out.push(ClusterRole {
            metadata: meta(&format!("crossplane:aggregate-to-{role}"), &[(&label, "true")]),
            rules: Some(base_rules(role)),
            ..ClusterRole::default()
        });
    }
    out
}

/// `crossplane-admin` bound to the group [`MASTERS_GROUP`], as upstream.
pub fn admin_binding() -> ClusterRoleBinding {
    ClusterRoleBinding {
        metadata: meta("crossplane-admin", &[]),
        role_ref: RoleRef {
            api_group: Some("rbac.authorization.k8s.io".to_owned()),
            kind: "ClusterRole".to_owned(),
            name: "crossplane-admin".to_owned(),
        },
        subjects: Some(vec![Subject {
            api_group: Some("rbac.authorization.k8s.io".to_owned()),
            kind: "Group".to_owned(),
            name: MASTERS_GROUP.to_owned(),
            namespace: None,
        }]),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_user_role_aggregates_its_label_and_has_base_rules() {
        let roles = user_roles();
        assert_eq!(roles.len(), 8);
        for role in USER_ROLES {
            let label = format!("{AGGREGATE_TO}{role}");
            let aggregated = roles
                .iter()
                .find(|r| r.metadata.name.as_deref() == Some(&format!("crossplane-{role}")))
                .and_then(|r| r.aggregation_rule.as_ref())
                .and_then(|a| a.cluster_role_selectors.as_ref());
            let selects = aggregated
                .and_then(|s| s.first())
                .and_then(|s| s.match_labels.as_ref())
                .and_then(|m| m.get(&label));
            assert_eq!(selects.map(String::as_str), Some("true"), "{role}");
            let base = roles
                .iter()
                .find(|r| r.metadata.name.as_deref() == Some(&format!("crossplane:aggregate-to-{role}")))
                .expect("base role");
            let labels = base.metadata.labels.as_ref().expect("labels");
            assert_eq!(labels.get(&label).map(String::as_str), Some("true"));
            assert!(!base.rules.as_ref().expect("rules").is_empty());
        }
    }

    #[test]
    fn only_admin_may_bind_roles_and_browse_reads_only_definitions() {
        let grants = |role: &str, group: &str, resource: &str, verb: &str| {
            base_rules(role).iter().any(|r| {
                let has = |list: &Option<Vec<String>>, want: &str| {
                    list.as_ref()
                        .is_some_and(|l| l.iter().any(|x| x == want || x == "*"))
                };
                has(&r.api_groups, group)
                    && has(&r.resources, resource)
                    && r.verbs.iter().any(|v| v == verb || v == "*")
            })
        };
        let rbac = "rbac.authorization.k8s.io";
        assert!(grants("admin", rbac, "clusterrolebindings", "create"));
        assert!(!grants("edit", rbac, "clusterrolebindings", "create"));
        assert!(grants("edit", "", "secrets", "create"));
        assert!(!grants("view", "", "secrets", "get"));
        assert!(grants(
            "browse",
            "apiextensions.crossplane.io",
            "compositions",
            "list"
        ));
        assert!(!grants("browse", "pkg.crossplane.io", "providers", "list"));
    }
}
