//! The leader leaves on its own Pod's deletion (issue 24), on the real control plane, with
//! `configmap-counter` replicas as processes that are told their Pod by `POD_NAME` and `POD_NAMESPACE`.
//!
//! There is no kubelet here, so nothing sends SIGTERM: each replica's Pod is an unscheduled Pod object
//! with a finalizer, which keeps it, with its `deletionTimestamp`, as a kubelet's graceful deletion
//! would. What the tests show is that the deletion alone makes the leader stop its work and release the
//! Lease, that a standby ignores its own Pod's deletion, and that without the right to watch Pods the
//! replica behaves as before.
#![allow(clippy::unwrap_used)]

mod common;

use std::time::Duration;

use anyhow::{Context, Result, ensure};
use common::*;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::rbac::v1::{Role, RoleBinding};
use kube::api::{DeleteParams, Patch, PatchParams, PostParams};
use kube::{Api, Client};
use nix::sys::signal::Signal;
use testenv::Cluster;
use tokio::time::Instant;

const SEC: Duration = Duration::from_secs(1);
const HOLD: &str = "test.crossplane-rs.io/hold";
/// The leader's heartbeat ConfigMap, whose `beat` the leader raises every resync period.
const HEARTBEAT: &str = "configmap-count-heartbeat";

async fn setup(prefix: &str) -> Result<(Cluster, Client, String)> {
    let cluster = Cluster::shared()?;
    let client = cluster.client().await?;
    let ns = cluster.namespace(prefix).await?;
    Ok((cluster, client, ns))
}

/// A Pod object named `name` that stays Pending (no node) and is held by a finalizer once deleted.
async fn pod(client: &Client, ns: &str, name: &str) -> Result<()> {
    let pod: Pod = serde_json::from_value(serde_json::json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "finalizers": [HOLD]},
        "spec": {"containers": [{"name": "replica", "image": "example.invalid/replica:0"}]},
    }))?;
    Api::<Pod>::namespaced(client.clone(), ns)
        .create(&PostParams::default(), &pod)
        .await
        .with_context(|| format!("creating Pod {ns}/{name}"))?;
    Ok(())
}

/// Deletes a Pod (it stays, terminating, until [`release`]).
async fn delete(client: &Client, ns: &str, name: &str) -> Result<()> {
    Api::<Pod>::namespaced(client.clone(), ns)
        .delete(name, &DeleteParams::default())
        .await
        .with_context(|| format!("deleting Pod {ns}/{name}"))?;
    Ok(())
}

/// Removes the finalizer, so that the Pod object goes.
async fn release(client: &Client, ns: &str, name: &str) -> Result<()> {
    let patch = serde_json::json!({"metadata": {"finalizers": null}});
    Api::<Pod>::namespaced(client.clone(), ns)
        .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .with_context(|| format!("releasing Pod {ns}/{name}"))?;
    Ok(())
}

fn opts(cluster: &Cluster, ns: &str, identity: &str) -> Opts {
    let mut o = Opts::new(cluster.kubeconfig(), ns, &format!("{ns}-lease"), identity);
    o.env = vec![
        ("POD_NAME".into(), identity.into()),
        ("POD_NAMESPACE".into(), ns.into()),
    ];
    o
}

