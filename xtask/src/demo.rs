//! `cargo xtask demo`: the whole system, live, on this machine.
//!
//! 1. Builds the binaries (debug; cargo's progress is shown) as `cargo xtask image --debug` does, reusing
//!    the libraries `cargo xtask` itself was built with.
//! 2. Uses the control plane named by `CROSSPLANE_RS_TESTBED`, or else the long-lived one of
//!    `cargo xtask control-plane up`, which it starts if needed (and stops at the end if it started it).
//! 3. Installs the CRDs and, for each binary, the ServiceAccount, Role, RoleBinding, ClusterRole(s) and
//!    ClusterRoleBinding that `cargo xtask generate` writes under deploy/ (not the Deployments), in
//!    `crossplane-system`, and waits until the core's aggregated ClusterRole is filled in.
//! 4. Starts two replicas each of the core, the RBAC manager, provider-nop and provider-kubernetes as local
//!    processes. Each authenticates with a token of *its own* binary's ServiceAccount, so it can do exactly
//!    what the generated RBAC allows.
//! 5. Applies `examples/demo/` (an XRD, a Composition of two NopResources and a provider-kubernetes Object,
//!    a ProviderConfig, an XR) and shows a live view: who holds each Lease, the resources' Synced and
//!    Ready, and per ServiceAccount the requests the apiserver's audit log saw and how many were denied.
//! 6. Hands provider-nop's Lease over twice and measures it, from the signal until the demo's watch sees
//!    the new holder: SIGTERM to the leader (it releases the Lease), then SIGKILL to the new leader (a
//!    crash: the standby takes over when the lease expires). Then it changes the XR and measures how long
//!    until the new leader has reconciled the change.
//! 7. Ctrl-C deletes the XR, Composition, XRD and ProviderConfig, stops the processes and deletes the
//!    namespace and the cluster-scoped RBAC. `--keep` leaves everything running and prints how to use
//!    kubectl on it; `--down` cleans a kept demo up. `--ci` needs no TTY: it runs once through, including the
//!    deletion, fails on any 403 of the four ServiceAccounts, and prints one `RESULT` line.
//!
//! The replicas run with the demo's lease timings, 6 s/4 s/1 s, so that the crash failover takes seconds
//! rather than the minute of the Deployments' defaults.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::io::{IsTerminal, Read, Seek, SeekFrom};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail, ensure};
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use k8s_openapi::api::rbac::v1::ClusterRole;
use kube::api::{ApiResource, DeleteParams, DynamicObject, GroupVersionKind, Patch, PatchParams};
use kube::discovery::Scope;
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Client};
use nix::sys::signal::Signal;
use nix::unistd::Pid;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use testenv::Cluster;

use crate::generate::{self, Deployed};
use crate::{control_plane, image, runtime};

/// How the demo runs.
#[derive(Debug, Clone, Copy, Default)]
pub struct Options {
    /// Leave everything running at the end.
    pub keep: bool,
    /// Run once through without a TTY, and exit non-zero on any failure.
    pub ci: bool,
    /// Clean up a demo left running by `--keep`.
    pub down: bool,
}

const NS: &str = generate::NAMESPACE;
/// The field manager of everything the demo applies.
const MANAGER: &str = "crossplane-rs-demo";
/// The deployments the demo runs, two replicas each.
const DEPLOYMENTS: [&str; 4] = [
    "crossplane",
    "crossplane-rbac-manager",
    "provider-nop",
    "provider-kubernetes",
];
/// The deployment whose leader is killed.
const KILLED: &str = "provider-nop";
/// The demo's lease timings.
const LEASE_DURATION: Duration = Duration::from_secs(6);
const TIMINGS: [(&str, &str); 3] = [
    ("--lease-duration", "6s"),
    ("--renew-deadline", "4s"),
    ("--retry-period", "1s"),
];
/// The XR of examples/demo/xr.yaml.
const XR: &str = "demo";
/// The ServiceAccount whose kubeconfig provider-kubernetes applies the Objects with.
const WORKLOADS: &str = "demo-workloads";
const LABEL_COMPOSITE: &str = "crossplane.io/composite";
const ANNOTATION_RESOURCE_NAME: &str = "crossplane.io/composition-resource-name";
/// The kinds of the generated bases that the demo applies (not the Deployment or the PDB).
const RBAC_KINDS: [&str; 5] = [
    "ServiceAccount",
    "Role",
    "RoleBinding",
    "ClusterRole",
    "ClusterRoleBinding",
];

fn resource(group: &str, version: &str, kind: &str, plural: &str) -> ApiResource {
    ApiResource {
        group: group.into(),
        version: version.into(),
        api_version: if group.is_empty() {
            version.into()
        } else {
            format!("{group}/{version}")
        },
        kind: kind.into(),
        plural: plural.into(),
    }
}

fn xrd_resource() -> ApiResource {
    resource(
        "apiextensions.crossplane.io",
        "v2",
        "CompositeResourceDefinition",
        "compositeresourcedefinitions",
    )
}
fn composition_resource() -> ApiResource {
    resource("apiextensions.crossplane.io", "v1", "Composition", "compositions")
}
fn xr_resource() -> ApiResource {
    resource("demo.crossplane-rs.io", "v1", "XApp", "xapps")
}
fn nop_resource() -> ApiResource {
    resource("nop.crossplane.io", "v1alpha1", "NopResource", "nopresources")
}
fn object_resource() -> ApiResource {
    resource("kubernetes.crossplane.io", "v1alpha2", "Object", "objects")
}
fn provider_config_resource() -> ApiResource {
    resource(
        "kubernetes.crossplane.io",
        "v1alpha1",
        "ProviderConfig",
        "providerconfigs",
    )
}

/// The control plane the demo runs on: `$CROSSPLANE_RS_TESTBED`, else the long-lived one.
fn testbed_dir() -> PathBuf {
    let dir = std::env::var_os(testenv::ENV_TESTBED)
        .map(PathBuf::from)
        .unwrap_or_else(control_plane::dev_dir);
    dir.canonicalize().unwrap_or(dir)
}

/// The demo's logs and state live with its control plane, so demos on different control planes (the
/// test suite's private one, a person's long-lived one) never touch each other.
fn demo_dir(testbed: &Path) -> PathBuf {
    testbed.join("demo")
}

