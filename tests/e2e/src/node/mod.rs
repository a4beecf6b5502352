//! `cargo xtask node-bench`: the figures of deploy/ on a real node, written to docs/node.md.
//!
//! It builds the images (release builds, what users run, as `bench --scale` measures) and the pause
//! image, starts a test bed with a node (`testenv::NodeTestBed`), imports the images, applies deploy/
//! and deploy/fencing/ through an overlay that only names the imported images, and waits for 2 Ready
//! Pods per Deployment.
//! Then it deletes the provider-nop leader's Pod `--deletions` times (each time once the Deployment is
//! back to 2 Ready Pods) and measures how long the Lease takes to reach the other Pod; then does the same
//! to a Deployment of client-go's lease candidate under the same conditions ([`candidate`]), and both
//! again as bare Pods that nothing replaces during the handover ([`bare`]), splits each
//! handover with the audit log at the old leader's release, runs the faults only a node gives (a
//! container killed, an eviction against the budget, a leader frozen with its requests in flight),
//! reads each Pod's memory from the kubelet's stats, rolls provider-nop and the core from build A to B
//! ([`rolling`]) and switches provider-nop between our image and the Go peer's ([`migration`]).

use std::{
    path::{Path, PathBuf},
    time::{Duration, Instant},
};

use anyhow::{Context, bail, ensure};
use k8s_openapi::api::{apps::v1::Deployment, core::v1::Pod};
use kube::{Api, api::ListParams};
use testenv::workload;

use release::{image, target_dir};

mod bare;
mod candidate;
mod cpu;
mod cutoff;
mod faults;
mod handover;
pub mod migration;
mod report;
mod rolling;

use handover::Split;

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
        // Release builds: the figures are latencies of our processes on 2 shared cores, which a debug
        // build's slower code would inflate (the node test packs debug builds; it times nothing).
        debug: false,
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
    let peer_image = migration::build_peer_image(&out)?;
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
            .chain([&candidate_image, &peer_image])
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

    let pod_logs = bed.node().dir().join("pod-logs");
    let ours = handover::delete_leaders(
        &client,
        &pod_logs,
        (NAMESPACE, "provider-nop", &lease),
        handover::Pool::Deployment,
        deletions,
    )
    .await?;
    // Split now (the audit log has every deletion's writes: the last handover ended seconds ago, once
    // the Deployment was back to 2 Ready Pods) and shown as soon as they are done.
    let our_splits: Vec<Split> = {
        let events = cluster.audit().read()?.events;
        ours.iter()
            .map(|d| handover::split(&events, NAMESPACE, &lease, d))
            .collect()
    };
    print_splits(&ours, &our_splits);

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
        &pod_logs,
        (candidate::NAMESPACE, candidate::APP, candidate::APP),
        handover::Pool::Deployment,
        deletions,
    )
    .await?;
    // The same deletions again with each elector's replicas as bare Pods, which nothing replaces
    // during the handover; then the Deployments back for the rest of the run.
    let bare = bare::run(&client, &pod_logs, &lease, deletions).await?;
    let faults = faults::run(bed, &client, &cluster, &lease).await?;
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
    // The live migration between implementations, on provider-nop's Lease.
    let migration = migration::run(&client, &cluster, &lease).await?;
    eprintln!("[node] {}", migration.summary());
    let events = cluster.audit().read()?.events;
    let prefix = format!("system:serviceaccount:{NAMESPACE}:");
    let refused = events
        .iter()
        .filter(|e| e.user.starts_with(&prefix) && e.code == 403)
        .count();
    let their_splits: Vec<Split> = theirs
        .iter()
        .map(|d| handover::split(&events, candidate::NAMESPACE, candidate::APP, d))
        .collect();
    let bare = bare.split(&events, &lease);
    let md = report::document(&report::Run {
        deletions,
        provenance: &provenance,
        times,
        all_ready,
        pods: &pods,
        memory: &memory,
        ours: &ours,
        theirs: &theirs,
        our_splits: &our_splits,
        their_splits: &their_splits,
        bare: &bare,
        rollout: &rollout,
        migration: &migration,
        faults: &faults,
        refused,
    })?;
    let path = testenv::harness::repo_root().join("docs").join("node.md");
    std::fs::write(&path, md).with_context(|| format!("writing {}", path.display()))?;
    // The record of this run; the figures themselves are the document's.
    let json = serde_json::json!({ "document": "node.md", "deletions": deletions, "provenance": provenance });
    let path = testenv::harness::repo_root().join("docs").join("node.json");
    std::fs::write(&path, serde_json::to_string_pretty(&json)? + "\n")
        .with_context(|| format!("writing {}", path.display()))?;
    eprintln!("[node] wrote {}", path.display());
    rollout.check()?;
    migration.check()?;
    ensure!(
        refused == faults.expected_refusals,
        "the fence refused {refused} requests, {} of them the frozen leader's late writes",
        faults.expected_refusals
    );
    Ok(())
}

/// Prints each of our deletions with its split.
fn print_splits(ours: &[handover::Deletion], splits: &[Split]) {
    for (d, s) in ours.iter().zip(splits) {
        let ms = |v: Option<f64>| v.map_or_else(|| "?".to_owned(), |v| format!("{v:.0}"));
        let phases = s.phases.map_or_else(String::new, |p| {
            format!(
                " (apiserver {:.0} + leader {:.0} + apiserver {:.0} + next holder {:.0} + apiserver {:.0})",
                p.delete, p.leader, p.release, p.standby, p.acquire
            )
        });
        eprintln!(
            "[node] {}: handover {} ms{phases}; stop of leader work {} ms; CPU in a window of {:.0} ms: {}",
            d.pod,
            ms(s.handover_ms),
            ms(d.stop_ms),
            d.window_ms,
            d.cpu.as_ref().map_or_else(
                || "not read (no scheduler statistics in /proc)".to_owned(),
                |u| format!(
                    "all {:.0} ms, kube-apiserver {:.0} ms",
                    u.total().0,
                    u.of(cpu::Component::Apiserver).0
                )
            )
        );
    }
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

/// What the audit-log checker found for one lock.
pub struct Judgement {
    /// Two holders at once from `since` on, and writes outside their writer's term.
    pub violations: Vec<String>,
    /// Writes the checker judged inside their writer's term although they arrived while another
    /// writer's Lease write (a takeover or a foreign release) was in flight: counted, as the fault
    /// schedule counts them ([`crate::checker::during_foreign_lock_write`]), and shown next to the verdict.
    pub during_foreign_lock_write: usize,
}

/// What the audit-log checker finds from `since` on for `lock`: two holders at once, and writes (those
/// `is_write` selects) outside their writer's term; and how many of the writes it admitted arrived while
/// another writer's Lease write was in flight.
fn judge(
    events: &[testenv::AuditEvent],
    lock: &crate::checker::Lock,
    since: jiff::Timestamp,
    is_write: impl Fn(&testenv::AuditEvent) -> bool + Copy,
) -> Judgement {
    let mut violations: Vec<String> = crate::checker::check_lock(events, lock)
        .into_iter()
        .filter(|v| v.time >= since)
        .map(|v| v.to_string())
        .collect();
    let terms = crate::checker::terms(events, lock);
    violations.extend(
        crate::checker::check_writes_in(&terms, events, lock, is_write)
            .into_iter()
            .map(|v| v.to_string()),
    );
    let during_foreign_lock_write =
        crate::checker::during_foreign_lock_write(&terms, events, lock, is_write).len();
    Judgement {
        violations,
        during_foreign_lock_write,
    }
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
