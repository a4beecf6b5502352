//! provider-nop as two replicas (processes) sharing one Lease: issue 5's "must show" 4. Only the leader
//! writes (checked in the apiserver's audit log); killing the leader mid-work loses nothing.

mod common;

use std::time::Duration;

use anyhow::{Context, Result, ensure};
use common::{ready_and_synced, user_agent};
use jiff::Timestamp;
use k8s_openapi::api::core::v1::Secret;
use kube::api::{DeleteParams, ListParams, PostParams};
use kube::{Api, CustomResourceExt};
use provider_nop::types::NopResource;
use testenv::log_dir;
use testenv::support::{
    Process, assert_failover_writes, cluster, eventually, fast_lease_args, install_crds, replica_args,
    wait_holder,
};

const BIN: &str = env!("CARGO_BIN_EXE_provider-nop");
const LEASE: &str = "crossplane-leader-election-provider-nop";
const COUNT: usize = 200;

fn replica(ns: &str, name: &str) -> Result<Process> {
    let c = cluster();
    let identity = format!("{ns}-{name}");
    let mut args = replica_args(&c, ns, LEASE, &identity);
    args.extend(["--poll", "30s", "--max-reconcile-rate", "50"].map(String::from));
    args.extend(fast_lease_args());
    Ok(Process::start(BIN, &log_dir!("nop-ha"), &identity, &args)?)
}

#[tokio::test]
async fn only_the_leader_reconciles_and_failover_finishes_the_work() -> Result<()> {
    let c = cluster();
    let client = c.client().await?;
    install_crds(&client, &[NopResource::crd()]).await?;
    let ns = c.namespace("nop-ha").await?;

    let mut a = replica(&ns, "a")?;
    let id_a = a.identity.clone();
    wait_holder(&client, &ns, LEASE, &id_a, Duration::from_secs(20))
        .await
        .with_context(|| a.log_text())?;
    let b = replica(&ns, "b")?;
    let id_b = b.identity.clone();
    tokio::time::sleep(Duration::from_secs(2)).await;

    // 200 resources, each Ready after 4 s and each with a connection secret.
    let api: Api<NopResource> = Api::all(client.clone());
    let started = Timestamp::now();
    for i in 0..COUNT {
        let r = serde_json::json!({
            "apiVersion": "nop.crossplane.io/v1alpha1",
            "kind": "NopResource",
            "metadata": { "name": format!("{ns}-{i:03}"), "labels": { "test": ns } },
            "spec": {
                "forProvider": {
                    "conditionAfter": [{ "time": "4s", "conditionType": "Ready", "conditionStatus": "True" }],
                    "connectionDetails": [{ "name": "index", "value": i.to_string() }],
                },
                "writeConnectionSecretToRef": { "name": format!("conn-{i:03}"), "namespace": ns },
            },
        });
        api.create(&PostParams::default(), &serde_json::from_value(r)?)
            .await?;
    }
    let selector = ListParams::default().labels(&format!("test={ns}"));

    // Kill the leader while work is in flight.
    let ready_now = api
        .list(&selector)
        .await?
        .items
        .iter()
        .filter(|r| ready_and_synced(r))
        .count();
    let killed_at = Timestamp::now();
    a.kill();
    // Reaped: nothing more can be sent. Bytes already in the socket may still arrive a moment later.
    let dead_at = Timestamp::now() + jiff::SignedDuration::from_millis(500);
    println!(
        "killed leader {id_a} with {ready_now}/{COUNT} ready, {:.1}s after the first create",
        killed_at.duration_since(started).as_secs_f64()
    );
    // Mid-work: resources become Ready 4 s after the leader first reconciles them, so some must still
    // be pending for the kill to hand work over.
    ensure!(
        ready_now < COUNT,
        "the kill came after all the work was done ({ready_now}/{COUNT} Ready): it tests no handover"
    );

    wait_holder(&client, &ns, LEASE, &id_b, Duration::from_secs(20))
        .await
        .with_context(|| b.log_text())?;
    let took_over = Timestamp::now();
    eventually("all resources Ready and Synced", Duration::from_secs(120), || {
        let api = api.clone();
        let selector = selector.clone();
        async move {
            Ok(api
                .list(&selector)
                .await?
                .items
                .iter()
                .filter(|r| ready_and_synced(r))
                .count()
                == COUNT)
        }
    })
    .await
    .with_context(|| b.log_text())?;
    let all_ready = Timestamp::now();
    println!(
        "b took over {:.1}s after the kill; all {COUNT} Ready {:.1}s after the kill",
        took_over.duration_since(killed_at).as_secs_f64(),
        all_ready.duration_since(killed_at).as_secs_f64()
    );

    // One connection secret per resource, each with its own value: nothing duplicated or lost.
    let secrets: Api<Secret> = Api::namespaced(client.clone(), &ns);
    let conn: Vec<Secret> = secrets
        .list(&ListParams::default())
        .await?
        .items
        .into_iter()
        .filter(|s| s.type_.as_deref() == Some(apis::meta::SECRET_TYPE_CONNECTION))
        .collect();
    ensure!(conn.len() == COUNT, "{} connection secrets", conn.len());

    // The audit log: writes to this test's resources, secrets and events, by replica.
    let (ua_a, ua_b) = (user_agent(&id_a), user_agent(&id_b));
    let events = c.audit().read()?.events;
    let ours = |e: &&testenv::AuditEvent| {
        e.is_write()
            && e.received >= started
            && ((e.resource == "nopresources" && e.name.starts_with(&ns))
                || (e.namespace == ns && (e.resource == "secrets" || e.resource == "events")))
    };
    let writes: Vec<&testenv::AuditEvent> = events.iter().filter(ours).collect();
    let summary = assert_failover_writes(&writes, "provider-nop/", (&ua_a, &ua_b), killed_at, dead_at)?;
    println!("{summary}");

    // Clean up through the provider: the finalizers come off.
    api.delete_collection(&DeleteParams::default(), &selector).await?;
    eventually("all resources deleted", Duration::from_secs(60), || {
        let api = api.clone();
        let selector = selector.clone();
        async move { Ok(api.list(&selector).await?.items.is_empty()) }
    })
    .await?;
    drop(b);
    Ok(())
}
