//! The client-go leader-election candidate (`harness lease-candidate`), run as a process: our
//! interoperability peer and benchmark anchor.
//!
//! It prints one JSON line per event (`started`, `new_leader`, `started_leading`, `stopped_leading`,
//! `signal`, `exited`) with a wall-clock time and a `CLOCK_MONOTONIC` time in nanoseconds, comparable
//! with [`monotonic_ns`] in this process.

use std::{
    io::{BufRead, BufReader},
    path::PathBuf,
    process::{Command, Stdio},
    sync::{Arc, Mutex, MutexGuard, PoisonError},
    time::Duration,
};

use nix::{
    sys::signal::Signal,
    time::{ClockId, clock_gettime},
};
use serde::Deserialize;
use tokio::sync::Notify;

use crate::{
    Cluster, Error, Result,
    process::{Output, Process},
};

/// How long [`GoCandidate::wait`] waits for the candidate to exit.
const EXIT_TIMEOUT: Duration = Duration::from_secs(120);

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
    process: Mutex<Process>,
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
        let mut cmd = Command::new(program);
        cmd.args(leading_args)
            .arg(format!("--kubeconfig={}", kubeconfig.display()))
            .arg(format!("--namespace={}", opts.namespace))
            .arg(format!("--name={}", opts.name))
            .arg(format!("--identity={}", opts.identity))
            .arg(format!("--lease-duration={}", go(opts.lease_duration)))
            .arg(format!("--renew-deadline={}", go(opts.renew_deadline)))
            .arg(format!("--retry-period={}", go(opts.retry_period)))
            .arg(format!("--release-on-cancel={}", opts.release_on_cancel))
            .env("HARNESS_PARENT_PID", std::process::id().to_string())
            .stdout(Stdio::piped())
            .stderr(Stdio::null());
        let name = format!("lease-candidate {}", opts.identity);
        let mut process = Process::spawn(&name, cmd, program, Output::AsConfigured)?;
        let events = Arc::new(Mutex::new(Vec::new()));
        let changed = Arc::new(Notify::new());
        if let Some(stdout) = process.take_stdout() {
            let (events, changed) = (events.clone(), changed.clone());
            // A thread of its own, so that events arrive while the test's runtime is busy or blocked.
            std::thread::spawn(move || {
                for line in BufReader::new(stdout).lines() {
                    let Ok(line) = line else { break };
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
            process: Mutex::new(process),
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
        let process = self.process.get_mut().unwrap_or_else(PoisonError::into_inner);
        Ok(process.wait_exit_async(EXIT_TIMEOUT).await?.code())
    }

    fn process(&self) -> MutexGuard<'_, Process> {
        self.process.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn signal(&self, sig: Signal) -> Result<()> {
        self.process().signal(sig)
    }
}

/// `CLOCK_MONOTONIC` now, in nanoseconds: the clock of the candidates' `mono_ns`.
pub fn monotonic_ns() -> i64 {
    clock_gettime(ClockId::CLOCK_MONOTONIC)
        .map(|t| t.tv_sec() * 1_000_000_000 + t.tv_nsec())
        .unwrap_or(0)
}
