//! `cargo xtask node-bench`: the figures of deploy/ on a real node, written to docs/node.md.
//!
//! It builds the images (debug builds, as the node test does) and the pause image, starts a test bed
//! with a node (`testenv::NodeTestBed`), imports the images, applies deploy/ and deploy/fencing/
//! through an overlay that only names the imported images, and waits for 2 Ready Pods per Deployment.
//! Then it deletes the provider-nop leader's Pod `--deletions` times (each time once the Deployment is
//! back to 2 Ready Pods) and measures how long the Lease takes to reach the other Pod, and reads each
//! Pod's memory from the kubelet's stats.

use std::{
    fmt::Write as _,
    path::{Path, PathBuf},
    process::Command,
    time::{Duration, Instant},
};

use anyhow::{Context, bail, ensure};
use k8s_openapi::api::{apps::v1::Deployment, core::v1::Pod};
use kube::{
    Api,
    api::{ListParams, Patch, PatchParams, PostParams},
};
use testenv::workload;

use crate::{image, target_dir};

const NAMESPACE: &str = "crossplane-system";
const READY_TIMEOUT: Duration = Duration::from_secs(300);
const HANDOVER_TIMEOUT: Duration = Duration::from_secs(60);

/// The overlay: deploy/ and deploy/fencing/, each image named by the reference it is imported under.
pub fn write_overlay(dir: &Path) -> anyhow::Result<PathBuf> {
    let mut images = Vec::new();
    for b in image::BINARIES {
        let full = image::full_reference(b.name);
        let (name, tag) = full.rsplit_once(':').context("image reference without a tag")?;
        images.push(workload::ImageOverride {
            name: format!("{}/{}", image::REPOSITORY, b.name),
            new_name: name.to_owned(),
            new_tag: tag.to_owned(),
        });
    }
    Ok(workload::write_overlay(dir, &images)?)
}

/// Runs the benchmark and writes docs/node.md.
pub fn run(deletions: usize) -> anyhow::Result<i32> {
    if deletions == 0 {
        eprintln!("xtask: --deletions must be at least 1");
        return Ok(2);
    }
    crate::prereq::ensure()?;
    let harness = crate::harness()?;
    let out = target_dir().join("images").join("node");
    let archives = image::run(
        &[],
        &image::Options {
            debug: true,
            out: Some(out.clone()),
            compression: Some(1),
            pause: true,
            next: false,
            registry: Default::default(),
        },
    )?;
    let pause = out.join("pause.oci.tar");
    let dir = target_dir().join("testbed").join("node-bench");
    if dir.exists() {
        std::fs::remove_dir_all(&dir).with_context(|| format!("removing {}", dir.display()))?;
    }
    let rt = crate::runtime()?;
    rt.block_on(async {
        let start = Instant::now();
        let mut bed = testenv::NodeTestBed::start(&dir, &harness, &pause)
            .await
            .context("starting a test bed with a node")?;
        let ready = start.elapsed();
        eprintln!("[node] node Ready in {:.1}s", ready.as_secs_f64());
        let result = measure(&mut bed, &archives, &dir, deletions, ready).await;
        bed.stop().context("stopping the node test bed")?;
        result
    })?;
    Ok(0)
}

