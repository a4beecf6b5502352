//! `cargo xtask bench [--quick]`: our elector against client-go's, side by side, on one apiserver.
//!
//! One run starts its own control plane in `target/testbed/bench`, builds the Go harness and, from the
//! same module with `-tags candidateonly`, client-go's elector as a stand-alone process (so its RSS is
//! client-go's own, not the test bed's), and this workspace's Rust twin
//! (`crates/election/examples/lease-candidate.rs`, release profile, same flags and JSON-line events),
//! then measures, at 15/10/2 s (client-go's defaults) and 60/50/2 s (Crossplane's):
//!
//! - **graceful handover**: SIGTERM the leader (release on cancel); latency = the standby's
//!   `started_leading` − the moment the signal was sent, both `CLOCK_MONOTONIC`. Rust and Go run one
//!   after the other so they do not share the CPU;
//! - **crash failover**: SIGKILL the leader; latency = the standby's `started_leading` − the kill. These
//!   series mostly wait for the lease to expire, so all four run at once;
//! - **API requests per minute** of a leader and of a standby, counted in the audit log by the identity in
//!   the user agent, over a window that starts once the pair has settled (all eight processes at once);
//! - **idle RSS** (`VmRSS` of `/proc/<pid>/status`) of each, sampled in the middle of that window;
//! - **N candidates on one Lease** (15/10/2): requests per minute of all of them, then handovers;
//! - **provider-nop** (Rust only: there is no Go provider-nop in this tree): the time to bring NopResources
//!   that are Ready at once (`conditionAfter: 0s`) to Ready with `--max-reconcile-rate 50`, and its RSS.
//!
//! It writes `docs/benchmarks.md` and `docs/benchmarks.svg`. Expected wall time on 2 cores, after the
//! builds: `--quick` about 8 minutes (5 graceful and 3 + 1 crash repetitions, 60 s of counting, 20
//! candidates, 200 NopResources); the full run about 25 minutes (20 graceful and 10 + 10 crash
//! repetitions, dominated by ten 60/50/2 s crash failovers of about 65 s each, 3 minutes of counting, 50
//! candidates, 1 000 NopResources). The Rust candidate is built (release) before anything is measured;
//! provider-nop's release build runs in the background meanwhile and is awaited only by the last
//! scenario. On a busy machine the release builds alone can take 10–15 minutes.
//!
//! Percentiles are nearest-rank, so with 5 samples p99 is the maximum.

use std::{
    collections::{BTreeMap, HashMap},
    fmt::Write as _,
    path::PathBuf,
    process::Stdio,
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

use anyhow::{Context, bail};
use jiff::Timestamp;
use kube::{
    Api, CustomResourceExt,
    api::{ApiResource, DeleteParams, DynamicObject, ListParams, Patch, PatchParams, PostParams},
};
use nix::{
    sys::signal::{Signal, kill},
    unistd::Pid,
};
use testenv::{CandidateEvent, Cluster, monotonic_ns as mono};
use tokio::{
    io::{AsyncBufReadExt, BufReader},
    process::{Child, Command},
};

use crate::{harness, runtime, target_dir};

/// Which elector.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
enum Imp {
    Rust,
    Go,
}

impl Imp {
    fn name(self) -> &'static str {
        match self {
            Imp::Rust => "Rust",
            Imp::Go => "client-go",
        }
    }
    fn short(self) -> &'static str {
        match self {
            Imp::Rust => "rs",
            Imp::Go => "go",
        }
    }
    fn color(self) -> &'static str {
        match self {
            Imp::Rust => "#d9480f",
            Imp::Go => "#1c7ed6",
        }
    }
}

/// Lease duration / renew deadline / retry period.
#[derive(Clone, Copy, Debug)]
struct Timings {
    lease: Duration,
    renew: Duration,
    retry: Duration,
}

const DEFAULTS: Timings = Timings {
    lease: Duration::from_secs(15),
    renew: Duration::from_secs(10),
    retry: Duration::from_secs(2),
};
const CROSSPLANE: Timings = Timings {
    lease: Duration::from_secs(60),
    renew: Duration::from_secs(50),
    retry: Duration::from_secs(2),
};

impl Timings {
    fn label(self) -> String {
        format!(
            "{}/{}/{} s",
            self.lease.as_secs(),
            self.renew.as_secs(),
            self.retry.as_secs()
        )
    }
    fn tag(self) -> u64 {
        self.lease.as_secs()
    }
}

/// How much to do.
#[derive(Clone, Copy, Debug)]
struct Plan {
    graceful_reps: usize,
    crash_reps_defaults: usize,
    crash_reps_crossplane: usize,
    rate_window: Duration,
    many: usize,
    many_window: Duration,
    many_handovers: usize,
    nop_count: usize,
}

const FULL: Plan = Plan {
    graceful_reps: 20,
    crash_reps_defaults: 10,
    crash_reps_crossplane: 10,
    rate_window: Duration::from_secs(180),
    many: 50,
    many_window: Duration::from_secs(120),
    many_handovers: 5,
    nop_count: 1000,
};
const QUICK: Plan = Plan {
    graceful_reps: 5,
    crash_reps_defaults: 3,
    crash_reps_crossplane: 1,
    rate_window: Duration::from_secs(60),
    many: 20,
    many_window: Duration::from_secs(60),
    many_handovers: 3,
    nop_count: 200,
};

/// One bar of the leadership timeline.
#[derive(Clone, Debug)]
struct Bar {
    row: String,
    imp: Imp,
    start: i64,
    end: i64,
}

/// What every scenario shares.
struct Env {
    cluster: Cluster,
    rust_bin: PathBuf,
    go_bin: PathBuf,
    logs: PathBuf,
    t0: i64,
    bars: Mutex<Vec<Bar>>,
}

/// A candidate process of either kind.
struct Cand {
    imp: Imp,
    identity: String,
    row: String,
    child: Child,
    pid: u32,
    events: Arc<Mutex<Vec<CandidateEvent>>>,
    ended: Option<i64>,
}