fn state_path(testbed: &Path) -> PathBuf {
    demo_dir(testbed).join("state.json")
}

/// Whether `pid` still runs `binary` (also when a rebuild has replaced the file since).
fn runs(pid: u32, binary: &Path) -> bool {
    std::fs::read_link(format!("/proc/{pid}/exe")).is_ok_and(|exe| {
        let exe = exe.to_string_lossy();
        exe.strip_suffix(" (deleted)").unwrap_or(&exe) == binary.to_string_lossy()
    })
}

fn examples_dir() -> PathBuf {
    testenv::harness::repo_root().join("examples").join("demo")
}

/// What `--keep` leaves behind, for `--down`.
#[derive(Debug, Serialize, Deserialize)]
struct Kept {
    testbed: PathBuf,
    started_control_plane: bool,
    replicas: Vec<KeptReplica>,
}

#[derive(Debug, Serialize, Deserialize)]
struct KeptReplica {
    identity: String,
    pid: u32,
    binary: PathBuf,
}

/// `cargo xtask demo`. Returns the exit code.
pub fn run(options: Options) -> Result<i32> {
    let testbed = testbed_dir();
    if options.down {
        return down(&testbed).map(|()| 0);
    }
    let wall = Instant::now();
    if state_path(&testbed).exists() {
        eprintln!("[demo] a previous demo is still up (--keep, or it was killed); cleaning it up first");
        down(&testbed)?;
    }
    let images: Vec<&image::Binary> = image::BINARIES
        .iter()
        .filter(|i| demo_deployments().iter().any(|b| b.image == i.name))
        .collect();
    let bin_dir = image::cargo_build(&images, false)?;
    let (cluster, started_control_plane) = match std::env::var_os(testenv::ENV_TESTBED) {
        Some(dir) => {
            eprintln!(
                "[demo] using the control plane in {} ({})",
                PathBuf::from(dir).display(),
                testenv::ENV_TESTBED
            );
            (Cluster::shared()?, false)
        }
        None => control_plane::up()?,
    };
    let rt = runtime()?;
    let outcome = rt.block_on(async {
        let mut demo = Demo::new(cluster, bin_dir, options, started_control_plane, wall).await?;
        let result = tokio::select! {
            r = demo.scenario() => Some(r),
            _ = interrupted() => None,
        };
        demo.finish(result).await
    });
    drop(rt);
    let code = outcome?;
    if started_control_plane && !options.keep {
        eprintln!("[demo] stopping the control plane the demo started");
        control_plane::down()?;
    }
    eprintln!("[demo] done in {:.1}s", wall.elapsed().as_secs_f64());
    Ok(code)
}