async fn measure(
    bed: &mut testenv::NodeTestBed,
    archives: &[PathBuf],
    dir: &Path,
    deletions: usize,
    node_ready: Duration,
) -> anyhow::Result<()> {
    let cluster = bed.cluster().clone();
    let start = Instant::now();
    for a in archives.iter().filter(|a| !a.ends_with("pause.oci.tar")) {
        bed.node().import(a)?;
    }
    let imported = start.elapsed();
    let overlay = write_overlay(&dir.join("overlay"))?;
    let status = Command::new("kubectl")
        .arg("--kubeconfig")
        .arg(cluster.kubeconfig())
        .args(["apply", "--server-side", "-k"])
        .arg(&overlay)
        .status()
        .context("running kubectl")?;
    ensure!(status.success(), "kubectl apply -k {} failed", overlay.display());
    let applied = Instant::now();
    let client = cluster.client().await?;
    let names: Vec<String> = Api::<Deployment>::namespaced(client.clone(), NAMESPACE)
        .list(&ListParams::default())
        .await?
        .items
        .into_iter()
        .filter_map(|d| d.metadata.name)
        .collect();
    let pods = workload::wait_deployments(&client, NAMESPACE, &names, 2, READY_TIMEOUT).await?;
    let all_ready = applied.elapsed();
    eprintln!(
        "[node] all Deployments Ready {:.1}s after apply",
        all_ready.as_secs_f64()
    );
    let leaders = workload::wait_one_leader_each(&client, NAMESPACE, &pods, HANDOVER_TIMEOUT).await?;
    let (lease, _) = leaders
        .get("provider-nop")
        .context("no Lease held by a provider-nop Pod")?
        .clone();

    let mut handovers = Vec::new();
    let mut to_standby = 0;
    for i in 0..deletions {
        let before: Vec<String> = provider_nop_pods(&client)
            .await?
            .iter()
            .map(|p| workload::name(p).to_string())
            .collect();
        let h = workload::delete_leader(&client, NAMESPACE, &lease, HANDOVER_TIMEOUT).await?;
        if before.iter().any(|p| p == workload::holder_pod(&h.new_holder)) {
            to_standby += 1;
        }
        eprintln!(
            "[node] {}/{deletions}: {} deleted, {} leads after {:.0} ms",
            i + 1,
            h.deleted,
            h.new_holder,
            h.elapsed.as_secs_f64() * 1e3
        );
        handovers.push(h.elapsed.as_secs_f64() * 1e3);
        workload::wait_deployments(
            &client,
            NAMESPACE,
            &["provider-nop".to_string()],
            2,
            READY_TIMEOUT,
        )
        .await?;
    }
    let faults = node_faults(bed, &client, &cluster, &lease).await?;
    let pods = workload::wait_deployments(&client, NAMESPACE, &names, 2, READY_TIMEOUT).await?;
    // The kubelet's stats of a new Pod appear after its first housekeeping.
    let memory = {
        let start = Instant::now();
        loop {
            let m = workload::pod_memory(&client, testenv::node::NODE_NAME).await?;
            let all = pods
                .values()
                .flatten()
                .all(|p| m.get(workload::name(p)).is_some_and(|(ws, _)| *ws > 0));
            if all {
                break m;
            }
            if start.elapsed() > Duration::from_secs(60) {
                bail!("the kubelet's stats lack some Pods after 60s: {m:?}");
            }
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
    };
    let prefix = format!("system:serviceaccount:{NAMESPACE}:");
    let refused = cluster
        .audit()
        .read()?
        .events
        .iter()
        .filter(|e| e.user.starts_with(&prefix) && e.code == 403)
        .count();

    let mut sorted = handovers.clone();
    sorted.sort_by(f64::total_cmp);
    let mut md = String::new();
    writeln!(md, "# deploy/ on a real node")?;
    writeln!(md)?;
    writeln!(
        md,
        "Written by `cargo xtask node-bench --deletions {deletions}` on {} ({} CPUs). Debug builds of the \
         images, imported into the node's containerd; kubelet and kube-scheduler {} from the harness.",
        jiff::Timestamp::now().strftime("%Y-%m-%d %H:%M UTC"),
        std::thread::available_parallelism().map(|n| n.get()).unwrap_or(0),
        testenv::KUBERNETES_VERSION,
    )?;
    writeln!(md)?;
    writeln!(md, "| Step | Seconds |")?;
    writeln!(md, "|---|---:|")?;
    writeln!(
        md,
        "| control plane + containerd + kubelet, to a Ready node | {:.1} |",
        node_ready.as_secs_f64()
    )?;
    writeln!(
        md,
        "| importing {} images | {:.1} |",
        archives.len() - 1,
        imported.as_secs_f64()
    )?;
    writeln!(
        md,
        "| `kubectl apply -k` to 2 Ready Pods per Deployment | {:.1} |",
        all_ready.as_secs_f64()
    )?;
    writeln!(md)?;
    writeln!(md, "## Pods (after the deletions and the faults)")?;
    writeln!(md)?;
    writeln!(
        md,
        "| Deployment | Pod | Restarts | RSS (MiB) | Working set (MiB) |"
    )?;
    writeln!(md, "|---|---|---:|---:|---:|")?;
    let mib = |b: u64| b as f64 / (1024.0 * 1024.0);
    for (app, ps) in &pods {
        for p in ps {
            let (ws, rss) = memory.get(workload::name(p)).copied().unwrap_or((0, 0));
            writeln!(
                md,
                "| {app} | {} | {} | {:.1} | {:.1} |",
                workload::name(p),
                workload::restarts(p),
                mib(rss),
                mib(ws)
            )?;
        }
    }
    writeln!(md)?;
    writeln!(md, "## Handover when the leader's Pod is deleted")?;
    writeln!(md)?;
    writeln!(
        md,
        "`kubectl delete pod` of provider-nop's leader (the kubelet sends SIGTERM; the replica releases \
         its Lease), timed from the delete request to the first read of the Lease naming another Pod (the standby, or the \
         replacement when it wins the race for the released Lease), \
         {deletions} times, each once the Deployment was back to 2 Ready Pods."
    )?;
    writeln!(md)?;
    writeln!(md, "| Deletions | p50 (ms) | p99 (ms) | max (ms) |")?;
    writeln!(md, "|---:|---:|---:|---:|")?;
    writeln!(
        md,
        "| {deletions} | {:.0} | {:.0} | {:.0} |",
        crate::bench::stats::pct(&sorted, 50.0),
        crate::bench::stats::pct(&sorted, 99.0),
        sorted.last().copied().unwrap_or(f64::NAN)
    )?;
    writeln!(md)?;
    writeln!(
        md,
        "The standby took the Lease {to_standby} times; the replacement Pod, started before the standby's \
         next retry, {} times.",
        deletions - to_standby
    )?;
    writeln!(md)?;
    writeln!(md, "## Faults only a node gives (provider-nop)")?;
    writeln!(md)?;
    writeln!(md, "| Fault | What happened |")?;
    writeln!(md, "|---|---|")?;
    for (fault, outcome) in &faults.lines {
        writeln!(md, "| {fault} | {outcome} |")?;
    }
    writeln!(md)?;
    writeln!(
        md,
        "Fence refusals (403 for a crossplane-system ServiceAccount, from the audit log) over the whole \
         run: {refused}; late writes of the frozen leader among them: {}.",
        faults.expected_refusals
    )?;
    let path = testenv::harness::repo_root().join("docs").join("node.md");
    std::fs::write(&path, md).with_context(|| format!("writing {}", path.display()))?;
    eprintln!("[node] wrote {}", path.display());
    ensure!(
        refused == faults.expected_refusals,
        "the fence refused {refused} requests, {} of them the frozen leader's late writes",
        faults.expected_refusals
    );
    Ok(())
}

/// What the node-only faults showed.
struct Faults {
    lines: Vec<(String, String)>,
    /// The frozen leader's refused late writes.
    expected_refusals: usize,
}

async fn provider_nop_pods(client: &kube::Client) -> anyhow::Result<Vec<Pod>> {
    Ok(Api::<Pod>::namespaced(client.clone(), NAMESPACE)
        .list(&ListParams::default().labels("app.kubernetes.io/name=provider-nop"))
        .await?
        .items)
}

async fn leader_pod(client: &kube::Client, lease: &str) -> anyhow::Result<Pod> {
    let holders = workload::lease_holders(client, NAMESPACE).await?;
    let holder = holders.get(lease).cloned().unwrap_or_default();
    provider_nop_pods(client)
        .await?
        .into_iter()
        .find(|p| workload::name(p) == workload::holder_pod(&holder))
        .with_context(|| format!("no running Pod holds {lease} ({holder:?})"))
}

/// The container killed under the kubelet, an eviction against the PodDisruptionBudget, and a frozen
/// leader container (the cgroup freezer, through containerd) while NopResources change.
async fn node_faults(
    bed: &mut testenv::NodeTestBed,
    client: &kube::Client,
    cluster: &testenv::Cluster,
    lease: &str,
) -> anyhow::Result<Faults> {
    let nop = vec!["provider-nop".to_string()];
    let mut lines = Vec::new();

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
    lines.push((
        "leader's container killed (SIGKILL through containerd)".to_string(),
        format!(
            "the kubelet restarted it in the same Pod (restarts 1), Ready again after {:.1} s; {} leads {:.1} s after the kill",
            restarted.as_secs_f64(),
            if workload::holder_pod(&after) == name { "the restarted container (same Pod, same identity)" } else { "the other Pod" },
            start.elapsed().as_secs_f64()
        ),
    ));

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
    lines.push((
        "eviction of both Pods against the PodDisruptionBudget (maxUnavailable 1)".to_string(),
        "the standby's eviction admitted; the leader's refused (429, \"would violate the pod's disruption budget\")"
            .to_string(),
    ));
    workload::wait_deployments(client, NAMESPACE, &nop, 2, READY_TIMEOUT).await?;

    // 3. The leader's container frozen (cgroup freezer) while NopResources change; the other Pod takes
    // over; once thawed, every write the frozen leader still sends must be refused by the fence.
    let nops = workload::nop_api(client);
    for i in 0..4 {
        let r = workload::ready_nop(&format!("freeze-{i}"));
        nops.create(&PostParams::default(), &r).await?;
    }
    tokio::time::sleep(Duration::from_secs(2)).await;
    let leader = leader_pod(client, lease).await?;
    let name = workload::name(&leader).to_string();
    let id = workload::container_id(&leader).context("the leader's container has no ID")?;
    let restarts_before = workload::restarts(&leader);
    bed.node().ctr(&["tasks", "pause", &id])?;
    let frozen = Instant::now();
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
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        })
    };
    let (new_holder, took) =
        workload::wait_holder_other_than(client, NAMESPACE, lease, &name, HANDOVER_TIMEOUT).await?;
    let taken_over = jiff::Timestamp::now();
    tokio::time::sleep(Duration::from_secs(2)).await;
    bed.node().ctr(&["tasks", "resume", &id])?;
    let frozen_for = frozen.elapsed();
    // The thawed leader's late writes, seen in the audit log within 15 s of the thaw.
    let late = |events: &[testenv::AuditEvent]| -> Vec<testenv::AuditEvent> {
        events
            .iter()
            .filter(|e| {
                e.is_write()
                    && e.agent_identity() == Some(name.as_str())
                    && e.resource != "leases"
                    && e.resource != "events"
                    && e.received > taken_over
            })
            .cloned()
            .collect()
    };
    let thawed = Instant::now();
    let mut late_writes = Vec::new();
    while thawed.elapsed() < Duration::from_secs(15) {
        late_writes = late(&cluster.audit().read()?.events);
        if !late_writes.is_empty() && thawed.elapsed() > Duration::from_secs(5) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    patcher.abort();
    let refused = late_writes.iter().filter(|e| e.code == 403).count();
    ensure!(
        refused == late_writes.len(),
        "the fence let {} of the frozen leader's {} late writes through",
        late_writes.len() - refused,
        late_writes.len()
    );
    let pods = workload::wait_deployments(client, NAMESPACE, &nop, 2, READY_TIMEOUT).await?;
    let frozen_restarts = pods["provider-nop"]
        .iter()
        .find(|p| workload::name(p) == name)
        .map(workload::restarts)
        .unwrap_or(0)
        - restarts_before;
    lines.push((
        "leader's container frozen (cgroup freezer through containerd) while NopResources change".to_string(),
        format!(
            "{new_holder} took over {:.1} s after the freeze (the Lease lasts 60 s); thawed after {:.1} s; \
             the kubelet restarted the frozen container {frozen_restarts} time(s) (its liveness probe times out while frozen); \
             {} late writes of the frozen leader, {refused} refused by the fence",
            took.as_secs_f64(),
            frozen_for.as_secs_f64(),
            late_writes.len()
        ),
    ));
    Ok(Faults {
        lines,
        expected_refusals: refused,
    })
}
