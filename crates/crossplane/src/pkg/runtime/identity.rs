//! Who the runtime is: its ServiceAccount (named after the revision, as upstream's, with the package's
//! pull secrets), and, unlike upstream, a Role and RoleBinding in the runtime's namespace for what
//! leader election needs: Leases, Events, and reading Pods (the leader watches its own Pod to leave
//! before SIGTERM, `manager::run::own_pod`). The Lease rules name no Lease, so a binary that ignores
//! `LEADER_ELECTION_ID` and uses a Lease name of its own still elects. The rights to the provider's
//! own kinds are the RBAC manager's business, as upstream's.

use k8s_openapi::api::core::v1::{LocalObjectReference, ServiceAccount};
use k8s_openapi::api::rbac::v1::{PolicyRule, Role, RoleBinding, RoleRef, Subject};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use super::plan::Plan;

/// The rules of the runtime's Role, as (API group, resources, verbs).
pub const RULES: &[(&str, &[&str], &[&str])] = &[
    (
        "coordination.k8s.io",
        &["leases"],
        &["get", "list", "watch", "create", "update", "patch"],
    ),
    ("", &["events"], &["create", "patch"]),
    ("events.k8s.io", &["events"], &["create", "patch"]),
    ("", &["pods"], &["get", "list", "watch"]),
];

fn meta(plan: &Plan, name: String) -> ObjectMeta {
    ObjectMeta {
        name: Some(name),
        namespace: Some(plan.namespace.clone()),
        labels: Some(plan.labels.clone()),
        owner_references: Some(plan.revision_owners()),
        ..Default::default()
    }
}

/// The runtime's ServiceAccount.
pub fn service_account(plan: &Plan) -> ServiceAccount {
    let tmeta = plan
        .config
        .service_account_template
        .as_ref()
        .and_then(|t| t.metadata.clone())
        .unwrap_or_default();
    let mut m = meta(plan, plan.service_account_name());
    if let Some(l) = tmeta.labels {
        m.labels.get_or_insert_with(Default::default).extend(l);
    }
    m.annotations = tmeta.annotations;
    ServiceAccount {
        metadata: m,
        image_pull_secrets: (!plan.pull_secrets.is_empty()).then(|| {
            plan.pull_secrets
                .iter()
                .map(|s| LocalObjectReference { name: s.clone() })
                .collect()
        }),
        ..Default::default()
    }
}

/// The name of the runtime's Role and RoleBinding: the revision's.
pub fn role_name(plan: &Plan) -> String {
    plan.revision.clone()
}

/// The runtime's Role.
pub fn role(plan: &Plan) -> Role {
    Role {
        metadata: meta(plan, role_name(plan)),
        rules: Some(
            RULES
                .iter()
                .map(|(group, resources, verbs)| PolicyRule {
                    api_groups: Some(vec![(*group).to_string()]),
                    resources: Some(resources.iter().map(|r| (*r).to_string()).collect()),
                    verbs: verbs.iter().map(|v| (*v).to_string()).collect(),
                    ..Default::default()
                })
                .collect(),
        ),
    }
}

/// The binding of the runtime's Role to its ServiceAccount.
pub fn role_binding(plan: &Plan) -> RoleBinding {
    RoleBinding {
        metadata: meta(plan, role_name(plan)),
        role_ref: RoleRef {
            api_group: Some("rbac.authorization.k8s.io".into()),
            kind: "Role".into(),
            name: role_name(plan),
        },
        subjects: Some(vec![Subject {
            kind: "ServiceAccount".into(),
            name: plan.service_account_name(),
            namespace: Some(plan.namespace.clone()),
            ..Default::default()
        }]),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pkg::kind::Kind;
    use crate::pkg::runtime::plan::tests::plan;

    #[test]
    fn the_service_account_may_elect_and_watch_its_pod() {
        let p = plan(Kind::Provider);
        let sa = service_account(&p);
        assert_eq!(sa.metadata.name.as_deref(), Some("pkg-x-abc"));
        assert_eq!(sa.image_pull_secrets.map(|s| s.len()), Some(1));
        let r = role(&p);
        let rules = r.rules.expect("rules");
        assert!(
            rules
                .iter()
                .any(|r| r.resources.as_deref() == Some(&["leases".to_string()][..])
                    && r.verbs.contains(&"update".to_string()))
        );
        assert!(
            rules
                .iter()
                .any(|r| r.resources.as_deref() == Some(&["pods".to_string()][..])
                    && r.verbs.contains(&"watch".to_string()))
        );
        let b = role_binding(&p);
        assert_eq!(b.role_ref.name, "pkg-x-abc");
        assert_eq!(b.subjects.expect("subjects")[0].name, "pkg-x-abc");
    }
}