/// Deleting the leader's Pod hands over without any signal: the leader stops its work and releases the
/// Lease, a standby leads, and the old leader keeps running (no exited container for a kubelet to
/// restart) until SIGTERM, when it exits 0. A standby whose Pod is deleted keeps standing by.
#[tokio::test]
async fn the_leader_leaves_when_its_pod_is_deleted() -> Result<()> {
    let (cluster, client, ns) = setup("mgr-pod").await?;
    for name in ["pod-0", "pod-1", "pod-2"] {
        pod(&client, &ns, name).await?;
    }
    let mut replicas = vec![
        Replica::spawn(&opts(&cluster, &ns, "pod-0"))?,
        Replica::spawn(&opts(&cluster, &ns, "pod-1"))?,
    ];
    let refs: Vec<&Replica> = replicas.iter().collect();
    let first = wait_for_leader(&refs, 30 * SEC).await?;
    let first_id = replicas[first].identity.clone();
    let other = 1 - first;
    wait_config_map(&client, &ns, "configmap-count", "writer", 10 * SEC, |w| {
        w == first_id
    })
    .await?;

    // Delete the leader's Pod, and send no signal.
    let deleted = Instant::now();
    delete(&client, &ns, &first_id).await?;
    replicas[first]
        .wait_for("this replica's Pod is going away", 10 * SEC)
        .await?;
    let stopped = replicas[first]
        .wait_for("leader work stopped for shutdown", 10 * SEC)
        .await?;
    replicas[first]
        .wait_for("waiting for SIGTERM to exit", 10 * SEC)
        .await?;
    let started = replicas[other].wait_for("leader work started", 10 * SEC).await?;
    ensure!(
        stopped.at <= started.at,
        "the standby started before the leader had stopped"
    );
    let handover = started.at.saturating_duration_since(deleted);
    eprintln!("handover: the standby started leader work {handover:?} after the leader's Pod was deleted");
    ensure!(
        handover <= 5 * SEC,
        "the standby took {handover:?} after the deletion to lead"
    );
    let second_id = replicas[other].identity.clone();
    wait_config_map(&client, &ns, "configmap-count", "writer", 10 * SEC, |w| {
        w == second_id
    })
    .await?;
    ensure!(
        replicas[first].try_exit().is_none(),
        "the old leader exited before its signal: {}",
        replicas[first].dump()
    );

    // The kubelet's SIGTERM, late: it exits 0.
    replicas[first].signal(Signal::SIGTERM)?;
    let status = replicas[first].wait_exit(15 * SEC).await?;
    assert_eq!(status.code(), Some(0), "{}", replicas[first].dump());
    release(&client, &ns, &first_id).await?;

    // A standby whose Pod is deleted keeps standing by, and the leader keeps leading.
    replicas.push(Replica::spawn(&opts(&cluster, &ns, "pod-2"))?);
    delete(&client, &ns, "pod-2").await?;
    replicas[2]
        .wait_for("this replica's Pod is going away", 20 * SEC)
        .await?;
    // One more heartbeat after the standby saw its Pod go: the leader did not change.
    let marker = config_map_field(&client, &ns, HEARTBEAT, "beat").await?;
    wait_config_map(&client, &ns, HEARTBEAT, "beat", 10 * SEC, |c| {
        Some(c) != marker.as_deref()
    })
    .await?;
    ensure!(replicas[other].leads(), "the leader stopped leading");
    ensure!(!replicas[2].leads(), "the standby led");
    ensure!(
        replicas[2].find("leaving:").is_empty() && replicas[2].try_exit().is_none(),
        "the standby left on its Pod's deletion: {}",
        replicas[2].dump()
    );

    for i in [other, 2] {
        replicas[i].signal(Signal::SIGTERM)?;
        let status = replicas[i].wait_exit(15 * SEC).await?;
        assert_eq!(status.code(), Some(0), "{}", replicas[i].dump());
    }
    release(&client, &ns, "pod-2").await?;

    // The audit log: every write to the output was made inside its writer's term.
    let writes = audited_writes(&cluster, &ns, "configmap-count")?;
    ensure!(writes.len() >= 3, "too few writes: {writes:?}");
    let tolerance = jiff::SignedDuration::from_millis(200);
    for (who, at, code) in &writes {
        let r = replicas
            .iter()
            .find(|r| &r.identity == who)
            .with_context(|| format!("write by a stranger {who}"))?;
        let inside = r.work_intervals().iter().any(|(from, to)| {
            *at >= *from && to.is_none_or(|to| *at <= to.checked_add(tolerance).unwrap_or(to))
        });
        ensure!(
            inside,
            "{who} wrote at {at} (code {code}) outside its terms {:?}",
            r.work_intervals()
        );
    }
    Ok(())
}

