//! One core at one number of XRDs: two replicas of ours (`crossplane core start`, release build) or of
//! upstream's (v2.3.4, Go) on a fresh control plane, each after its own `core init` has installed its
//! CRDs; the leader's resident set once it has settled, then `n` XRDs created at once and what it took
//! until all were Established.

use std::{
    collections::BTreeMap,
    path::{Path, PathBuf},
    process::Command,
    time::{Duration, Instant},
};

use anyhow::{Context, ensure};
use k8s_openapi::api::coordination::v1::Lease;
use kube::Api;
use serde::Serialize;
use testenv::{
    peers::{CORE_LEASE, Peers},
    process::{Output, Process},
};

use super::{
    load::{self, Target, Work},
    procstat, upstream,
};

/// Which core.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub enum Core {
    /// Ours, crates/crossplane (release build).
    Rust,
    /// Upstream's, built from Go's module proxy.
    Go,
}

impl Core {
    /// Its name in the report.
    pub fn label(self) -> &'static str {
        match self {
            Core::Rust => "crossplane-rs core (Rust)",
            Core::Go => "upstream core v2.3.4 (Go)",
        }
    }
}

/// Both cores' binaries.
pub struct Binaries {
    /// Ours, `crossplane` of crates/crossplane.
    pub ours: PathBuf,
    /// Upstream's core and its CRDs.
    pub peers: Peers,
}

/// CPU and memory of one replica.
#[derive(Clone, Copy, Debug, Default, Serialize)]
pub struct Usage {
    /// User and system CPU time from the first create until all XRDs were Established.
    pub cpu_seconds: f64,
    /// Resident set (`VmRSS`) then, in MiB.
    pub rss_mib: f64,
    /// Peak resident set (`VmHWM`) then, in MiB.
    pub peak_rss_mib: f64,
}

/// The replicas' resident sets before any XRD.
#[derive(Clone, Copy, Debug, Default, Serialize)]
pub struct Idle {
    /// The leader's, once settled (2 s of samples within 1 MiB).
    pub leader_rss_mib: f64,
    /// The standby's, at the same moment.
    pub standby_rss_mib: f64,
    /// Whether the leader's settled within [`SETTLE`]; else it is the last sample.
    pub settled: bool,
}

/// What one run measured.
#[derive(Clone, Debug, Serialize)]
pub struct Run {
    /// Which core.
    pub core: Core,
    /// What it was given.
    pub work: Work,
    /// How many XRDs or XRs.
    pub count: usize,
    /// Before them.
    pub idle: Idle,
    /// From the first create until the last create returned.
    pub create_seconds: f64,
    /// From the first create until a watch had seen every one done (XRDs Established, XRs Ready).
    pub done_seconds: f64,
    /// Errors of that watch (each retried after a backoff).
    pub watch_errors: usize,
    /// Re-lists of that watch after its first list.
    pub watch_restarts: usize,
    /// The last error of that watch, in words.
    pub watch_last_error: Option<String>,
    /// The leader over the window.
    pub leader: Usage,
    /// The standby over the window.
    pub standby: Usage,
    /// CPU time of kube-apiserver and etcd over the window.
    pub apiserver_cpu_seconds: f64,
    /// The replicas' requests over the window, by verb, Leases apart (from the audit log).
    pub requests: BTreeMap<String, usize>,
}

impl Run {
    /// The replicas' requests (Leases apart) per XRD or XR.
    pub fn requests_per_item(&self) -> f64 {
        self.requests.values().sum::<usize>() as f64 / self.count.max(1) as f64
    }
}

/// How long the leader's resident set may take to settle.
const SETTLE: Duration = Duration::from_secs(60);

/// A replica process, killed when dropped.
struct Replica {
    /// Its Lease identity (ours), or the prefix of it (upstream's: `<hostname>_<uuid>`).
    identity: String,
    process: Process,
    health: u16,
}

/// Runs `core init` of `core`: ours applies its CRDs and waits until they are Established; upstream's
/// also makes the client certificates its `core start` needs.
async fn init(
    core: Core,
    bins: &Binaries,
    cluster: &testenv::Cluster,
    ns: &str,
    dir: &Path,
) -> anyhow::Result<()> {
    match core {
        Core::Go => {
            let client = cluster.client().await?;
            testenv::upstream_core::init(&bins.peers, &client, cluster.kubeconfig(), ns, dir).await?;
        }
        Core::Rust => {
            let log = dir.join("core-init.log");
            let mut cmd = Command::new(&bins.ours);
            cmd.args(["core", "init"])
                .env("KUBECONFIG", cluster.kubeconfig())
                .env_remove("POD_NAME");
            let mut run = Process::spawn("crossplane core init", cmd, &log, Output::Log)?;
            let status = run.wait_exit_async(Duration::from_secs(180)).await?;
            ensure!(
                status.success(),
                "our `crossplane core init` exited with {status}; see {}",
                log.display()
            );
        }
    }
    Ok(())
}

