//! The faults only a node gives, on provider-nop: one function per fault.

use std::{
    process::Command,
    time::{Duration, Instant},
};

use anyhow::{Context, ensure};
use kube::api::{Patch, PatchParams, PostParams};
use testenv::workload;

use super::{
    HANDOVER_TIMEOUT, HELD_BEFORE_FREEZE, NAMESPACE, READY_TIMEOUT, cutoff, leader_pod, provider_nop_pods,
};

/// What the node-only faults showed.
pub(super) struct Faults {
    pub(super) lines: Vec<(String, String)>,
    /// The frozen leader's refused late writes.
    pub(super) expected_refusals: usize,
    /// Paragraphs after the table.
    pub(super) notes: Vec<String>,
}

/// The container killed under the kubelet, an eviction against the PodDisruptionBudget, a frozen leader
/// container (the cgroup freezer, through containerd) while NopResources change, and the leader cut off
/// from the apiserver; each once provider-nop is back to 2 Ready Pods.
pub(super) async fn run(
    bed: &mut testenv::NodeTestBed,
    client: &kube::Client,
    cluster: &testenv::Cluster,
    lease: &str,
) -> anyhow::Result<Faults> {
    let nop = vec!["provider-nop".to_string()];
    let mut lines = vec![kill_leader_container(bed, client, lease).await?];
    lines.push(evict_against_the_budget(client, cluster, lease).await?);
    let (frozen, refused) = freeze_with_writes_in_flight(bed, client, cluster, lease).await?;
    lines.push(frozen);
    // 4. The leader cut off from the apiserver past its renew deadline: it steps down and stays a
    // healthy standby (not restarted); restored, it rejoins as one.
    let cut = cutoff::run(bed, client, cluster, lease).await?;
    lines.push(cut.row());
    let notes = vec![cutoff_note(&cut)];
    workload::wait_deployments(client, NAMESPACE, &nop, 2, READY_TIMEOUT).await?;
    Ok(Faults {
        lines,
        expected_refusals: refused,
        notes,
    })
}

/// The leader's container killed with SIGKILL through containerd: the kubelet restarts it in the same Pod.
async fn kill_leader_container(
    bed: &mut testenv::NodeTestBed,
    client: &kube::Client,
    lease: &str,
) -> anyhow::Result<(String, String)> {
    let nop = vec!["provider-nop".to_string()];
    // 1. SIGKILL of the leader's container: the kubelet restarts it in the same Pod.
    let leader = leader_pod(client, lease).await?;
    let name = workload::name(&leader).to_string();
    let id = workload::container_id(&leader).context("the leader's container has no ID")?;
    let start = Instant::now();
    bed.node().ctr(&["tasks", "kill", "--signal", "SIGKILL", &id])?;
    let pods = loop {
        let pods = workload::wait_deployments(client, NAMESPACE, &nop, 2, READY_TIMEOUT).await?;
        if pods["provider-nop"]
            .iter()
            .any(|p| workload::name(p) == name && workload::restarts(p) >= 1)
        {
            break pods;
        }
        ensure!(start.elapsed() < READY_TIMEOUT, "{name} was not restarted");
        tokio::time::sleep(Duration::from_millis(250)).await;
    };
    let restarted = start.elapsed();
    let leaders = workload::wait_one_leader_each(client, NAMESPACE, &pods, HANDOVER_TIMEOUT).await?;
    let after = leaders
        .get("provider-nop")
        .map(|(_, h)| h.clone())
        .unwrap_or_default();
    Ok((
        "leader's container killed (SIGKILL through containerd)".to_string(),
        format!(
            "the kubelet restarted it in the same Pod (restarts 1), Ready again after {:.1} s; {} leads {:.1} s after the kill",
            restarted.as_secs_f64(),
            if workload::holder_pod(&after) == name {
                "the restarted container (same Pod, same identity)"
            } else {
                "the other Pod"
            },
            start.elapsed().as_secs_f64()
        ),
    ))
}

