//! Issue 12: every Deployment in deploy/ runs as Pods from its own image, on a real node.
//!
//! A test bed with a node (kube-scheduler, the kubelet, containerd with runc and the CNI plugins; see
//! `testenv::node`) starts next to the shared control plane; the images from `cargo xtask image --debug
//! --pause` are imported into its containerd, and `kubectl apply -k` applies deploy/ and deploy/fencing/
//! through an overlay that only names the imported images. Then:
//! - every Deployment has 2 Pods, Running and Ready, with 0 container restarts;
//! - every Lease has one holder, the name of one of its Deployment's running Pods (the identity comes
//!   from the downward API's POD_NAME), and the holders' tokens are pod-bound (the fence admits them);
//! - the fence refused nothing (no 403 for any ServiceAccount of crossplane-system);
//! - deleting the leader's Pod (the kubelet sends SIGTERM, the replica releases its Lease) hands the
//!   Lease over to the other Pod, and the time it took is printed.
//!
//! If the node cannot start, the test fails with the reason; it never skips.

use std::{
    path::{Path, PathBuf},
    process::Command,
    time::{Duration, Instant},
};

use anyhow::{Context, Result, ensure};
use k8s_openapi::api::apps::v1::Deployment;
use kube::{Api, api::ListParams};
use testenv::workload;

const NAMESPACE: &str = "crossplane-system";
const BINARIES: [&str; 4] = [
    "crossplane",
    "provider-nop",
    "provider-kubernetes",
    "provider-sql",
];
/// How long the Deployments get to have 2 Ready Pods each, on a loaded 2-core machine.
const READY_TIMEOUT: Duration = Duration::from_secs(240);
/// How long a deleted leader's Lease may take to reach the other Pod.
const HANDOVER_TIMEOUT: Duration = Duration::from_secs(60);

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_else(|| PathBuf::from(".."))
}

/// `cargo xtask image --debug --pause` into `out`; the archive paths.
fn build_images(out: &Path) -> Result<Vec<PathBuf>> {
    let start = Instant::now();
    let xtask = Command::new(env!("CARGO_BIN_EXE_xtask"))
        .args(["image", "--debug", "--pause", "--compression", "1", "--out"])
        .arg(out)
        .output()
        .context("running cargo xtask image --debug --pause")?;
    let log = String::from_utf8_lossy(&xtask.stderr);
    ensure!(
        xtask.status.success(),
        "cargo xtask image --debug --pause failed:\n{log}"
    );
    eprintln!(
        "[node] images built and packed in {:.1}s",
        start.elapsed().as_secs_f64()
    );
    Ok(BINARIES
        .iter()
        .map(|b| out.join(format!("{b}.oci.tar")))
        .collect())
}

/// The overlay: deploy/ and deploy/fencing/, with each image named by the reference it was imported
/// under, and nothing else changed.
fn write_overlay(dir: &Path) -> Result<PathBuf> {
    let overlay = dir.join("overlay");
    std::fs::create_dir_all(&overlay)?;
    let root = repo_root().canonicalize()?;
    let version = env!("CARGO_PKG_VERSION");
    let images: Vec<String> = BINARIES
        .iter()
        .map(|b| {
            format!(
                "- name: crossplane-rs/{b}\n  newName: docker.io/crossplane-rs/{b}\n  newTag: \"{version}\"\n"
            )
        })
        .collect();
    // kustomize takes only relative paths: up to / from the overlay, then down to the repository.
    let overlay = overlay.canonicalize()?;
    let up = "../".repeat(overlay.components().count().saturating_sub(1));
    let deploy = format!(
        "{up}{}",
        root.join("deploy").display().to_string().trim_start_matches('/')
    );
    let text = format!(
        "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n- {deploy}\n- {deploy}/fencing\nimages:\n{}",
        images.concat()
    );
    std::fs::write(overlay.join("kustomization.yaml"), text)?;
    Ok(overlay)
}