impl Cand {
    fn spawn(
        env: &Env,
        imp: Imp,
        ns: &str,
        lease: &str,
        identity: &str,
        row: &str,
        t: Timings,
    ) -> anyhow::Result<Cand> {
        let mut cmd = match imp {
            Imp::Go => {
                let mut c = Command::new(&env.go_bin);
                c.env("HARNESS_PARENT_PID", std::process::id().to_string());
                c
            }
            Imp::Rust => Command::new(&env.rust_bin),
        };
        let ms = |d: Duration| format!("{}ms", d.as_millis());
        let log = std::fs::File::create(env.logs.join(format!("{identity}.log")))?;
        let mut child = cmd
            .arg(format!("--kubeconfig={}", env.cluster.kubeconfig().display()))
            .arg(format!("--namespace={ns}"))
            .arg(format!("--name={lease}"))
            .arg(format!("--identity={identity}"))
            .arg(format!("--lease-duration={}", ms(t.lease)))
            .arg(format!("--renew-deadline={}", ms(t.renew)))
            .arg(format!("--retry-period={}", ms(t.retry)))
            .arg("--release-on-cancel=true")
            .env_remove("KUBECONFIG")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(log)
            .kill_on_drop(true)
            .spawn()
            .with_context(|| format!("starting the {} candidate {identity}", imp.name()))?;
        let pid = child.id().context("no pid")?;
        let events = Arc::new(Mutex::new(Vec::new()));
        if let Some(stdout) = child.stdout.take() {
            let events = events.clone();
            tokio::spawn(async move {
                let mut lines = BufReader::new(stdout).lines();
                while let Ok(Some(line)) = lines.next_line().await {
                    if let Ok(ev) = serde_json::from_str::<CandidateEvent>(&line)
                        && let Ok(mut list) = events.lock()
                    {
                        list.push(ev);
                    }
                }
            });
        }
        Ok(Cand {
            imp,
            identity: identity.into(),
            row: row.into(),
            child,
            pid,
            events,
            ended: None,
        })
    }

    fn events(&self) -> Vec<CandidateEvent> {
        self.events.lock().map(|e| e.clone()).unwrap_or_default()
    }

    fn find(&self, pred: impl Fn(&CandidateEvent) -> bool) -> Option<CandidateEvent> {
        self.events().into_iter().find(|e| pred(e))
    }

    async fn wait_for(
        &self,
        what: &str,
        timeout: Duration,
        pred: impl Fn(&CandidateEvent) -> bool,
    ) -> anyhow::Result<CandidateEvent> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(ev) = self.find(&pred) {
                return Ok(ev);
            }
            if Instant::now() > deadline {
                bail!(
                    "{} {}: no {what} within {timeout:?}",
                    self.imp.name(),
                    self.identity
                );
            }
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
    }

    async fn wait_leading(&self, timeout: Duration) -> anyhow::Result<CandidateEvent> {
        self.wait_for("started_leading", timeout, |e| e.event == "started_leading")
            .await
    }

    /// Waits until it has reported `leader` as the leader (best effort).
    async fn settle(&self, leader: &str) {
        let _ = self
            .wait_for("new_leader", Duration::from_secs(10), |e| {
                e.event == "new_leader" && e.leader == leader
            })
            .await;
    }

    fn signal(&self, sig: Signal) -> anyhow::Result<()> {
        kill(Pid::from_raw(i32::try_from(self.pid)?), sig)
            .with_context(|| format!("sending {sig} to {}", self.identity))
    }

    fn rss_kib(&self) -> Option<u64> {
        rss_kib(self.pid)
    }
}

/// `VmRSS` of a process in KiB.
fn rss_kib(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find(|l| l.starts_with("VmRSS:"))?
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()
}

