//! One provider at one size: two replicas of ours (provider-nop) or of the crossplane-runtime peer
//! (provider-nop-go) on a fresh control plane, `size` NopResources created at once, and what it took
//! until all were Ready.

use std::{
    collections::{BTreeMap, HashSet},
    path::{Path, PathBuf},
    process::Stdio,
    time::{Duration, Instant},
};

use anyhow::{Context, ensure};
use jiff::Timestamp;
use kube::{
    Api, CustomResourceExt,
    api::{ApiResource, DynamicObject, Patch, PatchParams},
};
use serde::Serialize;
use tokio::process::{Child, Command};

/// The Lease both implementations stand for.
pub(super) const LEASE: &str = "crossplane-leader-election-provider-nop";
/// How long all of them may take to be Ready.
const READY_TIMEOUT: Duration = Duration::from_secs(1800);

/// Which provider.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub enum Imp {
    /// Ours, providers/provider-nop (release build).
    Rust,
    /// tests/peers/provider-nop-go, on crossplane-runtime and controller-runtime.
    Go,
}

impl Imp {
    /// Its name in the report.
    pub fn label(self) -> &'static str {
        match self {
            Imp::Rust => "provider-nop (Rust)",
            Imp::Go => "provider-nop-go (crossplane-runtime)",
        }
    }
}

/// The flags both get alike.
#[derive(Clone, Copy, Debug, Serialize)]
pub struct Flags {
    /// `--max-reconcile-rate`: both take it as the global reconcile rate and the number of workers.
    pub max_reconcile_rate: u32,
    /// `--poll`, in seconds: long, so that resources already Ready are not polled again during the run.
    pub poll_seconds: u64,
}

/// CPU and memory of one replica over the run.
#[derive(Clone, Copy, Debug, Default, Serialize)]
pub struct Usage {
    /// User and system CPU time from the first create until all were Ready.
    pub cpu_seconds: f64,
    /// Peak resident set (`VmHWM`) at the end, in MiB.
    pub peak_rss_mib: f64,
}

/// What one run measured.
#[derive(Clone, Debug, Serialize)]
pub struct Run {
    /// Which provider.
    pub imp: Imp,
    /// How many NopResources.
    pub size: usize,
    /// From the first create until the last create returned.
    pub create_seconds: f64,
    /// From the first create until all were Ready.
    pub ready_seconds: f64,
    /// The leader's `controller_runtime_reconcile_total` at the end.
    pub reconciles: f64,
    /// The leader, and the standby.
    pub leader: Usage,
    /// The standby.
    pub standby: Usage,
    /// The replicas' requests to the apiserver from the first create until all were Ready, by verb
    /// (Leases apart), from the audit log.
    pub requests: BTreeMap<String, usize>,
    /// Their Lease requests in the same window.
    pub lease_requests: usize,
    /// How often the bench's own watch counting Ready resources failed, and re-listed (shown in the
    /// report, so that a count that needed retries says so).
    pub watch_errors: usize,
    /// Its re-lists.
    pub watch_relists: usize,
}

impl Run {
    /// Ready resources per second.
    pub fn per_second(&self) -> f64 {
        self.size as f64 / self.ready_seconds.max(f64::MIN_POSITIVE)
    }

    /// Reconciles per second.
    pub fn reconciles_per_second(&self) -> f64 {
        self.reconciles / self.ready_seconds.max(f64::MIN_POSITIVE)
    }

    /// All requests but Leases, per resource.
    pub fn requests_per_resource(&self) -> f64 {
        self.requests.values().sum::<usize>() as f64 / self.size.max(1) as f64
    }
}

/// A replica process.
pub(super) struct Replica {
    /// Its leader election identity (and POD_NAME).
    pub(super) identity: String,
    child: Child,
    pid: u32,
    metrics: u16,
}