/// Eviction of both provider-nop Pods: the budget (maxUnavailable 1) lets one go, not the second.
async fn evict_against_the_budget(
    client: &kube::Client,
    cluster: &testenv::Cluster,
    lease: &str,
) -> anyhow::Result<(String, String)> {
    let nop = vec!["provider-nop".to_string()];
    // 2. Eviction: the budget (maxUnavailable 1) lets one Pod go, not the second.
    let leader = leader_pod(client, lease).await?;
    let standby = provider_nop_pods(client)
        .await?
        .into_iter()
        .find(|p| workload::name(p) != workload::name(&leader))
        .context("no standby Pod")?;
    let evict = |pod: &str| -> anyhow::Result<std::process::Output> {
        // Through kubectl, which does not retry a 429 (kube's client backs off and retries it).
        let body = serde_json::json!({
            "apiVersion": "policy/v1",
            "kind": "Eviction",
            "metadata": { "name": pod, "namespace": NAMESPACE },
        });
        let file = std::env::temp_dir().join(format!("eviction-{pod}.json"));
        std::fs::write(&file, body.to_string())?;
        let out = Command::new("kubectl")
            .arg("--kubeconfig")
            .arg(cluster.kubeconfig())
            .args([
                "create",
                "--raw",
                &format!("/api/v1/namespaces/{NAMESPACE}/pods/{pod}/eviction"),
                "-f",
            ])
            .arg(&file)
            .output()?;
        let _ = std::fs::remove_file(&file);
        Ok(out)
    };
    let first = evict(workload::name(&standby))?;
    ensure!(
        first.status.success(),
        "evicting the standby Pod failed: {}",
        String::from_utf8_lossy(&first.stderr)
    );
    let second = evict(workload::name(&leader))?;
    let message = String::from_utf8_lossy(&second.stderr).into_owned();
    ensure!(
        !second.status.success() && message.contains("disruption budget"),
        "the PodDisruptionBudget let both provider-nop Pods be evicted ({message})"
    );
    let line = (
        "eviction of both Pods against the PodDisruptionBudget (maxUnavailable 1)".to_string(),
        "the standby's eviction admitted; the leader's refused (429, \"would violate the pod's disruption budget\")"
            .to_string(),
    );
    workload::wait_deployments(client, NAMESPACE, &nop, 2, READY_TIMEOUT).await?;
    Ok(line)
}

