//! The RBAC manager's provider-revision controller (upstream `internal/controller/rbac/provider/roles`
//! and `.../binding`): for each ProviderRevision, ClusterRoles over the CRDs it installed
//! (`status.objectRefs`), and a ClusterRoleBinding of the `system` role to the ServiceAccount its
//! runtime runs as. So a provider installed as a package may manage its own kinds, as upstream's may.
//!
//! The roles, as upstream names them: `crossplane:provider:<revision>:aggregate-to-edit` (every verb;
//! aggregated into the core's role, admin and edit), `...:aggregate-to-view` (read) and `...:system`
//! (read and write its kinds and their status, update their finalizers, and every verb on Secrets,
//! ConfigMaps, Events and Leases). All are controlled by the revision, so the garbage collector
//! removes them with it. The ServiceAccount is the one the runtime's Deployment names (the package
//! runtime names it after the revision, unless a DeploymentRuntimeConfig says otherwise).

use std::collections::BTreeMap;
use std::sync::Arc;

use apis::pkg::{LABEL_REVISION, ProviderRevision};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, PolicyRule, RoleRef, Subject};
use kube::api::{ListParams, ObjectMeta, Patch, PatchParams};
use kube::runtime::controller::Action;
use kube::runtime::{Controller, watcher};
use kube::{Api, Resource, ResourceExt};
use manager::controller::ControllerBuilder;
use manager::{BoxError, ReconcileMetrics, TermContext};

use crate::error::Error;

/// The controller's field manager.
pub const CONTROLLER: &str = "rbac.crossplane.io/provider-revision";

/// The controller's name in metrics and logs.
pub const CONTROLLER_NAME: &str = "rbac/providerrevision.pkg.crossplane.io";

/// The label on a system role naming its revision (upstream's key).
pub const LABEL_SYSTEM: &str = "rbac.crossplane.io/system";

/// How soon a revision whose runtime has no Deployment yet is looked at again.
const NO_DEPLOYMENT_YET: std::time::Duration = std::time::Duration::from_secs(5);

/// The name of the `system` role (and its binding) of revision `revision`.
pub fn system_role_name(revision: &str) -> String {
    format!("crossplane:provider:{revision}:system")
}

/// A kind a revision installed: its API group and plural.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Kind {
    /// The API group.
    pub group: String,
    /// The plural.
    pub plural: String,
}

/// The kinds of the CRDs and ManagedResourceDefinitions among `rev`'s `status.objectRefs` (either's
/// name is `<plural>.<group>`), as upstream's `DefinedResources`.
pub fn resources(rev: &ProviderRevision) -> Vec<Kind> {
    let mut out: Vec<Kind> = rev
        .status
        .as_ref()
        .map(|s| s.revision.object_refs.as_slice())
        .unwrap_or_default()
        .iter()
        .filter(|r| r.kind == "CustomResourceDefinition" || r.kind == apis::apiextensions::mrd::KIND)
        .filter_map(|r| r.name.split_once('.'))
        .map(|(plural, group)| Kind {
            group: group.to_string(),
            plural: plural.to_string(),
        })
        .collect();
    out.sort();
    out.dedup();
    out
}

fn rule(groups: Vec<String>, resources: Vec<String>, verbs: &[&str]) -> PolicyRule {
    PolicyRule {
        api_groups: Some(groups),
        resources: Some(resources),
        verbs: verbs.iter().map(|v| (*v).to_owned()).collect(),
        ..Default::default()
    }
}

