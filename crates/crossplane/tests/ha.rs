//! Must-show 3: two core replicas; only the leader reconciles (the per-XRD controllers too), checked
//! in the audit log; killing the leader halfway through 50 XRs, all become Ready and none is duplicated.

mod support;

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use anyhow::Context;
use k8s_openapi::api::coordination::v1::Lease;
use kube::Api;
use kube::api::ListParams;
use serde_json::json;
use support::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_the_leader_composes_and_failover_loses_and_duplicates_nothing() -> anyhow::Result<()> {
    let cluster = testenv::Cluster::shared()?;
    let client = cluster.client().await?;
    install_crds(&client).await?;
    let id = unique();
    let ns = cluster.namespace("core-ha").await?;
    let selector = format!("crossplane-rs.io/test={id}");
    let lease_name = format!("core-{id}");
    let args = [
        "core",
        "start",
        "--watch-label-selector",
        &selector,
        "-l",
        "--leader-election-namespace",
        &ns,
        "--leader-election-id",
        &lease_name,
        "--lease-duration",
        "6s",
        "--renew-deadline",
        "4s",
        "--retry-period",
        "1s",
    ];
    let ids = [format!("core-a-{id}"), format!("core-b-{id}")];
    let mut procs: BTreeMap<String, Process> = BTreeMap::new();
    for i in &ids {
        procs.insert(
            i.clone(),
            Process::start_env(cluster.kubeconfig(), &args, i, &[("POD_NAME", i)])?,
        );
    }
    let leases: Api<Lease> = Api::namespaced(client.clone(), &ns);
    let leader = wait_for("a leader", Duration::from_secs(30), || async {
        Ok(leases
            .get_opt(&lease_name)
            .await?
            .and_then(|l| l.spec?.holder_identity)
            .filter(|h| !h.is_empty()))
    })
    .await?;
    let standby = ids.iter().find(|i| **i != leader).context("standby")?.clone();

    let group = format!("{id}.ha.example.org");
    let xrd_name = format!("xhas.{group}");
    let xrds = xrd_api(&client);
    let comps = dynamic(
        &client,
        "apiextensions.crossplane.io",
        "v1",
        "Composition",
        "compositions",
    );
    let nops = dynamic(
        &client,
        "nop.crossplane.io",
        "v1alpha1",
        "NopResource",
        "nopresources",
    );
    apply(&xrds, json!({
        "apiVersion": "apiextensions.crossplane.io/v2", "kind": "CompositeResourceDefinition",
        "metadata": {"name": xrd_name, "labels": {"crossplane-rs.io/test": id}},
        "spec": {"group": group, "scope": "Cluster", "names": {"kind": "XHa", "plural": "xhas"},
                 "versions": [{"name": "v1", "referenceable": true, "served": true, "schema": {"openAPIV3Schema": {
                     "type": "object", "properties": {"spec": {"type": "object", "properties": {"n": {"type": "integer"}}}}}}}]}
    })).await?;
    apply(&comps, json!({
        "apiVersion": "apiextensions.crossplane.io/v1", "kind": "Composition",
        "metadata": {"name": format!("ha-{id}"), "labels": {"crossplane-rs.io/test": id}},
        "spec": {"compositeTypeRef": {"apiVersion": format!("{group}/v1"), "kind": "XHa"}, "mode": "Pipeline",
                 "pipeline": [{"step": "pt", "functionRef": {"name": "function-patch-and-transform"},
                   "input": {"apiVersion": "pt.fn.crossplane.io/v1beta1", "kind": "Resources", "resources": [{
                     "name": "nop",
                     "base": {"apiVersion": "nop.crossplane.io/v1alpha1", "kind": "NopResource", "spec": {"forProvider": {}}},
                     "patches": [{"type": "FromCompositeFieldPath", "fromFieldPath": "spec.n", "toFieldPath": "spec.forProvider.fields.n"}],
                     "readinessChecks": [{"type": "None"}]}]}}]}
    })).await?;
    wait_for("XRD Established", Duration::from_secs(30), || async {
        let x = json(&xrds.get(&xrd_name).await?);
        Ok(condition(&x, "Established").filter(|c| c["status"] == "True"))
    })
    .await?;
    let xrs = dynamic(&client, &group, "v1", "XHa", "xhas");

    for n in 0..25 {
        apply(&xrs, json!({"apiVersion": format!("{group}/v1"), "kind": "XHa", "metadata": {"name": format!("xr-{n}")}, "spec": {"n": n}})).await?;
    }
    wait_for("some composed", Duration::from_secs(30), || async {
        let l = nops
            .list(&ListParams::default().labels("crossplane.io/composite"))
            .await?;
        let ours = l
            .items
            .iter()
            .filter(|o| json(o)["metadata"]["ownerReferences"][0]["kind"] == "XHa")
            .count();
        Ok((ours >= 5).then_some(()))
    })
    .await?;
    let killed_at = jiff::Timestamp::now();
    procs.get_mut(&leader).context("leader")?.kill();
    for n in 25..50 {
        apply(&xrs, json!({"apiVersion": format!("{group}/v1"), "kind": "XHa", "metadata": {"name": format!("xr-{n}")}, "spec": {"n": n}})).await?;
    }

    wait_for("50 XRs Ready", Duration::from_secs(120), || async {
        let l = xrs.list(&ListParams::default()).await?;
        let ready = l
            .items
            .iter()
            .filter(|x| condition(&json(x), "Ready").is_some_and(|c| c["status"] == "True"))
            .count();
        Ok((ready == 50).then_some(()))
    })
    .await?;
    for n in 0..50 {
        let l = nops
            .list(&ListParams::default().labels(&format!("crossplane.io/composite=xr-{n}")))
            .await?;
        let ours: Vec<_> = l
            .items
            .iter()
            .filter(|o| json(o)["metadata"]["ownerReferences"][0]["kind"] == "XHa")
            .collect();
        assert_eq!(ours.len(), 1, "xr-{n} composed {} NopResources", ours.len());
        assert_eq!(json(ours[0])["spec"]["forProvider"]["fields"]["n"], n);
    }

    // The audit log: before the kill only the leader wrote XRs and NopResources; the standby wrote only
    // after it.
    let audit = cluster.audit();
    let events = audit.read()?.events;
    let writes: Vec<_> = events
        .iter()
        .filter(|e| {
            e.is_write()
                && (e.resource == "xhas" || (e.resource == "nopresources" && e.name.starts_with("xr-")))
        })
        .filter(|e| e.agent_identity().is_some_and(|i| ids.contains(&i.to_owned())))
        .collect();
    let before: BTreeSet<_> = writes
        .iter()
        .filter(|e| e.received < killed_at)
        .filter_map(|e| e.agent_identity())
        .collect();
    assert_eq!(
        before,
        BTreeSet::from([leader.as_str()]),
        "writers before the kill"
    );
    assert!(
        writes
            .iter()
            .any(|e| e.agent_identity() == Some(standby.as_str())),
        "the new leader composed"
    );
    assert!(procs.get_mut(&standby).context("standby")?.is_running());

    // Clean up.
    xrds.delete(&xrd_name, &Default::default()).await?;
    comps.delete(&format!("ha-{id}"), &Default::default()).await?;
    wait_for("XRD gone", Duration::from_secs(90), || async {
        Ok(xrds.get_opt(&xrd_name).await?.is_none().then_some(()))
    })
    .await?;
    Ok(())
}