/// Without the right to watch Pods, a replica says so once and works as before: it leads, and its
/// Pod's deletion changes nothing (it leaves on SIGTERM).
#[tokio::test]
async fn without_the_right_to_watch_pods_it_leaves_on_sigterm_only() -> Result<()> {
    let (cluster, client, ns) = setup("mgr-pod-rbac").await?;
    pod(&client, &ns, "pod-r").await?;
    let role: Role = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "counter"},
        "rules": [
            {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["*"]},
            {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["*"]},
            {"apiGroups": ["", "events.k8s.io"], "resources": ["events"], "verbs": ["create", "patch"]},
        ],
    }))?;
    Api::<Role>::namespaced(client.clone(), &ns)
        .create(&PostParams::default(), &role)
        .await?;
    let binding: RoleBinding = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "counter"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "counter"},
        "subjects": [{"kind": "ServiceAccount", "name": "counter", "namespace": ns}],
    }))?;
    Api::<RoleBinding>::namespaced(client.clone(), &ns)
        .create(&PostParams::default(), &binding)
        .await?;
    let kubeconfig = cluster.service_account_kubeconfig(&ns, "counter").await?;

    let mut o = opts(&cluster, &ns, "pod-r");
    o.kubeconfig = kubeconfig;
    let mut replica = Replica::spawn(&o)?;
    replica
        .wait_for("cannot watch this replica's own Pod (forbidden)", 30 * SEC)
        .await?;
    wait_for_leader(&[&replica], 30 * SEC).await?;
    wait_config_map(&client, &ns, "configmap-count", "writer", 10 * SEC, |w| {
        w == "pod-r"
    })
    .await?;

    delete(&client, &ns, "pod-r").await?;
    let marker = config_map_field(&client, &ns, HEARTBEAT, "beat").await?;
    wait_config_map(&client, &ns, HEARTBEAT, "beat", 10 * SEC, |c| {
        Some(c) != marker.as_deref()
    })
    .await?;
    ensure!(replica.leads(), "it stopped leading without a signal");

    let t = Instant::now();
    replica.signal(Signal::SIGTERM)?;
    let status = replica.wait_exit(15 * SEC).await?;
    assert_eq!(status.code(), Some(0), "{}", replica.dump());
    replica.wait_for("leader work stopped for shutdown", SEC).await?;
    eprintln!("exited {:?} after SIGTERM", t.elapsed());
    release(&client, &ns, "pod-r").await?;
    Ok(())
}

/// What the watch of its own Pod costs a replica while idle, from the audit log: its Pod requests
/// (by the identity in its user agent) at start, and then over a 20 s idle window, beside its Lease
/// requests in the same window for scale. The watch is one list and one long-lived watch (which the
/// audit log records only when it ends, so the window sees no request of it): nothing more while idle.
#[tokio::test]
async fn the_watch_of_its_own_pod_costs_nothing_while_idle() -> Result<()> {
    const WINDOW: Duration = Duration::from_secs(20);
    let (cluster, client, ns) = setup("mgr-pod-idle").await?;
    pod(&client, &ns, "pod-i").await?;
    let mut replica = Replica::spawn(&opts(&cluster, &ns, "pod-i"))?;
    wait_for_leader(&[&replica], 30 * SEC).await?;
    // The watch is up once the replica has said whose Pod it follows, or once a heartbeat has passed.
    let marker = config_map_field(&client, &ns, HEARTBEAT, "beat").await?;
    wait_config_map(&client, &ns, HEARTBEAT, "beat", 10 * SEC, |c| {
        Some(c) != marker.as_deref()
    })
    .await?;
    let from = jiff::Timestamp::now();
    // A measurement window, not a wait for an event: idle requests are counted over a fixed time.
    tokio::time::sleep(WINDOW).await;
    let to = jiff::Timestamp::now();
    let events = cluster.audit().read()?.events;
    let mine: Vec<&testenv::AuditEvent> = events
        .iter()
        .filter(|e| e.agent_identity() == Some("pod-i") && e.namespace == ns)
        .collect();
    let pods = |in_window: bool| {
        mine.iter()
            .filter(|e| e.resource == "pods")
            .filter(|e| (e.received >= from && e.received <= to) == in_window)
            .map(|e| e.verb.clone())
            .collect::<Vec<_>>()
    };
    let (at_start, idle) = (pods(false), pods(true));
    let leases = mine
        .iter()
        .filter(|e| e.resource == "leases" && e.received >= from && e.received <= to)
        .count();
    eprintln!(
        "own-Pod watch: {} request(s) before the window ({at_start:?}), {} in {}s idle ({idle:?}); \
         Lease requests in the same window: {leases}",
        at_start.len(),
        idle.len(),
        WINDOW.as_secs()
    );
    ensure!(
        at_start.iter().any(|v| v == "list" || v == "watch"),
        "the replica never listed or watched its Pod: {at_start:?}"
    );
    ensure!(
        leases > 0,
        "no Lease request in the window: the audit log did not see the replica"
    );
    ensure!(
        idle.is_empty(),
        "the watch of its own Pod made requests while idle: {idle:?}"
    );
    replica.signal(Signal::SIGTERM)?;
    replica.wait_exit(15 * SEC).await?;
    release(&client, &ns, "pod-i").await?;
    Ok(())
}