/// The three ClusterRoles of `rev` over `resources` (none when it installed no CRD).
pub fn roles(rev: &ProviderRevision, resources: &[Kind]) -> Vec<ClusterRole> {
    if resources.is_empty() {
        return Vec::new();
    }
    let mut by_group: BTreeMap<&str, Vec<String>> = BTreeMap::new();
    for r in resources {
        let v = by_group.entry(r.group.as_str()).or_default();
        v.push(r.plural.clone());
        v.push(format!("{}/status", r.plural));
    }
    let with = |verbs: &[&str]| -> Vec<PolicyRule> {
        by_group
            .iter()
            .map(|(g, rs)| rule(vec![(*g).to_string()], rs.clone(), verbs))
            .collect()
    };
    let groups: Vec<String> = by_group.keys().map(|g| (*g).to_string()).collect();
    let name = rev.name_any();
    let owner = rev.controller_owner_ref(&()).into_iter().collect::<Vec<_>>();
    let role = |suffix: &str, labels: &[(&str, &str)], rules: Vec<PolicyRule>| ClusterRole {
        metadata: ObjectMeta {
            name: Some(format!("crossplane:provider:{name}:{suffix}")),
            labels: Some(
                labels
                    .iter()
                    .map(|(k, v)| ((*k).to_string(), (*v).to_string()))
                    .collect(),
            ),
            owner_references: Some(owner.clone()),
            ..Default::default()
        },
        rules: Some(rules),
        ..Default::default()
    };
    let mut system = with(&["get", "list", "watch", "update", "patch", "create"]);
    system.push(rule(groups, vec!["*/finalizers".into()], &["update"]));
    system.push(rule(
        vec![String::new(), "coordination.k8s.io".into()],
        ["secrets", "configmaps", "events", "leases"]
            .map(String::from)
            .to_vec(),
        &["*"],
    ));
    // The provider starts a kind's controller once its CRD is established (an MRD's CRD appears
    // only when it is activated), so it reads CRDs. Upstream grants this to safe-start providers only;
    // every crossplane-rs provider waits for its CRDs.
    system.push(rule(
        vec!["apiextensions.k8s.io".into()],
        vec!["customresourcedefinitions".into()],
        &["get", "list", "watch"],
    ));
    vec![
        role(
            "aggregate-to-edit",
            &[
                ("rbac.crossplane.io/aggregate-to-crossplane", "true"),
                ("rbac.crossplane.io/aggregate-to-admin", "true"),
                ("rbac.crossplane.io/aggregate-to-edit", "true"),
            ],
            with(&["*"]),
        ),
        role(
            "aggregate-to-view",
            &[("rbac.crossplane.io/aggregate-to-view", "true")],
            with(&["get", "list", "watch"]),
        ),
        role("system", &[(LABEL_SYSTEM, name.as_str())], system),
    ]
}

/// The binding of `rev`'s system role to `subjects`.
pub fn binding(rev: &ProviderRevision, subjects: Vec<Subject>) -> ClusterRoleBinding {
    let name = system_role_name(&rev.name_any());
    ClusterRoleBinding {
        metadata: ObjectMeta {
            name: Some(name.clone()),
            owner_references: Some(rev.controller_owner_ref(&()).into_iter().collect()),
            ..Default::default()
        },
        role_ref: RoleRef {
            api_group: Some("rbac.authorization.k8s.io".into()),
            kind: "ClusterRole".into(),
            name,
        },
        subjects: Some(subjects),
    }
}

struct Ctx {
    client: kube::Client,
    namespace: String,
}

/// Runs the controller until the term ends: ProviderRevisions watched, their ClusterRoles and
/// ClusterRoleBindings owned. `namespace` is where package runtimes run (the core's namespace).
pub async fn run(term: TermContext, namespace: String, metrics: ReconcileMetrics) -> Result<(), BoxError> {
    let client = term.client().clone();
    let revs: Api<ProviderRevision> = Api::all(client.clone());
    let roles_api: Api<ClusterRole> = Api::all(client.clone());
    let bindings: Api<ClusterRoleBinding> = Api::all(client.clone());
    ControllerBuilder::new(
        CONTROLLER_NAME,
        Controller::new(revs, watcher::Config::default())
            .owns(roles_api, watcher::Config::default())
            .owns(bindings, watcher::Config::default()),
    )
    .metrics(&metrics)
    .run(term.token(), reconcile, Arc::new(Ctx { client, namespace }))
    .await;
    Ok(())
}

async fn reconcile(rev: Arc<ProviderRevision>, ctx: Arc<Ctx>) -> Result<Action, Error> {
    if rev.meta().deletion_timestamp.is_some() {
        // Owned by the revision; the garbage collector removes them.
        return Ok(Action::await_change());
    }
    let resources = resources(&rev);
    let roles = roles(&rev, &resources);
    if roles.is_empty() {
        // No CRD installed yet: the revision's status changes when there is one.
        return Ok(Action::await_change());
    }
    let pp = PatchParams::apply(CONTROLLER).force();
    let api = Api::<ClusterRole>::all(ctx.client.clone());
    for r in &roles {
        api.patch(&r.name_any(), &pp, &Patch::Apply(r)).await?;
    }
    // The ServiceAccounts the revision's Deployments run as, else the runtime's default name.
    let deployments: Api<Deployment> = Api::namespaced(ctx.client.clone(), &ctx.namespace);
    let name = rev.name_any();
    let found = deployments
        .list(&ListParams::default().labels(&format!("{LABEL_REVISION}={name}")))
        .await?;
    let mut accounts: Vec<String> = found
        .items
        .iter()
        .filter_map(|d| {
            d.spec
                .as_ref()?
                .template
                .spec
                .as_ref()?
                .service_account_name
                .clone()
        })
        .collect();
    let none_yet = accounts.is_empty();
    if none_yet {
        accounts.push(name.clone());
    }
    accounts.sort();
    accounts.dedup();
    let subjects = accounts
        .into_iter()
        .map(|sa| Subject {
            kind: "ServiceAccount".into(),
            name: sa,
            namespace: Some(ctx.namespace.clone()),
            ..Default::default()
        })
        .collect();
    let b = binding(&rev, subjects);
    Api::<ClusterRoleBinding>::all(ctx.client.clone())
        .patch(&b.name_any(), &pp, &Patch::Apply(&b))
        .await?;
    Ok(if none_yet {
        Action::requeue(NO_DEPLOYMENT_YET)
    } else {
        Action::await_change()
    })
}