fn kubectl(kubeconfig: &Path, args: &[&str]) -> Result<String> {
    let out = Command::new("kubectl")
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .args(args)
        .output()
        .context("running kubectl")?;
    ensure!(
        out.status.success(),
        "kubectl {} failed:\n{}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr)
    );
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_deployment_runs_as_pods_on_a_real_node() -> Result<()> {
    let shared = testenv::Cluster::shared().context("the node test needs `cargo xtask test`")?;
    let work = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("node-test");
    if work.exists() {
        std::fs::remove_dir_all(&work)?;
    }
    let archives = build_images(&work.join("images"))?;
    let pause = work.join("images").join("pause.oci.tar");

    let start = Instant::now();
    let dir = shared.dir.join("node");
    if dir.exists() {
        std::fs::remove_dir_all(&dir).with_context(|| format!("removing {}", dir.display()))?;
    }
    let mut bed = testenv::NodeTestBed::start(&dir, &shared.harness, &pause)
        .await
        .context("starting a test bed with a node (containerd, kubelet, kube-scheduler)")?;
    eprintln!("[node] node Ready in {:.1}s", start.elapsed().as_secs_f64());
    let result = run(&mut bed, &archives, &work).await;
    if result.is_err() {
        let logs = bed.node().dir().to_path_buf();
        eprintln!("[node] logs under {}", logs.display());
    }
    bed.stop().context("stopping the node test bed")?;
    result
}

async fn run(bed: &mut testenv::NodeTestBed, archives: &[PathBuf], work: &Path) -> Result<()> {
    let cluster = bed.cluster().clone();
    let start = Instant::now();
    for archive in archives {
        bed.node().import(archive)?;
    }
    eprintln!(
        "[node] {} images imported in {:.1}s",
        archives.len(),
        start.elapsed().as_secs_f64()
    );

    let overlay = write_overlay(work)?;
    kubectl(
        cluster.kubeconfig(),
        &["apply", "--server-side", "-k", &overlay.display().to_string()],
    )?;
    let applied = Instant::now();

    let client = cluster.client().await?;
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), NAMESPACE);
    let names: Vec<String> = deployments
        .list(&ListParams::default())
        .await?
        .items
        .into_iter()
        .filter_map(|d| d.metadata.name)
        .collect();
    ensure!(names.len() == 5, "deploy/ should hold 5 Deployments: {names:?}");
    let pods = workload::wait_deployments(&client, NAMESPACE, &names, 2, READY_TIMEOUT).await?;
    eprintln!(
        "[node] {} Deployments with 2 Ready Pods each, {:.1}s after kubectl apply",
        names.len(),
        applied.elapsed().as_secs_f64()
    );

    // One leader per Lease, whose identity is its own Pod's name, from the downward API.
    let leaders = workload::wait_one_leader_each(&client, NAMESPACE, &pods, HANDOVER_TIMEOUT).await?;
    for (app, (lease, holder)) in &leaders {
        eprintln!("[node] {app}: Lease {lease} held by {holder}");
    }
    for (app, ps) in &pods {
        for p in ps {
            let env = p
                .spec
                .as_ref()
                .map(|s| &s.containers[0])
                .and_then(|c| c.env.as_ref());
            let from_downward_api = env.is_some_and(|env| {
                env.iter().any(|e| {
                    e.name == "POD_NAME"
                        && e.value_from
                            .as_ref()
                            .and_then(|v| v.field_ref.as_ref())
                            .is_some_and(|f| f.field_path == "metadata.name")
                })
            });
            ensure!(
                from_downward_api,
                "{app}: POD_NAME does not come from the downward API"
            );
            ensure!(
                workload::restarts(p) == 0,
                "{app}: Pod {} restarted",
                workload::name(p)
            );
        }
    }

    // The leader of provider-nop goes: its Pod is deleted, the kubelet sends SIGTERM, the replica
    // releases the Lease and the other Pod takes it.
    let (lease, _) = leaders
        .get("provider-nop")
        .context("no Lease held by a provider-nop Pod")?;
    let handover = workload::delete_leader(&client, NAMESPACE, lease, HANDOVER_TIMEOUT).await?;
    eprintln!(
        "[node] deleted the leader's Pod {}; {} took Lease {lease} after {:.0} ms",
        handover.deleted,
        handover.new_holder,
        handover.elapsed.as_secs_f64() * 1000.0
    );
    let survivor = pods["provider-nop"]
        .iter()
        .map(workload::name)
        .find(|n| *n != handover.deleted)
        .context("no second provider-nop Pod")?;
    ensure!(
        workload::holder_pod(&handover.new_holder) == survivor,
        "the Lease went to {}, not to the other running Pod {survivor}",
        handover.new_holder
    );
    // The Deployment replaces the Pod; everything is back to 2 Ready Pods with no restart.
    let pods = workload::wait_deployments(&client, NAMESPACE, &names, 2, READY_TIMEOUT).await?;
    for (app, ps) in &pods {
        for p in ps {
            ensure!(
                workload::restarts(p) == 0,
                "{app}: Pod {} restarted",
                workload::name(p)
            );
        }
    }

    // The apiserver reaches the kubelet at the node's address: logs and the kubelet's stats.
    let leader = &handover.new_holder;
    let logs = kubectl(
        cluster.kubeconfig(),
        &["logs", "-n", NAMESPACE, workload::holder_pod(leader), "--tail=5"],
    )?;
    ensure!(!logs.trim().is_empty(), "no logs from {leader}");
    let memory = workload::pod_memory(&client, testenv::node::NODE_NAME).await?;
    ensure!(
        memory.contains_key(workload::holder_pod(leader)),
        "the kubelet's stats lack {leader}: {memory:?}"
    );

    // The fence refused nothing: every replica has a pod-bound token and writes only while it holds
    // its Lease.
    let prefix = format!("system:serviceaccount:{NAMESPACE}:");
    let refused: Vec<_> = cluster
        .audit()
        .read()?
        .events
        .into_iter()
        .filter(|e| e.user.starts_with(&prefix) && e.code == 403)
        .collect();
    ensure!(
        refused.is_empty(),
        "{} requests of crossplane-system's ServiceAccounts refused (403), e.g. {:?}",
        refused.len(),
        refused.first()
    );
    eprintln!("[node] fence refusals: 0");
    Ok(())
}