impl Env {
    /// Ends a candidate: SIGKILL (`crash`) or SIGTERM, waits for the exit, records its leading bars.
    async fn retire(&self, mut c: Cand, crash: bool) {
        if c.ended.is_none() {
            let now = mono();
            let _ = c.signal(if crash { Signal::SIGKILL } else { Signal::SIGTERM });
            c.ended = Some(now);
        }
        if tokio::time::timeout(Duration::from_secs(20), c.child.wait())
            .await
            .is_err()
        {
            let _ = c.child.kill().await;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
        let mut start = None;
        let mut bars = Vec::new();
        for e in c.events() {
            match e.event.as_str() {
                "started_leading" if start.is_none() => start = Some(e.mono_ns),
                "signal" | "stopped_leading" | "exited" => {
                    if let Some(s) = start.take() {
                        bars.push((s, e.mono_ns));
                    }
                }
                _ => {}
            }
        }
        if let Some(s) = start {
            bars.push((s, c.ended.unwrap_or_else(mono)));
        }
        if let Ok(mut all) = self.bars.lock() {
            all.extend(bars.into_iter().map(|(start, end)| Bar {
                row: c.row.clone(),
                imp: c.imp,
                start,
                end,
            }));
        }
    }
}

/// Nearest-rank percentile of `xs` (sorted inside).
fn pct(xs: &[f64], p: f64) -> f64 {
    if xs.is_empty() {
        return f64::NAN;
    }
    let mut v = xs.to_vec();
    v.sort_by(f64::total_cmp);
    let rank = ((p / 100.0) * v.len() as f64).ceil().max(1.0) as usize;
    v[rank.min(v.len()) - 1]
}

/// A handover series: one leader and one standby; each repetition ends the leader (SIGTERM or SIGKILL),
/// times the standby's takeover, and starts a fresh standby in the old one's slot. Latencies in ms.
async fn series(env: &Env, imp: Imp, t: Timings, reps: usize, crash: bool) -> anyhow::Result<Vec<f64>> {
    let kind = if crash { "crash" } else { "graceful" };
    let ns = env
        .cluster
        .namespace(&format!("bench-{}-{kind}-{}", imp.short(), t.tag()))
        .await?;
    let lease = "bench";
    let row = |slot: usize| format!("{} {kind} {} #{}", imp.name(), t.label(), slot + 1);
    let id = |slot: usize, generation: usize| {
        format!(
            "{}-{kind}-{}-{}-{generation}",
            imp.short(),
            t.tag(),
            ["a", "b"][slot]
        )
    };
    let take = t.lease * 2 + Duration::from_secs(30);
    let mut leader_slot = 0;
    let mut leader = Cand::spawn(env, imp, &ns, lease, &id(0, 0), &row(0), t)?;
    leader.wait_leading(take).await?;
    let mut standby = Cand::spawn(env, imp, &ns, lease, &id(1, 0), &row(1), t)?;
    standby.settle(&leader.identity).await;
    let mut out = Vec::new();
    for rep in 0..reps {
        // Desynchronise the end from the renew cycle: 1 to 2 retry periods after settling.
        let phase = (mono().rem_euclid(1000)) as f64 / 1000.0;
        tokio::time::sleep(t.retry.mul_f64(1.0 + phase)).await;
        let sent = mono();
        leader.signal(if crash { Signal::SIGKILL } else { Signal::SIGTERM })?;
        leader.ended = Some(sent);
        let ev = standby
            .wait_leading(take)
            .await
            .with_context(|| format!("{kind} repetition {rep}"))?;
        let ms = (ev.mono_ns - sent) as f64 / 1e6;
        eprintln!("[bench] {} {kind} {} #{rep}: {ms:.1} ms", imp.name(), t.label());
        out.push(ms);
        env.retire(leader, crash).await;
        leader = standby;
        let slot = leader_slot;
        leader_slot = 1 - leader_slot;
        standby = Cand::spawn(env, imp, &ns, lease, &id(slot, rep + 1), &row(slot), t)?;
        standby.settle(&leader.identity).await;
    }
    env.retire(standby, false).await;
    env.retire(leader, false).await;
    Ok(out)
}

/// Requests of one identity in a window, from the audit log.
#[derive(Clone, Copy, Debug, Default)]
struct Counts {
    reads: usize,
    writes: usize,
}

/// Counts each request once (by audit ID, at its first stage) by the identity of its user agent.
fn count_requests(
    cluster: &Cluster,
    from: Timestamp,
    to: Timestamp,
) -> anyhow::Result<HashMap<String, Counts>> {
    let events = cluster.audit().read_all_stages()?.events;
    let mut seen = std::collections::HashSet::new();
    let mut out: HashMap<String, Counts> = HashMap::new();
    for e in events {
        if e.received < from || e.received >= to || !seen.insert(e.audit_id.clone()) {
            continue;
        }
        let Some(id) = e.agent_identity() else { continue };
        let c = out.entry(id.to_string()).or_default();
        if e.is_write() {
            c.writes += 1;
        } else {
            c.reads += 1;
        }
    }
    Ok(out)
}

fn per_min(n: usize, window: Duration) -> f64 {
    n as f64 * 60.0 / window.as_secs_f64()
}

/// Steady-state figures of one pair.
#[derive(Clone, Copy, Debug, Default)]
struct PairRates {
    leader_writes: f64,
    leader_reads: f64,
    standby: f64,
    leader_rss: u64,
    standby_rss: u64,
}

/// A leader and a standby of each kind at each timing, all at once, counted over `window`.
async fn rates(env: &Env, window: Duration) -> anyhow::Result<BTreeMap<(Imp, u64), PairRates>> {
    let mut pairs = Vec::new();
    for imp in [Imp::Rust, Imp::Go] {
        for t in [DEFAULTS, CROSSPLANE] {
            let ns = env
                .cluster
                .namespace(&format!("bench-{}-rate-{}", imp.short(), t.tag()))
                .await?;
            let row = |s: &str| format!("{} idle {} {s}", imp.name(), t.label());
            let a = Cand::spawn(
                env,
                imp,
                &ns,
                "bench",
                &format!("{}-rate-{}-leader", imp.short(), t.tag()),
                &row("leader"),
                t,
            )?;
            a.wait_leading(Duration::from_secs(30)).await?;
            let b = Cand::spawn(
                env,
                imp,
                &ns,
                "bench",
                &format!("{}-rate-{}-standby", imp.short(), t.tag()),
                &row("standby"),
                t,
            )?;
            pairs.push((imp, t, a, b));
        }
    }
    for (_, _, a, b) in &pairs {
        b.settle(&a.identity).await;
    }
    // Let start-up traffic (the standby's first list and watch) pass.
    tokio::time::sleep(Duration::from_secs(5)).await;
    let from = Timestamp::now();
    eprintln!("[bench] counting requests of 4 pairs for {window:?}");
    tokio::time::sleep(window / 2).await;
    let rss: Vec<(u64, u64)> = pairs
        .iter()
        .map(|(_, _, a, b)| (a.rss_kib().unwrap_or(0), b.rss_kib().unwrap_or(0)))
        .collect();
    tokio::time::sleep(window / 2).await;
    let to = Timestamp::now();
    let mut ids = Vec::new();
    for (imp, t, a, b) in pairs {
        ids.push((imp, t, a.identity.clone(), b.identity.clone()));
        env.retire(a, false).await;
        env.retire(b, false).await;
    }
    tokio::time::sleep(Duration::from_secs(2)).await;
    let counts = count_requests(&env.cluster, from, to)?;
    let mut out = BTreeMap::new();
    for ((imp, t, a, b), (ra, rb)) in ids.into_iter().zip(rss) {
        let ca = counts.get(&a).copied().unwrap_or_default();
        let cb = counts.get(&b).copied().unwrap_or_default();
        out.insert(
            (imp, t.tag()),
            PairRates {
                leader_writes: per_min(ca.writes, window),
                leader_reads: per_min(ca.reads, window),
                standby: per_min(cb.reads + cb.writes, window),
                leader_rss: ra,
                standby_rss: rb,
            },
        );
    }
    Ok(out)
}

/// N candidates on one Lease.
#[derive(Clone, Debug, Default)]
struct ManyResult {
    total_per_min: f64,
    per_standby_per_min: f64,
    handovers: Vec<f64>,
    mean_rss: u64,
}

async fn many(
    env: &Env,
    n: usize,
    window: Duration,
    handovers: usize,
) -> anyhow::Result<BTreeMap<Imp, ManyResult>> {
    let t = DEFAULTS;
    let mut groups = Vec::new();
    for imp in [Imp::Rust, Imp::Go] {
        let ns = env
            .cluster
            .namespace(&format!("bench-{}-many", imp.short()))
            .await?;
        let mut cands = Vec::new();
        for i in 0..n {
            let row = format!("{} {n} candidates", imp.name());
            cands.push(Cand::spawn(
                env,
                imp,
                &ns,
                "bench",
                &format!("{}-many-{i:02}", imp.short()),
                &row,
                t,
            )?);
        }
        groups.push((imp, cands));
    }
    for (imp, cands) in &groups {
        wait_any_leading(cands, 0, Duration::from_secs(60))
            .await
            .with_context(|| format!("{} candidates: no leader", imp.name()))?;
    }
    tokio::time::sleep(Duration::from_secs(8)).await;
    eprintln!("[bench] counting requests of 2×{n} candidates for {window:?}");
    let from = Timestamp::now();
    tokio::time::sleep(window / 2).await;
    let rss: Vec<u64> = groups
        .iter()
        .map(|(_, c)| c.iter().filter_map(Cand::rss_kib).sum::<u64>() / c.len().max(1) as u64)
        .collect();
    tokio::time::sleep(window / 2).await;
    let to = Timestamp::now();
    tokio::time::sleep(Duration::from_secs(1)).await;
    let counts = count_requests(&env.cluster, from, to)?;
    let mut out = BTreeMap::new();
    for ((imp, mut cands), rss) in groups.into_iter().zip(rss) {
        let leader = cands
            .iter()
            .position(is_leading)
            .context("no leader among the candidates")?;
        let total: usize = cands
            .iter()
            .map(|c| counts.get(&c.identity).map(|c| c.reads + c.writes).unwrap_or(0))
            .sum();
        let standbys: usize = cands
            .iter()
            .enumerate()
            .filter(|(i, _)| *i != leader)
            .map(|(_, c)| counts.get(&c.identity).map(|c| c.reads + c.writes).unwrap_or(0))
            .sum();
        let mut res = ManyResult {
            total_per_min: per_min(total, window),
            per_standby_per_min: per_min(standbys, window) / (n.saturating_sub(1).max(1)) as f64,
            handovers: Vec::new(),
            mean_rss: rss,
        };
        for rep in 0..handovers {
            let leader = cands.iter().position(is_leading).context("no leader")?;
            let old = cands.remove(leader);
            let sent = mono();
            old.signal(Signal::SIGTERM)?;
            let mut old = old;
            old.ended = Some(sent);
            let (_, ev) = wait_any_leading(&cands, sent, t.lease * 2 + Duration::from_secs(10)).await?;
            let ms = (ev.mono_ns - sent) as f64 / 1e6;
            eprintln!(
                "[bench] {} {n} candidates handover #{rep}: {ms:.1} ms",
                imp.name()
            );
            res.handovers.push(ms);
            env.retire(old, false).await;
            tokio::time::sleep(t.retry * 2).await;
        }
        for c in cands.iter() {
            let _ = c.signal(Signal::SIGTERM);
        }
        for c in cands {
            env.retire(c, false).await;
        }
        out.insert(imp, res);
    }
    Ok(out)
}

fn is_leading(c: &Cand) -> bool {
    c.events()
        .iter()
        .rev()
        .find(|e| e.event == "started_leading" || e.event == "stopped_leading")
        .is_some_and(|e| e.event == "started_leading")
}

/// Waits for the first `started_leading` after `after` (monotonic ns) among `cands`.
async fn wait_any_leading(
    cands: &[Cand],
    after: i64,
    timeout: Duration,
) -> anyhow::Result<(usize, CandidateEvent)> {
    let deadline = Instant::now() + timeout;
    loop {
        let mut best: Option<(usize, CandidateEvent)> = None;
        for (i, c) in cands.iter().enumerate() {
            if let Some(ev) = c.find(|e| e.event == "started_leading" && e.mono_ns >= after)
                && best.as_ref().is_none_or(|(_, b)| ev.mono_ns < b.mono_ns)
            {
                best = Some((i, ev));
            }
        }
        if let Some(b) = best {
            return Ok(b);
        }
        if Instant::now() > deadline {
            bail!("no candidate started leading within {timeout:?}");
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// provider-nop bringing NopResources to Ready.
#[derive(Clone, Debug, Default)]
struct NopResult {
    count: usize,
    create_secs: f64,
    ready_secs: f64,
    idle_rss: u64,
    loaded_rss: u64,
}

async fn nop(env: &Env, nop_bin: &std::path::Path, count: usize) -> anyhow::Result<NopResult> {
    use provider_nop::types::NopResource;
    let client = env.cluster.client().await?;
    let crd = NopResource::crd();
    let crds: Api<
        k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition,
    > = Api::all(client.clone());
    let crd_name = crd.metadata.name.clone().context("CRD without a name")?;
    crds.patch(
        &crd_name,
        &PatchParams::apply("xtask-bench").force(),
        &Patch::Apply(&crd),
    )
    .await?;
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let c = crds.get(&crd_name).await?;
        let established = c
            .status
            .and_then(|s| s.conditions)
            .unwrap_or_default()
            .iter()
            .any(|c| c.type_ == "Established" && c.status == "True");
        if established {
            break;
        }
        if Instant::now() > deadline {
            bail!("CRD {crd_name} not Established");
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let ns = env.cluster.namespace("bench-nop").await?;
    let identity = format!("{ns}-nop");
    let log = std::fs::File::create(env.logs.join("provider-nop.log"))?;
    let mut child = Command::new(nop_bin)
        .args([
            "--kubeconfig",
            &env.cluster.kubeconfig().display().to_string(),
            "--leader-election",
            "--leader-election-namespace",
            &ns,
            "--leader-election-id",
            "crossplane-leader-election-provider-nop",
            "--leader-election-identity",
            &identity,
            "--metrics-bind-address",
            "0",
            "--health-probe-bind-address",
            "0",
            "--label-selector",
            &format!("bench={ns}"),
            "--poll",
            "60s",
            "--max-reconcile-rate",
            "50",
        ])
        .env_remove("KUBECONFIG")
        .env_remove("POD_NAMESPACE")
        .env("POD_NAME", &identity)
        .stdin(Stdio::null())
        .stdout(log.try_clone()?)
        .stderr(log)
        .kill_on_drop(true)
        .spawn()
        .context("starting provider-nop")?;
    let pid = child.id().context("provider-nop has no pid")?;
    let leases: Api<k8s_openapi::api::coordination::v1::Lease> = Api::namespaced(client.clone(), &ns);
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let holder = leases
            .get_opt("crossplane-leader-election-provider-nop")
            .await?
            .and_then(|l| l.spec)
            .and_then(|s| s.holder_identity);
        if holder.as_deref() == Some(identity.as_str()) {
            break;
        }
        if Instant::now() > deadline {
            bail!(
                "provider-nop did not lead within 60 s (log {})",
                env.logs.join("provider-nop.log").display()
            );
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    tokio::time::sleep(Duration::from_secs(10)).await;
    let idle_rss = rss_kib(pid).unwrap_or(0);

    let ar = ApiResource::erase::<NopResource>(&());
    let api: Api<DynamicObject> = Api::all_with(client.clone(), &ar);
    let started = Instant::now();
    let mut set = tokio::task::JoinSet::new();
    let per = count.div_ceil(16);
    for w in 0..16 {
        let api = api.clone();
        let ns = ns.clone();
        set.spawn(async move {
            for i in (w * per)..((w + 1) * per).min(count) {
                let obj: DynamicObject = serde_json::from_value(serde_json::json!({
                    "apiVersion": "nop.crossplane.io/v1alpha1",
                    "kind": "NopResource",
                    "metadata": { "name": format!("{ns}-{i:04}"), "labels": { "bench": ns } },
                    "spec": { "forProvider": { "conditionAfter": [
                        { "time": "0s", "conditionType": "Ready", "conditionStatus": "True" }
                    ] } },
                }))?;
                api.create(&PostParams::default(), &obj).await?;
            }
            anyhow::Ok(())
        });
    }
    while let Some(r) = set.join_next().await {
        r??;
    }
    let create_secs = started.elapsed().as_secs_f64();
    let selector = ListParams::default().labels(&format!("bench={ns}"));
    let deadline = Instant::now() + Duration::from_secs(900);
    loop {
        let ready = api
            .list(&selector)
            .await?
            .items
            .iter()
            .filter(|r| {
                r.data
                    .pointer("/status/conditions")
                    .and_then(|c| c.as_array())
                    .is_some_and(|cs| {
                        cs.iter().any(|c| {
                            c.get("type").and_then(|t| t.as_str()) == Some("Ready")
                                && c.get("status").and_then(|s| s.as_str()) == Some("True")
                        })
                    })
            })
            .count();
        if ready >= count {
            break;
        }
        if Instant::now() > deadline {
            bail!("only {ready}/{count} NopResources Ready after 15 minutes");
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    let ready_secs = started.elapsed().as_secs_f64();
    eprintln!("[bench] provider-nop: {count} NopResources Ready in {ready_secs:.1} s");
    tokio::time::sleep(Duration::from_secs(5)).await;
    let loaded_rss = rss_kib(pid).unwrap_or(0);
    // Clean up through the provider so the finalizers come off, then stop it.
    let _ = api.delete_collection(&DeleteParams::default(), &selector).await;
    let deadline = Instant::now() + Duration::from_secs(120);
    while Instant::now() < deadline && !api.list(&selector).await?.items.is_empty() {
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let _ = kill(Pid::from_raw(i32::try_from(pid)?), Signal::SIGTERM);
    if tokio::time::timeout(Duration::from_secs(20), child.wait())
        .await
        .is_err()
    {
        let _ = child.kill().await;
    }
    Ok(NopResult {
        count,
        create_secs,
        ready_secs,
        idle_rss,
        loaded_rss,
    })
}

/// Everything measured.
#[derive(Default)]
struct Results {
    graceful: BTreeMap<(Imp, u64), Vec<f64>>,
    crash: BTreeMap<(Imp, u64), Vec<f64>>,
    rates: BTreeMap<(Imp, u64), PairRates>,
    many: BTreeMap<Imp, ManyResult>,
    nop: Option<NopResult>,
    errors: Vec<String>,
}

/// Builds the Rust candidate (release) and returns its path.
fn build_candidate() -> anyhow::Result<PathBuf> {
    cargo_release(&["-p", "election", "--example", "lease-candidate"])?;
    Ok(target_dir()
        .join("release")
        .join("examples")
        .join("lease-candidate"))
}

/// Runs `cargo build --release <args>` in the workspace.
fn cargo_release(args: &[&str]) -> anyhow::Result<()> {
    eprintln!("[bench] cargo build --release {}", args.join(" "));
    let status = crate::cargo()
        .args(["build", "--release"])
        .args(args)
        .current_dir(testenv::harness::repo_root())
        .status()?;
    if !status.success() {
        bail!("cargo build --release {} failed", args.join(" "));
    }
    Ok(())
}

/// `cargo xtask bench [--quick]`.
pub fn run(quick: bool) -> anyhow::Result<i32> {
    let plan = if quick { QUICK } else { FULL };
    let began = Instant::now();
    let began_wall = Timestamp::now();
    let harness = harness()?;
    let go_bin = testenv::harness::ensure_candidate_built(&target_dir())
        .context("building client-go's stand-alone lease candidate")?;
    let rust_bin = build_candidate()?;
    // provider-nop's release build (long, with LTO) runs while the candidates are measured; only the
    // last scenario needs it.
    let nop_build = std::thread::spawn(|| {
        cargo_release(&["-p", "provider-nop", "--bin", "provider-nop"])
            .map(|()| target_dir().join("release").join("provider-nop"))
    });
    let dir = target_dir().join("testbed").join("bench");
    if dir.exists() {
        std::fs::remove_dir_all(&dir).with_context(|| format!("removing {}", dir.display()))?;
    }
    let logs = dir.join("candidates");
    let rt = runtime()?;
    eprintln!("[bench] starting the control plane in {}", dir.display());
    let mut cp = rt
        .block_on(testenv::ControlPlane::start(&dir, &harness, false))
        .context("starting the bench control plane")?;
    std::fs::create_dir_all(&logs)?;
    let env = Env {
        cluster: cp.cluster().clone(),
        rust_bin,
        go_bin,
        logs,
        t0: mono(),
        bars: Mutex::new(Vec::new()),
    };
    let load_start = loadavg();
    let results = rt.block_on(measure(&env, plan, nop_build));
    let t1 = mono();
    eprintln!("[bench] stopping the control plane");
    cp.stop().context("stopping the bench control plane")?;
    let elapsed = began.elapsed();
    let root = testenv::harness::repo_root();
    let docs = root.join("docs");
    std::fs::create_dir_all(&docs)?;
    let bars = env.bars.lock().map(|b| b.clone()).unwrap_or_default();
    std::fs::write(
        docs.join("benchmarks.md"),
        markdown(&results, plan, quick, began_wall, elapsed, &load_start)?,
    )?;
    std::fs::write(docs.join("benchmarks.svg"), svg(&results, &bars, env.t0, t1))?;
    eprintln!(
        "[bench] wrote docs/benchmarks.md and docs/benchmarks.svg in {:.1} min",
        elapsed.as_secs_f64() / 60.0
    );
    for e in &results.errors {
        eprintln!("[bench] error: {e}");
    }
    Ok(if results.errors.is_empty() { 0 } else { 1 })
}

async fn measure(
    env: &Env,
    plan: Plan,
    nop_build: std::thread::JoinHandle<anyhow::Result<PathBuf>>,
) -> Results {
    let mut r = Results::default();
    let err = |r: &mut Results, what: &str, e: anyhow::Error| {
        eprintln!("[bench] {what} failed: {e:#}");
        r.errors.push(format!("{what}: {e:#}"));
    };
    // Graceful handovers, one series at a time.
    for t in [DEFAULTS, CROSSPLANE] {
        for imp in [Imp::Rust, Imp::Go] {
            match series(env, imp, t, plan.graceful_reps, false).await {
                Ok(v) => {
                    r.graceful.insert((imp, t.tag()), v);
                }
                Err(e) => err(&mut r, &format!("{} graceful {}", imp.name(), t.label()), e),
            }
        }
    }
    // Crash failovers: all four series at once.
    eprintln!("[bench] crash failovers (waiting out the leases)");
    let (a, b, c, d) = tokio::join!(
        series(env, Imp::Rust, DEFAULTS, plan.crash_reps_defaults, true),
        series(env, Imp::Go, DEFAULTS, plan.crash_reps_defaults, true),
        series(env, Imp::Rust, CROSSPLANE, plan.crash_reps_crossplane, true),
        series(env, Imp::Go, CROSSPLANE, plan.crash_reps_crossplane, true),
    );
    for (key, res) in [
        ((Imp::Rust, DEFAULTS), a),
        ((Imp::Go, DEFAULTS), b),
        ((Imp::Rust, CROSSPLANE), c),
        ((Imp::Go, CROSSPLANE), d),
    ] {
        match res {
            Ok(v) => {
                r.crash.insert((key.0, key.1.tag()), v);
            }
            Err(e) => err(&mut r, &format!("{} crash {}", key.0.name(), key.1.label()), e),
        }
    }
    match rates(env, plan.rate_window).await {
        Ok(v) => r.rates = v,
        Err(e) => err(&mut r, "request rates", e),
    }
    match many(env, plan.many, plan.many_window, plan.many_handovers).await {
        Ok(v) => r.many = v,
        Err(e) => err(&mut r, "many candidates", e),
    }
    let nop_bin = tokio::task::spawn_blocking(move || nop_build.join())
        .await
        .map_err(|e| anyhow::anyhow!("{e}"))
        .and_then(|r| r.map_err(|_| anyhow::anyhow!("the provider-nop build panicked")))
        .and_then(|r| r);
    let res = match nop_bin {
        Ok(bin) => nop(env, &bin, plan.nop_count).await,
        Err(e) => Err(e),
    };
    match res {
        Ok(v) => r.nop = Some(v),
        Err(e) => err(&mut r, "provider-nop", e),
    }
    r
}

fn command_line(cmd: &str, args: &[&str]) -> String {
    std::process::Command::new(cmd)
        .args(args)
        .output()
        .ok()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "unknown".into())
}

fn mem_total() -> String {
    std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|m| {
            m.lines()
                .find(|l| l.starts_with("MemTotal:"))
                .and_then(|l| l.split_whitespace().nth(1).and_then(|k| k.parse::<f64>().ok()))
        })
        .map(|k| format!("{:.1} GiB", k / 1024.0 / 1024.0))
        .unwrap_or_else(|| "unknown".into())
}

fn fmt_ms(x: f64) -> String {
    if x.is_nan() {
        "–".into()
    } else if x >= 10_000.0 {
        format!("{:.2} s", x / 1000.0)
    } else {
        format!("{x:.1} ms")
    }
}

fn ratio(rust: f64, go: f64) -> String {
    if rust.is_nan() || go.is_nan() || go == 0.0 {
        "–".into()
    } else {
        format!("{:.3}", rust / go)
    }
}

/// A table row: name, how to read the figure, unit.
type RateRow = (&'static str, fn(PairRates) -> f64, &'static str);
/// A table row of the many-candidates figures.
type ManyRow = (&'static str, fn(&ManyResult) -> f64, &'static str);

/// The 1-, 5- and 15-minute load averages.
fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|l| l.split_whitespace().take(3).collect::<Vec<_>>().join(" / "))
        .unwrap_or_else(|_| "unknown".into())
}

fn markdown(
    r: &Results,
    plan: Plan,
    quick: bool,
    began: Timestamp,
    elapsed: Duration,
    load_start: &str,
) -> anyhow::Result<String> {
    let mut s = String::new();
    writeln!(s, "# Benchmarks: crossplane-rs `election` vs client-go\n")?;
    writeln!(
        s,
        "Written by `cargo xtask bench{}` on {} ({:.1} min). Do not edit by hand; rerun it.\n",
        if quick { " --quick" } else { "" },
        began.strftime("%Y-%m-%d %H:%M UTC"),
        elapsed.as_secs_f64() / 60.0
    )?;
    writeln!(s, "## Machine and versions\n")?;
    writeln!(s, "| | |\n|---|---|")?;
    writeln!(s, "| CPUs (`nproc`) | {} |", command_line("nproc", &[]))?;
    writeln!(s, "| Memory | {} |", mem_total())?;
    writeln!(s, "| Kernel | {} |", command_line("uname", &["-sr"]))?;
    writeln!(s, "| rustc | {} |", command_line("rustc", &["--version"]))?;
    writeln!(s, "| go | {} |", command_line("go", &["version"]))?;
    writeln!(
        s,
        "| Kubernetes (apiserver, etcd, client-go) | {} |",
        testenv::KUBERNETES_VERSION
    )?;
    writeln!(
        s,
        "| Mode | {} |\n",
        if quick {
            format!(
                "`--quick`: {} graceful and {} / {} crash repetitions (15/10/2, 60/50/2), {} s counting window, {} candidates, {} NopResources",
                plan.graceful_reps,
                plan.crash_reps_defaults,
                plan.crash_reps_crossplane,
                plan.rate_window.as_secs(),
                plan.many,
                plan.nop_count
            )
        } else {
            "full".into()
        }
    )?;
    writeln!(
        s,
        "Both candidates are processes with the same flags and JSON events: client-go's `leaderelection` \
         (`tests/control-plane` built alone with `-tags candidateonly`, so only client-go is linked in) \
         and `crates/election/examples/lease-candidate.rs` (release build), \
         against one kube-apiserver + etcd on this machine. Latencies are `CLOCK_MONOTONIC` from the \
         signal sent by the bench to the standby's `started_leading`. Percentiles are nearest-rank (with \
         fewer than 100 samples, p99 is the maximum). Request counts come from the apiserver's audit log, \
         by the identity in each candidate's user agent. Rust/Go < 1 means Rust is faster or cheaper.\n"
    )?;
    writeln!(
        s,
        "The machine is shared: load \
         average {} at the start and {} at the end of the run.\n",
        load_start,
        loadavg()
    )?;
    writeln!(s, "## Results\n")?;
    writeln!(s, "| Figure | Timings | n | Rust | client-go | Rust/Go |")?;
    writeln!(s, "|---|---|---|---|---|---|")?;
    for (name, map) in [("Graceful handover", &r.graceful), ("Crash failover", &r.crash)] {
        for t in [DEFAULTS, CROSSPLANE] {
            let rs = map.get(&(Imp::Rust, t.tag()));
            let go = map.get(&(Imp::Go, t.tag()));
            let n = rs.map(Vec::len).or(go.map(Vec::len)).unwrap_or(0);
            for p in [50.0, 99.0] {
                let a = rs.map(|v| pct(v, p)).unwrap_or(f64::NAN);
                let b = go.map(|v| pct(v, p)).unwrap_or(f64::NAN);
                writeln!(
                    s,
                    "| {name} p{p} | {} | {n} | {} | {} | {} |",
                    t.label(),
                    fmt_ms(a),
                    fmt_ms(b),
                    ratio(a, b)
                )?;
            }
        }
    }
    for t in [DEFAULTS, CROSSPLANE] {
        let rs = r.rates.get(&(Imp::Rust, t.tag())).copied();
        let go = r.rates.get(&(Imp::Go, t.tag())).copied();
        let rows: [RateRow; 5] = [
            ("Leader writes/min", |p| p.leader_writes, ""),
            ("Leader reads/min", |p| p.leader_reads, ""),
            ("Standby requests/min", |p| p.standby, ""),
            ("Leader idle RSS", |p| p.leader_rss as f64 / 1024.0, " MiB"),
            ("Standby idle RSS", |p| p.standby_rss as f64 / 1024.0, " MiB"),
        ];
        for (name, f, unit) in rows {
            let a = rs.map(f).unwrap_or(f64::NAN);
            let b = go.map(f).unwrap_or(f64::NAN);
            writeln!(
                s,
                "| {name} | {} | {} s | {a:.1}{unit} | {b:.1}{unit} | {} |",
                t.label(),
                plan.rate_window.as_secs(),
                ratio(a, b)
            )?;
        }
    }
    let m = |imp: Imp| r.many.get(&imp).cloned();
    let (mr, mg) = (m(Imp::Rust), m(Imp::Go));
    let many_rows: [ManyRow; 3] = [
        ("all candidates, requests/min", |x| x.total_per_min, ""),
        ("per standby, requests/min", |x| x.per_standby_per_min, ""),
        ("mean RSS per candidate", |x| x.mean_rss as f64 / 1024.0, " MiB"),
    ];
    for (name, f, unit) in many_rows {
        let a = mr.as_ref().map(f).unwrap_or(f64::NAN);
        let b = mg.as_ref().map(f).unwrap_or(f64::NAN);
        writeln!(
            s,
            "| {} candidates: {name} | 15/10/2 s | {} s | {a:.1}{unit} | {b:.1}{unit} | {} |",
            plan.many,
            plan.many_window.as_secs(),
            ratio(a, b)
        )?;
    }
    for p in [50.0, 99.0] {
        let a = mr.as_ref().map(|x| pct(&x.handovers, p)).unwrap_or(f64::NAN);
        let b = mg.as_ref().map(|x| pct(&x.handovers, p)).unwrap_or(f64::NAN);
        writeln!(
            s,
            "| {} candidates: graceful handover p{p} | 15/10/2 s | {} | {} | {} | {} |",
            plan.many,
            plan.many_handovers,
            fmt_ms(a),
            fmt_ms(b),
            ratio(a, b)
        )?;
    }
    match &r.nop {
        Some(n) => {
            writeln!(
                s,
                "| provider-nop: {} NopResources created → all Ready | 60/50/2 s, `--max-reconcile-rate 50` | 1 | {:.1} s (creates took {:.1} s) | no Go provider-nop here | – |",
                n.count, n.ready_secs, n.create_secs
            )?;
            writeln!(
                s,
                "| provider-nop idle RSS (leading, no resources) | | 1 | {:.1} MiB | – | – |",
                n.idle_rss as f64 / 1024.0
            )?;
            writeln!(
                s,
                "| provider-nop RSS with {} resources | | 1 | {:.1} MiB | – | – |",
                n.count,
                n.loaded_rss as f64 / 1024.0
            )?;
        }
        None => writeln!(s, "| provider-nop | | | failed | – | – |")?,
    }
    goals(&mut s, r)?;
    writeln!(s, "\n## Samples (ms)\n")?;
    for (name, map) in [("graceful", &r.graceful), ("crash", &r.crash)] {
        for ((imp, tag), v) in map.iter() {
            let list: Vec<String> = v.iter().map(|x| format!("{x:.1}")).collect();
            writeln!(s, "- {} {name} {tag}/…: {}", imp.name(), list.join(", "))?;
        }
    }
    for (imp, x) in &r.many {
        let list: Vec<String> = x.handovers.iter().map(|x| format!("{x:.1}")).collect();
        writeln!(
            s,
            "- {} {} candidates handover: {}",
            imp.name(),
            plan.many,
            list.join(", ")
        )?;
    }
    if !r.errors.is_empty() {
        writeln!(s, "\n## Errors in this run\n")?;
        for e in &r.errors {
            writeln!(s, "- {e}")?;
        }
    }
    writeln!(s, "\nThe picture: [benchmarks.svg](benchmarks.svg).")?;
    Ok(s)
}

/// Issue 8's goals, checked against this run.
fn goals(s: &mut String, r: &Results) -> std::fmt::Result {
    let mark = |ok: bool| if ok { "met" } else { "**missed**" };
    writeln!(s, "\n## Goals (issue 8)\n")?;
    writeln!(s, "| Goal | This run | |\n|---|---|---|")?;
    for t in [DEFAULTS, CROSSPLANE] {
        let rs = r.graceful.get(&(Imp::Rust, t.tag())).map(|v| pct(v, 99.0));
        let go = r.graceful.get(&(Imp::Go, t.tag())).map(|v| pct(v, 99.0));
        if let (Some(a), Some(b)) = (rs, go) {
            writeln!(
                s,
                "| graceful handover p99 ≤ 250 ms and ≥ 10× faster than client-go ({}) | {} vs {} ({:.0}×) | {} |",
                t.label(),
                fmt_ms(a),
                fmt_ms(b),
                b / a,
                mark(a <= 250.0 && b / a >= 10.0)
            )?;
        }
        if let Some(v) = r.crash.get(&(Imp::Rust, t.tag())) {
            let p = pct(v, 99.0);
            let limit = t.lease.as_secs_f64() * 1000.0 + 250.0;
            writeln!(
                s,
                "| crash failover p99 ≤ lease + 250 ms ({}) | {} ≤ {} | {} |",
                t.label(),
                fmt_ms(p),
                fmt_ms(limit),
                mark(p <= limit)
            )?;
        }
        if let Some(p) = r.rates.get(&(Imp::Rust, t.tag())) {
            writeln!(
                s,
                "| standby ≤ 1 request/min ({}) | {:.2}/min | {} |",
                t.label(),
                p.standby,
                mark(p.standby <= 1.0)
            )?;
            writeln!(
                s,
                "| leader ≤ 30 writes/min, no reads ({}) | {:.1} writes/min, {:.1} reads/min | {} |",
                t.label(),
                p.leader_writes,
                p.leader_reads,
                mark(p.leader_writes <= 30.5 && p.leader_reads == 0.0)
            )?;
        }
    }
    if let Some(n) = &r.nop {
        let mib = n.idle_rss as f64 / 1024.0;
        writeln!(
            s,
            "| provider idle RSS ≤ 20 MiB (provider-nop, release build) | {mib:.1} MiB | {} |",
            mark(mib <= 20.0)
        )?;
    }
    writeln!(
        s,
        "\nA request is counted once, when it was received, by the identity in its user agent. A standby's \
         watch is one long-running request, opened before the window and renewed by kube-rs every 295 s \
         (its `timeoutSeconds`), so its steady state is about 0.2 requests/min; client-go's standby polls with \
         a GET every retry period (2–4.4 s with jitter). The leader's writes at a 2 s retry period are \
         at most 30/min by construction (one conditional replace per retry period)."
    )?;
    Ok(())
}

fn esc(s: &str) -> String {
    s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;")
}

/// A Gantt chart of leadership per replica slot over the run, and a strip plot of handover latencies
/// on a log scale.
fn svg(r: &Results, bars: &[Bar], t0: i64, t1: i64) -> String {
    let mut rows: Vec<(String, Imp)> = Vec::new();
    for b in bars {
        if !rows.iter().any(|(r, _)| *r == b.row) {
            rows.push((b.row.clone(), b.imp));
        }
    }
    let width = 1100.0;
    let left = 260.0;
    let plot_w = width - left - 30.0;
    let row_h = 16.0;
    let top = 50.0;
    let gantt_h = rows.len() as f64 * row_h;
    let span = ((t1 - t0).max(1)) as f64;
    let x_of = |t: i64| left + ((t - t0) as f64 / span) * plot_w;

    let strips: Vec<(String, Imp, Vec<f64>)> = {
        let mut v = Vec::new();
        for (kind, map) in [("graceful", &r.graceful), ("crash", &r.crash)] {
            for t in [DEFAULTS, CROSSPLANE] {
                for imp in [Imp::Rust, Imp::Go] {
                    if let Some(x) = map.get(&(imp, t.tag())) {
                        v.push((format!("{} {kind} {}", imp.name(), t.label()), imp, x.clone()));
                    }
                }
            }
        }
        for (imp, m) in &r.many {
            v.push((
                format!("{} many-candidate handover", imp.name()),
                *imp,
                m.handovers.clone(),
            ));
        }
        v
    };
    let strip_top = top + gantt_h + 90.0;
    let strip_h = 22.0;
    let height = strip_top + strips.len() as f64 * strip_h + 60.0;
    let mut s = String::new();
    let _ = writeln!(
        s,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" font-family="sans-serif" font-size="11">"#
    );
    let _ = writeln!(s, r#"<rect width="100%" height="100%" fill="white"/>"#);
    let _ = writeln!(
        s,
        r#"<text x="10" y="20" font-size="15" font-weight="bold">Leadership over the benchmark run (bars = leading), Rust (orange) vs client-go (blue)</text>"#
    );
    // Time axis.
    let minutes = (span / 60e9).ceil() as i64;
    let step = if minutes > 20 { 5 } else { 1 };
    for m in (0..=minutes).step_by(step as usize) {
        let x = x_of(t0 + m * 60_000_000_000);
        if x > left + plot_w + 1.0 {
            break;
        }
        let _ = writeln!(
            s,
            r##"<line x1="{x:.1}" y1="{top}" x2="{x:.1}" y2="{:.1}" stroke="#ddd"/><text x="{x:.1}" y="{:.1}" text-anchor="middle">{m} min</text>"##,
            top + gantt_h,
            top - 6.0
        );
    }
    for (i, (row, imp)) in rows.iter().enumerate() {
        let y = top + i as f64 * row_h;
        let _ = writeln!(
            s,
            r#"<text x="{:.1}" y="{:.1}" text-anchor="end" fill="{}">{}</text>"#,
            left - 6.0,
            y + row_h - 4.0,
            imp.color(),
            esc(row)
        );
        for b in bars.iter().filter(|b| b.row == *row) {
            let x0 = x_of(b.start);
            let x1 = x_of(b.end).max(x0 + 1.0);
            let _ = writeln!(
                s,
                r#"<rect x="{x0:.1}" y="{:.1}" width="{:.1}" height="{:.1}" fill="{}" opacity="0.85"/>"#,
                y + 2.0,
                x1 - x0,
                row_h - 4.0,
                b.imp.color()
            );
        }
    }
    // Strip plot, log scale 1 ms .. 100 s.
    let _ = writeln!(
        s,
        r#"<text x="10" y="{:.1}" font-size="15" font-weight="bold">Handover latency per repetition (log scale; signal sent → standby started leading)</text>"#,
        strip_top - 40.0
    );
    let (lo, hi) = (0.0f64, 5.0f64); // log10 ms
    let lx = |ms: f64| left + ((ms.max(1.0).log10() - lo) / (hi - lo)).clamp(0.0, 1.0) * plot_w;
    for (d, label) in [
        (1.0, "1 ms"),
        (10.0, "10 ms"),
        (100.0, "100 ms"),
        (1000.0, "1 s"),
        (10000.0, "10 s"),
        (100000.0, "100 s"),
    ] {
        let x = lx(d);
        let _ = writeln!(
            s,
            r##"<line x1="{x:.1}" y1="{:.1}" x2="{x:.1}" y2="{:.1}" stroke="#ddd"/><text x="{x:.1}" y="{:.1}" text-anchor="middle">{label}</text>"##,
            strip_top - 10.0,
            strip_top + strips.len() as f64 * strip_h,
            strip_top - 14.0
        );
    }
    for (i, (label, imp, xs)) in strips.iter().enumerate() {
        let y = strip_top + i as f64 * strip_h + strip_h / 2.0;
        let _ = writeln!(
            s,
            r#"<text x="{:.1}" y="{:.1}" text-anchor="end" fill="{}">{}</text>"#,
            left - 6.0,
            y + 4.0,
            imp.color(),
            esc(label)
        );
        for (j, x) in xs.iter().enumerate() {
            let jitter = ((j * 7) % 5) as f64 * 2.0 - 4.0;
            let _ = writeln!(
                s,
                r#"<circle cx="{:.1}" cy="{:.1}" r="3.5" fill="{}" opacity="0.7"><title>{x:.1} ms</title></circle>"#,
                lx(*x),
                y + jitter,
                imp.color()
            );
        }
        if !xs.is_empty() {
            let p99 = pct(xs, 99.0);
            let _ = writeln!(
                s,
                r#"<line x1="{:.1}" y1="{:.1}" x2="{:.1}" y2="{:.1}" stroke="black" stroke-width="1.5"/>"#,
                lx(p99),
                y - 8.0,
                lx(p99),
                y + 8.0
            );
        }
    }
    let _ = writeln!(
        s,
        r#"<text x="{left}" y="{:.1}">Black tick: p99. Dots: one repetition each.</text>"#,
        height - 20.0
    );
    let _ = writeln!(s, "</svg>");
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_rank() {
        let v = [5.0, 1.0, 3.0, 2.0, 4.0];
        assert_eq!(pct(&v, 50.0), 3.0);
        assert_eq!(pct(&v, 99.0), 5.0);
        assert!(pct(&[], 50.0).is_nan());
    }

    #[test]
    fn svg_is_well_formed_enough() {
        let mut r = Results::default();
        r.graceful.insert((Imp::Rust, 15), vec![10.0, 20.0]);
        let bars = vec![Bar {
            row: "Rust <a>".into(),
            imp: Imp::Rust,
            start: 0,
            end: 10,
        }];
        let s = svg(&r, &bars, 0, 100);
        assert!(s.starts_with("<svg") && s.trim_end().ends_with("</svg>"));
        assert!(s.contains("Rust &lt;a&gt;"));
    }
}