/// Starts replica `id` of `core`, each at its defaults but webhooks off and package runtime External
/// (the bench serves the function itself).
fn spawn(
    core: Core,
    bins: &Binaries,
    kubeconfig: &Path,
    ns: &str,
    id: &str,
    dir: &Path,
) -> anyhow::Result<Replica> {
    let health = testenv::free_port()?;
    let cmd = match core {
        Core::Go => upstream::start(&bins.peers, kubeconfig, ns, id, dir, health)?,
        Core::Rust => {
            let mut cmd = Command::new(&bins.ours);
            cmd.args(["core", "start", "--kubeconfig"])
                .arg(kubeconfig)
                .args(["--leader-election", "--leader-election-namespace", ns])
                .args(["--leader-election-identity", id, "--namespace", ns])
                .args(["--enable-webhooks=false", "--metrics-bind-address", "0"])
                .args(["--package-runtime", "External"])
                .args(["--health-probe-bind-address", &format!("127.0.0.1:{health}")])
                .env_remove("KUBECONFIG")
                .env_remove("LEADER_ELECTION")
                .env_remove("POD_NAME")
                .env_remove("POD_NAMESPACE");
            cmd
        }
    };
    let log = dir.join(format!("{id}.log"));
    let process =
        Process::spawn(&format!("{} {id}", core.label()), cmd, &log, Output::Log).with_context(|| {
            format!(
                "starting {} (upstream's runs under unshare, as root)",
                core.label()
            )
        })?;
    Ok(Replica {
        identity: id.to_owned(),
        process,
        health,
    })
}

/// Waits until one of `replicas` holds the core's Lease; returns its index.
async fn wait_leader(client: &kube::Client, ns: &str, replicas: &[Replica]) -> anyhow::Result<usize> {
    let leases: Api<Lease> = Api::namespaced(client.clone(), ns);
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let holder = leases
            .get_opt(CORE_LEASE)
            .await?
            .and_then(|l| l.spec?.holder_identity)
            .unwrap_or_default();
        let held_by = |r: &Replica| holder == r.identity || holder.starts_with(&format!("{}_", r.identity));
        if let Some(i) = replicas.iter().position(held_by) {
            return Ok(i);
        }
        ensure!(
            Instant::now() < deadline,
            "no replica took Lease {ns}/{CORE_LEASE} within 120 s"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Waits until `replica` answers `/readyz` with 200.
async fn wait_ready(replica: &Replica) -> anyhow::Result<()> {
    let deadline = Instant::now() + Duration::from_secs(120);
    while testenv::http_get(replica.health, "/readyz")
        .await
        .is_none_or(|(code, _)| code != 200)
    {
        ensure!(
            Instant::now() < deadline,
            "{} did not answer /readyz with 200 within 120 s; see {}",
            replica.identity,
            replica.process.log().display()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    Ok(())
}

/// Runs `core` with `n` of `work` on a fresh control plane in `dir`.
pub async fn run(
    core: Core,
    bins: &Binaries,
    harness: &Path,
    dir: &Path,
    work: Work,
    n: usize,
) -> anyhow::Result<Run> {
    super::on_fresh_control_plane(dir, harness, async |cp| {
        let apiserver: Vec<u32> = [cp.apiserver().pid(), cp.etcd().pid()]
            .into_iter()
            .flatten()
            .collect();
        measure(core, bins, cp.cluster(), &apiserver, dir, (work, n)).await
    })
    .await
}

async fn measure(
    core: Core,
    bins: &Binaries,
    cluster: &testenv::Cluster,
    apiserver: &[u32],
    dir: &Path,
    (work, n): (Work, usize),
) -> anyhow::Result<Run> {
    let client = cluster.client().await?;
    let ns = cluster.namespace("cores").await?;
    let logs = dir.join("logs");
    std::fs::create_dir_all(&logs)?;
    init(core, bins, cluster, &ns, &logs).await?;
    let mut replicas = Vec::new();
    for id in ["core-a", "core-b"] {
        replicas.push(spawn(core, bins, cluster.kubeconfig(), &ns, id, &logs)?);
    }
    let leader = wait_leader(&client, &ns, &replicas)
        .await
        .with_context(|| format!("{}: logs in {}", core.label(), logs.display()))?;
    let (leader, standby) = (&replicas[leader], &replicas[1 - leader]);
    wait_ready(leader).await?;
    let (leader_rss_mib, settled) = procstat::settled_rss_mib(leader.process.pid(), SETTLE).await?;
    let idle = Idle {
        leader_rss_mib,
        standby_rss_mib: procstat::rss_mib(standby.process.pid())?,
        settled,
    };
    eprintln!(
        "[scale] {}: idle leader {leader_rss_mib:.1} MiB{}, standby {:.1} MiB",
        core.label(),
        if settled { "" } else { " (not settled)" },
        idle.standby_rss_mib
    );
    let target = Target {
        core,
        client: &client,
        ns: &ns,
        pids: [leader.process.pid(), standby.process.pid()],
        apiserver,
        logs: &logs,
        cluster,
    };
    let m = match work {
        Work::Xrds => load::xrds(&target, n).await,
        Work::Xrs => load::xrs(&target, n).await,
    }
    .with_context(|| format!("logs in {}", logs.display()))?;
    Ok(Run {
        core,
        work,
        count: n,
        idle,
        create_seconds: m.create_seconds,
        done_seconds: m.done_seconds,
        watch_errors: m.tally.errors,
        watch_restarts: m.tally.restarts,
        watch_last_error: m.tally.last_error,
        leader: m.leader,
        standby: m.standby,
        apiserver_cpu_seconds: m.apiserver_cpu_seconds,
        requests: m.requests,
    })
}
