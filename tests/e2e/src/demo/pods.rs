//! The demo on a real node: deploy/ runs as Pods, the leader's Pod is deleted, the handover is measured.
//!
//! When this machine can run a node (root, and containerd, runc, the CNI plugins, iproute2, iptables
//! and kubectl installed), `cargo xtask demo` starts a test bed with a node of its own
//! (`testenv::NodeTestBed`, under `target/testbed/demo-node`), imports the images of
//! `cargo xtask image --debug --pause` into its containerd and applies deploy/ and deploy/fencing/ with
//! an overlay that only names the imported images, as a user applies them to a cluster. It shows the
//! Pods and the Leases as kubectl does, has provider-nop make a NopResource Ready, deletes the Pod of
//! provider-nop's leader (the kubelet sends SIGTERM; the replica releases its Lease) and measures until
//! the Lease names another Pod, then shows the new leader reconciling a change. The server-side fence
//! is on throughout; the demo counts its refusals (403) in the audit log, and `--ci` fails on any.

use std::os::unix::fs::MetadataExt as _;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
use testenv::kubectl::run as kubectl;

use anyhow::{Context, Result, ensure};
use k8s_openapi::api::apps::v1::Deployment;
use kube::Api;
use kube::api::{ListParams, Patch, PatchParams, PostParams};
use testenv::workload;

use super::report::show;
use super::{KILLED, NS, Options, interrupted};
use crate::node;
use release::{image, target_dir};

/// How long the Deployments get to have 2 Ready Pods each.
const READY_TIMEOUT: Duration = Duration::from_secs(300);
/// How long a released Lease may take to reach another Pod, and a NopResource to be reconciled.
const HANDOVER_TIMEOUT: Duration = Duration::from_secs(60);
/// The NopResource the demo has provider-nop reconcile.
const NOP: &str = "demo-on-the-node";

/// What the node demo came to.
pub(super) enum Outcome {
    /// It ran; the exit code.
    Ran(i32),
    /// The node did not start; why, in one line.
    NoNode(String),
}

/// The node demo's test bed directory, with every component's log.
pub(super) fn dir() -> PathBuf {
    target_dir().join("testbed").join("demo-node")
}

/// Why this machine can never run a node, whatever is installed, in one line; `None` when it can.
pub(super) fn impossible() -> Option<String> {
    let uid = std::fs::metadata("/proc/self")
        .map(|m| m.uid())
        .unwrap_or(u32::MAX);
    if uid != 0 {
        return Some("a node needs root (it creates a bridge, an iptables rule and mounts)".into());
    }
    let cgroup = Path::new("/sys/fs/cgroup");
    let v2 = cgroup.join("cgroup.controllers").is_file();
    let v1 = cgroup.join("memory").is_dir() && cgroup.join("cpu").is_dir();
    if !(v1 || v2) {
        return Some(
            "a node needs cgroups (neither cgroup v2 nor v1's cpu and memory hierarchies are mounted under /sys/fs/cgroup)"
                .into(),
        );
    }
    None
}

/// Why the node cannot start now, in one line (a system tool missing); `None` when it can.
pub(super) fn unavailable() -> Option<String> {
    if let Err(e) = testenv::node::check_prerequisites() {
        return Some(e.to_string());
    }
    let on_path = |name: &str| {
        std::env::var_os("PATH")
            .is_some_and(|paths| std::env::split_paths(&paths).any(|dir| dir.join(name).is_file()))
    };
    if !on_path("kubectl") {
        return Some(
            "the node demo applies deploy/ with kubectl, which is missing (apt-get install kubectl)".into(),
        );
    }
    None
}

