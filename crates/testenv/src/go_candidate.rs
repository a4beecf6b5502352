//! The client-go leader-election candidate (`harness lease-candidate`), run as a process: our
//! interoperability peer and benchmark anchor.
//!
//! It prints one JSON line per event (`started`, `new_leader`, `started_leading`, `stopped_leading`,
//! `signal`, `exited`) with a wall-clock time and a `CLOCK_MONOTONIC` time in nanoseconds, comparable
//! with [`monotonic_ns`] in this process.

use std::{
    path::PathBuf,
    process::Stdio,
    sync::{Arc, Mutex},
    time::Duration,
};

use nix::{
    sys::signal::{Signal, kill},
    time::{ClockId, clock_gettime},
    unistd::Pid,
};
use serde::Deserialize;
use tokio::{
    io::{AsyncBufReadExt, BufReader},
    process::{Child, Command},
    sync::Notify,
};

use crate::{Cluster, Error, Result};

/// One line printed by the candidate.
#[derive(Debug, Clone, Deserialize, PartialEq)]
pub struct CandidateEvent {
    /// What happened.
    pub event: String,
    /// The candidate's identity.
    pub identity: String,
    /// For `new_leader` and `started_leading`, the leader's identity.
    #[serde(default)]
    pub leader: String,
    /// Wall-clock time, RFC 3339.
    pub wall: String,
    /// `CLOCK_MONOTONIC` in nanoseconds.
    pub mono_ns: i64,
}

/// How to run a candidate.
#[derive(Debug, Clone)]
pub struct CandidateOptions {
    /// The Lease's namespace.
    pub namespace: String,
    /// The Lease's name.
    pub name: String,
    /// The candidate's identity.
    pub identity: String,
    /// Lease duration.
    pub lease_duration: Duration,
    /// Renew deadline.
    pub renew_deadline: Duration,
    /// Retry period.
    pub retry_period: Duration,
    /// Release the Lease on SIGTERM.
    pub release_on_cancel: bool,
    /// A kubeconfig other than the admin one.
    pub kubeconfig: Option<PathBuf>,
}

impl CandidateOptions {
    /// Options with short test timings (4 s / 3 s / 500 ms) and release on cancel.
    pub fn new(namespace: &str, name: &str, identity: &str) -> Self {
        CandidateOptions {
            namespace: namespace.into(),
            name: name.into(),
            identity: identity.into(),
            lease_duration: Duration::from_secs(4),
            renew_deadline: Duration::from_secs(3),
            retry_period: Duration::from_millis(500),
            release_on_cancel: true,
            kubeconfig: None,
        }
    }
}

/// A running client-go candidate.
#[derive(Debug)]
pub struct GoCandidate {
    identity: String,
    child: Child,
    events: Arc<Mutex<Vec<CandidateEvent>>>,
    changed: Arc<Notify>,
}

impl GoCandidate {
    /// Starts client-go's candidate (`harness lease-candidate`) against `cluster`.
    pub fn spawn(cluster: &Cluster, opts: &CandidateOptions) -> Result<GoCandidate> {
        GoCandidate::spawn_program(cluster, &cluster.harness, &["lease-candidate"], opts)
    }

