//! The demo on a real node, installed by package as a Crossplane user installs: the leader's Pod is
//! deleted, provider-nop is upgraded, and each handover is measured.
//!
//! When this machine can run a node (root, and containerd, runc, the CNI plugins, iproute2, iptables
//! and kubectl installed), `cargo xtask demo` starts a test bed with a node of its own
//! (`testenv::NodeTestBed`, under `target/testbed/demo-node`) and an OCI registry on the node's address.
//! [`super::packages`] pushes the core's image and the packages of provider-nop and function-go there,
//! applies the core and the RBAC manager from deploy/ with deploy/fencing/, then a `Provider` and a
//! `Function` with kubectl, shows both Healthy with 2 Pods each, and composes an XR through the
//! function over mutual TLS. Then provider-nop makes a NopResource Ready, the Pod of its leader is
//! deleted (the leader sees its own Pod's deletion and releases its Lease before the kubelet's SIGTERM)
//! and the demo measures until the Lease names another Pod; provider-nop goes from `v1` to `v2` with the
//! longest time without a leader taken from the audit log, and the new version reconciles a change. The
//! fence (deploy/fencing/) covers the core and the RBAC manager, whose ServiceAccounts it names; a
//! package's runtime runs as its revision's ServiceAccount. The demo counts every refusal (403) of
//! crossplane-system's ServiceAccounts in the audit log, and `--ci` fails on any.

use std::os::unix::fs::MetadataExt as _;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
use testenv::kubectl::run as kubectl;

use anyhow::{Context, Result, ensure};
use kube::Api;
use kube::api::{Patch, PatchParams, PostParams};
use testenv::workload;

use super::packages;
use super::report::show;
use super::{KILLED, NS, Options, interrupted};
use crate::packages::Archives;
use release::target_dir;

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