/// The archives of every image and the pause image: those in `images` (from
/// `cargo xtask image --debug --pause --out DIR`), else built as `cargo xtask node-bench` does.
fn archives(images: Option<&Path>) -> Result<(Vec<PathBuf>, PathBuf)> {
    let dir = match images {
        Some(dir) => dir.to_path_buf(),
        None => {
            let out = target_dir().join("images").join("node");
            image::run(
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
            out
        }
    };
    let archives: Vec<PathBuf> = image::BINARIES
        .iter()
        .map(|b| dir.join(format!("{}.oci.tar", b.name)))
        .collect();
    let pause = dir.join("pause.oci.tar");
    for a in archives.iter().chain([&pause]) {
        ensure!(
            a.is_file(),
            "{} is missing: make the images with `cargo xtask image --debug --pause --out {}`",
            a.display(),
            dir.display()
        );
    }
    Ok((archives, pause))
}

/// The first line of an error, for the one line that says why the demo falls back.
fn first_line(e: &anyhow::Error) -> String {
    format!("{e:#}").lines().next().unwrap_or_default().to_owned()
}

/// Runs the demo on a node of its own.
pub(super) fn run(options: Options, images: Option<&Path>) -> Result<Outcome> {
    let wall = Instant::now();
    if let Some(dir) = std::env::var_os(testenv::ENV_TESTBED) {
        eprintln!(
            "[demo] the node demo starts a control plane of its own (not the one in {})",
            PathBuf::from(dir).display()
        );
    }
    let harness = release::harness()?;
    let (archives, pause) = archives(images)?;
    let dir = dir();
    if dir.exists() {
        std::fs::remove_dir_all(&dir).with_context(|| {
            format!(
                "removing {} (left by a demo that was killed?): unmount what is mounted under it",
                dir.display()
            )
        })?;
    }
    let rt = release::runtime()?;
    let code = rt.block_on(async {
        let start = Instant::now();
        eprintln!("[demo] starting a node: control plane, containerd (runc, CNI bridge), kubelet, kube-scheduler");
        let mut bed = match testenv::NodeTestBed::start(&dir, &harness, &pause).await {
            Ok(bed) => bed,
            Err(e) => return Ok(Outcome::NoNode(first_line(&e.into()))),
        };
        let mut demo = NodeDemo {
            wall: Some(wall),
            node_ready: start.elapsed(),
            ..NodeDemo::default()
        };
        demo.note(format!(
            "node {} Ready in {:.1} s (logs and state under {})",
            testenv::node::NODE_NAME,
            demo.node_ready.as_secs_f64(),
            dir.display()
        ));
        let result = tokio::select! {
            r = demo.scenario(&mut bed, &archives, &dir) => Some(r),
            _ = interrupted() => None,
        };
        let code = match result {
            Some(Ok(())) if options.ci => demo.result_line(),
            Some(Ok(())) => {
                let kubeconfig = bed.cluster().kubeconfig().display().to_string();
                println!(
                    "\nThe node keeps running until Ctrl-C. In another terminal:\n\n  export KUBECONFIG={kubeconfig}\n  \
                     kubectl get pods -n {NS} -o wide\n  kubectl get leases -n {NS}\n  \
                     kubectl delete pod -n {NS} <the holder of crossplane-leader-election-{KILLED}>\n"
                );
                interrupted().await;
                Ok(0)
            }
            Some(Err(e)) => {
                eprintln!("[demo] logs under {}", bed.node().dir().display());
                Err(e)
            }
            None => {
                eprintln!("[demo] Ctrl-C: stopping the node and its control plane");
                Ok(130)
            }
        };
        eprintln!("[demo] stopping the node and its control plane");
        bed.stop().context("stopping the node test bed")?;
        code.map(Outcome::Ran)
    });
    drop(rt);
    if let Ok(Outcome::Ran(_)) = &code {
        eprintln!("[demo] done in {:.1}s", wall.elapsed().as_secs_f64());
    }
    code
}

/// The node demo's figures.
#[derive(Default)]
struct NodeDemo {
    wall: Option<Instant>,
    node_ready: Duration,
    imported: Duration,
    pods_ready: Duration,
    nop_ready: Option<Duration>,
    handover: Option<workload::Handover>,
    propagated: Option<Duration>,
    refused: usize,
}

impl NodeDemo {
    fn note(&self, msg: impl AsRef<str>) {
        let at = self.wall.map(|w| w.elapsed().as_secs_f64()).unwrap_or_default();
        println!("[demo] {at:>6.1}s  {}", msg.as_ref());
    }

    async fn scenario(
        &mut self,
        bed: &mut testenv::NodeTestBed,
        archives: &[PathBuf],
        dir: &Path,
    ) -> Result<()> {
        let cluster = bed.cluster().clone();
        let start = Instant::now();
        for a in archives {
            bed.node().import(a)?;
        }
        self.imported = start.elapsed();
        self.note(format!(
            "imported {} images into the node's containerd in {:.1} s (nothing is pulled)",
            archives.len(),
            self.imported.as_secs_f64()
        ));
        let overlay = node::write_overlay(&dir.join("overlay"))?;
        let kubeconfig = cluster.kubeconfig().to_path_buf();
        kubectl(
            &kubeconfig,
            &["apply", "--server-side", "-k", &overlay.display().to_string()],
        )?;
        let applied = Instant::now();
        self.note("kubectl apply -k deploy/ + deploy/fencing/ (an overlay names the imported images; nothing else changes)");
        let client = cluster.client().await?;
        let names: Vec<String> = Api::<Deployment>::namespaced(client.clone(), NS)
            .list(&ListParams::default())
            .await?
            .items
            .into_iter()
            .filter_map(|d| d.metadata.name)
            .collect();
        let pods = workload::wait_deployments(&client, NS, &names, 2, READY_TIMEOUT).await?;
        self.pods_ready = applied.elapsed();
        self.note(format!(
            "{} Deployments with 2 Running and Ready Pods each, {:.1} s after kubectl apply:",
            names.len(),
            self.pods_ready.as_secs_f64()
        ));
        print!(
            "{}",
            kubectl(&kubeconfig, &["get", "pods", "-n", NS, "-o", "wide"])?
        );
        let leaders = workload::wait_one_leader_each(&client, NS, &pods, HANDOVER_TIMEOUT).await?;
        self.note("one leader per Lease; each holder is its Pod's name, from the downward API:");
        print!("{}", kubectl(&kubeconfig, &["get", "leases", "-n", NS])?);
        let (lease, _) = leaders
            .get(KILLED)
            .with_context(|| format!("no Lease held by a {KILLED} Pod"))?
            .clone();

        // The leader acts: a NopResource becomes Ready and Synced.
        let nops = workload::nop_api(&client);
        let created = Instant::now();
        nops.create(&PostParams::default(), &workload::ready_nop(NOP))
            .await?;
        wait_reconciled(&nops, NOP).await?;
        self.nop_ready = Some(created.elapsed());
        self.note(format!(
            "NopResource {NOP} is Ready and Synced {} after it was created: the leader Pod reconciled it",
            show(created.elapsed())
        ));

        // The leader's Pod is deleted: the kubelet sends SIGTERM, the replica releases its Lease.
        let h = workload::delete_leader(&client, NS, &lease, HANDOVER_TIMEOUT).await?;
        self.note(format!(
            "kubectl delete pod {} (the leader of {KILLED}; the kubelet sends SIGTERM and it releases \
             the Lease) -> {} leads {} after the delete",
            h.deleted,
            h.new_holder,
            show(h.elapsed)
        ));
        self.handover = Some(h);

        // The new leader acts on a change.
        let changed = Instant::now();
        let patch = serde_json::json!({ "spec": { "forProvider": { "fields": { "integerField": 1 } } } });
        nops.patch(NOP, &PatchParams::default(), &Patch::Merge(&patch))
            .await?;
        wait_reconciled(&nops, NOP).await?;
        self.propagated = Some(changed.elapsed());
        self.note(format!(
            "the new leader reconciled a change of {NOP} {} after it was made",
            show(changed.elapsed())
        ));
        workload::wait_deployments(&client, NS, &[KILLED.to_string()], 2, READY_TIMEOUT).await?;
        self.note(format!(
            "the Deployment replaced the deleted Pod; {KILLED} has 2 Ready Pods again:"
        ));
        print!(
            "{}",
            kubectl(
                &kubeconfig,
                &[
                    "get",
                    "pods",
                    "-n",
                    NS,
                    "-l",
                    &format!("app.kubernetes.io/name={KILLED}"),
                    "-o",
                    "wide"
                ],
            )?
        );
        let prefix = format!("system:serviceaccount:{NS}:");
        self.refused = cluster
            .audit()
            .read()?
            .events
            .iter()
            .filter(|e| e.user.starts_with(&prefix) && e.code == 403)
            .count();
        self.note(format!(
            "the server-side fence (deploy/fencing/) refused {} requests of the replicas (audit log)",
            self.refused
        ));
        Ok(())
    }

    /// `--ci`: the `RESULT` line, and a failure on any refusal.
    fn result_line(&self) -> Result<i32> {
        ensure!(
            self.refused == 0,
            "the fence refused {} requests of the replicas (403)",
            self.refused
        );
        let ms = |d: Option<Duration>| d.map(|d| d.as_millis().to_string()).unwrap_or_else(|| "-".into());
        println!(
            "RESULT mode=node node_ready_s={:.1} imported_s={:.1} pods_ready_s={:.1} nop_ready_ms={} \
             graceful_handover_ms={} propagated_ms={} denied={} wall_s={:.1}",
            self.node_ready.as_secs_f64(),
            self.imported.as_secs_f64(),
            self.pods_ready.as_secs_f64(),
            ms(self.nop_ready),
            ms(self.handover.as_ref().map(|h| h.elapsed)),
            ms(self.propagated),
            self.refused,
            self.wall.map(|w| w.elapsed().as_secs_f64()).unwrap_or_default()
        );
        Ok(0)
    }
}

/// Waits until the NopResource `name` is Ready and Synced at its latest generation.
async fn wait_reconciled(nops: &Api<kube::api::DynamicObject>, name: &str) -> Result<()> {
    let start = Instant::now();
    loop {
        let r = nops.get(name).await?;
        let status = &r.data["status"];
        let conditions = status["conditions"].as_array().cloned().unwrap_or_default();
        let done = ["Ready", "Synced"].iter().all(|t| {
            conditions
                .iter()
                .any(|c| c["type"] == *t && c["status"] == "True")
        }) && status["observedGeneration"].as_i64() == r.metadata.generation;
        if done {
            return Ok(());
        }
        ensure!(
            start.elapsed() < HANDOVER_TIMEOUT,
            "NopResource {name} was not reconciled within {}s: {status}",
            HANDOVER_TIMEOUT.as_secs()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
