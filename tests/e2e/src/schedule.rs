//! The fault schedule (issue 8): three replicas of provider-nop and three of the core, on a control plane
//! of their own, are hit with faults one after another, round-robin over the leader of the relevant
//! Lease, until enough leadership changes have happened. Then the audit-log [`checker`](crate::checker)
//! must find no write outside its writer's term, every resource must end Ready, nothing may be
//! duplicated, and no process may have exited except where the schedule stopped it.
//!
//! # Setup
//!
//! - provider-nop replicas reconcile `nop_resources` NopResources (Ready after 1 s, each with a
//!   connection secret), which a background task keeps changing (about ten spec patches a second);
//! - core replicas compose one NopResource (with its own connection secret) for each of `xrs` XRs,
//!   whose `spec.n` the same task keeps changing, and the provider makes those Ready too;
//! - each replica reaches the apiserver through its own loopback [`Relay`], so one replica alone can be
//!   cut off;
//! - identities are `<nop|core>-<slot>-<generation>`: a restarted replica is a new candidate, as a new
//!   pod of a Deployment is, so every takeover is a change of holder in the Lease.
//!
//! # Faults
//!
//! [`Fault::ALL`], in order, each aimed at the leader of one group (alternating provider-nop and core,
//! so that over two rounds every fault hits both Leases):
//!
//! - [`Fault::Kill`]: SIGKILL the leader, wait for a standby to take over, start a new replica;
//! - [`Fault::Term`]: SIGTERM the leader (it must exit 0, releasing the Lease), then start a new one;
//! - [`Fault::Stop`]: SIGSTOP the leader for longer than the lease, SIGCONT it after a standby took over;
//! - [`Fault::ApiserverRestart`]: restart the apiserver (both Leases);
//! - [`Fault::RelayCut`]: cut only the leader's relay for longer than the lease, then restore it;
//! - [`Fault::ClockSkew`]: restart a standby under libfaketime (`FAKETIME=+5m`, the next time `-5m`;
//!   the monotonic clock is left alone), then SIGTERM leaders until the skewed replica leads;
//! - [`Fault::EtcdPause`]: SIGSTOP etcd for longer than the lease (so longer than the renew deadline);
//! - [`Fault::RollingUpdate`]: replace the group's replicas one by one with the other build (standbys
//!   first, the leader last), so that two builds with different version strings run side by side. The
//!   second build is `e2e-<binary>-next`, the same code reporting [`NEXT_VERSION`]; the next rolling
//!   update of the group goes back.
//!
//! Leadership changes are counted from the audit log (a term of a new holder starting) and attributed
//! to the fault during which they happened. The apiserver restart and the etcd pause leave the choice of
//! the next leader to a race (the old leader may win it back), so they need not cause a change.
//!
//! # Writes in flight when a leader is frozen
//!
//! The fence is checked before a write is handed to kube, and again under kube's request buffer (each
//! term's client carries `manager::gate::FenceLayer`); between that check and the socket there are still
//! the transport's hops (hyper's connection pool and connection task). A SIGSTOP that
//! lands in that gap freezes a write that was legitimately begun during the term, and it leaves the
//! process the moment SIGCONT lets it run, seconds after the term ended. No client-side check can close
//! that gap (it is the classic argument for fencing tokens); the apiserver's optimistic concurrency
//! refuses such a write with 409 when the new leader has written the object since. The schedule records
//! when it sent each SIGCONT; a late write of the stopped replica that arrives within
//! [`IN_FLIGHT_GRACE`] of it is reported in [`Report::in_flight_at_stop`] with its HTTP status instead of
//! as a violation. A write begun after SIGCONT would have been refused by the fence, so anything later
//! (or from anyone else) is still a violation.
//!
//! This module is test machinery: its errors are `anyhow` errors that end up in a test failure or in
//! `cargo xtask chaos`'s exit code.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use jiff::Timestamp;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, ApiResource, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use kube::{Client, CustomResourceExt};
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use serde_json::{Value, json};
use testenv::{AuditEvent, ControlPlane};

use crate::checker::{self, Lock, Violation};
use crate::relay::Relay;

/// The version string of the second build (`e2e-provider-nop-next`, `e2e-crossplane-next`).
pub const NEXT_VERSION: &str = concat!(env!("CARGO_PKG_VERSION"), "+next");
/// The version string of the first build, the package's.
pub const CURRENT_VERSION: &str = env!("CARGO_PKG_VERSION");
/// libfaketime, from the Debian/Ubuntu package `libfaketime`.
pub const LIBFAKETIME: &str = "/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1";
/// The offset applied to a skewed replica's wall clock, forward and backward in turn.
pub const CLOCK_OFFSET: &str = "5m";

const NOP_LEASE: &str = "crossplane-leader-election-provider-nop";
const CORE_LEASE: &str = "crossplane-leader-election-core";
const REPLICAS: usize = 3;
const XR_GROUP: &str = "faults.example.org";
const POLL: Duration = Duration::from_millis(100);
/// How long a new leader may take after a fault.
const TAKEOVER_TIMEOUT: Duration = Duration::from_secs(45);
/// How long a replica gets to exit after SIGTERM (its graceful-shutdown timeout is 10 s).
const EXIT_TIMEOUT: Duration = Duration::from_secs(20);
/// How soon after SIGCONT a write of the stopped replica counts as having been in flight at SIGSTOP.
pub const IN_FLIGHT_GRACE: Duration = Duration::from_millis(500);
/// How long the apiserver gets to exit after SIGTERM in an apiserver restart.
const APISERVER_STOP_GRACE: Duration = Duration::from_secs(3);

/// A kind of fault.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Fault {
    /// SIGKILL the leader, then start a new replica.
    Kill,
    /// SIGTERM the leader, then start a new replica.
    Term,
    /// SIGSTOP the leader for longer than the lease, then SIGCONT.
    Stop,
    /// Restart the apiserver.
    ApiserverRestart,
    /// Cut only the leader's relay to the apiserver for longer than the lease.
    RelayCut,
    /// Run a replica with its wall clock several minutes off, and make it lead.
    ClockSkew,
    /// Pause etcd for longer than the renew deadline.
    EtcdPause,
    /// Replace the replicas one by one with the other build.
    RollingUpdate,
}

impl Fault {
    /// Every fault, in schedule order.
    pub const ALL: [Fault; 8] = [
        Fault::Kill,
        Fault::Term,
        Fault::Stop,
        Fault::ApiserverRestart,
        Fault::RelayCut,
        Fault::ClockSkew,
        Fault::EtcdPause,
        Fault::RollingUpdate,
    ];

    /// A short name.
    pub fn name(self) -> &'static str {
        match self {
            Fault::Kill => "SIGKILL",
            Fault::Term => "SIGTERM",
            Fault::Stop => "SIGSTOP/SIGCONT",
            Fault::ApiserverRestart => "apiserver restart",
            Fault::RelayCut => "relay cut",
            Fault::ClockSkew => "clock skew",
            Fault::EtcdPause => "etcd pause",
            Fault::RollingUpdate => "rolling update",
        }
    }

    /// Whether it hits the whole control plane rather than one group's leader.
    pub fn is_global(self) -> bool {
        matches!(self, Fault::ApiserverRestart | Fault::EtcdPause)
    }
}

