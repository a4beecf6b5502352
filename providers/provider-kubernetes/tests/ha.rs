//! provider-kubernetes as two replicas (processes) sharing one Lease: issue 5's "must show" 4. With 200
//! Objects, only the leader writes (checked in the apiserver's audit log); killing the leader while work
//! is in flight loses nothing and duplicates nothing.

use std::collections::BTreeSet;
use std::time::Duration;

use anyhow::{Context, Result, ensure};
use jiff::Timestamp;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{DeleteParams, ListParams, PostParams};
use kube::{Api, ResourceExt};
use provider_kubernetes::types::namespaced;
use serde_json::{Value, json};
use testenv::log_dir;
use testenv::support::{
    Process, assert_failover_writes, cluster, eventually, fast_lease_args, install_crds, replica_args,
    wait_holder,
};

const BIN: &str = env!("CARGO_BIN_EXE_provider-kubernetes");
const LEASE: &str = "crossplane-leader-election-provider-kubernetes";
const COUNT: usize = 200;

fn replica(ns: &str, name: &str) -> Result<Process> {
    let c = cluster();
    let identity = format!("{ns}-{name}");
    let mut args = replica_args(&c, ns, LEASE, &identity);
    args.extend(["--poll", "30s", "--max-reconcile-rate", "20"].map(String::from));
    args.extend(fast_lease_args());
    Ok(Process::start(BIN, &log_dir!("k8s-ha"), &identity, &args)?)
}

fn is_true(o: &Value, t: &str) -> bool {
    o["status"]["conditions"]
        .as_array()
        .is_some_and(|cs| cs.iter().any(|c| c["type"] == t && c["status"] == "True"))
}