/// Cleans up a demo left running by `--keep` on the control plane in `testbed`.
fn down(testbed: &Path) -> Result<()> {
    let path = state_path(testbed);
    if !path.exists() {
        eprintln!("[demo] no demo is kept running");
        return Ok(());
    }
    let text = std::fs::read_to_string(&path)?;
    let kept: Kept = serde_json::from_str(&text).with_context(|| format!("parsing {}", path.display()))?;
    let state = testenv::State::load(&kept.testbed);
    let rt = runtime()?;
    if let Ok(state) = &state {
        let client = rt.block_on(state.cluster.client())?;
        rt.block_on(delete_examples(&client, true, |_| {}))?;
    }
    // Only processes that still run the binary the demo started.
    for r in kept.replicas.iter().filter(|r| runs(r.pid, &r.binary)) {
        let _ = nix::sys::signal::kill(Pid::from_raw(r.pid as i32), Signal::SIGTERM);
    }
    let deadline = Instant::now() + Duration::from_secs(15);
    for r in &kept.replicas {
        while runs(r.pid, &r.binary) {
            if Instant::now() > deadline {
                let _ = nix::sys::signal::kill(Pid::from_raw(r.pid as i32), Signal::SIGKILL);
                break;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
    if let Ok(state) = &state {
        let client = rt.block_on(state.cluster.client())?;
        rt.block_on(delete_rbac_and_namespace(&client))?;
    }
    drop(rt);
    std::fs::remove_file(&path)?;
    if kept.started_control_plane && testbed == control_plane::dev_dir() {
        eprintln!("[demo] stopping the control plane the demo started");
        control_plane::down()?;
    }
    eprintln!("[demo] cleaned up");
    Ok(())
}

/// One replica: a local process of a binary.
struct Replica {
    deployment: &'static str,
    identity: String,
    binary: PathBuf,
    args: Vec<String>,
    log: PathBuf,
    child: Option<Child>,
    /// Left running when the demo exits (`--keep`).
    detached: bool,
}

impl Replica {
    fn spawn(&mut self) -> Result<()> {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log)
            .with_context(|| format!("opening {}", self.log.display()))?;
        let child = Command::new(&self.binary)
            .args(&self.args)
            .env("POD_NAME", &self.identity)
            .env_remove("KUBECONFIG")
            .env_remove("LEADER_ELECTION")
            .env_remove("POD_NAMESPACE")
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log)
            // Its own process group: Ctrl-C reaches the demo, which stops the replicas itself.
            .process_group(0)
            .spawn()
            .with_context(|| format!("starting {}", self.binary.display()))?;
        self.child = Some(child);
        Ok(())
    }

    fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    fn running(&mut self) -> bool {
        self.child
            .as_mut()
            .is_some_and(|c| matches!(c.try_wait(), Ok(None)))
    }

    fn signal(&self, signal: Signal) -> Result<()> {
        let pid = self.pid().context("the replica is not running")?;
        nix::sys::signal::kill(Pid::from_raw(pid as i32), signal)
            .with_context(|| format!("sending {signal} to {}", self.identity))
    }

    /// Waits until the process has exited; false on time-out.
    async fn exited(&mut self, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        while self.running() {
            if Instant::now() > deadline {
                return false;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        true
    }

    /// SIGTERM (the replica releases its Lease and exits), SIGKILL after ten seconds.
    async fn stop(&mut self) {
        if !self.running() {
            return;
        }
        let _ = self.signal(Signal::SIGTERM);
        if !self.exited(Duration::from_secs(10)).await {
            let _ = self.signal(Signal::SIGKILL);
            self.exited(Duration::from_secs(5)).await;
        }
    }
}

impl Drop for Replica {
    fn drop(&mut self) {
        if self.detached {
            return;
        }
        if let Some(child) = self.child.as_mut()
            && matches!(child.try_wait(), Ok(None))
        {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// Requests per ServiceAccount of the demo's namespace, read incrementally from the audit log.
struct AuditTail {
    path: PathBuf,
    offset: u64,
    pending: Vec<u8>,
    since: jiff::Timestamp,
    users: BTreeMap<String, UserStats>,
}

#[derive(Debug, Clone, Default)]
struct UserStats {
    requests: u64,
    denied: u64,
    examples: Vec<String>,
}

impl AuditTail {
    fn new(path: &Path) -> Self {
        AuditTail {
            path: path.to_path_buf(),
            offset: std::fs::metadata(path).map(|m| m.len()).unwrap_or(0),
            pending: Vec::new(),
            since: jiff::Timestamp::now(),
            users: BTreeMap::new(),
        }
    }

    fn poll(&mut self) -> Result<()> {
        let mut f = std::fs::File::open(&self.path)
            .with_context(|| format!("opening the audit log {}", self.path.display()))?;
        f.seek(SeekFrom::Start(self.offset))?;
        let n = f.read_to_end(&mut self.pending)?;
        self.offset += n as u64;
        let Some(end) = self.pending.iter().rposition(|b| *b == b'\n') else {
            return Ok(());
        };
        let complete: Vec<u8> = self.pending.drain(..=end).collect();
        let prefix = format!("system:serviceaccount:{NS}:");
        for e in testenv::audit::parse(&String::from_utf8_lossy(&complete), false).events {
            if e.received < self.since {
                continue;
            }
            let Some(sa) = e.user.strip_prefix(&prefix) else {
                continue;
            };
            let s = self.users.entry(sa.to_owned()).or_default();
            s.requests += 1;
            if e.code == 403 {
                s.denied += 1;
                if s.examples.len() < 5 {
                    let res = if e.subresource.is_empty() {
                        e.resource.clone()
                    } else {
                        format!("{}/{}", e.resource, e.subresource)
                    };
                    s.examples.push(format!(
                        "{} {}.{} ns={:?} name={:?}",
                        e.verb, res, e.api_group, e.namespace, e.name
                    ));
                }
            }
        }
        Ok(())
    }
}

/// A measured handover.
#[derive(Debug, Clone)]
struct Handover {
    signal: Signal,
    from: String,
    to: String,
    took: Duration,
    released: Option<Duration>,
}

#[derive(Debug, Default)]
struct Results {
    graceful: Option<Handover>,
    crash: Option<Handover>,
    propagated: Option<Duration>,
    ready: Option<Duration>,
}

struct Demo {
    cluster: Cluster,
    client: Client,
    bin_dir: PathBuf,
    options: Options,
    started_control_plane: bool,
    tty: bool,
    wall: Instant,
    replicas: Vec<Replica>,
    events: Vec<String>,
    audit: AuditTail,
    last_draw: Option<Instant>,
    results: Results,
    /// Whether the example resources were deleted already (in `--ci`).
    deleted: bool,
    /// Whether the scenario is through and only the live view runs (so Ctrl-C is the normal end).
    running: bool,
}

impl Demo {
    async fn new(
        cluster: Cluster,
        bin_dir: PathBuf,
        options: Options,
        started_control_plane: bool,
        wall: Instant,
    ) -> Result<Self> {
        let client = cluster.client().await?;
        let audit = AuditTail::new(&cluster.audit_log);
        Ok(Demo {
            tty: !options.ci && std::io::stdout().is_terminal(),
            cluster,
            client,
            bin_dir,
            options,
            started_control_plane,
            wall,
            replicas: Vec::new(),
            events: Vec::new(),
            audit,
            last_draw: None,
            results: Results::default(),
            deleted: false,
            running: false,
        })
    }

    /// Records a line of what happened: in the live view's log, or printed at once without a TTY.
    fn note(&mut self, msg: impl Into<String>) {
        let line = format!("{:>6.1}s  {}", self.wall.elapsed().as_secs_f64(), msg.into());
        if !self.tty {
            println!("[demo] {line}");
        }
        self.events.push(line);
    }

    async fn scenario(&mut self) -> Result<()> {
        std::fs::create_dir_all(demo_dir(&self.cluster.dir).join("logs"))?;
        self.install().await?;
        self.start_replicas().await?;
        self.apply_examples().await?;
        self.handovers().await?;
        if self.options.ci {
            self.print_view().await;
            delete_examples(&self.client, false, |m| {
                println!("[demo] {m}");
            })
            .await?;
            self.deleted = true;
            return Ok(());
        }
        if self.options.keep {
            return Ok(());
        }
        self.note("running; Ctrl-C cleans everything up (or run with --keep to leave it running)");
        self.running = true;
        let mut printed = Instant::now();
        loop {
            self.tick().await;
            // Without a TTY (output to a file or a pipe), a snapshot every 15 seconds.
            if !self.tty && printed.elapsed() >= Duration::from_secs(15) {
                self.print_view().await;
                printed = Instant::now();
            }
        }
    }

    /// Installs the CRDs, the namespace, the generated RBAC of the four binaries and the workload identity.
    async fn install(&mut self) -> Result<()> {
        let root = testenv::harness::repo_root().join("deploy");
        if !generate::drift(&root, &generate::render()?)?.is_empty() {
            self.note(
                "note: deploy/ differs from the code (run `cargo xtask generate`); the demo uses the code's",
            );
        }
        let crds: Vec<_> = generate::deployed().iter().flat_map(|b| (b.crds)()).collect();
        self.note(format!("installing {} CRDs", crds.len()));
        testenv::support::install_crds(&self.client, &crds).await?;

        let namespaces: Api<Namespace> = Api::all(self.client.clone());
        self.wait(
            "the old namespace to be gone",
            Duration::from_secs(120),
            |c| async move {
                let ns = Api::<Namespace>::all(c).get_opt(NS).await?;
                Ok(ns
                    .filter(|n| n.metadata.deletion_timestamp.is_some())
                    .is_none()
                    .then_some(()))
            },
        )
        .await?;
        namespaces
            .patch(
                NS,
                &PatchParams::apply(MANAGER).force(),
                &Patch::Apply(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})),
            )
            .await?;

        let mut applied = 0;
        for b in demo_deployments() {
            for (_, obj) in generate::base(&b, env!("CARGO_PKG_VERSION")) {
                if RBAC_KINDS.contains(&obj["kind"].as_str().unwrap_or_default()) {
                    apply(&self.client, &obj).await?;
                    applied += 1;
                }
            }
        }
        self.note(format!(
            "applied the generated RBAC of {}: {applied} objects (ServiceAccounts, Roles, ClusterRoles, bindings)",
            DEPLOYMENTS.join(", ")
        ));

        // The identity provider-kubernetes applies the demo's Objects with: ConfigMaps in the namespace.
        let kubeconfig = self.cluster.service_account_kubeconfig(NS, WORKLOADS).await?;
        let text = std::fs::read_to_string(&kubeconfig)?;
        for obj in [
            json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
                   "metadata": {"name": WORKLOADS, "namespace": NS},
                   "rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["*"]}]}),
            json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
                   "metadata": {"name": WORKLOADS, "namespace": NS},
                   "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": WORKLOADS},
                   "subjects": [{"kind": "ServiceAccount", "name": WORKLOADS, "namespace": NS}]}),
            json!({"apiVersion": "v1", "kind": "Secret",
                   "metadata": {"name": format!("{WORKLOADS}-kubeconfig"), "namespace": NS},
                   "stringData": {"kubeconfig": text}}),
        ] {
            apply(&self.client, &obj).await?;
        }

        // The core's ClusterRole aggregates its own needs and the providers' kinds.
        self.wait(
            "the aggregated ClusterRole crossplane",
            Duration::from_secs(60),
            |c| async move {
                let role = Api::<ClusterRole>::all(c).get_opt("crossplane").await?;
                let groups: Vec<String> = role
                    .and_then(|r| r.rules)
                    .unwrap_or_default()
                    .into_iter()
                    .flat_map(|r| r.api_groups.unwrap_or_default())
                    .collect();
                let want = [
                    "apiextensions.crossplane.io",
                    "nop.crossplane.io",
                    "kubernetes.crossplane.io",
                ];
                Ok(want.iter().all(|g| groups.iter().any(|h| h == g)).then_some(()))
            },
        )
        .await?;
        self.note("the core's ClusterRole is aggregated");
        Ok(())
    }

    async fn start_replicas(&mut self) -> Result<()> {
        let logs = demo_dir(&self.cluster.dir).join("logs");
        for b in demo_deployments() {
            let kubeconfig = self.cluster.service_account_kubeconfig(NS, b.name).await?;
            for suffix in ["a", "b"] {
                let identity = format!("{}-{suffix}", b.name);
                let mut args: Vec<String> = b.args.iter().map(|s| (*s).to_owned()).collect();
                args.extend(
                    [
                        "--kubeconfig",
                        &kubeconfig.display().to_string(),
                        "--leader-election",
                        "--leader-election-namespace",
                        NS,
                        "--metrics-bind-address",
                        "0",
                        "--health-probe-bind-address",
                        "0",
                    ]
                    .map(String::from),
                );
                for (flag, value) in TIMINGS {
                    args.extend([flag.to_owned(), value.to_owned()]);
                }
                let log = logs.join(format!("{identity}.log"));
                let _ = std::fs::remove_file(&log);
                let mut replica = Replica {
                    deployment: b.name,
                    identity,
                    binary: self.bin_dir.join(b.image),
                    args,
                    log,
                    child: None,
                    detached: false,
                };
                replica.spawn()?;
                self.replicas.push(replica);
                self.save_state()?;
            }
        }
        self.note(format!(
            "started {} replicas, each with its own ServiceAccount's token (logs: {})",
            self.replicas.len(),
            logs.display()
        ));
        self.wait(
            "a leader for every Lease",
            Duration::from_secs(60),
            |c| async move {
                for b in demo_deployments() {
                    if holder(&c, b.lease.lease_id).await?.is_empty() {
                        return Ok(None);
                    }
                }
                Ok(Some(()))
            },
        )
        .await?;
        self.note("every Lease has a leader");
        Ok(())
    }

    async fn apply_examples(&mut self) -> Result<()> {
        let dir = examples_dir();
        for file in ["providerconfig.yaml", "xrd.yaml", "composition.yaml"] {
            apply(&self.client, &read_example(&dir.join(file))?).await?;
        }
        self.note("applied examples/demo/: ProviderConfig, XRD, Composition");
        self.wait(
            "the XRD to be Established",
            Duration::from_secs(60),
            |c| async move {
                let xrd = Api::<DynamicObject>::all_with(c, &xrd_resource())
                    .get_opt("xapps.demo.crossplane-rs.io")
                    .await?;
                Ok(
                    (condition(&xrd.map(to_json).unwrap_or_default(), "Established").as_deref()
                        == Some("True"))
                    .then_some(()),
                )
            },
        )
        .await?;
        self.note("XRD Established: the core serves xapps.demo.crossplane-rs.io");
        apply(&self.client, &read_example(&dir.join("xr.yaml"))?).await?;
        let applied = Instant::now();
        self.note("applied the XR XApp/demo");
        self.wait("the XR to be Ready", Duration::from_secs(120), |c| async move {
            let xr = get_json(&c, &xr_resource(), XR).await?;
            Ok((condition(&xr, "Ready").as_deref() == Some("True")
                && condition(&xr, "Synced").as_deref() == Some("True"))
            .then_some(()))
        })
        .await?;
        self.results.ready = Some(applied.elapsed());
        self.note(format!(
            "XApp/demo is Ready {:.1}s after it was applied: two NopResources and a ConfigMap",
            applied.elapsed().as_secs_f64()
        ));
        Ok(())
    }

    async fn handovers(&mut self) -> Result<()> {
        if !self.tty {
            self.print_view().await;
        }
        let graceful = self.handover(KILLED, Signal::SIGTERM).await?;
        self.note(format!(
            "graceful handover: SIGTERM to {} (leader) -> {} leads {} later{}",
            graceful.from,
            graceful.to,
            show(graceful.took),
            graceful
                .released
                .map(|r| format!(" (released after {})", show(r)))
                .unwrap_or_default()
        ));
        self.results.graceful = Some(graceful.clone());
        self.restart(&graceful.from).await?;
        // Let the restarted replica start watching the Lease before the next kill.
        self.pause(Duration::from_secs(3)).await;

        let crash = self.handover(KILLED, Signal::SIGKILL).await?;
        self.note(format!(
            "crash failover: SIGKILL to {} (leader) -> {} leads {} later (lease duration {}s)",
            crash.from,
            crash.to,
            show(crash.took),
            LEASE_DURATION.as_secs()
        ));
        self.results.crash = Some(crash.clone());
        self.restart(&crash.from).await?;

        // The new leader acts: a change of the XR reaches the NopResources through it.
        let xrs = Api::<DynamicObject>::all_with(self.client.clone(), &xr_resource());
        let changed = Instant::now();
        xrs.patch(
            XR,
            &PatchParams::apply(MANAGER).force(),
            &Patch::Apply(json!({"apiVersion": "demo.crossplane-rs.io/v1", "kind": "XApp",
                                 "metadata": {"name": XR}, "spec": {"size": "large"}})),
        )
        .await?;
        self.note("changed XApp/demo: size small -> large");
        self.wait(
            "the change to reach the NopResources",
            Duration::from_secs(60),
            |c| async move {
                let nops = composed(&c, &nop_resource()).await?;
                let done = nops.len() == 2
                    && nops.iter().all(|n| {
                        let fields = &n["spec"]["forProvider"]["fields"];
                        let changed = fields["instanceClass"] == "db.r6.xlarge" || fields["nodes"] == "3";
                        changed
                            && n["status"]["observedGeneration"] == n["metadata"]["generation"]
                            && condition(n, "Synced").as_deref() == Some("True")
                    });
                Ok(done.then_some(()))
            },
        )
        .await?;
        self.results.propagated = Some(changed.elapsed());
        self.note(format!(
            "the new provider-nop leader reconciled the change {} after it was made",
            show(changed.elapsed())
        ));
        Ok(())
    }

    /// Signals the current leader of `deployment`'s Lease and measures until the demo's watch sees another
    /// replica hold it.
    async fn handover(&mut self, deployment: &str, signal: Signal) -> Result<Handover> {
        let lease = demo_deployments()
            .into_iter()
            .find(|b| b.name == deployment)
            .map(|b| b.lease.lease_id)
            .context("unknown deployment")?;
        // Both replicas up, and one of them leads.
        let ids: Vec<String> = self
            .replicas
            .iter()
            .filter(|r| r.deployment == deployment)
            .map(|r| r.identity.clone())
            .collect();
        let from = self
            .wait("a leader among the replicas", Duration::from_secs(60), {
                let ids = ids.clone();
                move |c| {
                    let ids = ids.clone();
                    async move {
                        let h = holder(&c, lease).await?;
                        Ok(ids.contains(&h).then_some(h))
                    }
                }
            })
            .await?;
        let api: Api<Lease> = Api::namespaced(self.client.clone(), NS);
        let mut stream = watcher(
            api,
            watcher::Config::default().fields(&format!("metadata.name={lease}")),
        )
        .applied_objects()
        .boxed();
        // The watch is established once it has delivered the current record.
        tokio::time::timeout(Duration::from_secs(10), stream.try_next())
            .await
            .context("watching the Lease")??;
        let index = self
            .replicas
            .iter()
            .position(|r| r.identity == from)
            .context("the leader is not a demo replica")?;
        let start = Instant::now();
        self.replicas[index].signal(signal)?;
        let mut released = None;
        let timeout = LEASE_DURATION * 3;
        let to = loop {
            let next = tokio::time::timeout(timeout.saturating_sub(start.elapsed()), stream.try_next())
                .await
                .with_context(|| format!("no new holder of {lease} within {timeout:?}"))??;
            let Some(l) = next else {
                bail!("the watch of {lease} ended");
            };
            let h = l.spec.and_then(|s| s.holder_identity).unwrap_or_default();
            if h.is_empty() {
                released.get_or_insert(start.elapsed());
            } else if h != from {
                break h;
            }
        };
        let took = start.elapsed();
        Ok(Handover {
            signal,
            from,
            to,
            took,
            released,
        })
    }

    /// Waits for the replica to exit and starts it again, as its Deployment would.
    async fn restart(&mut self, identity: &str) -> Result<()> {
        let index = self
            .replicas
            .iter()
            .position(|r| r.identity == identity)
            .context("no such replica")?;
        if !self.replicas[index].exited(Duration::from_secs(30)).await {
            bail!("{identity} did not exit");
        }
        self.replicas[index].spawn()?;
        self.save_state()?;
        self.note(format!("restarted {identity}; it stands by"));
        Ok(())
    }

    /// Polls `f` until it returns `Some`, refreshing the live view meanwhile.
    async fn wait<T, F, Fut>(&mut self, what: &str, timeout: Duration, mut f: F) -> Result<T>
    where
        F: FnMut(Client) -> Fut,
        Fut: Future<Output = Result<Option<T>>>,
    {
        let deadline = Instant::now() + timeout;
        let mut last_err = None;
        loop {
            match f(self.client.clone()).await {
                Ok(Some(v)) => return Ok(v),
                Ok(None) => {}
                Err(e) => last_err = Some(e),
            }
            for r in &mut self.replicas {
                ensure!(
                    r.running() || r.child.is_none(),
                    "replica {} exited; its log: {}",
                    r.identity,
                    r.log.display()
                );
            }
            if Instant::now() > deadline {
                bail!(
                    "timed out after {timeout:?} waiting for {what}{}",
                    last_err
                        .map(|e| format!(" (last error: {e:#})"))
                        .unwrap_or_default()
                );
            }
            self.tick().await;
        }
    }

    async fn pause(&mut self, d: Duration) {
        let until = Instant::now() + d;
        while Instant::now() < until {
            self.tick().await;
        }
    }

    /// Reads the audit log, redraws the live view (at most twice a second, with a TTY) and sleeps a little.
    async fn tick(&mut self) {
        let _ = self.audit.poll();
        if self.tty
            && self
                .last_draw
                .is_none_or(|t| t.elapsed() >= Duration::from_millis(500))
        {
            let view = self.view().await;
            // Home, each line cleared to its end, the rest of the screen cleared: no flicker.
            let mut screen = String::from("\x1b[H");
            for line in view.lines() {
                screen.push_str(line);
                screen.push_str("\x1b[K\n");
            }
            screen.push_str("\x1b[J");
            print!("{screen}");
            use std::io::Write as _;
            let _ = std::io::stdout().flush();
            self.last_draw = Some(Instant::now());
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }

    async fn print_view(&mut self) {
        let _ = self.audit.poll();
        let view = self.view().await;
        if self.tty {
            print!("\x1b[H\x1b[2J");
        }
        println!("{view}");
    }

    /// The live view as text.
    async fn view(&mut self) -> String {
        let mut out = String::new();
        let _ = writeln!(
            out,
            "crossplane-rs demo · {:.0}s · namespace {NS} · {}",
            self.wall.elapsed().as_secs_f64(),
            self.cluster.server
        );
        let _ = writeln!(
            out,
            "\n{:<48} {:<28} {:>5}  REPLICAS (* leads, - stands by, x down)",
            "LEASE", "HOLDER", "TRANS"
        );
        for b in demo_deployments() {
            let lease: Option<Lease> = Api::namespaced(self.client.clone(), NS)
                .get_opt(b.lease.lease_id)
                .await
                .ok()
                .flatten();
            let spec = lease.and_then(|l| l.spec).unwrap_or_default();
            let h = spec.holder_identity.clone().unwrap_or_default();
            let mut reps = Vec::new();
            for r in self.replicas.iter_mut().filter(|r| r.deployment == b.name) {
                let mark = if !r.running() {
                    'x'
                } else if r.identity == h {
                    '*'
                } else {
                    '-'
                };
                reps.push(format!("{mark} {}", r.identity));
            }
            let _ = writeln!(
                out,
                "{:<48} {:<28} {:>5}  {}",
                b.lease.lease_id,
                if h.is_empty() { "(none)" } else { &h },
                spec.lease_transitions.unwrap_or(0),
                reps.join("  ")
            );
        }
        let _ = writeln!(out, "\n{:<62} {:<7} {:<7} NOTE", "RESOURCE", "SYNCED", "READY");
        let c = self.client.clone();
        let xrd = get_json(&c, &xrd_resource(), "xapps.demo.crossplane-rs.io")
            .await
            .unwrap_or_default();
        if !xrd.is_null() {
            let _ = writeln!(
                out,
                "{:<62} {:<7} {:<7} Established={}",
                "CompositeResourceDefinition/xapps.demo.crossplane-rs.io",
                "",
                "",
                condition(&xrd, "Established").unwrap_or_else(|| "-".into())
            );
        }
        let xr = get_json(&c, &xr_resource(), XR).await.unwrap_or_default();
        if !xr.is_null() {
            let _ = writeln!(
                out,
                "{:<62} {:<7} {:<7} size={}",
                format!("XApp/{XR}"),
                condition(&xr, "Synced").unwrap_or_else(|| "-".into()),
                condition(&xr, "Ready").unwrap_or_else(|| "-".into()),
                xr["spec"]["size"].as_str().unwrap_or("-")
            );
        }
        for (ar, kind) in [(nop_resource(), "NopResource"), (object_resource(), "Object")] {
            for r in composed(&c, &ar).await.unwrap_or_default() {
                let role = r["metadata"]["annotations"][ANNOTATION_RESOURCE_NAME]
                    .as_str()
                    .unwrap_or("-")
                    .to_owned();
                let name = r["metadata"]["name"].as_str().unwrap_or("-").to_owned();
                let note = if kind == "Object" {
                    let cm = format!("{XR}-config");
                    match Api::<ConfigMap>::namespaced(c.clone(), NS).get_opt(&cm).await {
                        Ok(Some(m)) => format!(
                            "ConfigMap {NS}/{cm} size={}",
                            m.data
                                .unwrap_or_default()
                                .get("size")
                                .cloned()
                                .unwrap_or_default()
                        ),
                        _ => "no ConfigMap yet".into(),
                    }
                } else {
                    format!("{role}: {}", r["spec"]["forProvider"]["fields"])
                };
                let _ = writeln!(
                    out,
                    "{:<62} {:<7} {:<7} {note}",
                    format!("  {kind}/{name}"),
                    condition(&r, "Synced").unwrap_or_else(|| "-".into()),
                    condition(&r, "Ready").unwrap_or_else(|| "-".into()),
                );
            }
        }
        let _ = writeln!(
            out,
            "\n{:<48} {:>9} {:>12}",
            "SERVICEACCOUNT (apiserver audit log)", "REQUESTS", "DENIED (403)"
        );
        for (sa, s) in &self.audit.users {
            let _ = writeln!(out, "{:<48} {:>9} {:>12}", sa, s.requests, s.denied);
            for e in &s.examples {
                let _ = writeln!(out, "    denied: {e}");
            }
        }
        // Without a TTY the events are printed as they happen.
        if self.tty {
            let _ = writeln!(out);
            let from = self.events.len().saturating_sub(12);
            for e in &self.events[from..] {
                let _ = writeln!(out, "{e}");
            }
        }
        out
    }

    /// After the scenario (`Some`) or Ctrl-C (`None`): cleans up (unless kept) and reports.
    async fn finish(mut self, result: Option<Result<()>>) -> Result<i32> {
        let failed = match &result {
            Some(Err(e)) => Some(format!("{e:#}")),
            _ => None,
        };
        if self.tty {
            print!("\x1b[H\x1b[2J");
            let view = self.view().await;
            println!("{view}");
        }
        if let Some(e) = &failed {
            eprintln!("[demo] error: {e}");
        }
        if self.options.keep && failed.is_none() && result.is_some() {
            return self.keep();
        }
        if result.is_none() {
            eprintln!("[demo] Ctrl-C: cleaning up (Ctrl-C again to stop at once)");
        }
        let cleanup = async {
            if !self.deleted {
                let _ = delete_examples(&self.client, true, |m| eprintln!("[demo] {m}")).await;
            }
            let _ = self.audit.poll();
            futures::future::join_all(self.replicas.iter_mut().map(Replica::stop)).await;
            // Let the apiserver write the last requests' audit events.
            tokio::time::sleep(Duration::from_millis(300)).await;
            let _ = self.audit.poll();
            delete_rbac_and_namespace(&self.client).await
        };
        tokio::select! {
            r = cleanup => r?,
            _ = interrupted() => {
                eprintln!("[demo] stopping at once");
                return Ok(130);
            }
        }
        let _ = std::fs::remove_file(state_path(&self.cluster.dir));
        let summary = self.summary();
        for line in &summary.lines {
            println!("[demo] {line}");
        }
        if let Some(e) = failed {
            bail!("{e}");
        }
        if result.is_none() {
            return Ok(if self.running { 0 } else { 130 });
        }
        if self.options.ci {
            ensure!(
                summary.denied == 0,
                "{} requests of the demo's ServiceAccounts were denied (403)",
                summary.denied
            );
            let r = &self.results;
            println!(
                "RESULT graceful_handover_ms={} crash_failover_ms={} propagated_ms={} xr_ready_ms={} \
                 requests={} denied={} wall_s={:.1}",
                ms(r.graceful.as_ref().map(|h| h.took)),
                ms(r.crash.as_ref().map(|h| h.took)),
                ms(r.propagated),
                ms(r.ready),
                summary.requests,
                summary.denied,
                self.wall.elapsed().as_secs_f64()
            );
        }
        Ok(0)
    }

    fn summary(&self) -> Summary {
        let mut lines = Vec::new();
        let r = &self.results;
        for h in [&r.graceful, &r.crash].into_iter().flatten() {
            lines.push(format!(
                "{} handover of {}: {} -> {} in {}",
                if h.signal == Signal::SIGKILL {
                    "crash (SIGKILL)"
                } else {
                    "graceful (SIGTERM)"
                },
                KILLED,
                h.from,
                h.to,
                show(h.took)
            ));
        }
        let (mut requests, mut denied) = (0, 0);
        for name in DEPLOYMENTS {
            let s = self.audit.users.get(name).cloned().unwrap_or_default();
            requests += s.requests;
            denied += s.denied;
            lines.push(format!(
                "RBAC {name}: {} requests, {} denied (403)",
                s.requests, s.denied
            ));
            for e in &s.examples {
                lines.push(format!("  denied: {e}"));
            }
        }
        Summary {
            lines,
            requests,
            denied,
        }
    }

    /// Records the running replicas, so that `--down` (or the next demo) can stop them if this process
    /// ends without cleaning up: `--keep`, or killed.
    fn save_state(&self) -> Result<()> {
        let kept = Kept {
            testbed: self.cluster.dir.clone(),
            started_control_plane: self.started_control_plane,
            replicas: self
                .replicas
                .iter()
                .filter_map(|r| {
                    Some(KeptReplica {
                        identity: r.identity.clone(),
                        pid: r.pid()?,
                        binary: r.binary.clone(),
                    })
                })
                .collect(),
        };
        let path = state_path(&self.cluster.dir);
        std::fs::write(&path, serde_json::to_string_pretty(&kept)?)
            .with_context(|| format!("writing {}", path.display()))
    }

    /// `--keep`: leaves the replicas running and says how to reach them.
    fn keep(mut self) -> Result<i32> {
        self.save_state()?;
        for r in &mut self.replicas {
            r.detached = true;
        }
        let kc = self.cluster.admin_kubeconfig.display();
        println!(
            "\nThe demo keeps running ({} replicas; logs in {}).\n\n  export KUBECONFIG={kc}\n  kubectl get leases -n {NS}\n  kubectl get xapps,nopresources,objects\n  kubectl get configmap -n {NS} {XR}-config -o yaml\n  kubectl patch xapp {XR} --type merge -p '{{\"spec\":{{\"size\":\"small\"}}}}'\n\nClean up with `{down}` (before stopping the control plane).",
            self.replicas.len(),
            demo_dir(&self.cluster.dir).join("logs").display(),
            down = match std::env::var_os(testenv::ENV_TESTBED) {
                Some(dir) => format!(
                    "{}={} cargo xtask demo --down",
                    testenv::ENV_TESTBED,
                    PathBuf::from(dir).display()
                ),
                None => "cargo xtask demo --down".to_owned(),
            }
        );
        Ok(0)
    }
}

struct Summary {
    lines: Vec<String>,
    requests: u64,
    denied: u64,
}

/// Ctrl-C, SIGTERM or SIGHUP (a closed terminal).
async fn interrupted() {
    use tokio::signal::unix::{SignalKind, signal};
    let (Ok(mut term), Ok(mut hup)) = (signal(SignalKind::terminate()), signal(SignalKind::hangup())) else {
        let _ = tokio::signal::ctrl_c().await;
        return;
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = term.recv() => {}
        _ = hup.recv() => {}
    }
}

fn demo_deployments() -> Vec<Deployed> {
    generate::deployed()
        .into_iter()
        .filter(|b| DEPLOYMENTS.contains(&b.name))
        .collect()
}

fn show(d: Duration) -> String {
    if d < Duration::from_secs(1) {
        format!("{} ms", d.as_millis())
    } else {
        format!("{:.2} s", d.as_secs_f64())
    }
}

fn ms(d: Option<Duration>) -> String {
    d.map(|d| d.as_millis().to_string()).unwrap_or_else(|| "-".into())
}

fn to_json(o: DynamicObject) -> Value {
    serde_json::to_value(o).unwrap_or(Value::Null)
}

/// The status of condition `type_`.
fn condition(obj: &Value, type_: &str) -> Option<String> {
    obj.pointer("/status/conditions")?
        .as_array()?
        .iter()
        .find(|c| c["type"] == type_)
        .and_then(|c| c["status"].as_str())
        .map(str::to_owned)
}

async fn get_json(client: &Client, ar: &ApiResource, name: &str) -> Result<Value> {
    let api: Api<DynamicObject> = Api::all_with(client.clone(), ar);
    Ok(api.get_opt(name).await?.map(to_json).unwrap_or(Value::Null))
}

/// The resources of kind `ar` the demo XR composed.
async fn composed(client: &Client, ar: &ApiResource) -> Result<Vec<Value>> {
    let api: Api<DynamicObject> = Api::all_with(client.clone(), ar);
    let mut items: Vec<Value> = api
        .list(&kube::api::ListParams::default().labels(&format!("{LABEL_COMPOSITE}={XR}")))
        .await?
        .items
        .into_iter()
        .map(to_json)
        .collect();
    items.sort_by(|a, b| {
        a["metadata"]["annotations"][ANNOTATION_RESOURCE_NAME]
            .as_str()
            .cmp(&b["metadata"]["annotations"][ANNOTATION_RESOURCE_NAME].as_str())
    });
    Ok(items)
}

/// The holder of the Lease `name` in the demo's namespace (empty when none).
async fn holder(client: &Client, name: &str) -> Result<String> {
    let lease = Api::<Lease>::namespaced(client.clone(), NS).get_opt(name).await?;
    Ok(lease
        .and_then(|l| l.spec)
        .and_then(|s| s.holder_identity)
        .unwrap_or_default())
}

fn read_example(path: &Path) -> Result<Value> {
    let text = std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    serde_saphyr::from_str(&text).with_context(|| format!("parsing {}", path.display()))
}

/// The API of an object given as JSON, found through discovery.
async fn api_for(client: &Client, obj: &Value) -> Result<Api<DynamicObject>> {
    let api_version = obj["apiVersion"].as_str().context("apiVersion")?;
    let kind = obj["kind"].as_str().context("kind")?;
    let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
    let (ar, caps) = kube::discovery::pinned_kind(client, &GroupVersionKind::gvk(group, version, kind))
        .await
        .with_context(|| format!("discovering {api_version} {kind}"))?;
    Ok(match caps.scope {
        Scope::Namespaced => Api::namespaced_with(
            client.clone(),
            obj["metadata"]["namespace"].as_str().unwrap_or(NS),
            &ar,
        ),
        Scope::Cluster => Api::all_with(client.clone(), &ar),
    })
}

/// Server-side applies `obj` (as admin).
async fn apply(client: &Client, obj: &Value) -> Result<()> {
    let name = obj["metadata"]["name"].as_str().context("metadata.name")?;
    api_for(client, obj)
        .await?
        .patch(name, &PatchParams::apply(MANAGER).force(), &Patch::Apply(obj))
        .await
        .with_context(|| format!("applying {} {name}", obj["kind"]))?;
    Ok(())
}

/// Deletes `name` of `ar` (cluster-scoped) and waits until it is gone; with `force`, finalizers left
/// after the time-out (a controller that no longer runs) are removed.
async fn delete_and_wait(
    client: &Client,
    ar: &ApiResource,
    name: &str,
    timeout: Duration,
    force: bool,
) -> Result<()> {
    let api: Api<DynamicObject> = Api::all_with(client.clone(), ar);
    match api.delete(name, &DeleteParams::background()).await {
        Ok(_) => {}
        Err(kube::Error::Api(s)) if s.code == 404 => return Ok(()),
        Err(e) => return Err(e.into()),
    }
    let deadline = Instant::now() + timeout;
    while api.get_opt(name).await?.is_some() {
        if Instant::now() > deadline {
            ensure!(force, "{} {name} was not deleted within {timeout:?}", ar.kind);
            let _ = api
                .patch(
                    name,
                    &PatchParams::default(),
                    &Patch::Merge(json!({"metadata": {"finalizers": null}})),
                )
                .await;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    Ok(())
}

/// Deletes the example resources in order, while the controllers still run: the XR (and so what it
/// composed), the Composition and XRD (and so the XR's CRD), the ProviderConfig.
async fn delete_examples(client: &Client, force: bool, mut note: impl FnMut(&str)) -> Result<()> {
    let start = Instant::now();
    let wait = Duration::from_secs(60);
    // The XR's CRD may not exist (any more): then there is no XR either.
    let xr_crd: Api<
        k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition,
    > = Api::all(client.clone());
    if xr_crd.get_opt("xapps.demo.crossplane-rs.io").await?.is_some() {
        delete_and_wait(client, &xr_resource(), XR, wait, force).await?;
    }
    let deadline = Instant::now() + wait;
    loop {
        let left = composed(client, &nop_resource()).await?.len()
            + composed(client, &object_resource()).await?.len();
        let cm = Api::<ConfigMap>::namespaced(client.clone(), NS)
            .get_opt(&format!("{XR}-config"))
            .await?;
        if left == 0 && cm.is_none() {
            break;
        }
        if Instant::now() > deadline {
            ensure!(force, "the composed resources were not deleted within {wait:?}");
            for ar in [nop_resource(), object_resource()] {
                for r in composed(client, &ar).await? {
                    if let Some(n) = r["metadata"]["name"].as_str() {
                        delete_and_wait(client, &ar, n, Duration::ZERO, true).await?;
                    }
                }
            }
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    note(&format!(
        "deleted XApp/{XR}: its NopResources, Object and ConfigMap are gone ({})",
        show(start.elapsed())
    ));
    delete_and_wait(
        client,
        &composition_resource(),
        "xapps.demo.crossplane-rs.io",
        wait,
        force,
    )
    .await?;
    delete_and_wait(
        client,
        &xrd_resource(),
        "xapps.demo.crossplane-rs.io",
        wait,
        force,
    )
    .await?;
    delete_and_wait(client, &provider_config_resource(), "demo", wait, force).await?;
    note(&format!(
        "deleted the Composition, the XRD (and its CRD) and the ProviderConfig ({})",
        show(start.elapsed())
    ));
    Ok(())
}

/// Deletes the cluster-scoped RBAC of the bases and the namespace (with everything in it).
async fn delete_rbac_and_namespace(client: &Client) -> Result<()> {
    for b in demo_deployments() {
        for (_, obj) in generate::base(&b, env!("CARGO_PKG_VERSION")) {
            let kind = obj["kind"].as_str().unwrap_or_default();
            if kind != "ClusterRole" && kind != "ClusterRoleBinding" {
                continue;
            }
            let name = obj["metadata"]["name"].as_str().unwrap_or_default();
            match api_for(client, &obj)
                .await?
                .delete(name, &DeleteParams::default())
                .await
            {
                Ok(_) => {}
                Err(kube::Error::Api(s)) if s.code == 404 => {}
                Err(e) => return Err(e.into()),
            }
        }
    }
    let namespaces: Api<Namespace> = Api::all(client.clone());
    match namespaces.delete(NS, &DeleteParams::default()).await {
        Ok(_) => {}
        Err(kube::Error::Api(s)) if s.code == 404 => return Ok(()),
        Err(e) => return Err(e.into()),
    }
    let deadline = Instant::now() + Duration::from_secs(60);
    while namespaces.get_opt(NS).await?.is_some() && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    Ok(())
}