impl Replica {
    /// Starts one replica of `imp` standing for the Lease in `namespace` as `identity`, logging to
    /// `logs/<identity>.log`.
    pub(super) fn spawn(
        imp: Imp,
        binary: &Path,
        kubeconfig: &Path,
        namespace: &str,
        identity: &str,
        flags: Flags,
        logs: &Path,
    ) -> anyhow::Result<Replica> {
        let metrics = testenv::free_port()?;
        let mut cmd = Command::new(binary);
        cmd.arg("--kubeconfig")
            .arg(kubeconfig)
            .args(["--leader-election", "--leader-election-namespace", namespace])
            .args(["--metrics-bind-address", &format!("127.0.0.1:{metrics}")])
            .args(["--health-probe-bind-address", "0"])
            .args(["--poll", &format!("{}s", flags.poll_seconds)])
            .args(["--max-reconcile-rate", &flags.max_reconcile_rate.to_string()]);
        if imp == Imp::Rust {
            cmd.args(["--leader-election-identity", identity]);
        }
        let log = std::fs::File::create(logs.join(format!("{identity}.log")))?;
        let child = cmd
            .env_remove("KUBECONFIG")
            .env_remove("POD_NAMESPACE")
            .env("POD_NAME", identity)
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log)
            .kill_on_drop(true)
            .spawn()
            .with_context(|| format!("starting {}", binary.display()))?;
        let pid = child.id().context("a replica without a pid")?;
        Ok(Replica {
            identity: identity.to_owned(),
            child,
            pid,
            metrics,
        })
    }

    fn cpu_seconds(&self) -> anyhow::Result<f64> {
        super::procstat::cpu_seconds(self.pid)
    }

    /// Sends `signal` to the process.
    pub(super) fn signal(&self, signal: nix::sys::signal::Signal) -> anyhow::Result<()> {
        let pid = nix::unistd::Pid::from_raw(i32::try_from(self.pid)?);
        nix::sys::signal::kill(pid, signal).with_context(|| format!("signalling {}", self.identity))
    }

    /// Waits until the process has exited.
    pub(super) async fn wait_exit(&mut self) {
        let _ = self.child.wait().await;
    }

    /// Kills the process and waits for it.
    pub(super) async fn stop(&mut self) {
        let _ = self.child.start_kill();
        self.wait_exit().await;
    }

    /// Waits until its /metrics answers (it has started), for at most a minute.
    pub(super) async fn wait_serving(&self) -> anyhow::Result<()> {
        let start = Instant::now();
        while testenv::http_get(self.metrics, "/metrics").await.is_none() {
            ensure!(
                start.elapsed() < Duration::from_secs(60),
                "{} serves no /metrics on port {} after 60s",
                self.identity,
                self.metrics
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        Ok(())
    }
}

/// The sum of `controller_runtime_reconcile_total` at `port`'s /metrics.
async fn reconciles(port: u16) -> anyhow::Result<f64> {
    let (code, body) = testenv::http_get(port, "/metrics")
        .await
        .with_context(|| format!("no answer from /metrics on port {port}"))?;
    ensure!(code == 200, "/metrics on port {port} answered {code}");
    Ok(body
        .lines()
        .filter(|l| l.starts_with("controller_runtime_reconcile_total"))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum())
}

/// Installs the NopResource CRD and waits until it is Established.
pub(super) async fn install_crd(client: &kube::Client) -> anyhow::Result<()> {
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
    let crd = provider_nop::types::NopResource::crd();
    let name = crd.metadata.name.clone().context("the CRD has no name")?;
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    crds.patch(
        &name,
        &PatchParams::apply("xtask-scale").force(),
        &Patch::Apply(&crd),
    )
    .await?;
    let start = Instant::now();
    loop {
        let established = crds
            .get(&name)
            .await?
            .status
            .and_then(|s| s.conditions)
            .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Established" && c.status == "True"));
        if established {
            return Ok(());
        }
        ensure!(
            start.elapsed() < Duration::from_secs(60),
            "CRD {name} not Established after 60s"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Waits until one of `replicas` holds the Lease; returns its index.
pub(super) async fn wait_leader(
    client: &kube::Client,
    namespace: &str,
    replicas: &[Replica],
) -> anyhow::Result<usize> {
    let start = Instant::now();
    loop {
        let holders = testenv::workload::lease_holders(client, namespace).await?;
        if let Some(h) = holders.get(LEASE)
            && let Some(i) = replicas
                .iter()
                .position(|r| testenv::workload::holder_pod(h) == r.identity)
        {
            return Ok(i);
        }
        ensure!(
            start.elapsed() < Duration::from_secs(120),
            "no replica took {LEASE} within 120s"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

fn is_ready(obj: &DynamicObject) -> bool {
    obj.data["status"]["conditions"]
        .as_array()
        .is_some_and(|cs| cs.iter().any(|c| c["type"] == "Ready" && c["status"] == "True"))
}

/// Creates `size` NopResources Ready at once ([`super::create_all`]).
async fn create(api: &Api<DynamicObject>, size: usize) -> anyhow::Result<()> {
    super::create_all(api, size, "NopResource", nop).await
}

/// NopResource number `i`, Ready at once.
fn nop(i: usize) -> anyhow::Result<DynamicObject> {
    Ok(serde_json::from_value(serde_json::json!({
        "apiVersion": "nop.crossplane.io/v1alpha1", "kind": "NopResource",
        "metadata": {"name": format!("scale-{i:05}")},
        "spec": {"forProvider": {"conditionAfter": [
            {"time": "0s", "conditionType": "Ready", "conditionStatus": "True"}]}},
    }))?)
}

/// Runs `imp` with `size` NopResources on a fresh control plane in `dir`.
pub async fn run(
    imp: Imp,
    binary: &Path,
    harness: &Path,
    dir: &Path,
    size: usize,
    flags: Flags,
) -> anyhow::Result<Run> {
    super::on_fresh_control_plane(dir, harness, async |cp| {
        measure(imp, binary, cp.cluster(), dir, size, flags).await
    })
    .await
}

async fn measure(
    imp: Imp,
    binary: &Path,
    cluster: &testenv::Cluster,
    dir: &Path,
    size: usize,
    flags: Flags,
) -> anyhow::Result<Run> {
    let client = cluster.client().await?;
    install_crd(&client).await?;
    let namespace = cluster.namespace("scale").await?;
    let logs: PathBuf = dir.join("logs");
    std::fs::create_dir_all(&logs)?;
    let mut replicas = Vec::new();
    for id in ["scale-a", "scale-b"] {
        replicas.push(Replica::spawn(
            imp,
            binary,
            cluster.kubeconfig(),
            &namespace,
            id,
            flags,
            &logs,
        )?);
    }
    let leader = wait_leader(&client, &namespace, &replicas).await?;
    let standby = 1 - leader;

    let api: Api<DynamicObject> = Api::all_with(
        client.clone(),
        &ApiResource::erase::<provider_nop::types::NopResource>(&()),
    );
    // Count Ready resources from a watch, so that counting costs the apiserver no lists.
    let (watch, mut rx) = super::tally::count(api.clone(), is_ready);
    let cpu0 = [replicas[0].cpu_seconds()?, replicas[1].cpu_seconds()?];
    let from = Timestamp::now();
    let started = Instant::now();
    create(&api, size).await?;
    let create_seconds = started.elapsed().as_secs_f64();
    let what = format!("NopResources Ready (logs in {})", logs.display());
    let waited = super::tally::wait(&mut rx, size, READY_TIMEOUT, imp.label(), &what).await;
    let ready_seconds = started.elapsed().as_secs_f64();
    let until = Timestamp::now();
    watch.abort();
    waited?;
    let tally = rx.borrow().clone();
    if tally.errors > 0 || tally.restarts > 0 {
        eprintln!(
            "[scale] the watch counting Ready NopResources failed {} times and re-listed {} times",
            tally.errors, tally.restarts
        );
    }
    let usage = |i: usize| -> anyhow::Result<Usage> {
        Ok(Usage {
            cpu_seconds: replicas[i].cpu_seconds()? - cpu0[i],
            peak_rss_mib: super::procstat::peak_rss_mib(replicas[i].pid)?,
        })
    };
    let (leader_usage, standby_usage) = (usage(leader)?, usage(standby)?);
    let reconciles = reconciles(replicas[leader].metrics).await?;
    eprintln!(
        "[scale] {}: {size} NopResources Ready in {ready_seconds:.1}s ({reconciles} reconciles)",
        imp.label()
    );
    for r in &mut replicas {
        r.stop().await;
    }
    let identities: Vec<&str> = replicas.iter().map(|r| r.identity.as_str()).collect();
    let (requests, lease_requests) = requests(cluster, &identities, from, until)?;
    Ok(Run {
        imp,
        size,
        create_seconds,
        ready_seconds,
        reconciles,
        leader: leader_usage,
        standby: standby_usage,
        requests,
        lease_requests,
        watch_errors: tally.errors,
        watch_relists: tally.restarts,
    })
}

/// The requests of the replicas named by `identities` in `[from, until]`, by verb, and their Lease
/// requests apart; one per request (its ResponseComplete stage, or the ResponseStarted of a watch).
fn requests(
    cluster: &testenv::Cluster,
    identities: &[&str],
    from: Timestamp,
    until: Timestamp,
) -> anyhow::Result<(BTreeMap<String, usize>, usize)> {
    let mut requests = BTreeMap::new();
    let mut lease_requests = 0;
    let mut seen = HashSet::new();
    for e in cluster.audit().read()?.events {
        if e.received < from || e.received > until {
            continue;
        }
        if !e.agent_identity().is_some_and(|id| identities.contains(&id)) {
            continue;
        }
        if !seen.insert(e.audit_id.clone()) {
            continue;
        }
        if e.resource == "leases" {
            lease_requests += 1;
        } else {
            *requests.entry(e.verb.clone()).or_insert(0) += 1;
        }
    }
    Ok((requests, lease_requests))
}
