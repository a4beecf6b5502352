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
use k8s_openapi::api::apps::v1::Deployment;
use kube::{Api, api::ListParams};
use testenv::workload;

use crate::{image, target_dir};

const NAMESPACE: &str = "crossplane-system";
const READY_TIMEOUT: Duration = Duration::from_secs(300);
const HANDOVER_TIMEOUT: Duration = Duration::from_secs(60);

/// The overlay: deploy/ and deploy/fencing/, each image named by the reference it is imported under.
pub fn write_overlay(dir: &Path) -> anyhow::Result<PathBuf> {
    std::fs::create_dir_all(dir)?;
    let root = testenv::harness::repo_root().canonicalize()?;
    // kustomize takes only relative paths: up to / from the overlay, then down to the repository.
    let overlay = dir.canonicalize()?;
    let up = "../".repeat(overlay.components().count().saturating_sub(1));
    let deploy = format!(
        "{up}{}",
        root.join("deploy").display().to_string().trim_start_matches('/')
    );
    let mut text = format!(
        "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n- {deploy}\n- {deploy}/fencing\nimages:\n",
    );
    for b in image::BINARIES {
        let full = image::full_reference(b.name);
        let (name, tag) = full.rsplit_once(':').context("image reference without a tag")?;
        writeln!(
            text,
            "- name: {}/{}\n  newName: {name}\n  newTag: \"{tag}\"",
            image::REPOSITORY,
            b.name
        )?;
    }
    std::fs::write(dir.join("kustomization.yaml"), text)?;
    Ok(dir.to_path_buf())
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
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
    for i in 0..deletions {
        let h = workload::delete_leader(&client, NAMESPACE, &lease, HANDOVER_TIMEOUT).await?;
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
    writeln!(md, "## Pods (after the deletions)")?;
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
         its Lease), timed from the delete request to the first read of the Lease naming the other Pod, \
         {deletions} times, each once the Deployment was back to 2 Ready Pods."
    )?;
    writeln!(md)?;
    writeln!(md, "| Deletions | p50 (ms) | p99 (ms) | max (ms) |")?;
    writeln!(md, "|---:|---:|---:|---:|")?;
    writeln!(
        md,
        "| {deletions} | {:.0} | {:.0} | {:.0} |",
        percentile(&sorted, 50.0),
        percentile(&sorted, 99.0),
        sorted.last().copied().unwrap_or(f64::NAN)
    )?;
    writeln!(md)?;
    writeln!(
        md,
        "Fence refusals (403 for a crossplane-system ServiceAccount, from the audit log): {refused}."
    )?;
    let path = testenv::harness::repo_root().join("docs").join("node.md");
    std::fs::write(&path, md).with_context(|| format!("writing {}", path.display()))?;
    eprintln!("[node] wrote {}", path.display());
    ensure!(refused == 0, "the fence refused {refused} requests");
    Ok(())
}
