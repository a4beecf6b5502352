//! The generated deploy/ against the test control plane (issue 7, must-show 1 and 3):
//! - every manifest is schema-valid: `kubectl apply --dry-run=server -k deploy/` (and `-k deploy/fencing`)
//!   succeeds;
//! - the generated RBAC is minimal: each binary's ClusterRole and Role, bound to a ServiceAccount of
//!   its own, allow what the binary declares and deny requests outside it.

use std::path::{Path, PathBuf};
use testenv::kubectl::run as kubectl;

use anyhow::{Context, Result, ensure};
use k8s_openapi::api::authorization::v1::{
    ResourceAttributes, SelfSubjectAccessReview, SelfSubjectAccessReviewSpec,
};
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, Role, RoleBinding, RoleRef, Subject};
use kube::api::{ObjectMeta, PostParams};
use kube::{Api, Client};
use serde_json::Value;
use testenv::support::cluster;

fn deploy_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../deploy")
}

#[tokio::test]
async fn kustomization_applies_with_server_side_dry_run() -> Result<()> {
    let c = cluster();
    let deploy = deploy_dir();
    // A server-side dry run of a namespaced object fails with NotFound while its namespace does not
    // exist, and dry-run objects are never persisted, so the Namespace is applied for real first (it is
    // idempotent and harmless in the shared test bed). The CRDs need no first pass: deploy/ contains no
    // custom resources, only the CRDs themselves, which the dry run validates like any other object.
    kubectl(
        c.kubeconfig(),
        &[
            "apply",
            "-f",
            &deploy.join("namespace.yaml").display().to_string(),
        ],
    )?;
    let out = kubectl(
        c.kubeconfig(),
        &[
            "apply",
            "--dry-run=server",
            "--validate=strict",
            "-k",
            &deploy.display().to_string(),
        ],
    )?;
    for kind in [
        "customresourcedefinition.apiextensions.k8s.io/compositeresourcedefinitions.apiextensions.crossplane.io",
        "deployment.apps/crossplane",
        "deployment.apps/crossplane-rbac-manager",
        "deployment.apps/provider-nop",
        "deployment.apps/provider-kubernetes",
        "deployment.apps/provider-sql",
        "poddisruptionbudget.policy/provider-nop",
        "clusterrole.rbac.authorization.k8s.io/provider-sql",
        "role.rbac.authorization.k8s.io/provider-kubernetes:leader-election",
        // The conversion webhook's Service (Object v1alpha1 ⇄ v1alpha2).
        "service/provider-kubernetes",
    ] {
        ensure!(
            out.contains(kind),
            "{kind} missing from the dry run's output:\n{out}"
        );
    }
    // The opt-in server-side fence: CEL that does not compile is refused here.
    let out = kubectl(
        c.kubeconfig(),
        &[
            "apply",
            "--dry-run=server",
            "--validate=strict",
            "-k",
            &deploy.join("fencing").display().to_string(),
        ],
    )?;
    for kind in [
        "validatingadmissionpolicy.admissionregistration.k8s.io/crossplane-rs-fence-crossplane",
        "validatingadmissionpolicybinding.admissionregistration.k8s.io/crossplane-rs-fence-provider-sql",
    ] {
        ensure!(
            out.contains(kind),
            "{kind} missing from the fencing dry run's output:\n{out}"
        );
    }
    Ok(())
}

/// A generated object, read back from deploy/.
fn read(path: &Path) -> Result<Value> {
    let text = std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    serde_saphyr::from_str(&text).with_context(|| format!("parsing {}", path.display()))
}

/// One request: (API group, resource, verb, namespaced in the test namespace, object name).
type Request = (
    &'static str,
    &'static str,
    &'static str,
    bool,
    Option<&'static str>,
);

