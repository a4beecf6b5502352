//! `cargo xtask node-bench`: the figures of deploy/ on a real node, written to docs/node.md.
//!
//! It builds the images (debug builds, as the node test does) and the pause image, starts a test bed
//! with a node (`testenv::NodeTestBed`), imports the images, applies deploy/ and deploy/fencing/
//! through an overlay that only names the imported images, and waits for 2 Ready Pods per Deployment.
//! Then it deletes the provider-nop leader's Pod `--deletions` times (each time once the Deployment is
//! back to 2 Ready Pods) and measures how long the Lease takes to reach the other Pod; then does the same
//! to a Deployment of client-go's lease candidate under the same conditions ([`candidate`]), splits each
//! handover with the audit log at the old leader's release, runs the faults only a node gives (a
//! container killed, an eviction against the budget, a leader frozen with its requests in flight) and
//! reads each Pod's memory from the kubelet's stats.

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

use release::{image, target_dir};

mod candidate;
mod cutoff;
mod handover;
mod rolling;

use handover::{Deletion, Split};

const NAMESPACE: &str = "crossplane-system";
const READY_TIMEOUT: Duration = Duration::from_secs(300);
const HANDOVER_TIMEOUT: Duration = Duration::from_secs(60);
/// How long the leader's requests are held before it is frozen: it keeps writing meanwhile.
const HELD_BEFORE_FREEZE: Duration = Duration::from_secs(6);

/// The overlay: deploy/ and deploy/fencing/, each image named by the reference it is imported under.
pub fn write_overlay(dir: &Path) -> anyhow::Result<PathBuf> {
    overlay_with_next(dir, &[])
}