/// The API access this controller needs: ProviderRevisions read (and their finalizers, as the
/// blocking owner of the roles), ClusterRoles applied with `escalate` (they grant what the manager
/// does not hold), ClusterRoleBindings applied with `bind` on ClusterRoles, and the runtime
/// Deployments read.
pub fn rbac_needs() -> Vec<manager::controller::rbac::Rule> {
    use manager::controller::rbac::{READ, Rule};
    vec![
        Rule::kind::<ProviderRevision>(&[""], READ),
        Rule::kind::<ProviderRevision>(&["finalizers"], &["update"]),
        Rule::kind::<ClusterRole>(&[""], &["bind"]),
        Rule::kind::<ClusterRoleBinding>(&[""], &["get", "list", "watch", "create", "patch", "update"]),
        Rule::kind::<Deployment>(&[""], READ),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use apis::pkg::package::TypedReference;

    fn revision(refs: &[(&str, &str)]) -> ProviderRevision {
        let mut rev: ProviderRevision = serde_json::from_value(serde_json::json!({
            "apiVersion": "pkg.crossplane.io/v1", "kind": "ProviderRevision",
            "metadata": {"name": "provider-nop-abc", "uid": "u1"},
            "spec": {"image": "r/p:v1", "desiredState": "Active", "revision": 1},
        }))
        .expect("a revision");
        let mut status = apis::pkg::ProviderRevisionStatus::default();
        status.revision.object_refs = refs
            .iter()
            .map(|(kind, name)| TypedReference {
                api_version: "x/v1".into(),
                kind: (*kind).into(),
                name: (*name).into(),
                uid: None,
            })
            .collect();
        rev.status = Some(status);
        rev
    }

    #[test]
    fn roles_cover_the_revisions_crds_and_name_it() {
        let rev = revision(&[
            ("CustomResourceDefinition", "nopresources.nop.crossplane.io"),
            ("ManagedResourceDefinition", "nopconfigs.nop.crossplane.io"),
            ("MutatingWebhookConfiguration", "ignored.example.org"),
        ]);
        let rs = resources(&rev);
        assert_eq!(rs.len(), 2);
        let roles = roles(&rev, &rs);
        let names: Vec<String> = roles.iter().map(|r| r.name_any()).collect();
        assert_eq!(
            names,
            [
                "crossplane:provider:provider-nop-abc:aggregate-to-edit",
                "crossplane:provider:provider-nop-abc:aggregate-to-view",
                "crossplane:provider:provider-nop-abc:system",
            ]
        );
        let system = roles[2].rules.as_ref().expect("rules");
        assert_eq!(
            system[0].resources.as_deref(),
            Some(
                &[
                    "nopconfigs".to_string(),
                    "nopconfigs/status".into(),
                    "nopresources".into(),
                    "nopresources/status".into()
                ][..]
            )
        );
        assert_eq!(
            system[0].verbs,
            ["get", "list", "watch", "update", "patch", "create"]
        );
        assert_eq!(
            system[1].resources.as_deref(),
            Some(&["*/finalizers".to_string()][..])
        );
        assert!(
            system[2]
                .resources
                .as_ref()
                .expect("r")
                .contains(&"leases".to_string())
        );
        assert_eq!(
            (system[3].resources.as_deref(), system[3].verbs.as_slice()),
            (
                Some(&["customresourcedefinitions".to_string()][..]),
                &["get".to_string(), "list".into(), "watch".into()][..]
            ),
            "the provider waits for its CRDs"
        );
        assert_eq!(roles[2].labels()[LABEL_SYSTEM], "provider-nop-abc");
        assert_eq!(roles[0].owner_references()[0].uid, "u1");
        assert_eq!(
            roles[0].labels()["rbac.crossplane.io/aggregate-to-crossplane"],
            "true"
        );
        let b = binding(&rev, vec![]);
        assert_eq!(b.role_ref.name, system_role_name("provider-nop-abc"));
        assert_eq!(b.owner_references()[0].kind, "ProviderRevision");
    }

    #[test]
    fn a_revision_without_crds_gets_no_roles() {
        let rev = revision(&[]);
        assert!(roles(&rev, &resources(&rev)).is_empty());
    }
}