/// Requests each binary's declared needs allow, and at least three outside them that must be denied.
/// `LEASE` stands for the binary's own Lease.
fn expectations(binary: &str) -> (Vec<Request>, Vec<Request>) {
    const LEASE: Option<&str> = Some("LEASE");
    // Every binary: its own Lease yes, someone else's no; events in its namespace.
    let mut allowed: Vec<Request> = vec![
        ("coordination.k8s.io", "leases", "update", true, LEASE),
        ("coordination.k8s.io", "leases", "create", true, None),
        ("events.k8s.io", "events", "create", true, None),
        // Its own Pod, watched so that the leader leaves as soon as it is deleted.
        ("", "pods", "watch", true, None),
    ];
    let mut denied: Vec<Request> = vec![
        (
            "coordination.k8s.io",
            "leases",
            "update",
            true,
            Some("crossplane-leader-election-other"),
        ),
        ("coordination.k8s.io", "leases", "delete", true, LEASE),
        ("", "secrets", "list", false, None),
        (
            "rbac.authorization.k8s.io",
            "clusterrolebindings",
            "create",
            false,
            None,
        ),
        ("", "pods", "create", true, None),
    ];
    match binary {
        "crossplane" => {
            allowed.push((
                "apiextensions.crossplane.io",
                "compositionrevisions",
                "create",
                false,
                None,
            ));
            allowed.push((
                "apiextensions.k8s.io",
                "customresourcedefinitions",
                "delete",
                false,
                None,
            ));
            // Upstream's default rules (crossplane::upstream_rbac): ConfigMaps, Deployments, Services,
            // everything in Crossplane's groups; still no RBAC and no Pods.
            allowed.push(("", "configmaps", "create", true, None));
            allowed.push(("apps", "deployments", "create", true, None));
            allowed.push(("", "services", "delete", true, None));
            allowed.push(("pkg.crossplane.io", "functions", "delete", false, None));
            denied.push(("rbac.authorization.k8s.io", "clusterroles", "create", false, None));
            denied.push(("", "namespaces", "delete", false, None));
            // Secrets: function credentials, composed resources' connection details, the XR connection
            // Secret, and the function CA and server certificates.
            denied.retain(|r| r.1 != "secrets");
            allowed.push(("", "secrets", "get", true, None));
            allowed.push(("", "secrets", "list", false, None));
            allowed.push(("pkg.crossplane.io", "functionrevisions", "list", false, None));
            // The package runtime grants each package's ServiceAccount the Leases of the core's
            // namespace, and RBAC lets only a holder of a right grant it (the core has no `escalate`):
            // so the core may update any Lease there, not only its own. Deleting one stays denied.
            denied.retain(|r| !(r.1 == "leases" && r.2 == "update"));
            allowed.push((
                "coordination.k8s.io",
                "leases",
                "update",
                true,
                Some("crossplane-leader-election-other"),
            ));
        }
        "crossplane-rbac-manager" => {
            allowed.push((
                "rbac.authorization.k8s.io",
                "clusterroles",
                "escalate",
                false,
                None,
            ));
            // It binds each provider revision's system role to the revision's ServiceAccount (as
            // upstream's does), so it may create ClusterRoleBindings and bind ClusterRoles; it may
            // never delete a binding (the garbage collector removes them with their revision).
            denied.retain(|r| r.1 != "clusterrolebindings");
            allowed.push((
                "rbac.authorization.k8s.io",
                "clusterrolebindings",
                "create",
                false,
                None,
            ));
            allowed.push(("rbac.authorization.k8s.io", "clusterroles", "bind", false, None));
            denied.push((
                "rbac.authorization.k8s.io",
                "clusterrolebindings",
                "delete",
                false,
                None,
            ));
            allowed.push((
                "apiextensions.crossplane.io",
                "compositeresourcedefinitions",
                "watch",
                false,
                None,
            ));
            denied.push((
                "apiextensions.k8s.io",
                "customresourcedefinitions",
                "delete",
                false,
                None,
            ));
            denied.push(("rbac.authorization.k8s.io", "clusterroles", "delete", false, None));
            denied.push((
                "apiextensions.crossplane.io",
                "compositeresourcedefinitions",
                "patch",
                false,
                None,
            ));
        }
        "provider-nop" => {
            allowed.push(("nop.crossplane.io", "nopresources", "watch", false, None));
            allowed.push(("", "secrets", "create", true, None));
            denied.push(("kubernetes.crossplane.io", "objects", "list", false, None));
            denied.push(("nop.crossplane.io", "nopresources", "delete", false, None));
            denied.push(("", "configmaps", "get", true, None));
        }
        "provider-kubernetes" => {
            allowed.push(("kubernetes.m.crossplane.io", "objects", "patch", true, None));
            allowed.push((
                "kubernetes.crossplane.io",
                "providerconfigusages",
                "delete",
                false,
                None,
            ));
            denied.push(("nop.crossplane.io", "nopresources", "list", false, None));
            denied.push((
                "postgresql.sql.crossplane.io",
                "providerconfigs",
                "get",
                false,
                None,
            ));
            denied.push(("", "secrets", "delete", true, None));
        }
        "provider-sql" => {
            allowed.push(("postgresql.sql.m.crossplane.io", "grants", "watch", true, None));
            allowed.push((
                "postgresql.sql.crossplane.io",
                "roles/status",
                "update",
                false,
                None,
            ));
            denied.push(("kubernetes.crossplane.io", "objects", "get", false, None));
            denied.push(("postgresql.sql.crossplane.io", "databases", "delete", false, None));
            denied.push(("", "secrets", "list", true, None));
        }
        other => panic!("no expectations for {other}"),
    }
    (allowed, denied)
}

async fn can(client: &Client, ns: &str, lease: &str, r: &Request) -> Result<bool> {
    let (group, resource, verb, namespaced, name) = *r;
    let (resource, subresource) = match resource.split_once('/') {
        Some((res, sub)) => (res, Some(sub.to_owned())),
        None => (resource, None),
    };
    let review = SelfSubjectAccessReview {
        spec: SelfSubjectAccessReviewSpec {
            resource_attributes: Some(ResourceAttributes {
                group: Some(group.to_owned()),
                resource: Some(resource.to_owned()),
                subresource,
                verb: Some(verb.to_owned()),
                namespace: namespaced.then(|| ns.to_owned()),
                name: name.map(|n| {
                    if n == "LEASE" {
                        lease.to_owned()
                    } else {
                        n.to_owned()
                    }
                }),
                ..ResourceAttributes::default()
            }),
            ..SelfSubjectAccessReviewSpec::default()
        },
        ..SelfSubjectAccessReview::default()
    };
    let api: Api<SelfSubjectAccessReview> = Api::all(client.clone());
    let out = api.create(&PostParams::default(), &review).await?;
    Ok(out.status.map(|s| s.allowed).unwrap_or(false))
}