impl std::fmt::Display for Fault {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.pad(self.name())
    }
}

/// A set of replicas sharing one Lease.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Group {
    /// provider-nop.
    Nop,
    /// The core (`crossplane core start`).
    Core,
}

impl Group {
    /// Both groups.
    pub const ALL: [Group; 2] = [Group::Nop, Group::Core];

    fn short(self) -> &'static str {
        match self {
            Group::Nop => "nop",
            Group::Core => "core",
        }
    }

    /// The binary's name in user agents.
    pub fn binary(self) -> &'static str {
        match self {
            Group::Nop => "provider-nop",
            Group::Core => "crossplane",
        }
    }

    /// Its Lease's name.
    pub fn lease(self) -> &'static str {
        match self {
            Group::Nop => NOP_LEASE,
            Group::Core => CORE_LEASE,
        }
    }
}

impl std::fmt::Display for Group {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.pad(self.binary())
    }
}

/// The four builds the schedule runs.
#[derive(Debug, Clone)]
pub struct Binaries {
    /// provider-nop reporting [`CURRENT_VERSION`].
    pub nop: PathBuf,
    /// provider-nop reporting [`NEXT_VERSION`].
    pub nop_next: PathBuf,
    /// The core reporting [`CURRENT_VERSION`].
    pub core: PathBuf,
    /// The core reporting [`NEXT_VERSION`].
    pub core_next: PathBuf,
}

impl Binaries {
    /// The builds of this package's `src/bin` in a Cargo profile directory such as `target/debug`.
    pub fn in_dir(dir: &Path) -> Binaries {
        Binaries {
            nop: dir.join("e2e-provider-nop"),
            nop_next: dir.join("e2e-provider-nop-next"),
            core: dir.join("e2e-crossplane"),
            core_next: dir.join("e2e-crossplane-next"),
        }
    }

    fn get(&self, group: Group, next: bool) -> &Path {
        match (group, next) {
            (Group::Nop, false) => &self.nop,
            (Group::Nop, true) => &self.nop_next,
            (Group::Core, false) => &self.core,
            (Group::Core, true) => &self.core_next,
        }
    }
}

/// Lease timings of every replica.
#[derive(Debug, Clone, Copy)]
pub struct Timings {
    /// `--lease-duration`.
    pub lease: Duration,
    /// `--renew-deadline`.
    pub renew: Duration,
    /// `--retry-period`.
    pub retry: Duration,
}

impl Timings {
    /// 4 s / 3 s / 1 s: short, so that faults are quick, with the least margin the manager accepts.
    pub const FAST: Timings = Timings {
        lease: Duration::from_secs(4),
        renew: Duration::from_secs(3),
        retry: Duration::from_secs(1),
    };
}

/// What to run.
#[derive(Debug, Clone)]
pub struct Config {
    /// The builds.
    pub binaries: Binaries,
    /// Stand-alone NopResources.
    pub nop_resources: usize,
    /// XRs, each composing one NopResource.
    pub xrs: usize,
    /// Stop injecting faults once this many leadership changes were observed.
    pub min_changes: usize,
    /// Give up (a failure) if the faults take longer than this.
    pub time_limit: Duration,
    /// Lease timings.
    pub timings: Timings,
    /// Where replica logs and kubeconfigs go.
    pub log_dir: PathBuf,
    /// Print a line per fault on stderr as it happens.
    pub verbose: bool,
}

/// One fault as it ran.
#[derive(Debug, Clone)]
pub struct FaultRecord {
    /// The kind.
    pub fault: Fault,
    /// The group whose leader it hit; `None` for faults of the whole control plane.
    pub group: Option<Group>,
    /// When it began.
    pub start: Timestamp,
    /// When the schedule had recovered from it.
    pub end: Timestamp,
    /// What happened, in words.
    pub detail: String,
}

/// One replica process as it ran.
#[derive(Debug, Clone)]
pub struct ReplicaRecord {
    /// Its identity.
    pub identity: String,
    /// Its group.
    pub group: Group,
    /// The version its build reports.
    pub version: &'static str,
    /// Its `FAKETIME` offset, if skewed.
    pub clock: Option<String>,
    /// Its PID.
    pub pid: u32,
    /// Its log.
    pub log: PathBuf,
    /// How the schedule ended it (`None`: still running, or it exited on its own).
    pub ended_by: Option<String>,
    /// Its exit status, once it exited.
    pub exit: Option<String>,
}

/// The outcome of a run.
#[derive(Debug, Clone, Default)]
pub struct Report {
    /// The faults, in order.
    pub faults: Vec<FaultRecord>,
    /// Leadership changes during each kind of fault (both Leases), from the audit log.
    pub changes_by_fault: BTreeMap<Fault, usize>,
    /// Leadership changes per Lease during the faults, from the audit log.
    pub changes_by_group: BTreeMap<Group, usize>,
    /// All leadership changes during the faults.
    pub total_changes: usize,
    /// Leadership changes the schedule saw live (polling the Leases), which decided when to stop.
    pub live_changes: usize,
    /// The checker's findings: lock takeovers before expiry and writes outside the writer's terms.
    pub violations: Vec<Violation>,
    /// Writes outside their writer's term that arrived within [`IN_FLIGHT_GRACE`] of a SIGCONT, from
    /// the replica that had been stopped: requests that had passed the fence check but were not yet on
    /// the wire when SIGSTOP froze the process, so that they left it as soon as it ran again. They are
    /// not counted as violations (see the module docs); each names its outcome (HTTP status).
    pub in_flight_at_stop: Vec<String>,
    /// How many controller writes the checker examined.
    pub checked_writes: usize,
    /// Every other failed expectation: unexpected exits, resources not Ready, duplicates, ...
    pub problems: Vec<String>,
    /// Every replica process started.
    pub replicas: Vec<ReplicaRecord>,
    /// The versions in the user agents of each group's Lease writes.
    pub versions: BTreeMap<Group, BTreeSet<String>>,
    /// Stand-alone NopResources and XRs.
    pub resources: (usize, usize),
    /// Time to set up and converge before the first fault.
    pub setup: Duration,
    /// Time injecting faults.
    pub schedule: Duration,
    /// Time to converge after the last fault and check.
    pub settle: Duration,
}

impl Report {
    /// Whether the run met every expectation, with at least `min_changes` leadership changes.
    pub fn passed(&self, min_changes: usize) -> bool {
        self.violations.is_empty() && self.problems.is_empty() && self.total_changes >= min_changes
    }

