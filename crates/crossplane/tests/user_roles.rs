//! The user-facing roles (`crossplane-admin`, `-edit`, `-view`, `-browse`), as `deploy/crossplane-roles/`
//! ships them: a user bound to each gets what upstream grants, including the XR kinds of an XRD through the
//! RBAC manager's per-XRD roles (and the claim kind of an XRD that offers claims), which the real
//! clusterrole-aggregation controller folds in. The apiserver's own authorizer answers
//! (SubjectAccessReview), for each user and each action.

mod support;

use std::time::Duration;

use apis::apiextensions::CompositeResourceDefinition;
use k8s_openapi::api::authorization::v1::{ResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec};
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, RoleRef, Subject};
use kube::api::{DeleteParams, ObjectMeta, Patch, PatchParams, PostParams};
use kube::{Api, Client, ResourceExt};
use serde_json::json;
use support::*;

const MANAGER: &str = "user-roles-test";

/// Whether `user` may `verb` the `resource` of `group` (cluster-wide), as the apiserver's authorizer says.
async fn can(client: &Client, user: &str, verb: &str, group: &str, resource: &str) -> anyhow::Result<bool> {
    let review = SubjectAccessReview {
        spec: SubjectAccessReviewSpec {
            user: Some(user.to_owned()),
            resource_attributes: Some(ResourceAttributes {
                group: Some(group.to_owned()),
                resource: Some(resource.to_owned()),
                verb: Some(verb.to_owned()),
                namespace: Some("default".to_owned()),
                ..ResourceAttributes::default()
            }),
            ..SubjectAccessReviewSpec::default()
        },
        ..SubjectAccessReview::default()
    };
    let api: Api<SubjectAccessReview> = Api::all(client.clone());
    let answer = api.create(&PostParams::default(), &review).await?;
    Ok(answer.status.is_some_and(|s| s.allowed))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_user_role_grants_what_upstream_grants() -> anyhow::Result<()> {
    let cluster = testenv::Cluster::shared()?;
    let client = cluster.client().await?;
    let id = unique();
    let pp = PatchParams::apply(MANAGER).force();

    // The roles as deploy/ ships them (the same objects `cargo xtask generate` renders).
    let roles: Api<ClusterRole> = Api::all(client.clone());
    for role in crossplane::roles::user_roles() {
        roles.patch(&role.name_any(), &pp, &Patch::Apply(&role)).await?;
    }

    // The RBAC manager's roles for an XRD that offers claims (applied directly: the RBAC manager's own test covers it).
    let group = format!("{id}.roles.example.org");
    let xrd: CompositeResourceDefinition = serde_json::from_value(json!({
        "apiVersion": "apiextensions.crossplane.io/v2", "kind": "CompositeResourceDefinition",
        "metadata": {"name": format!("xthings.{group}")},
        "spec": {"group": group, "scope": "LegacyCluster", "names": {"kind": "XThing", "plural": "xthings"},
                 "claimNames": {"kind": "Thing", "plural": "things"},
                 "versions": [{"name": "v1", "referenceable": true, "served": true}]}
    }))?;
    let xrd_roles = crossplane::rbac::roles(&xrd);
    for role in &xrd_roles {
        roles.patch(&role.name_any(), &pp, &Patch::Apply(role)).await?;
    }

    let bindings: Api<ClusterRoleBinding> = Api::all(client.clone());
    let user = |role: &str| format!("{role}-{id}@example.org");
    for role in crossplane::roles::USER_ROLES {
        let binding = ClusterRoleBinding {
            metadata: ObjectMeta {
                name: Some(format!("{role}-{id}")),
                ..ObjectMeta::default()
            },
            role_ref: RoleRef {
                api_group: Some("rbac.authorization.k8s.io".to_owned()),
                kind: "ClusterRole".to_owned(),
                name: format!("crossplane-{role}"),
            },
            subjects: Some(vec![Subject {
                api_group: Some("rbac.authorization.k8s.io".to_owned()),
                kind: "User".to_owned(),
                name: user(role),
                namespace: None,
            }]),
        };
        bindings
            .patch(&binding.name_any(), &pp, &Patch::Apply(&binding))
            .await?;
    }

    // Aggregation is the controller manager's work, one role at a time: wait until each role sees the
    // new XR kind as it should before the table is judged.
    for (role, verb) in [
        ("admin", "create"),
        ("edit", "create"),
        ("view", "list"),
        ("browse", "list"),
    ] {
        let subject = user(role);
        wait_for(
            &format!("crossplane-{role} to aggregate the XRD's role ({verb} xthings)"),
            Duration::from_secs(60),
            || {
                let (client, group, subject) = (client.clone(), group.clone(), subject.clone());
                async move {
                    Ok(can(&client, &subject, verb, &group, "xthings")
                        .await?
                        .then_some(()))
                }
            },
        )
        .await?;
    }

    let xr = group.as_str();
    let cp = "apiextensions.crossplane.io";
    let rbac = "rbac.authorization.k8s.io";
    // (role, verb, group, resource, allowed) as upstream's chart and RBAC manager grant them.
    let table: &[(&str, &str, &str, &str, bool)] = &[
        ("admin", "create", xr, "xthings", true),
        ("admin", "create", xr, "things", true),
        ("admin", "delete", "", "namespaces", true),
        ("admin", "create", rbac, "clusterrolebindings", true),
        ("admin", "create", cp, "compositions", true),
        ("edit", "create", xr, "xthings", true),
        ("edit", "create", xr, "things", true),
        ("edit", "create", "", "secrets", true),
        ("edit", "create", cp, "compositeresourcedefinitions", true),
        ("edit", "delete", "", "namespaces", false),
        ("edit", "create", rbac, "clusterrolebindings", false),
        ("view", "list", xr, "xthings", true),
        ("view", "create", xr, "xthings", false),
        ("view", "list", xr, "things", true),
        ("view", "create", xr, "things", false),
        ("view", "get", "", "secrets", false),
        ("view", "list", "", "namespaces", true),
        ("view", "list", cp, "compositions", true),
        ("browse", "list", xr, "xthings", true),
        ("browse", "get", cp, "compositions", true),
        ("browse", "create", xr, "xthings", false),
        ("browse", "list", xr, "things", true),
        ("browse", "delete", xr, "things", false),
        ("browse", "list", "", "namespaces", false),
        ("browse", "list", "pkg.crossplane.io", "providers", false),
    ];
    let mut wrong = Vec::new();
    for (role, verb, group, resource, want) in table {
        let got = can(&client, &user(role), verb, group, resource).await?;
        if got != *want {
            wrong.push(format!(
                "crossplane-{role}: {verb} {resource}.{group} allowed={got}, want {want}"
            ));
        }
    }
    // The admin group binding, as upstream.
    let masters = crossplane::roles::admin_binding();
    bindings
        .patch(&masters.name_any(), &pp, &Patch::Apply(&masters))
        .await?;

    for role in crossplane::roles::USER_ROLES {
        bindings
            .delete(&format!("{role}-{id}"), &DeleteParams::default())
            .await?;
    }
    for role in &xrd_roles {
        roles.delete(&role.name_any(), &DeleteParams::default()).await?;
    }
    assert!(
        wrong.is_empty(),
        "{} of {} checks disagree with upstream's roles:\n{}",
        wrong.len(),
        table.len(),
        wrong.join("\n")
    );
    Ok(())
}
