//! The replica pool: one [`Slot`] per replica (its relay and kubeconfig), and the processes that run
//! in them: starting, signalling, reaping, and noticing those that exit on their own.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use anyhow::Context;
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

use super::go_peer::LOST_LEASE;
use super::world::World;
use super::{CURRENT_VERSION, GoPeer, Group, LIBFAKETIME, NEXT_VERSION, ReplicaRecord};
use crate::relay::Relay;

/// How long a replica gets to exit after SIGTERM (its graceful-shutdown timeout is 10 s).
const EXIT_TIMEOUT: Duration = Duration::from_secs(20);

/// A running replica process. Killed when dropped.
pub(super) struct Replica {
    pub(super) identity: String,
    child: Child,
    record: usize,
}

impl Replica {
    fn pid(&self) -> u32 {
        self.child.id()
    }

    pub(super) fn signal(&self, sig: Signal) -> anyhow::Result<()> {
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

/// One replica's place: its relay and ServiceAccount outlive the processes that run in it. Each process
/// gets a token of that ServiceAccount bound to a placeholder Pod named after the process's identity,
/// as a pod of a Deployment does, so the apiserver authenticates every write as coming from that pod.
pub(super) struct Slot {
    pub(super) group: Group,
    pub(super) index: usize,
    pub(super) relay: Relay,
    pub(super) generation: usize,
    pub(super) next: bool,
    /// Runs a Go peer rather than our binary (see [`GoPeer`]).
    pub(super) go: Option<GoPeer>,
    pub(super) replica: Option<Replica>,
}

impl Slot {
    /// The slot's ServiceAccount, `<nop|core>-<index>`.
    pub(super) fn service_account(&self) -> String {
        format!("{}-{}", self.group.short(), self.index)
    }
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

fn ms(d: Duration) -> String {
    format!("{}ms", d.as_millis())
}

/// The ConfigMap client-go's candidate updates while it leads.
pub(super) const CLIENT_GO_WORK: &str = "client-go-work";

/// `harness lease-candidate`'s arguments: the same Lease and timings as the group's replicas, release on
/// SIGTERM, and a write to [`CLIENT_GO_WORK`] every 100 ms while leading.
fn client_go_args(
    kubeconfig: &Path,
    ns: &str,
    lease: &str,
    identity: &str,
    t: super::Timings,
) -> Vec<String> {
    vec![
        "lease-candidate".into(),
        format!("--kubeconfig={}", kubeconfig.display()),
        format!("--namespace={ns}"),
        format!("--name={lease}"),
        format!("--identity={identity}"),
        format!("--lease-duration={}", ms(t.lease)),
        format!("--renew-deadline={}", ms(t.renew)),
        format!("--retry-period={}", ms(t.retry)),
        "--release-on-cancel=true".into(),
        format!("--work-configmap={CLIENT_GO_WORK}"),
        "--work-period=100ms".into(),
    ]
}

/// provider-nop-go's arguments: leader election on its Lease (provider-nop's) in `ns` at the group's
/// timings, released on SIGTERM as our replicas and client-go's candidate do; no metrics or probes; our
/// replicas' poll and reconcile rate. Its identity comes from `POD_NAME`.
fn go_provider_args(kubeconfig: &Path, ns: &str, t: super::Timings) -> Vec<String> {
    vec![
        format!("--kubeconfig={}", kubeconfig.display()),
        "--leader-election".into(),
        format!("--leader-election-namespace={ns}"),
        "--leader-election-release-on-cancel".into(),
        format!("--lease-duration={}", ms(t.lease)),
        format!("--renew-deadline={}", ms(t.renew)),
        format!("--retry-period={}", ms(t.retry)),
        "--metrics-bind-address=0".into(),
        "--health-probe-bind-address=0".into(),
        "--poll=30s".into(),
        "--max-reconcile-rate=50".into(),
    ]
}

/// Our replicas' arguments.
fn our_args(group: Group, kubeconfig: &Path, ns: &str, identity: &str, t: super::Timings) -> Vec<String> {
    let mut args: Vec<String> = if group == Group::Core {
        vec![
            "core".into(),
            "start".into(),
            "--poll-interval".into(),
            "30s".into(),
        ]
    } else {
        vec![
            "--poll".into(),
            "30s".into(),
            "--max-reconcile-rate".into(),
            "50".into(),
        ]
    };
    args.extend([
        "--kubeconfig".into(),
        kubeconfig.display().to_string(),
        "--leader-election".into(),
        "--leader-election-namespace".into(),
        ns.into(),
        "--leader-election-id".into(),
        group.lease().into(),
        "--leader-election-identity".into(),
        identity.into(),
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
    args
}

/// Whether a Go provider's exit is controller-runtime's on a lost Lease: exit code 1, with its message
/// in the log.
fn lost_its_lease(status: ExitStatus, log: &Path) -> bool {
    status.code() == Some(1)
        && std::fs::read_to_string(log).is_ok_and(|text| text.lines().any(|l| l.trim() == LOST_LEASE))
}

impl World<'_> {
    /// A kubeconfig for `identity` in `slot`: a token of the slot's ServiceAccount bound to the Pod
    /// `identity`, reaching the apiserver through the slot's relay. Retried for a while: a replica may be
    /// started right after an apiserver restart.
    async fn pod_kubeconfig(&self, slot: usize, identity: &str) -> anyhow::Result<PathBuf> {
        let s = &self.slots[slot];
        let cluster = self.cp.cluster();
        let deadline = Instant::now() + Duration::from_secs(60);
        let token = loop {
            match cluster
                .pod_kubeconfig(&self.ns, &s.service_account(), identity)
                .await
            {
                Ok(path) => break path,
                Err(e) if Instant::now() < deadline => {
                    self.say(&format!("minting a token for {identity}: {e}; retrying"));
                    tokio::time::sleep(Duration::from_secs(1)).await;
                }
                Err(e) => return Err(e).context(format!("minting a token for {identity}")),
            }
        };
        let text = std::fs::read_to_string(&token).with_context(|| format!("reading {}", token.display()))?;
        let path = self.config.log_dir.join(format!("{identity}.kubeconfig"));
        let relayed = text.replace(&cluster.server, &format!("https://127.0.0.1:{}", s.relay.port()));
        std::fs::write(&path, relayed).with_context(|| format!("writing {}", path.display()))?;
        Ok(path)
    }

    pub(super) async fn spawn(&mut self, slot: usize, clock: Option<String>) -> anyhow::Result<()> {
        let config = self.config;
        let ns = self.ns.clone();
        let identity = {
            let s = &self.slots[slot];
            format!("{}-{}-{}", s.group.short(), s.index, s.generation + 1)
        };
        let kubeconfig = self.pod_kubeconfig(slot, &identity).await?;
        let s = &mut self.slots[slot];
        s.generation += 1;
        let t = config.timings;
        let (binary, version) = match s.go {
            Some(GoPeer::ClientGo) => (self.cp.cluster().harness.as_path(), GoPeer::ClientGo.version()),
            Some(GoPeer::Provider) => (
                self.go_provider
                    .as_deref()
                    .context("provider-nop-go was not built (Config::go_provider is off)")?,
                GoPeer::Provider.version(),
            ),
            None if s.next => (config.binaries.get(s.group, true), NEXT_VERSION),
            None => (config.binaries.get(s.group, false), CURRENT_VERSION),
        };
        let mut args: Vec<String> = Vec::new();
        match s.go {
            Some(GoPeer::ClientGo) => {
                args.extend(client_go_args(&kubeconfig, &ns, s.group.lease(), &identity, t));
            }
            Some(GoPeer::Provider) => args.extend(go_provider_args(&kubeconfig, &ns, t)),
            None => args.extend(our_args(s.group, &kubeconfig, &ns, &identity, t)),
        }
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
            .env("HARNESS_PARENT_PID", std::process::id().to_string())
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err);
        if s.go == Some(GoPeer::Provider) {
            // Its identity, as the downward API gives a pod's name.
            cmd.env("POD_NAME", &identity);
        }
        if let Some(offset) = &clock {
            anyhow::ensure!(
                s.go.is_none(),
                "a Go peer cannot run with a skewed clock: it is static and reads the clock through the \
                 vDSO, so libfaketime does not reach it"
            );
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
            go: s.go,
            version,
            clock,
            pid: child.id(),
            log,
            ended_by: None,
            exit: None,
            lost_lease_exit: false,
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
    pub(super) async fn check_processes(&mut self) {
        let mut dead = Vec::new();
        for (i, s) in self.slots.iter_mut().enumerate() {
            if let Some(r) = s.replica.as_mut()
                && let Ok(Some(status)) = r.child.try_wait()
            {
                let rec = &mut self.history[r.record];
                rec.exit = Some(exit_text(status));
                if s.go == Some(GoPeer::Provider) && lost_its_lease(status, &rec.log) {
                    // controller-runtime's way: it exits when it loses its Lease, and its pod's kubelet
                    // restarts it. Counted in its figures (its writes are judged like any other's).
                    rec.ended_by =
                        Some("exited on its own after losing its Lease (controller-runtime's way)".into());
                    rec.lost_lease_exit = true;
                } else {
                    self.problems.push(format!(
                        "{} (pid {}) exited on its own with {}; last log lines:\n{}",
                        rec.identity,
                        rec.pid,
                        exit_text(status),
                        log_tail(&rec.log, 15)
                    ));
                }
                s.replica = None;
                dead.push(i);
            }
        }
        for i in dead {
            if let Err(e) = self.spawn(i, None).await {
                self.problems.push(format!("restarting a replica: {e:#}"));
            }
        }
    }

    pub(super) fn slot_of(&self, identity: &str) -> Option<usize> {
        self.slots
            .iter()
            .position(|s| s.replica.as_ref().is_some_and(|r| r.identity == identity))
    }

    pub(super) fn replica(&self, slot: usize) -> anyhow::Result<&Replica> {
        self.slots[slot]
            .replica
            .as_ref()
            .context("the slot has no replica")
    }

    /// SIGKILLs the replica in `slot` and reaps it.
    pub(super) fn kill(&mut self, slot: usize, why: &str) -> anyhow::Result<()> {
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
    pub(super) async fn terminate(&mut self, slot: usize, why: &str) -> anyhow::Result<()> {
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
    pub(super) async fn stop_replicas(&mut self) {
        for i in 0..self.slots.len() {
            if self.slots[i].replica.is_some()
                && let Err(e) = self.terminate(i, "end of run").await
            {
                self.problems.push(format!("stopping a replica: {e:#}"));
            }
        }
    }

    /// Kills whatever still runs (after a failure).
    pub(super) fn stop_all(&mut self) {
        for s in &mut self.slots {
            if let Some(r) = s.replica.take() {
                let _ = r.signal(Signal::SIGCONT);
                drop(r);
            }
        }
    }
}