/// The leader's container frozen (cgroup freezer, through containerd) while NopResources change, with
/// its requests in flight held and released after the takeover: the line, and how many late writes the
/// fence refused.
async fn freeze_with_writes_in_flight(
    bed: &mut testenv::NodeTestBed,
    client: &kube::Client,
    cluster: &testenv::Cluster,
    lease: &str,
) -> anyhow::Result<((String, String), usize)> {
    let nop = vec!["provider-nop".to_string()];
    // 3. The leader's container frozen (cgroup freezer) while NopResources change, with requests in
    // flight: from 6 s before the freeze, the data its Pod sends over TCP is held in a queue in the Pod's
    // network namespace (`testenv::Hold`), as the fault schedule's relay delays a leader's requests and
    // holds them at its SIGSTOP. The other Pod takes over when the Lease expires; then the queue is
    // released, and the writes the leader sent in its last moment reach the apiserver late: the fence
    // must refuse every one. Then the container is thawed.
    let nops = workload::nop_api(client);
    for i in 0..4 {
        let r = workload::ready_nop(&format!("freeze-{i}"));
        nops.create(&PostParams::default(), &r).await?;
    }
    let leader = leader_pod(client, lease).await?;
    let name = workload::name(&leader).to_string();
    let id = workload::container_id(&leader).context("the leader's container has no ID")?;
    let pid = bed.node().task_pid(&id)?;
    let restarts_before = workload::restarts(&leader);
    let patcher = {
        let nops = nops.clone();
        tokio::spawn(async move {
            for n in 1..=u64::MAX {
                let patch =
                    serde_json::json!({ "spec": { "forProvider": { "fields": { "integerField": n } } } });
                let name = format!("freeze-{}", n % 4);
                if nops
                    .patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
                    .await
                    .is_err()
                {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        })
    };
    // The leader reconciles the changes; then its requests are held while it keeps writing.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let sink = std::net::SocketAddrV4::new(bed.network().node_ip, bed.control_plane().state().apiserver_port);
    let mut hold = testenv::Hold::install(pid, sink)?;
    let held_at = jiff::Timestamp::now();
    tokio::time::sleep(HELD_BEFORE_FREEZE).await;
    eprintln!("[node] {name}'s requests held; freezing it: {}", hold.stats()?);
    bed.node().ctr(&["tasks", "pause", &id])?;
    let frozen = Instant::now();
    let (new_holder, took) =
        workload::wait_holder_other_than(client, NAMESPACE, lease, &name, HANDOVER_TIMEOUT * 2).await?;
    let taken_over = jiff::Timestamp::now();
    patcher.abort();
    eprintln!("[node] the frozen leader's held queue: {}", hold.stats()?);
    hold.release()?;
    let released = Instant::now();
    let released_at = jiff::Timestamp::now();
    // The frozen leader's writes (its pod-bound token, or its identity in the user agent) received after
    // the takeover: its NopResource writes (which the fence judges) and its Lease renews (which the
    // fence leaves to the Lease's own optimistic concurrency). Events, which the fence lets through by
    // design, are counted apart.
    let by_leader = |e: &testenv::AuditEvent| {
        e.pod_name.as_deref() == Some(name.as_str()) || e.agent_identity() == Some(name.as_str())
    };
    let late = |events: &[testenv::AuditEvent]| -> Vec<testenv::AuditEvent> {
        events
            .iter()
            .filter(|e| e.is_write() && by_leader(e) && e.resource != "events" && e.received > taken_over)
            .cloned()
            .collect()
    };
    // The held requests arrive at once; wait until none has come for 10 s after the first, or 30 s.
    let mut late_writes = Vec::new();
    let mut last_new = Instant::now();
    while released.elapsed() < Duration::from_secs(30) {
        let now = late(&cluster.audit().read()?.events);
        if now.len() > late_writes.len() {
            last_new = Instant::now();
        }
        late_writes = now;
        if !late_writes.is_empty() && last_new.elapsed() > Duration::from_secs(10) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    hold.remove()?;
    // The kubelet may have killed the frozen container already (its liveness probe failed while frozen).
    let thawed = bed.node().ctr(&["tasks", "resume", &id]).is_ok();
    let frozen_for = frozen.elapsed();
    // What the thawed container still sends before the kubelet's pending kill.
    tokio::time::sleep(Duration::from_secs(10)).await;
    late_writes = late(&cluster.audit().read()?.events);
    // While delayed, none of the leader's requests should reach the apiserver before the takeover:
    // counted, to show the delay held them.
    let in_window = cluster
        .audit()
        .read()?
        .events
        .iter()
        .filter(|e| e.is_write() && by_leader(e) && e.received > held_at && e.received <= taken_over)
        .count();
    // When the first held write arrived, after the release.
    let arrived_after = late_writes
        .iter()
        .map(|e| e.received)
        .min()
        .map(|t| (t.as_millisecond() - released_at.as_millisecond()) as f64 / 1e3)
        .unwrap_or(f64::NAN);
    let late_events = cluster
        .audit()
        .read()?
        .events
        .iter()
        .filter(|e| e.is_write() && by_leader(e) && e.resource == "events" && e.received > taken_over)
        .count();
    // Per resource and answer, e.g. "nopresources 403 ×3".
    let mut kinds: std::collections::BTreeMap<(String, i32), usize> = Default::default();
    for e in &late_writes {
        *kinds.entry((e.resource.clone(), e.code)).or_default() += 1;
    }
    let kinds = kinds
        .iter()
        .map(|((r, c), n)| format!("{r} {c} ×{n}"))
        .collect::<Vec<_>>()
        .join(", ");
    let by_code = |code: i32| late_writes.iter().filter(|e| e.code == code).count();
    let (forbidden, conflict, gone) = (by_code(403), by_code(409), by_code(404));
    let admitted: Vec<String> = late_writes
        .iter()
        .filter(|e| e.code < 300)
        .map(|e| {
            format!(
                "{} {}/{} {} -> {}",
                e.verb, e.resource, e.subresource, e.name, e.code
            )
        })
        .collect();
    ensure!(
        admitted.is_empty(),
        "the frozen leader's late writes got through: {admitted:?}"
    );
    let pods = workload::wait_deployments(client, NAMESPACE, &nop, 2, READY_TIMEOUT).await?;
    let frozen_restarts = pods["provider-nop"]
        .iter()
        .find(|p| workload::name(p) == name)
        .map(workload::restarts)
        .unwrap_or(0)
        - restarts_before;
    let other = late_writes.len() - forbidden - conflict - gone;
    let line = (
        "leader's container frozen (cgroup freezer through containerd) while NopResources change, \
         the data its Pod sends over TCP held in a queue from 6 s before the freeze until the takeover"
            .to_string(),
        format!(
            "{new_holder} took over {:.1} s after the freeze (the Lease lasts 60 s); {in_window} writes of the \
             frozen leader reached the apiserver between the hold's start and the takeover; the held \
             requests, released at the takeover, began to arrive {:.1} s later: {} late writes of \
             the frozen leader ({kinds}): {forbidden} refused by the fence (403), {conflict} conflicts (409), \
             {gone} not found (404){}, 0 admitted (besides {late_events} Event(s), which the fence lets \
             through by design); {} after {:.1} s; the kubelet restarted the frozen container \
             {frozen_restarts} time(s) (its liveness probe times out while frozen). provider-nop reconciles \
             one resource at a time (max concurrent reconciles 1): after its first held write it waits for \
             that write's answer, so at most one NopResource write is in flight when it is frozen, besides \
             its Lease renews",
            took.as_secs_f64(),
            arrived_after,
            late_writes.len(),
            if other > 0 {
                format!(", {other} other failures")
            } else {
                String::new()
            },
            if thawed {
                "thawed"
            } else {
                "the kubelet had killed it before the thaw"
            },
            frozen_for.as_secs_f64(),
        ),
    );
    Ok((line, forbidden))
}

/// How the cut-off leader's fate differs from client-go's and controller-runtime's.
fn cutoff_note(c: &cutoff::Cutoff) -> String {
    format!(
        "The leader that cannot renew, against client-go: client-go's `leaderelection` stops leading at its \
         renew deadline and calls `OnStoppedLeading`, where kube-controller-manager, kube-scheduler and \
         controller-runtime's manager (`leader election lost`) exit the process, so the kubelet restarts \
         the container (a restart, and a cold start with new caches, for every lost lease); their \
         `HealthzAdaptor` fails `/healthz` only while the process still believes it leads with a renewal \
         older than the lease + tolerance. Ours (`--on-lost-leadership standby`, the default) stops only its \
         leader work at the renew deadline and goes back to standby in the same process, with its caches \
         and its watch of the Lease; `/healthz` (crates/manager/src/run/health.rs) fails only while a replica \
         *leads* with its last renewal sent more than lease + tolerance ago, which a replica that stepped \
         down never does. Measured here: {} stepped down {:.1} s after its last received renewal (renew \
         deadline {:.0} s), {} took over {:.1} s after it (lease {:.0} s), and in {:.0} s cut off, past \
         lease + tolerance + {} probe periods, the kubelet restarted it {} time(s); once restored it {}.",
        c.pod,
        c.step_down_after_renew_s,
        c.renew_deadline_s,
        c.new_holder,
        c.takeover_after_renew_s,
        c.lease_s,
        c.cut_for_s,
        c.probe.1,
        c.restarts_after,
        if c.rejoined_as_standby {
            "was Ready as a standby"
        } else {
            "did not rejoin as a standby"
        }
    )
}