    /// A human-readable summary.
    pub fn summary(&self) -> String {
        let mut s = String::new();
        let _ = writeln!(
            s,
            "fault schedule: {} faults, {} leadership changes ({} seen live), {} NopResources + {} XRs",
            self.faults.len(),
            self.total_changes,
            self.live_changes,
            self.resources.0,
            self.resources.1
        );
        let _ = writeln!(
            s,
            "time: setup {:.0}s, faults {:.0}s, settle+check {:.0}s, total {:.0}s",
            self.setup.as_secs_f64(),
            self.schedule.as_secs_f64(),
            self.settle.as_secs_f64(),
            (self.setup + self.schedule + self.settle).as_secs_f64()
        );
        let _ = writeln!(s, "changes per fault kind:");
        for f in Fault::ALL {
            let runs = self.faults.iter().filter(|r| r.fault == f).count();
            let _ = writeln!(
                s,
                "  {:<18} {:>3} runs {:>4} changes",
                f.name(),
                runs,
                self.changes_by_fault.get(&f).copied().unwrap_or(0)
            );
        }
        for (g, n) in &self.changes_by_group {
            let versions: Vec<&str> = self
                .versions
                .get(g)
                .map(|v| v.iter().map(String::as_str).collect())
                .unwrap_or_default();
            let _ = writeln!(s, "  {g:<18} {n:>4} changes, versions seen {versions:?}");
        }
        let restarts = self.replicas.len().saturating_sub(2 * REPLICAS);
        let skewed = self.replicas.iter().filter(|r| r.clock.is_some()).count();
        let _ = writeln!(
            s,
            "replicas: {} processes ({restarts} started by the schedule, {skewed} with a skewed clock)",
            self.replicas.len()
        );
        let _ = writeln!(
            s,
            "checker: {} violations in {} controller writes",
            self.violations.len(),
            self.checked_writes
        );
        for v in self.violations.iter().take(20) {
            let _ = writeln!(s, "  VIOLATION {v}");
        }
        let _ = writeln!(
            s,
            "in flight at SIGSTOP, delivered after SIGCONT (not violations): {}",
            self.in_flight_at_stop.len()
        );
        for w in &self.in_flight_at_stop {
            let _ = writeln!(s, "  {w}");
        }
        let _ = writeln!(s, "problems: {}", self.problems.len());
        for p in self.problems.iter().take(20) {
            let _ = writeln!(s, "  PROBLEM {p}");
        }
        s
    }
}

/// Runs the schedule on `cp`, which it disrupts (use a control plane of its own).
pub async fn run(cp: &mut ControlPlane, config: &Config) -> anyhow::Result<Report> {
    preflight(config)?;
    std::fs::create_dir_all(&config.log_dir)
        .with_context(|| format!("creating {}", config.log_dir.display()))?;
    let started = Instant::now();
    let mut world = World::new(cp, config).await?;
    let result = world.run(started).await;
    world.stop_all();
    let mut report = result.with_context(|| {
        format!(
            "the fault schedule failed after {:.0}s; replica logs in {}",
            started.elapsed().as_secs_f64(),
            config.log_dir.display()
        )
    })?;
    report.replicas = world.history.clone();
    Ok(report)
}

fn preflight(config: &Config) -> anyhow::Result<()> {
    if !Path::new(LIBFAKETIME).exists() {
        bail!(
            "libfaketime is missing ({LIBFAKETIME}): the clock-skew fault needs it. Install the package \
             `libfaketime` (apt-get install libfaketime; .ci/run does)."
        );
    }
    let b = &config.binaries;
    for p in [&b.nop, &b.nop_next, &b.core, &b.core_next] {
        if !p.exists() {
            bail!(
                "{} is missing: build it with `cargo build -p e2e --bins`",
                p.display()
            );
        }
    }
    Ok(())
}

/// A running replica process. Killed when dropped.
struct Replica {
    identity: String,
    child: Child,
    record: usize,
}

impl Replica {
    fn pid(&self) -> u32 {
        self.child.id()
    }

    fn signal(&self, sig: Signal) -> anyhow::Result<()> {
        let pid = i32::try_from(self.pid()).context("PID out of range")?;
        kill(Pid::from_raw(pid), sig).with_context(|| format!("sending {sig} to {}", self.identity))
    }
}

impl Drop for Replica {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// One replica's place: its relay and kubeconfig outlive the processes that run in it.
struct Slot {
    group: Group,
    index: usize,
    relay: Relay,
    kubeconfig: PathBuf,
    generation: usize,
    next: bool,
    replica: Option<Replica>,
}

/// Leadership as polled from the Leases, for deciding when enough changes happened.
#[derive(Default)]
struct Observed {
    last: BTreeMap<Group, String>,
    changes: usize,
}

struct World<'a> {
    cp: &'a mut ControlPlane,
    config: &'a Config,
    client: Client,
    ns: String,
    slots: Vec<Slot>,
    history: Vec<ReplicaRecord>,
    problems: Vec<String>,
    faults: Vec<FaultRecord>,
    observed: Arc<Mutex<Observed>>,
    skew_forward: bool,
    pauses: Vec<Pause>,
    t0: Instant,
}

/// A leader frozen by the schedule: who, and when it was let go again.
struct Pause {
    identity: String,
    resumed: Timestamp,
}

fn dynamic(client: &Client, group: &str, version: &str, kind: &str, plural: &str) -> Api<DynamicObject> {
    let ar = ApiResource {
        group: group.into(),
        version: version.into(),
        api_version: format!("{group}/{version}"),
        kind: kind.into(),
        plural: plural.into(),
    };
    Api::all_with(client.clone(), &ar)
}

fn condition_true(obj: &Value, type_: &str) -> bool {
    obj.pointer("/status/conditions")
        .and_then(Value::as_array)
        .is_some_and(|cs| cs.iter().any(|c| c["type"] == type_ && c["status"] == "True"))
}

fn log_tail(path: &Path, lines: usize) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

fn exit_text(status: ExitStatus) -> String {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        (Some(code), _) => format!("exit code {code}"),
        (None, Some(sig)) => format!("signal {sig}"),
        _ => format!("{status}"),
    }
}