#[tokio::test]
async fn generated_rbac_is_minimal() -> Result<()> {
    let c = cluster();
    let admin = c.client().await?;
    let ns = c.namespace("rbac-minimal").await?;
    let deploy = deploy_dir();
    let kustomization = read(&deploy.join("kustomization.yaml"))?;
    let binaries: Vec<String> = kustomization["resources"]
        .as_array()
        .context("resources")?
        .iter()
        .filter_map(Value::as_str)
        .filter(|r| !r.ends_with(".yaml") && *r != "crds" && *r != "crossplane-roles")
        .map(str::to_owned)
        .collect();
    ensure!(binaries.len() == 5, "expected five binaries, found {binaries:?}");
    let mut failures = Vec::new();
    for binary in &binaries {
        let dir = deploy.join(binary);
        let sa = format!("sa-{binary}");
        let subject = vec![Subject {
            kind: "ServiceAccount".into(),
            name: sa.clone(),
            namespace: Some(ns.clone()),
            ..Subject::default()
        }];
        // The core's ClusterRole aggregates; its declared needs are in the system part, bound directly
        // (the test bed runs no clusterrole-aggregation controller).
        let cr_file = if dir.join("clusterrole-system.yaml").exists() {
            "clusterrole-system.yaml"
        } else {
            "clusterrole.yaml"
        };
        let mut cr: ClusterRole = serde_json::from_value(read(&dir.join(cr_file))?)?;
        let cr_name = format!("{ns}:{binary}");
        cr.metadata = ObjectMeta {
            name: Some(cr_name.clone()),
            ..ObjectMeta::default()
        };
        Api::<ClusterRole>::all(admin.clone())
            .create(&PostParams::default(), &cr)
            .await
            .with_context(|| format!("creating {cr_name}"))?;
        Api::<ClusterRoleBinding>::all(admin.clone())
            .create(
                &PostParams::default(),
                &ClusterRoleBinding {
                    metadata: ObjectMeta {
                        name: Some(cr_name.clone()),
                        ..ObjectMeta::default()
                    },
                    role_ref: RoleRef {
                        api_group: Some("rbac.authorization.k8s.io".into()),
                        kind: "ClusterRole".into(),
                        name: cr_name.clone(),
                    },
                    subjects: Some(subject.clone()),
                },
            )
            .await?;
        let mut role: Role = serde_json::from_value(read(&dir.join("role.yaml"))?)?;
        let lease = role
            .rules
            .iter()
            .flatten()
            .find_map(|r| r.resource_names.as_ref()?.first().cloned())
            .context("the Role names no Lease")?;
        role.metadata = ObjectMeta {
            name: Some(binary.clone()),
            namespace: Some(ns.clone()),
            ..ObjectMeta::default()
        };
        Api::<Role>::namespaced(admin.clone(), &ns)
            .create(&PostParams::default(), &role)
            .await?;
        Api::<RoleBinding>::namespaced(admin.clone(), &ns)
            .create(
                &PostParams::default(),
                &RoleBinding {
                    metadata: ObjectMeta {
                        name: Some(binary.clone()),
                        namespace: Some(ns.clone()),
                        ..ObjectMeta::default()
                    },
                    role_ref: RoleRef {
                        api_group: Some("rbac.authorization.k8s.io".into()),
                        kind: "Role".into(),
                        name: binary.clone(),
                    },
                    subjects: Some(subject),
                },
            )
            .await?;

        let client = testenv::client_from(&c.service_account_kubeconfig(&ns, &sa).await?).await?;
        let (allowed, denied) = expectations(binary);
        ensure!(denied.len() >= 3, "{binary}: fewer than three denials checked");
        for r in &allowed {
            if !can(&client, &ns, &lease, r).await? {
                failures.push(format!("{binary}: expected allowed: {r:?}"));
            }
        }
        for r in &denied {
            if can(&client, &ns, &lease, r).await? {
                failures.push(format!("{binary}: expected denied: {r:?}"));
            }
        }
    }
    for binary in &binaries {
        let name = format!("{ns}:{binary}");
        let _ = Api::<ClusterRoleBinding>::all(admin.clone())
            .delete(&name, &Default::default())
            .await;
        let _ = Api::<ClusterRole>::all(admin.clone())
            .delete(&name, &Default::default())
            .await;
    }
    ensure!(
        failures.is_empty(),
        "RBAC checks failed:\n{}",
        failures.join("\n")
    );
    Ok(())
}
