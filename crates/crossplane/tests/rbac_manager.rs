//! Must-show 4: the RBAC manager creates the XRD's ClusterRoles and they go with the XRD; with two
//! replicas only the leader writes them (checked in the audit log).

mod support;

use std::time::Duration;

use k8s_openapi::api::rbac::v1::ClusterRole;
use kube::Api;
use kube::api::DeleteParams;
use serde_json::json;
use support::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rbac_manager_keeps_xrd_roles_and_only_the_leader_writes() -> anyhow::Result<()> {
    let cluster = testenv::Cluster::shared()?;
    let client = cluster.client().await?;
    install_crds(&client).await?;
    let id = unique();
    let ns = cluster.namespace("rbac").await?;
    let selector = format!("crossplane-rs.io/test={id}");
    let lease = format!("rbac-{id}");
    let args = [
        "rbac",
        "start",
        "--watch-label-selector",
        &selector,
        "-l",
        "--leader-election-namespace",
        &ns,
        "--leader-election-id",
        &lease,
    ];
    let id_a = format!("rbac-a-{id}");
    let id_b = format!("rbac-b-{id}");
    let mut a = Process::start_env(cluster.kubeconfig(), &args, &id_a, &[("POD_NAME", &id_a)])?;
    let mut b = Process::start_env(cluster.kubeconfig(), &args, &id_b, &[("POD_NAME", &id_b)])?;

    let xrds = xrd_api(&client);
    let group = format!("{id}.rbac.example.org");
    let xrd_name = format!("xthings.{group}");
    apply(
        &xrds,
        json!({
            "apiVersion": "apiextensions.crossplane.io/v2", "kind": "CompositeResourceDefinition",
            "metadata": {"name": xrd_name, "labels": {"crossplane-rs.io/test": id}},
            "spec": {"group": group, "scope": "Cluster", "names": {"kind": "XThing", "plural": "xthings"},
                     "versions": [{"name": "v1", "referenceable": true, "served": true}]}
        }),
    )
    .await?;

    let roles: Api<ClusterRole> = Api::all(client.clone());
    let names: Vec<String> = ["crossplane", "edit", "view", "browse"]
        .iter()
        .map(|s| format!("crossplane:composite:{xrd_name}:aggregate-to-{s}"))
        .collect();
    wait_for("four ClusterRoles", Duration::from_secs(30), || async {
        for n in &names {
            if roles.get_opt(n).await?.is_none() {
                return Ok(None);
            }
        }
        Ok(Some(()))
    })
    .await?;
    let main = roles.get(&names[0]).await?;
    let labels = main.metadata.labels.clone().unwrap_or_default();
    assert_eq!(
        labels
            .get("rbac.crossplane.io/aggregate-to-crossplane")
            .map(String::as_str),
        Some("true")
    );
    let rules = main.rules.clone().unwrap_or_default();
    assert_eq!(
        rules[0].resources.clone().unwrap_or_default(),
        ["xthings", "xthings/status"]
    );

    // Only one replica wrote the roles.
    let audit = cluster.audit();
    let writers = wait_for(
        "role writes in the audit log",
        Duration::from_secs(30),
        || async {
            let w: std::collections::BTreeSet<String> = audit
                .read()?
                .events
                .iter()
                .filter(|e| e.is_write() && e.resource == "clusterroles" && e.name.contains(&xrd_name))
                .filter_map(|e| e.agent_identity().map(str::to_owned))
                .collect();
            Ok((!w.is_empty()).then_some(w))
        },
    )
    .await?;
    assert_eq!(writers.len(), 1, "writers: {writers:?}");
    assert!(
        writers.contains(&id_a) || writers.contains(&id_b),
        "writers: {writers:?}"
    );

    // The roles go with the XRD (no core runs here, so the XRD has no finalizer).
    xrds.delete(&xrd_name, &DeleteParams::default()).await?;
    wait_for("ClusterRoles gone", Duration::from_secs(60), || async {
        for n in &names {
            if roles.get_opt(n).await?.is_some() {
                return Ok(None);
            }
        }
        Ok(Some(()))
    })
    .await?;
    assert!(a.is_running() && b.is_running(), "a replica crashed");
    Ok(())
}