/// The overlay of [`write_overlay`], with the images in `next` at their second builds' tag
/// ([`image::NEXT_TAG`]).
pub fn overlay_with_next(dir: &Path, next: &[&str]) -> anyhow::Result<PathBuf> {
    let mut images = Vec::new();
    for b in image::BINARIES.iter() {
        let full = image::full_reference(b.name);
        let (name, tag) = full.rsplit_once(':').context("image reference without a tag")?;
        images.push(workload::ImageOverride {
            name: format!("{}/{}", image::REPOSITORY, b.name),
            new_name: name.to_owned(),
            new_tag: if next.contains(&b.name) {
                image::NEXT_TAG
            } else {
                tag
            }
            .to_owned(),
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
    release::prereq::ensure()?;
    let harness = release::harness()?;
    let command = format!("cargo xtask node-bench --deletions {deletions}");
    let provenance = release::provenance::for_artifact("node.json", &command)?;
    let out = target_dir().join("images").join("node");
    let options = image::Options {
        debug: true,
        out: Some(out.clone()),
        compression: Some(1),
        pause: true,
        next: true,
        registry: Default::default(),
    };
    let mut archives = image::run(&[], &options)?;
    // The core's second build too, for the rolling update of the core.
    archives.extend(image::pack_next(image::NEXT_CORE, &out, &options)?);
    let pause = out.join("pause.oci.tar");
    let candidate_image = candidate::build_image(&out)?;
    let dir = target_dir().join("testbed").join("node-bench");
    if dir.exists() {
        std::fs::remove_dir_all(&dir).with_context(|| format!("removing {}", dir.display()))?;
    }
    let rt = release::runtime()?;
    rt.block_on(async {
        // Cold: containerd's root empty, nothing imported. The images are imported, and the node stopped.
        let start = Instant::now();
        let mut bed = testenv::NodeTestBed::start(&dir, &harness, &pause)
            .await
            .context("starting a test bed with a node")?;
        let cold = start.elapsed();
        eprintln!("[node] node Ready in {:.1}s (cold)", cold.as_secs_f64());
        let start = Instant::now();
        let imported = archives
            .iter()
            .filter(|a| !a.ends_with("pause.oci.tar"))
            .chain([&candidate_image])
            .try_for_each(|a| bed.node().import(a))
            .map(|()| start.elapsed());
        bed.stop().context("stopping the node test bed")?;
        let imported = imported?;
        // Warm: a fresh control plane and kubelet, containerd's root kept with the images in it.
        keep_only_containerd_root(&dir)?;
        let start = Instant::now();
        let mut bed = testenv::NodeTestBed::start(&dir, &harness, &pause)
            .await
            .context("starting the test bed with a node again")?;
        let warm = start.elapsed();
        eprintln!("[node] node Ready in {:.1}s (warm)", warm.as_secs_f64());
        let times = StartTimes {
            cold,
            warm,
            imported,
            images: archives.len(),
        };
        let result = measure(&mut bed, &dir, deletions, &times, provenance).await;
        bed.stop().context("stopping the node test bed")?;
        result
    })?;
    Ok(0)
}

/// How long the node took to be Ready, cold and warm, and to import the images.
struct StartTimes {
    cold: Duration,
    warm: Duration,
    imported: Duration,
    /// How many images were imported (ours and client-go's candidate; the pause image at start).
    images: usize,
}

/// Empties the test bed directory `dir` but for containerd's root (its content store and snapshots).
fn keep_only_containerd_root(dir: &Path) -> anyhow::Result<()> {
    let root = dir.join("node").join("containerd").join("root");
    let kept = dir.with_extension("containerd-root");
    if kept.exists() {
        std::fs::remove_dir_all(&kept).with_context(|| format!("removing {}", kept.display()))?;
    }
    std::fs::rename(&root, &kept).with_context(|| format!("moving {} aside", root.display()))?;
    std::fs::remove_dir_all(dir).with_context(|| format!("removing {}", dir.display()))?;
    std::fs::create_dir_all(root.parent().unwrap_or(dir))?;
    std::fs::rename(&kept, &root).with_context(|| format!("moving {} back", root.display()))?;
    Ok(())
}

async fn measure(
    bed: &mut testenv::NodeTestBed,
    dir: &Path,
    deletions: usize,
    times: &StartTimes,
    provenance: serde_json::Value,
) -> anyhow::Result<()> {
    let cluster = bed.cluster().clone();
    let overlay = write_overlay(&dir.join("overlay"))?;
    testenv::kubectl::apply(cluster.kubeconfig(), &overlay)?;
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

    let ours = handover::delete_leaders(
        &client,
        cluster.kubeconfig(),
        NAMESPACE,
        "provider-nop",
        &lease,
        deletions,
    )
    .await?;

    // client-go's candidate under the same conditions, its leader's Pod deleted as often.
    candidate::apply(cluster.kubeconfig(), dir)?;
    workload::wait_deployments(
        &client,
        candidate::NAMESPACE,
        &[candidate::APP.to_string()],
        2,
        READY_TIMEOUT,
    )
    .await?;
    wait_held(&client, candidate::NAMESPACE, candidate::APP).await?;
    let theirs = handover::delete_leaders(
        &client,
        cluster.kubeconfig(),
        candidate::NAMESPACE,
        candidate::APP,
        candidate::APP,
        deletions,
    )
    .await?;
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
    // The seed's scenario: provider-nop and the core rolled from build A to build B while resources
    // change.
    let leases: std::collections::BTreeMap<String, String> =
        workload::wait_one_leader_each(&client, NAMESPACE, &pods, HANDOVER_TIMEOUT)
            .await?
            .into_iter()
            .map(|(app, (lease, _))| (app, lease))
            .collect();
    let rollout = rolling::run(&client, &cluster, dir, &leases).await?;
    let events = cluster.audit().read()?.events;
    let prefix = format!("system:serviceaccount:{NAMESPACE}:");
    let refused = events
        .iter()
        .filter(|e| e.user.starts_with(&prefix) && e.code == 403)
        .count();
    let our_splits: Vec<Split> = ours
        .iter()
        .map(|d| handover::split(&events, NAMESPACE, &lease, d))
        .collect();
    let their_splits: Vec<Split> = theirs
        .iter()
        .map(|d| handover::split(&events, candidate::NAMESPACE, candidate::APP, d))
        .collect();
    let (timings, release_on_cancel, grace) = candidate::provider_nop_conditions()?;

    let mut md = String::new();
    writeln!(md, "# deploy/ on a real node")?;
    writeln!(md)?;
    writeln!(
        md,
        "Written by `cargo xtask node-bench --deletions {deletions}` on {} ({} CPUs). Debug builds of the \
         images, imported into the node's containerd; kubelet and kube-scheduler {} from the harness. {}",
        jiff::Timestamp::now().strftime("%Y-%m-%d %H:%M UTC"),
        std::thread::available_parallelism().map(|n| n.get()).unwrap_or(0),
        testenv::KUBERNETES_VERSION,
        release::provenance::markdown_line(&provenance),
    )?;
    writeln!(md)?;
    writeln!(md, "| Step | Seconds |")?;
    writeln!(md, "|---|---:|")?;
    writeln!(
        md,
        "| control plane + containerd + kubelet, to a Ready node, cold (containerd's root empty, only the \
         pause image imported) | {:.1} |",
        times.cold.as_secs_f64()
    )?;
    writeln!(
        md,
        "| importing {} images (ours, with the second builds of provider-nop and crossplane, and client-go's candidate), cold | {:.1} |",
        times.images,
        times.imported.as_secs_f64()
    )?;
    writeln!(
        md,
        "| control plane + containerd + kubelet, to a Ready node, warm (a fresh control plane and kubelet; \
         containerd's root kept, with the images in it) | {:.1} |",
        times.warm.as_secs_f64()
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
    handover_tables(&mut md, &ours, &theirs, &our_splits, &their_splits)?;
    writeln!(
        md,
        "client-go's candidate ran as a Deployment of 2 replicas in a namespace of its own \
         (`{}`), from a static image of `tests/control-plane/candidate.go` (`go build -tags candidateonly`, \
         `CGO_ENABLED=0`) imported like ours, with provider-nop's conditions: lease duration {:?}, renew \
         deadline {:?}, retry period {:?}, terminationGracePeriodSeconds {grace}, identity from the downward \
         API's POD_NAME, and `ReleaseOnCancel: {release_on_cancel}` (what controller-runtime users set with \
         `LeaderElectionReleaseOnCancel`; both release the Lease on SIGTERM).",
        candidate::NAMESPACE,
        timings.lease_duration,
        timings.renew_deadline,
        timings.retry_period,
    )?;
    writeln!(md)?;
    for line in rollout.section() {
        writeln!(md, "{line}")?;
    }
    writeln!(md)?;
    writeln!(md, "## Faults only a node gives (provider-nop)")?;
    writeln!(md)?;
    writeln!(md, "| Fault | What happened |")?;
    writeln!(md, "|---|---|")?;
    for (fault, outcome) in &faults.lines {
        writeln!(md, "| {fault} | {outcome} |")?;
    }
    writeln!(md)?;
    for note in &faults.notes {
        writeln!(md, "{note}")?;
        writeln!(md)?;
    }
    writeln!(
        md,
        "Fence refusals (403 for a crossplane-system ServiceAccount, from the audit log) over the whole \
         run: {refused}; late writes of the frozen leader among them: {}.",
        faults.expected_refusals
    )?;
    let path = testenv::harness::repo_root().join("docs").join("node.md");
    std::fs::write(&path, md).with_context(|| format!("writing {}", path.display()))?;
    // The record of this run; the figures themselves are the document's.
    let json = serde_json::json!({ "document": "node.md", "deletions": deletions, "provenance": provenance });
    let path = testenv::harness::repo_root().join("docs").join("node.json");
    std::fs::write(&path, serde_json::to_string_pretty(&json)? + "\n")
        .with_context(|| format!("writing {}", path.display()))?;
    eprintln!("[node] wrote {}", path.display());
    rollout.check()?;
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
    /// Paragraphs after the table.
    notes: Vec<String>,
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
         and its watch of the Lease; `/healthz` (crates/manager/src/health.rs) fails only while a replica \
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
    lines.push((
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
    ));
    let refused = forbidden;

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

/// Waits until the Lease `namespace/name` has a holder.
async fn wait_held(client: &kube::Client, namespace: &str, name: &str) -> anyhow::Result<()> {
    let start = Instant::now();
    loop {
        let holders = workload::lease_holders(client, namespace).await?;
        if holders.get(name).is_some_and(|h| !h.is_empty()) {
            return Ok(());
        }
        ensure!(
            start.elapsed() < HANDOVER_TIMEOUT,
            "nobody took Lease {namespace}/{name} within {}s",
            HANDOVER_TIMEOUT.as_secs()
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// The handovers of ours and client-go's side by side, their ratio, and each split at the release.
fn handover_tables(
    md: &mut String,
    ours: &[Deletion],
    theirs: &[Deletion],
    our_splits: &[Split],
    their_splits: &[Split],
) -> anyhow::Result<()> {
    let ms = |ds: &[Deletion]| ds.iter().map(|d| d.ms).collect::<Vec<f64>>();
    let (o50, o99, omax) = handover::summary(&ms(ours));
    let (t50, t99, tmax) = handover::summary(&ms(theirs));
    let standby = |ds: &[Deletion]| ds.iter().filter(|d| d.to_standby).count();
    writeln!(
        md,
        "| Elector | Deletions | p50 (ms) | p99 (ms) | max (ms) | taken by the standby | by the replacement |"
    )?;
    writeln!(md, "|---|---:|---:|---:|---:|---:|---:|")?;
    for (name, ds, p50, p99, max) in [
        ("ours (provider-nop)", ours, o50, o99, omax),
        ("client-go (lease candidate)", theirs, t50, t99, tmax),
    ] {
        writeln!(
            md,
            "| {name} | {} | {p50:.0} | {p99:.0} | {max:.0} | {} | {} |",
            ds.len(),
            standby(ds),
            ds.len() - standby(ds)
        )?;
    }
    writeln!(md)?;
    writeln!(
        md,
        "client-go / ours: p50 ×{:.1}, p99 ×{:.1}. (With {} deletions the p99 is the slowest one.)",
        t50 / o50,
        t99 / o99,
        ours.len()
    )?;
    writeln!(md)?;
    writeln!(
        md,
        "Each handover split with the audit log at the old leader's release of the Lease: from the delete \
         request to the release write (the kubelet sees the deletion, stops the container with SIGTERM, the \
         replica shuts down and releases), and from the release to the next holder's write (the electors' \
         own part)."
    )?;
    writeln!(md)?;
    writeln!(
        md,
        "| Elector | delete → release p50 / p99 (ms) | release → next holder p50 / p99 (ms) | split |"
    )?;
    writeln!(md, "|---|---:|---:|---:|")?;
    for (name, splits) in [("ours", our_splits), ("client-go", their_splits)] {
        let before: Vec<f64> = splits.iter().filter_map(|s| s.to_release_ms).collect();
        let after: Vec<f64> = splits.iter().filter_map(|s| s.release_to_taken_ms).collect();
        let (b50, b99, _) = handover::summary(&before);
        let (a50, a99, _) = handover::summary(&after);
        writeln!(
            md,
            "| {name} | {b50:.0} / {b99:.0} | {a50:.0} / {a99:.0} | {} of {} |",
            after.len(),
            splits.len()
        )?;
    }
    writeln!(md)?;
    // Where the spread lies: before the release (the kubelet and the shutdown) or after it (the
    // election).
    let parts = |splits: &[Split]| {
        let before: Vec<f64> = splits.iter().filter_map(|s| s.to_release_ms).collect();
        let after: Vec<f64> = splits.iter().filter_map(|s| s.release_to_taken_ms).collect();
        (handover::summary(&before), handover::summary(&after))
    };
    let ((tb50, _, _), (ta50, ta99, _)) = parts(their_splits);
    let ((ob50, ob99, _), (oa50, oa99, _)) = (parts(our_splits).0, parts(our_splits).1);
    let stops: Vec<f64> = ours.iter().filter_map(|d| d.stop_ms).collect();
    let (s50, s99, _) = handover::summary(&stops);
    let ((_, tb99, _), _) = parts(their_splits);
    writeln!(
        md,
        "{} Of that first part, our replica's own work before the release, stopping its leader work (the \
         controller, awaiting a reconcile in flight, bounded by `--graceful-shutdown-timeout`, so that \
         nothing of it writes after the release, as controller-runtime's manager does before its release on \
         cancel), took p50 {s50:.0} ms, p99 {s99:.0} ms by its own log ({} of {} deletions logged). {} \
         client-go's bare candidate, which has no work to stop, released {tb50:.0} ms (p50), {tb99:.0} ms \
         (p99) after the delete. After the release, our standby, which watches the Lease, took it in \
         {oa50:.0} ms (p50), {oa99:.0} ms (p99).",
        if ob99 >= oa99 {
            format!(
                "Our spread (p99 against p50) lies before the release: from the delete to the release write \
                 p50 {ob50:.0} ms, p99 {ob99:.0} ms."
            )
        } else {
            format!(
                "Our spread (p99 against p50) lies after the release: the standby took the released Lease in \
                 {oa50:.0} ms (p50) but {oa99:.0} ms (p99)."
            )
        },
        stops.len(),
        ours.len(),
        if s99 * 2.0 < ob99 {
            "So the spread is not in our code: it is the kubelet's part (it sees the deletion through its \
             watch of Pods and stops the container with SIGTERM through containerd) and the wake-up of the \
             process on a 2-core machine shared with ten other Pods, which varies with the machine's load."
        } else {
            "So much of the spread is our own stop of leader work."
        }
    )?;
    writeln!(md)?;
    writeln!(
        md,
        "client-go's standby has no watch: it tries to acquire every retry period (2 s, jittered up to \
         ×1.2), so it finds a released Lease {ta50:.0} ms (p50), {ta99:.0} ms (p99) after the release, \
         where ours, watching, takes it at once.{}",
        if ta50 * 2.0 > t50 - o50 {
            " That is most of the difference between the medians above."
        } else {
            ""
        }
    )?;
    writeln!(md)?;
    // Where our slowest handover spent its time.
    if let Some((d, s)) = ours
        .iter()
        .zip(our_splits)
        .max_by(|a, b| a.0.ms.total_cmp(&b.0.ms))
    {
        let part = |x: Option<f64>| x.map(|v| format!("{v:.0} ms")).unwrap_or_else(|| "?".into());
        writeln!(
            md,
            "Our slowest handover ({:.0} ms, {} deleted): {} from the delete to the release, {} from the \
             release to the next holder ({}).",
            d.ms,
            d.pod,
            part(s.to_release_ms),
            part(s.release_to_taken_ms),
            if d.to_standby {
                "the standby"
            } else {
                "the replacement Pod"
            }
        )?;
        writeln!(md)?;
    }
    Ok(())
}