async fn wait_exit(child: &mut Child, timeout: Duration) -> Option<ExitStatus> {
    let deadline = Instant::now() + timeout;
    loop {
        if let Ok(Some(status)) = child.try_wait() {
            return Some(status);
        }
        if Instant::now() > deadline {
            return None;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Writes a copy of the admin kubeconfig (JSON) whose server is the relay on `port`.
fn relay_kubeconfig(admin: &Path, port: u16, path: &Path) -> anyhow::Result<()> {
    let text = std::fs::read_to_string(admin).with_context(|| format!("reading {}", admin.display()))?;
    let mut doc: Value = serde_json::from_str(&text).context("the admin kubeconfig is not JSON")?;
    let clusters = doc
        .get_mut("clusters")
        .and_then(Value::as_array_mut)
        .context("the admin kubeconfig has no clusters")?;
    for c in clusters {
        c["cluster"]["server"] = json!(format!("https://127.0.0.1:{port}"));
    }
    std::fs::write(path, serde_json::to_string_pretty(&doc)?)
        .with_context(|| format!("writing {}", path.display()))
}

fn ms(d: Duration) -> String {
    format!("{}ms", d.as_millis())
}

impl<'a> World<'a> {
    async fn new(cp: &'a mut ControlPlane, config: &'a Config) -> anyhow::Result<World<'a>> {
        let cluster = cp.cluster().clone();
        let client = cluster.client().await?;
        let upstream: SocketAddr = ([127, 0, 0, 1], cp.state().apiserver_port).into();
        let mut slots = Vec::new();
        for group in Group::ALL {
            for index in 0..REPLICAS {
                let relay = Relay::start(upstream).await?;
                let kubeconfig = config
                    .log_dir
                    .join(format!("{}-{index}.kubeconfig", group.short()));
                relay_kubeconfig(cluster.kubeconfig(), relay.port(), &kubeconfig)?;
                slots.push(Slot {
                    group,
                    index,
                    relay,
                    kubeconfig,
                    generation: 0,
                    next: false,
                    replica: None,
                });
            }
        }
        let ns = cluster.namespace("faults").await?;
        Ok(World {
            cp,
            config,
            client,
            ns,
            slots,
            history: Vec::new(),
            problems: Vec::new(),
            faults: Vec::new(),
            observed: Arc::default(),
            skew_forward: true,
            pauses: Vec::new(),
            t0: Instant::now(),
        })
    }

    fn say(&self, msg: &str) {
        if self.config.verbose {
            eprintln!("[faults {:>6.1}s] {msg}", self.t0.elapsed().as_secs_f64());
        }
    }

    fn nops(&self) -> Api<DynamicObject> {
        dynamic(
            &self.client,
            "nop.crossplane.io",
            "v1alpha1",
            "NopResource",
            "nopresources",
        )
    }

    fn xrs(&self) -> Api<DynamicObject> {
        dynamic(&self.client, XR_GROUP, "v1", "XFault", "xfaults")
    }

    fn leases(&self) -> Api<Lease> {
        Api::namespaced(self.client.clone(), &self.ns)
    }

    async fn run(&mut self, started: Instant) -> anyhow::Result<Report> {
        self.t0 = started;
        self.setup().await?;
        let setup = started.elapsed();
        self.say(&format!("set up and converged in {:.1}s", setup.as_secs_f64()));

        let observer = tokio::spawn(observe(self.leases(), self.observed.clone()));
        let churn = tokio::spawn(churn(
            self.nops(),
            self.xrs(),
            self.config.nop_resources,
            self.config.xrs,
        ));
        let schedule_start = Instant::now();
        let faults_from = Timestamp::now();
        let outcome = self.schedule(schedule_start, faults_from).await;
        churn.abort();
        let _ = churn.await;
        let faults_until = Timestamp::now();
        let schedule = schedule_start.elapsed();
        let live_changes = self.live_changes();
        observer.abort();
        let _ = observer.await;
        outcome?;

        let settle_start = Instant::now();
        self.settle().await?;
        let mut report = self.check(faults_from, faults_until).await?;
        report.live_changes = live_changes;
        report.setup = setup;
        report.schedule = schedule;
        report.settle = settle_start.elapsed();
        Ok(report)
    }

    // ---------------------------------------------------------------------------------------------
    // Setup

    async fn setup(&mut self) -> anyhow::Result<()> {
        let crds = [
            apis::apiextensions::CompositeResourceDefinition::crd(),
            apis::apiextensions::Composition::crd(),
            apis::apiextensions::CompositionRevision::crd(),
            provider_nop::types::NopResource::crd(),
        ];
        testenv::support::install_crds(&self.client, &crds).await?;
        for i in 0..self.slots.len() {
            self.spawn(i, None)?;
        }
        for g in Group::ALL {
            let leader = self.wait_leader(g, None, Duration::from_secs(60)).await?;
            self.say(&format!("{g} leader: {leader}"));
        }

        let ns = self.ns.clone();
        let xrds = dynamic(
            &self.client,
            "apiextensions.crossplane.io",
            "v2",
            "CompositeResourceDefinition",
            "compositeresourcedefinitions",
        );
        let comps = dynamic(
            &self.client,
            "apiextensions.crossplane.io",
            "v1",
            "Composition",
            "compositions",
        );
        let xrd_name = format!("xfaults.{XR_GROUP}");
        create(&xrds, json!({
            "apiVersion": "apiextensions.crossplane.io/v2", "kind": "CompositeResourceDefinition",
            "metadata": {"name": xrd_name},
            "spec": {"group": XR_GROUP, "scope": "Cluster", "names": {"kind": "XFault", "plural": "xfaults"},
                     "versions": [{"name": "v1", "referenceable": true, "served": true, "schema": {"openAPIV3Schema": {
                         "type": "object", "properties": {"spec": {"type": "object", "properties": {"n": {"type": "integer"}}}}}}}]}
        })).await?;
        create(&comps, json!({
            "apiVersion": "apiextensions.crossplane.io/v1", "kind": "Composition",
            "metadata": {"name": "faults"},
            "spec": {"compositeTypeRef": {"apiVersion": format!("{XR_GROUP}/v1"), "kind": "XFault"}, "mode": "Pipeline",
                     "pipeline": [{"step": "pt", "functionRef": {"name": "function-patch-and-transform"},
                       "input": {"apiVersion": "pt.fn.crossplane.io/v1beta1", "kind": "Resources", "resources": [{
                         "name": "nop",
                         "base": {"apiVersion": "nop.crossplane.io/v1alpha1", "kind": "NopResource",
                                  "spec": {"forProvider": {
                                              "conditionAfter": [{"time": "1s", "conditionType": "Ready", "conditionStatus": "True"}],
                                              "connectionDetails": [{"name": "composed", "value": "yes"}]},
                                           "writeConnectionSecretToRef": {"namespace": ns, "name": "unset"}}},
                         "patches": [
                             {"type": "FromCompositeFieldPath", "fromFieldPath": "spec.n", "toFieldPath": "spec.forProvider.fields.n"},
                             {"type": "FromCompositeFieldPath", "fromFieldPath": "metadata.name",
                              "toFieldPath": "spec.writeConnectionSecretToRef.name",
                              "transforms": [{"type": "string", "string": {"type": "Format", "fmt": "conn-%s"}}]}
                         ]}]}}]}
        })).await?;

        let nops = self.nops();
        for i in 0..self.config.nop_resources {
            create(&nops, json!({
                "apiVersion": "nop.crossplane.io/v1alpha1", "kind": "NopResource",
                "metadata": {"name": format!("nop-{i:03}")},
                "spec": {
                    "forProvider": {
                        "conditionAfter": [{"time": "1s", "conditionType": "Ready", "conditionStatus": "True"}],
                        "connectionDetails": [{"name": "index", "value": i.to_string()}],
                        "fields": {"gen": 0},
                    },
                    "writeConnectionSecretToRef": {"name": format!("conn-nop-{i:03}"), "namespace": ns},
                },
            }))
            .await?;
        }

        // The XR kind is served once the core leader has turned the XRD into a CRD.
        let xrs = self.xrs();
        let deadline = Instant::now() + Duration::from_secs(90);
        for j in 0..self.config.xrs {
            let xr = json!({"apiVersion": format!("{XR_GROUP}/v1"), "kind": "XFault",
                            "metadata": {"name": format!("xr-{j:03}")}, "spec": {"n": 0}});
            loop {
                match create(&xrs, xr.clone()).await {
                    Ok(()) => break,
                    Err(e) if Instant::now() > deadline => {
                        return Err(e.context("creating XRs: the XR kind was never served"));
                    }
                    Err(_) => tokio::time::sleep(Duration::from_millis(250)).await,
                }
            }
        }
        self.converge(Duration::from_secs(180)).await
    }

    // ---------------------------------------------------------------------------------------------
    // Processes

    fn spawn(&mut self, slot: usize, clock: Option<String>) -> anyhow::Result<()> {
        let config = self.config;
        let ns = self.ns.clone();
        let s = &mut self.slots[slot];
        s.generation += 1;
        let identity = format!("{}-{}-{}", s.group.short(), s.index, s.generation);
        let binary = config.binaries.get(s.group, s.next);
        let version = if s.next { NEXT_VERSION } else { CURRENT_VERSION };
        let t = config.timings;
        let mut args: Vec<String> = Vec::new();
        if s.group == Group::Core {
            args.extend([
                "core".into(),
                "start".into(),
                "--poll-interval".into(),
                "30s".into(),
            ]);
        } else {
            args.extend([
                "--poll".into(),
                "30s".into(),
                "--max-reconcile-rate".into(),
                "50".into(),
            ]);
        }
        args.extend([
            "--kubeconfig".into(),
            s.kubeconfig.display().to_string(),
            "--leader-election".into(),
            "--leader-election-namespace".into(),
            ns,
            "--leader-election-id".into(),
            s.group.lease().into(),
            "--leader-election-identity".into(),
            identity.clone(),
            "--lease-duration".into(),
            ms(t.lease),
            "--renew-deadline".into(),
            ms(t.renew),
            "--retry-period".into(),
            ms(t.retry),
            "--graceful-shutdown-timeout".into(),
            "10s".into(),
            "--metrics-bind-address".into(),
            "0".into(),
            "--health-probe-bind-address".into(),
            "0".into(),
        ]);
        let log = config.log_dir.join(format!("{identity}.log"));
        let out = std::fs::File::create(&log).with_context(|| format!("creating {}", log.display()))?;
        let err = out.try_clone()?;
        let mut cmd = Command::new(binary);
        cmd.args(&args)
            .env_remove("KUBECONFIG")
            .env_remove("POD_NAME")
            .env_remove("POD_NAMESPACE")
            .env_remove("LEADER_ELECTION")
            .env_remove("LD_PRELOAD")
            .env_remove("FAKETIME")
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err);
        if let Some(offset) = &clock {
            cmd.env("LD_PRELOAD", LIBFAKETIME)
                .env("FAKETIME", offset)
                .env("FAKETIME_DONT_FAKE_MONOTONIC", "1");
        }
        let child = cmd
            .spawn()
            .with_context(|| format!("starting {}", binary.display()))?;
        let record = self.history.len();
        self.history.push(ReplicaRecord {
            identity: identity.clone(),
            group: s.group,
            version,
            clock,
            pid: child.id(),
            log,
            ended_by: None,
            exit: None,
        });
        s.replica = Some(Replica {
            identity,
            child,
            record,
        });
        Ok(())
    }

    /// Records replicas that exited without the schedule stopping them, and starts new ones in their
    /// slots so that the run goes on.
    fn check_processes(&mut self) {
        let mut dead = Vec::new();
        for (i, s) in self.slots.iter_mut().enumerate() {
            if let Some(r) = s.replica.as_mut()
                && let Ok(Some(status)) = r.child.try_wait()
            {
                let rec = &mut self.history[r.record];
                rec.exit = Some(exit_text(status));
                self.problems.push(format!(
                    "{} (pid {}) exited on its own with {}; last log lines:\n{}",
                    rec.identity,
                    rec.pid,
                    exit_text(status),
                    log_tail(&rec.log, 15)
                ));
                s.replica = None;
                dead.push(i);
            }
        }
        for i in dead {
            if let Err(e) = self.spawn(i, None) {
                self.problems.push(format!("restarting a replica: {e:#}"));
            }
        }
    }

    fn slot_of(&self, identity: &str) -> Option<usize> {
        self.slots
            .iter()
            .position(|s| s.replica.as_ref().is_some_and(|r| r.identity == identity))
    }

    fn replica(&self, slot: usize) -> anyhow::Result<&Replica> {
        self.slots[slot]
            .replica
            .as_ref()
            .context("the slot has no replica")
    }

    /// SIGKILLs the replica in `slot` and reaps it.
    fn kill(&mut self, slot: usize, why: &str) -> anyhow::Result<()> {
        let mut r = self.slots[slot]
            .replica
            .take()
            .context("the slot has no replica")?;
        r.signal(Signal::SIGKILL)?;
        let status = r.child.wait()?;
        let rec = &mut self.history[r.record];
        rec.ended_by = Some(why.into());
        rec.exit = Some(exit_text(status));
        Ok(())
    }

    /// SIGTERMs the replica in `slot` and waits for it to exit, which it must do cleanly (exit 0).
    async fn terminate(&mut self, slot: usize, why: &str) -> anyhow::Result<()> {
        let mut r = self.slots[slot]
            .replica
            .take()
            .context("the slot has no replica")?;
        r.signal(Signal::SIGTERM)?;
        let status = wait_exit(&mut r.child, EXIT_TIMEOUT).await;
        let rec = &mut self.history[r.record];
        rec.ended_by = Some(why.into());
        match status {
            Some(s) => {
                rec.exit = Some(exit_text(s));
                if !s.success() {
                    self.problems.push(format!(
                        "{} exited with {} after SIGTERM (expected 0); last log lines:\n{}",
                        rec.identity,
                        exit_text(s),
                        log_tail(&rec.log, 15)
                    ));
                }
            }
            None => {
                rec.exit = Some("killed: no exit within the timeout after SIGTERM".into());
                self.problems.push(format!(
                    "{} did not exit within {EXIT_TIMEOUT:?} of SIGTERM; last log lines:\n{}",
                    rec.identity,
                    log_tail(&rec.log, 15)
                ));
            }
        }
        Ok(())
    }

    /// Stops every replica with SIGTERM (each must exit 0), at the end of the run.
    async fn stop_replicas(&mut self) {
        for i in 0..self.slots.len() {
            if self.slots[i].replica.is_some()
                && let Err(e) = self.terminate(i, "end of run").await
            {
                self.problems.push(format!("stopping a replica: {e:#}"));
            }
        }
    }

    /// Kills whatever still runs (after a failure).
    fn stop_all(&mut self) {
        for s in &mut self.slots {
            if let Some(r) = s.replica.take() {
                let _ = r.signal(Signal::SIGCONT);
                drop(r);
            }
        }
    }

    // ---------------------------------------------------------------------------------------------
    // Leadership

    async fn holder(&self, group: Group) -> Option<String> {
        self.leases()
            .get_opt(group.lease())
            .await
            .ok()
            .flatten()
            .and_then(|l| l.spec?.holder_identity)
            .filter(|h| !h.is_empty())
    }

    /// Waits until a live replica of `group` other than `not` holds the Lease.
    async fn wait_leader(
        &mut self,
        group: Group,
        not: Option<&str>,
        timeout: Duration,
    ) -> anyhow::Result<String> {
        let deadline = Instant::now() + timeout;
        let mut last = None;
        loop {
            self.check_processes();
            let h = self.holder(group).await;
            if let Some(h) = &h
                && Some(h.as_str()) != not
                && self.slot_of(h).is_some_and(|s| self.slots[s].group == group)
            {
                return Ok(h.clone());
            }
            last = h.or(last);
            if Instant::now() > deadline {
                bail!(
                    "no leader of {group} other than {not:?} within {timeout:?} (the Lease names {last:?})"
                );
            }
            tokio::time::sleep(POLL).await;
        }
    }

    fn live_changes(&self) -> usize {
        self.observed.lock().map(|o| o.changes).unwrap_or(0)
    }

    // ---------------------------------------------------------------------------------------------
    // The schedule

    /// Leadership changes since `from` as the audit log shows them (the measure the report and the
    /// tests use), counted the same way as in [`Self::check`].
    fn audit_changes(&self, from: Timestamp) -> anyhow::Result<usize> {
        let events = self.cp.cluster().audit().read()?.events;
        let mut n = 0;
        for g in Group::ALL {
            let terms = checker::terms(&events, &Lock::lease(&self.ns, g.lease()));
            n += terms
                .windows(2)
                .filter(|p| p[0].holder != p[1].holder && p[1].start >= from)
                .count();
        }
        Ok(n)
    }

    /// Whether the schedule has made enough changes: seen live, and confirmed by the audit log (which
    /// can count fewer, e.g. when a change happened while the apiserver was restarting).
    fn enough_changes(&self, from: Timestamp) -> anyhow::Result<bool> {
        let min = self.config.min_changes;
        Ok(self.live_changes() >= min && self.audit_changes(from)? >= min)
    }

    async fn schedule(&mut self, start: Instant, from: Timestamp) -> anyhow::Result<()> {
        let mut step = 0usize;
        while !self.enough_changes(from)? {
            if start.elapsed() > self.config.time_limit {
                bail!(
                    "only {} leadership changes after {:?} of faults (wanted {})",
                    self.live_changes(),
                    self.config.time_limit,
                    self.config.min_changes
                );
            }
            let fault = Fault::ALL[step % Fault::ALL.len()];
            let group = Group::ALL[(step + step / Fault::ALL.len()) % Group::ALL.len()];
            let group = (!fault.is_global()).then_some(group);
            let begin = Timestamp::now();
            let detail = self
                .inject(fault, group)
                .await
                .with_context(|| format!("fault {step} ({fault} on {group:?})"))?;
            self.check_processes();
            self.faults.push(FaultRecord {
                fault,
                group,
                start: begin,
                end: Timestamp::now(),
                detail: detail.clone(),
            });
            let who = group.map_or_else(|| "control plane".to_owned(), |g| g.to_string());
            self.say(&format!(
                "#{step:<3} {fault:<18} {who:<13} {detail} [{} changes]",
                self.live_changes()
            ));
            // Let restarted replicas start watching before the next fault.
            tokio::time::sleep(Duration::from_millis(500)).await;
            step += 1;
        }
        Ok(())
    }

    async fn inject(&mut self, fault: Fault, group: Option<Group>) -> anyhow::Result<String> {
        let t = self.config.timings;
        let beyond_lease = t.lease + Duration::from_secs(1);
        let Some(group) = group else {
            return self.global(fault, beyond_lease).await;
        };
        let leader = self.wait_leader(group, None, TAKEOVER_TIMEOUT).await?;
        let slot = self.slot_of(&leader).context("the leader's slot")?;
        match fault {
            Fault::Kill => {
                self.kill(slot, "SIGKILL (schedule)")?;
                let next = self.wait_leader(group, Some(&leader), TAKEOVER_TIMEOUT).await?;
                self.spawn(slot, None)?;
                Ok(format!("{leader} -> {next}"))
            }
            Fault::Term => {
                self.terminate(slot, "SIGTERM (schedule)").await?;
                let next = self.wait_leader(group, Some(&leader), TAKEOVER_TIMEOUT).await?;
                self.spawn(slot, None)?;
                Ok(format!("{leader} -> {next}"))
            }
            Fault::Stop => {
                self.replica(slot)?.signal(Signal::SIGSTOP)?;
                tokio::time::sleep(beyond_lease).await;
                let next = self.wait_leader(group, Some(&leader), TAKEOVER_TIMEOUT).await;
                self.pauses.push(Pause {
                    identity: leader.clone(),
                    resumed: Timestamp::now(),
                });
                self.replica(slot)?.signal(Signal::SIGCONT)?;
                let next = next?;
                Ok(format!("{leader} stopped {beyond_lease:?} -> {next}"))
            }
            Fault::RelayCut => {
                let cut = self.slots[slot].relay.cut().await?;
                tokio::time::sleep(beyond_lease).await;
                let next = self.wait_leader(group, Some(&leader), TAKEOVER_TIMEOUT).await;
                self.slots[slot].relay.restore().await?;
                let next = next?;
                Ok(format!(
                    "{leader} cut off {beyond_lease:?} ({cut} connections) -> {next}"
                ))
            }
            Fault::ClockSkew => self.clock_skew(group, &leader).await,
            Fault::RollingUpdate => self.rolling_update(group, &leader).await,
            Fault::ApiserverRestart | Fault::EtcdPause => unreachable!("global faults have no group"),
        }
    }

    async fn global(&mut self, fault: Fault, beyond_lease: Duration) -> anyhow::Result<String> {
        let mut before = Vec::new();
        for g in Group::ALL {
            before.push(self.wait_leader(g, None, TAKEOVER_TIMEOUT).await?);
        }
        let begin = Instant::now();
        match fault {
            Fault::ApiserverRestart => {
                // SIGTERM; it stops serving at once, but then waits for long-running requests for up
                // to the test bed's 15 s stop grace. Give it 3 s before SIGKILL, then start it again.
                self.cp.apiserver().stop(APISERVER_STOP_GRACE)?;
                self.cp.restart_apiserver().await?;
            }
            Fault::EtcdPause => {
                self.cp.etcd().pause()?;
                tokio::time::sleep(beyond_lease).await;
                self.cp.etcd().resume()?;
            }
            _ => bail!("{fault} is not a fault of the control plane"),
        }
        let outage = begin.elapsed();
        let mut out = format!("{:.1}s:", outage.as_secs_f64());
        for (g, old) in Group::ALL.into_iter().zip(before) {
            let now = self.wait_leader(g, None, TAKEOVER_TIMEOUT).await?;
            let _ = write!(out, " {old} -> {now}");
        }
        Ok(out)
    }

    async fn clock_skew(&mut self, group: Group, leader: &str) -> anyhow::Result<String> {
        let leader_slot = self.slot_of(leader).context("the leader's slot")?;
        let slot = self
            .slots
            .iter()
            .position(|s| s.group == group && s.index == (self.slots[leader_slot].index + 1) % REPLICAS)
            .context("a standby slot")?;
        let offset = format!("{}{CLOCK_OFFSET}", if self.skew_forward { '+' } else { '-' });
        self.skew_forward = !self.skew_forward;
        self.terminate(slot, "SIGTERM (schedule: restart with a skewed clock)")
            .await?;
        self.spawn(slot, Some(offset.clone()))?;
        let skewed = self.replica(slot)?.identity.clone();
        tokio::time::sleep(Duration::from_millis(1500)).await;
        let mut chain = vec![leader.to_owned()];
        let mut current = leader.to_owned();
        for _ in 0..4 {
            if current == skewed {
                break;
            }
            let s = self.slot_of(&current).context("the leader's slot")?;
            self.terminate(s, "SIGTERM (schedule: hand over to the skewed replica)")
                .await?;
            current = self.wait_leader(group, Some(&current), TAKEOVER_TIMEOUT).await?;
            self.spawn(s, None)?;
            chain.push(current.clone());
        }
        if current != skewed {
            bail!("the replica with FAKETIME={offset} ({skewed}) never took the lease: {chain:?}");
        }
        // Let it lead (and renew) with its skewed clock for a while.
        tokio::time::sleep(self.config.timings.lease).await;
        Ok(format!("{skewed} FAKETIME={offset}: {}", chain.join(" -> ")))
    }

    async fn rolling_update(&mut self, group: Group, leader: &str) -> anyhow::Result<String> {
        let leader_slot = self.slot_of(leader).context("the leader's slot")?;
        let target = !self.slots[leader_slot].next;
        let version = if target { NEXT_VERSION } else { CURRENT_VERSION };
        let mut order: Vec<usize> = (0..self.slots.len())
            .filter(|&i| self.slots[i].group == group && i != leader_slot)
            .collect();
        order.push(leader_slot);
        let mut replaced = Vec::new();
        for i in order {
            let old = self.replica(i)?.identity.clone();
            self.terminate(i, "SIGTERM (schedule: rolling update)").await?;
            if i == leader_slot {
                let next = self.wait_leader(group, Some(&old), TAKEOVER_TIMEOUT).await?;
                replaced.push(format!("leader {old} -> {next}"));
            }
            self.slots[i].next = target;
            self.spawn(i, None)?;
            let new = self.replica(i)?.identity.clone();
            if i != leader_slot {
                replaced.push(format!("{old}=>{new}"));
                // Old and new builds run side by side while the new one starts.
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
        }
        Ok(format!("to {version}: {}", replaced.join(", ")))
    }

    // ---------------------------------------------------------------------------------------------
    // The end

    /// Waits until every resource is Ready and Synced, every XR's composed resource has its latest
    /// `spec.n`, and nothing is missing; returns what was still wrong at the deadline as an error.
    async fn converge(&self, timeout: Duration) -> anyhow::Result<()> {
        let deadline = Instant::now() + timeout;
        loop {
            let wrong = match self.unconverged().await {
                Ok(w) => w,
                Err(e) => vec![format!("listing: {e:#}")],
            };
            if wrong.is_empty() {
                return Ok(());
            }
            if Instant::now() > deadline {
                bail!(
                    "not converged after {timeout:?}: {} ({} in all)",
                    wrong.iter().take(5).cloned().collect::<Vec<_>>().join("; "),
                    wrong.len()
                );
            }
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
    }

    async fn unconverged(&self) -> anyhow::Result<Vec<String>> {
        let mut wrong = Vec::new();
        let nops = self.nops().list(&ListParams::default()).await?.items;
        let xrs = self.xrs().list(&ListParams::default()).await?.items;
        let composed: BTreeMap<String, Vec<Value>> = nops
            .iter()
            .map(|n| serde_json::to_value(n).unwrap_or(Value::Null))
            .fold(BTreeMap::new(), |mut m, n| {
                if let Some(xr) = n["metadata"]["labels"]["crossplane.io/composite"].as_str() {
                    m.entry(xr.to_owned()).or_insert_with(Vec::new).push(n.clone());
                }
                m
            });
        for n in &nops {
            let v = serde_json::to_value(n)?;
            if !(condition_true(&v, "Ready") && condition_true(&v, "Synced")) {
                wrong.push(format!(
                    "NopResource {} not Ready and Synced",
                    n.metadata.name.as_deref().unwrap_or("?")
                ));
            }
        }
        let standalone = nops
            .iter()
            .filter(|n| n.metadata.owner_references.as_ref().is_none_or(Vec::is_empty))
            .count();
        if standalone != self.config.nop_resources {
            wrong.push(format!(
                "{standalone} stand-alone NopResources, expected {}",
                self.config.nop_resources
            ));
        }
        if xrs.len() != self.config.xrs {
            wrong.push(format!("{} XRs, expected {}", xrs.len(), self.config.xrs));
        }
        for x in &xrs {
            let v = serde_json::to_value(x)?;
            let name = x.metadata.name.clone().unwrap_or_default();
            if !(condition_true(&v, "Ready") && condition_true(&v, "Synced")) {
                wrong.push(format!("XR {name} not Ready and Synced"));
            }
            match composed.get(&name).map(Vec::as_slice) {
                Some([one]) if one["spec"]["forProvider"]["fields"]["n"] == v["spec"]["n"] => {}
                Some([one]) => wrong.push(format!(
                    "XR {name} has spec.n {} but its NopResource {}",
                    v["spec"]["n"], one["spec"]["forProvider"]["fields"]["n"]
                )),
                Some(many) => wrong.push(format!("XR {name} composed {} NopResources", many.len())),
                None => wrong.push(format!("XR {name} composed nothing")),
            }
        }
        Ok(wrong)
    }

    async fn settle(&mut self) -> anyhow::Result<()> {
        for g in Group::ALL {
            self.wait_leader(g, None, TAKEOVER_TIMEOUT).await?;
        }
        let timeout = Duration::from_secs(120 + self.config.nop_resources as u64 / 2);
        if let Err(e) = self.converge(timeout).await {
            self.problems.push(format!("{e:#}"));
        }
        self.duplicates().await?;
        self.check_processes();
        self.stop_replicas().await;
        Ok(())
    }

    /// No XR composed twice (checked in `unconverged` too), no NopResource too many, and exactly one
    /// connection secret per NopResource.
    async fn duplicates(&mut self) -> anyhow::Result<()> {
        let nops = self.nops().list(&ListParams::default()).await?.items;
        let expected_nops = self.config.nop_resources + self.config.xrs;
        if nops.len() != expected_nops {
            self.problems.push(format!(
                "{} NopResources, expected {expected_nops} (stand-alone and composed)",
                nops.len()
            ));
        }
        let mut by_xr: BTreeMap<String, usize> = BTreeMap::new();
        for n in &nops {
            if let Some(xr) = n
                .metadata
                .labels
                .as_ref()
                .and_then(|l| l.get("crossplane.io/composite"))
            {
                *by_xr.entry(xr.clone()).or_default() += 1;
            }
        }
        for (xr, n) in by_xr.iter().filter(|(_, n)| **n != 1) {
            self.problems.push(format!("XR {xr} composed {n} NopResources"));
        }
        let secrets: Api<Secret> = Api::namespaced(self.client.clone(), &self.ns);
        let conn: Vec<String> = secrets
            .list(&ListParams::default())
            .await?
            .items
            .into_iter()
            .filter(|s| s.type_.as_deref() == Some(apis::meta::SECRET_TYPE_CONNECTION))
            .filter_map(|s| s.metadata.name)
            .collect();
        let expected: BTreeSet<String> = (0..self.config.nop_resources)
            .map(|i| format!("conn-nop-{i:03}"))
            .chain((0..self.config.xrs).map(|j| format!("conn-xr-{j:03}")))
            .collect();
        let got: BTreeSet<String> = conn.iter().cloned().collect();
        if conn.len() != expected.len() || got != expected {
            let extra: Vec<_> = got.difference(&expected).take(5).collect();
            let missing: Vec<_> = expected.difference(&got).take(5).collect();
            self.problems.push(format!(
                "{} connection secrets, expected {}: extra {extra:?}, missing {missing:?}",
                conn.len(),
                expected.len()
            ));
        }
        Ok(())
    }

    async fn check(&mut self, from: Timestamp, until: Timestamp) -> anyhow::Result<Report> {
        // The audit log is written synchronously, but give the last lines a moment.
        tokio::time::sleep(Duration::from_secs(1)).await;
        let audit = self.cp.cluster().audit().read()?;
        let events = audit.events;
        let mut report = Report {
            faults: self.faults.clone(),
            resources: (self.config.nop_resources, self.config.xrs),
            ..Report::default()
        };
        for g in Group::ALL {
            let lock = Lock::lease(&self.ns, g.lease());
            let identities: BTreeSet<&str> = self
                .history
                .iter()
                .filter(|r| r.group == g)
                .map(|r| r.identity.as_str())
                .collect();
            let controller_write = |e: &AuditEvent| {
                e.agent_identity().is_some_and(|i| identities.contains(i))
                    && e.resource != "leases"
                    && !(e.resource == "events" && e.name.starts_with(g.lease()))
            };
            report.checked_writes += events
                .iter()
                .filter(|e| e.is_write() && controller_write(e))
                .count();
            report.violations.extend(checker::check_lock(&events, &lock));
            for v in checker::check_writes(&events, &lock, controller_write) {
                match self.in_flight_at_stop(&v, &events) {
                    Some(what) => report.in_flight_at_stop.push(what),
                    None => report.violations.push(v),
                }
            }

            let versions: BTreeSet<String> = events
                .iter()
                .filter(|e| e.resource == "leases" && e.name == g.lease() && e.is_write())
                .filter(|e| e.agent_identity().is_some_and(|i| identities.contains(i)))
                .filter_map(|e| {
                    let rest = e.user_agent.strip_prefix(g.binary())?.strip_prefix('/')?;
                    Some(rest.split(' ').next()?.to_owned())
                })
                .collect();
            let rolled = self
                .faults
                .iter()
                .any(|f| f.fault == Fault::RollingUpdate && f.group == Some(g));
            if rolled && !(versions.contains(CURRENT_VERSION) && versions.contains(NEXT_VERSION)) {
                self.problems.push(format!(
                    "{g}: a rolling update ran, but the Lease writes show the versions {versions:?}"
                ));
            }
            report.versions.insert(g, versions);

            let terms = checker::terms(&events, &lock);
            let mut n = 0;
            for pair in terms.windows(2) {
                let (prev, next) = (&pair[0], &pair[1]);
                if prev.holder == next.holder || next.start < from || next.start > until {
                    continue;
                }
                n += 1;
                let fault = self
                    .faults
                    .iter()
                    .rev()
                    .find(|f| f.start <= next.start)
                    .map(|f| f.fault);
                if let Some(f) = fault {
                    *report.changes_by_fault.entry(f).or_default() += 1;
                }
            }
            report.changes_by_group.insert(g, n);
            report.total_changes += n;
        }
        for r in &self.history {
            let log = std::fs::read_to_string(&r.log).unwrap_or_default();
            if log.contains("panicked") {
                self.problems
                    .push(format!("{} panicked; see {}", r.identity, r.log.display()));
            }
        }
        report.problems = self.problems.clone();
        Ok(report)
    }
}

impl World<'_> {
    /// Whether `v` is a write that the replica had in flight when SIGSTOP froze it: it arrived within
    /// [`IN_FLIGHT_GRACE`] of the SIGCONT. Such a write passed the fence check during the term; it can
    /// only have left the process after SIGCONT because the freeze caught it between the check and the
    /// socket. A write *begun* after SIGCONT would have been refused by the fence, whose deadline is on
    /// the monotonic clock, which ran on while the process was stopped.
    fn in_flight_at_stop(&self, v: &Violation, events: &[AuditEvent]) -> Option<String> {
        let grace = jiff::SignedDuration::try_from(IN_FLIGHT_GRACE).unwrap_or_default();
        let pause = self.pauses.iter().find(|p| {
            p.identity == v.identity
                && p.resumed <= v.time
                && p.resumed.checked_add(grace).is_ok_and(|end| v.time <= end)
        })?;
        let code = events
            .iter()
            .find(|e| e.received == v.time && e.agent_identity() == Some(v.identity.as_str()))
            .map_or(0, |e| e.code);
        Some(format!(
            "{} wrote {} {:.0} ms after its SIGCONT (HTTP {code}; holder {})",
            v.identity,
            v.object,
            v.time.duration_since(pause.resumed).as_secs_f64() * 1000.0,
            v.holder.as_deref().unwrap_or("nobody")
        ))
    }
}

/// Creates an object from JSON.
async fn create(api: &Api<DynamicObject>, obj: Value) -> anyhow::Result<()> {
    let o: DynamicObject = serde_json::from_value(obj)?;
    api.create(&PostParams::default(), &o).await?;
    Ok(())
}

/// Polls both Leases and counts changes of holder (never a release: only who holds next).
async fn observe(leases: Api<Lease>, observed: Arc<Mutex<Observed>>) {
    loop {
        for g in Group::ALL {
            let holder = leases
                .get_opt(g.lease())
                .await
                .ok()
                .flatten()
                .and_then(|l| l.spec?.holder_identity)
                .filter(|h| !h.is_empty());
            if let (Some(h), Ok(mut o)) = (holder, observed.lock()) {
                match o.last.insert(g, h.clone()) {
                    Some(prev) if prev != h => o.changes += 1,
                    _ => {}
                }
            }
        }
        tokio::time::sleep(POLL).await;
    }
}

/// Keeps changing resources: about ten NopResource spec patches a second, and every fifth an XR's.
async fn churn(nops: Api<DynamicObject>, xrs: Api<DynamicObject>, n_nops: usize, n_xrs: usize) {
    let pp = PatchParams::default();
    let mut k: u64 = 0;
    loop {
        k += 1;
        if n_nops > 0 {
            let i = usize::try_from(k).unwrap_or(0) % n_nops;
            let patch = json!({"spec": {"forProvider": {"fields": {"gen": k}}}});
            let _ = nops
                .patch(&format!("nop-{i:03}"), &pp, &Patch::Merge(&patch))
                .await;
        }
        if n_xrs > 0 && k.is_multiple_of(5) {
            let j = usize::try_from(k / 5).unwrap_or(0) % n_xrs;
            let patch = json!({"spec": {"n": k}});
            let _ = xrs.patch(&format!("xr-{j:03}"), &pp, &Patch::Merge(&patch)).await;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