/// The archives the demo pushes (the core's image, provider-nop's packages `v1` and `v2`, function-go's
/// package) and the pause image: those in `images` (from `cargo xtask image --debug --pause --next
/// --function --out DIR`), else built as `cargo xtask package-bench` does.
fn archives(images: Option<&Path>) -> Result<(Archives, PathBuf)> {
    let Some(dir) = images else {
        return crate::packages::bench::build_archives();
    };
    let archives = Archives {
        core: dir.join("crossplane.oci.tar"),
        package: dir.join("provider-nop.xpkg.oci.tar"),
        next: dir.join("provider-nop-next.oci.tar"),
        function: dir.join("function-go.xpkg.oci.tar"),
        // Not pushed by the demo (no Configuration).
        dependency: dir.join("provider-kubernetes.xpkg.oci.tar"),
        pause: dir.join("pause.oci.tar"),
    };
    let pause = archives.pause.clone();
    for a in [
        &archives.core,
        &archives.package,
        &archives.next,
        &archives.function,
        &pause,
    ] {
        ensure!(
            a.is_file(),
            "{} is missing: make the images with `cargo xtask image --debug --pause --next --function --out {}`",
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
    pods_ready: Duration,
    nop_ready: Option<Duration>,
    handover: Option<workload::Handover>,
    propagated: Option<Duration>,
    installed: Option<packages::Installed>,
    upgraded: Option<packages::Upgraded>,
    upgraded_version: String,
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
        archives: &Archives,
        dir: &Path,
    ) -> Result<()> {
        let cluster = bed.cluster().clone();
        let applied = Instant::now();
        let installed = packages::install(&cluster, archives, dir, READY_TIMEOUT, &|m| self.note(m)).await?;
        self.pods_ready = applied.elapsed();
        let client = cluster.client().await?;
        let nops = workload::nop_api(&client);
        self.act(&nops).await?;
        self.hand_over(&client, &nops, &installed.revision, cluster.kubeconfig())
            .await?;
        let upgraded = packages::upgrade(&client, &cluster, &installed.v2, &|m| self.note(m)).await?;
        self.installed = Some(installed);
        // The new version acts on a change.
        let changed = Instant::now();
        let patch = serde_json::json!({ "spec": { "forProvider": { "fields": { "integerField": 2 } } } });
        nops.patch(NOP, &PatchParams::default(), &Patch::Merge(&patch))
            .await?;
        wait_reconciled(&nops, NOP).await?;
        self.upgraded_version = packages::acting_version(&cluster)?;
        self.note(format!(
            "{} (revision {}) reconciled a change of {NOP} {} after it was made; the writes of its term carry \
             the version {}",
            upgraded.leaders.1,
            upgraded.revision,
            show(changed.elapsed()),
            self.upgraded_version
        ));
        self.upgraded = Some(upgraded);
        self.count_refusals(&cluster)
    }

    /// The leader acts: a NopResource becomes Ready and Synced.
    async fn act(&mut self, nops: &Api<kube::api::DynamicObject>) -> Result<()> {
        let created = Instant::now();
        nops.create(&PostParams::default(), &workload::ready_nop(NOP))
            .await?;
        wait_reconciled(nops, NOP).await?;
        self.nop_ready = Some(created.elapsed());
        self.note(format!(
            "NopResource {NOP} is Ready and Synced {} after it was created: the leader Pod reconciled it",
            show(created.elapsed())
        ));

        Ok(())
    }

    /// The leader's Pod is deleted, and the new leader acts on a change.
    async fn hand_over(
        &mut self,
        client: &kube::Client,
        nops: &Api<kube::api::DynamicObject>,
        revision: &str,
        kubeconfig: &Path,
    ) -> Result<()> {
        // The leader's Pod is deleted: the leader sees its own Pod's deletion and releases its Lease,
        // before the kubelet's SIGTERM.
        let h = workload::delete_leader(client, NS, crate::packages::LEASE, HANDOVER_TIMEOUT).await?;
        self.note(format!(
            "kubectl delete pod {} (the leader of {KILLED}; it sees its own Pod's deletion and \
             releases the Lease before the kubelet's SIGTERM) -> {} leads {} after the delete",
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
        wait_reconciled(nops, NOP).await?;
        self.propagated = Some(changed.elapsed());
        self.note(format!(
            "the new leader reconciled a change of {NOP} {} after it was made",
            show(changed.elapsed())
        ));
        crate::packages::wait_runtime(client, revision, READY_TIMEOUT).await?;
        self.note(format!(
            "the Deployment replaced the deleted Pod; {KILLED}'s revision {revision} has 2 Ready Pods again:"
        ));
        print!(
            "{}",
            kubectl(
                kubeconfig,
                &[
                    "get",
                    "pods",
                    "-n",
                    NS,
                    "-l",
                    &format!("{}={KILLED}", apis::pkg::LABEL_PACKAGE),
                    "-o",
                    "wide"
                ],
            )?
        );
        Ok(())
    }

    /// The requests of crossplane-system's ServiceAccounts refused (403), by RBAC or the fence, from the audit log.
    fn count_refusals(&mut self, cluster: &testenv::Cluster) -> Result<()> {
        let prefix = format!("system:serviceaccount:{NS}:");
        self.refused = cluster
            .audit()
            .read()?
            .events
            .iter()
            .filter(|e| e.user.starts_with(&prefix) && e.code == 403)
            .count();
        self.note(format!(
            "requests of crossplane-system's ServiceAccounts refused (403) by RBAC or the fence (audit log): {}",
            self.refused
        ));
        Ok(())
    }

    /// `--ci`: the `RESULT` line, and a failure on any refusal.
    fn result_line(&self) -> Result<i32> {
        ensure!(
            self.refused == 0,
            "{} requests of crossplane-system's ServiceAccounts were refused (403)",
            self.refused
        );
        let ms = |d: Option<Duration>| d.map(|d| d.as_millis().to_string()).unwrap_or_else(|| "-".into());
        let installed = self.installed.as_ref();
        let upgraded = self.upgraded.as_ref();
        println!(
            "RESULT mode=node node_ready_s={:.1} installed_s={:.1} provider_healthy_s={:.1} \
             function_healthy_s={:.1} xr_ready_s={:.1} nop_ready_ms={} graceful_handover_ms={} propagated_ms={} \
             upgrade_gap_ms={:.0} upgraded_version={} denied={} wall_s={:.1}",
            self.node_ready.as_secs_f64(),
            self.pods_ready.as_secs_f64(),
            installed.map_or(f64::NAN, |i| i.provider_healthy),
            installed.map_or(f64::NAN, |i| i.function_healthy),
            installed.map_or(f64::NAN, |i| i.xr_ready),
            ms(self.nop_ready),
            ms(self.handover.as_ref().map(|h| h.elapsed)),
            ms(self.propagated),
            upgraded.map_or(f64::NAN, |u| u.gap_ms),
            if self.upgraded_version.is_empty() {
                "-"
            } else {
                &self.upgraded_version
            },
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