    /// Starts any candidate program that takes the same flags and prints the same JSON lines as the
    /// client-go one, such as the election crate's `lease-candidate` example, so that both can be driven
    /// (and SIGKILLed) the same way.
    pub fn spawn_program(
        cluster: &Cluster,
        program: &std::path::Path,
        leading_args: &[&str],
        opts: &CandidateOptions,
    ) -> Result<GoCandidate> {
        let go = |d: Duration| format!("{}ms", d.as_millis());
        let kubeconfig = opts
            .kubeconfig
            .clone()
            .unwrap_or_else(|| cluster.admin_kubeconfig.clone());
        let mut child = Command::new(program)
            .args(leading_args)
            .arg(format!("--kubeconfig={}", kubeconfig.display()))
            .arg(format!("--namespace={}", opts.namespace))
            .arg(format!("--name={}", opts.name))
            .arg(format!("--identity={}", opts.identity))
            .arg(format!("--lease-duration={}", go(opts.lease_duration)))
            .arg(format!("--renew-deadline={}", go(opts.renew_deadline)))
            .arg(format!("--retry-period={}", go(opts.retry_period)))
            .arg(format!("--release-on-cancel={}", opts.release_on_cancel))
            .env("HARNESS_PARENT_PID", std::process::id().to_string())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .map_err(Error::io("starting a lease candidate", program))?;
        let events = Arc::new(Mutex::new(Vec::new()));
        let changed = Arc::new(Notify::new());
        if let Some(stdout) = child.stdout.take() {
            let (events, changed) = (events.clone(), changed.clone());
            tokio::spawn(async move {
                let mut lines = BufReader::new(stdout).lines();
                while let Ok(Some(line)) = lines.next_line().await {
                    if let Ok(ev) = serde_json::from_str::<CandidateEvent>(&line)
                        && let Ok(mut list) = events.lock()
                    {
                        list.push(ev);
                    }
                    changed.notify_waiters();
                }
                changed.notify_waiters();
            });
        }
        Ok(GoCandidate {
            identity: opts.identity.clone(),
            child,
            events,
            changed,
        })
    }

    /// The candidate's identity.
    pub fn identity(&self) -> &str {
        &self.identity
    }

    /// Every event so far.
    pub fn events(&self) -> Vec<CandidateEvent> {
        self.events.lock().map(|e| e.clone()).unwrap_or_default()
    }

    /// Whether its latest leadership event says it leads.
    pub fn is_leading(&self) -> bool {
        self.events()
            .iter()
            .rev()
            .find(|e| e.event == "started_leading" || e.event == "stopped_leading")
            .is_some_and(|e| e.event == "started_leading")
    }

    /// Waits until an event matches `pred`, and returns it.
    pub async fn wait_for(
        &self,
        what: &str,
        timeout: Duration,
        pred: impl Fn(&CandidateEvent) -> bool,
    ) -> Result<CandidateEvent> {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            let notified = self.changed.notified();
            if let Some(ev) = self.events().into_iter().find(|e| pred(e)) {
                return Ok(ev);
            }
            if tokio::time::timeout_at(deadline, notified).await.is_err() {
                return Err(Error::Timeout {
                    what: format!("client-go candidate {}: {what}", self.identity),
                    seconds: timeout.as_secs(),
                });
            }
        }
    }

    /// Sends SIGTERM: with release-on-cancel it releases the Lease and exits.
    pub fn terminate(&self) -> Result<()> {
        self.signal(Signal::SIGTERM)
    }

    /// Sends SIGKILL: the Lease is left to expire.
    pub fn kill(&self) -> Result<()> {
        self.signal(Signal::SIGKILL)
    }

    /// Sends SIGSTOP.
    pub fn pause(&self) -> Result<()> {
        self.signal(Signal::SIGSTOP)
    }

    /// Sends SIGCONT.
    pub fn resume(&self) -> Result<()> {
        self.signal(Signal::SIGCONT)
    }

    /// Waits for the process to exit and returns its exit code (None if killed by a signal).
    pub async fn wait(&mut self) -> Result<Option<i32>> {
        let status = self.child.wait().await.map_err(Error::io(
            "waiting for the client-go candidate",
            "lease-candidate",
        ))?;
        Ok(status.code())
    }

    fn signal(&self, sig: Signal) -> Result<()> {
        let pid = self.child.id().ok_or_else(|| Error::Component {
            component: format!("lease-candidate {}", self.identity),
            message: format!("cannot send {sig}: it has exited"),
            log: PathBuf::new(),
        })?;
        let raw = i32::try_from(pid).map_err(|_| Error::Unexpected("PID out of range".into()))?;
        kill(Pid::from_raw(raw), sig).map_err(|e| Error::Unexpected(format!("sending {sig}: {e}")))
    }
}

/// `CLOCK_MONOTONIC` now, in nanoseconds: the clock of the candidates' `mono_ns`.
pub fn monotonic_ns() -> i64 {
    clock_gettime(ClockId::CLOCK_MONOTONIC)
        .map(|t| t.tv_sec() * 1_000_000_000 + t.tv_nsec())
        .unwrap_or(0)
}