#[tokio::test]
async fn only_the_leader_reconciles_and_failover_finishes_the_work() -> Result<()> {
    let c = cluster();
    let client = c.client().await?;
    install_crds(&client, &provider_kubernetes::crds()).await?;
    let ns = c.namespace("k8s-ha").await?;
    let pcs: Api<namespaced::ProviderConfig> = Api::namespaced(client.clone(), &ns);
    pcs.create(
        &PostParams::default(),
        &serde_json::from_value(json!({
            "apiVersion": "kubernetes.m.crossplane.io/v1alpha1",
            "kind": "ProviderConfig",
            "metadata": { "name": "local", "namespace": ns },
            "spec": { "credentials": { "source": "InjectedIdentity" } },
        }))?,
    )
    .await?;

    let mut a = replica(&ns, "a")?;
    let id_a = a.identity.clone();
    wait_holder(&client, &ns, LEASE, &id_a, Duration::from_secs(20))
        .await
        .with_context(|| a.log_text())?;
    let b = replica(&ns, "b")?;
    let id_b = b.identity.clone();
    tokio::time::sleep(Duration::from_secs(2)).await;

    // 200 Objects, each managing a ConfigMap of its own.
    let objects: Api<namespaced::Object> = Api::namespaced(client.clone(), &ns);
    let started = Timestamp::now();
    for i in 0..COUNT {
        let o = json!({
            "apiVersion": "kubernetes.m.crossplane.io/v1alpha1",
            "kind": "Object",
            "metadata": { "name": format!("obj-{i:03}"), "namespace": ns, "labels": { "test": ns } },
            "spec": {
                "forProvider": { "manifest": {
                    "apiVersion": "v1",
                    "kind": "ConfigMap",
                    "metadata": { "name": format!("cm-{i:03}") },
                    "data": { "index": i.to_string() },
                } },
                "providerConfigRef": { "kind": "ProviderConfig", "name": "local" },
            },
        });
        objects
            .create(&PostParams::default(), &serde_json::from_value(o)?)
            .await?;
    }
    let raw = kube::api::ApiResource::erase::<namespaced::Object>(&());
    let dynamic: Api<kube::api::DynamicObject> = Api::namespaced_with(client.clone(), &ns, &raw);
    let ready_count = || {
        let dynamic = dynamic.clone();
        async move {
            let list = dynamic.list(&ListParams::default()).await?;
            let n = list
                .items
                .iter()
                .map(serde_json::to_value)
                .filter_map(Result::ok)
                .filter(|o| is_true(o, "Ready") && is_true(o, "Synced"))
                .count();
            anyhow::Ok(n)
        }
    };

    // Kill the leader while work is in flight: once some, but not all, Objects are Ready.
    eventually("the leader is at work", Duration::from_secs(60), || {
        let count = ready_count();
        async move { Ok(count.await? >= 10) }
    })
    .await
    .with_context(|| a.log_text())?;
    let ready_now = ready_count().await?;
    let killed_at = Timestamp::now();
    a.kill();
    // Reaped: nothing more can be sent. Bytes already in the socket may still arrive a moment later.
    let dead_at = Timestamp::now() + jiff::SignedDuration::from_millis(500);
    println!(
        "killed leader {id_a} with {ready_now}/{COUNT} ready, {:.1}s after the first create",
        killed_at.duration_since(started).as_secs_f64()
    );
    ensure!(
        ready_now < COUNT,
        "all Objects were Ready before the kill: nothing was in flight"
    );

    wait_holder(&client, &ns, LEASE, &id_b, Duration::from_secs(20))
        .await
        .with_context(|| b.log_text())?;
    let took_over = Timestamp::now();
    eventually("all Objects Ready and Synced", Duration::from_secs(120), || {
        let count = ready_count();
        async move { Ok(count.await? == COUNT) }
    })
    .await
    .with_context(|| b.log_text())?;
    let all_ready = Timestamp::now();
    println!(
        "b took over {:.1}s after the kill; all {COUNT} Ready {:.1}s after the kill",
        took_over.duration_since(killed_at).as_secs_f64(),
        all_ready.duration_since(killed_at).as_secs_f64()
    );

    // Exactly one ConfigMap per Object, each with its own data: nothing duplicated or lost.
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), &ns);
    let managed: Vec<ConfigMap> = cms
        .list(&ListParams::default())
        .await?
        .items
        .into_iter()
        .filter(|c| c.name_any().starts_with("cm-"))
        .collect();
    ensure!(
        managed.len() == COUNT,
        "{} ConfigMaps for {COUNT} Objects",
        managed.len()
    );
    let indexes: BTreeSet<String> = managed
        .iter()
        .filter_map(|c| c.data.as_ref()?.get("index").cloned())
        .collect();
    ensure!(
        indexes.len() == COUNT,
        "{} distinct ConfigMap contents",
        indexes.len()
    );

    // The audit log: writes to this test's Objects, ConfigMaps, usages and events, by replica.
    let ua_a = format!("provider-kubernetes/{} ({id_a})", env!("CARGO_PKG_VERSION"));
    let ua_b = format!("provider-kubernetes/{} ({id_b})", env!("CARGO_PKG_VERSION"));
    let events = c.audit().read()?.events;
    let writes: Vec<&testenv::AuditEvent> = events
        .iter()
        .filter(|e| e.is_write() && e.received >= started && e.namespace == ns && e.resource != "leases")
        .filter(|e| e.user_agent.starts_with("provider-kubernetes/"))
        .collect();
    let summary = assert_failover_writes(
        &writes,
        "provider-kubernetes/",
        (&ua_a, &ua_b),
        killed_at,
        dead_at,
    )?;
    println!("{summary}");

    // Clean up through the provider: the ConfigMaps go with their Objects.
    objects
        .delete_collection(&DeleteParams::default(), &ListParams::default())
        .await?;
    eventually("all Objects deleted", Duration::from_secs(90), || {
        let objects = objects.clone();
        async move { Ok(objects.list(&ListParams::default()).await?.items.is_empty()) }
    })
    .await
    .with_context(|| b.log_text())?;
    drop(b);
    Ok(())
}
