//! A candidate process of either elector, its JSON-line events, its RSS, and the leadership timeline.

use std::{
    path::PathBuf,
    process::Stdio,
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

use anyhow::{Context, bail};
use nix::{
    sys::signal::{Signal, kill},
    unistd::Pid,
};
use testenv::{CandidateEvent, Cluster, monotonic_ns as mono};
use tokio::{
    io::{AsyncBufReadExt, BufReader},
    process::{Child, Command},
};

use super::plan::{Imp, Timings};

/// One bar of the leadership timeline.
#[derive(Clone, Debug)]
pub(super) struct Bar {
    pub(super) row: String,
    pub(super) imp: Imp,
    pub(super) start: i64,
    pub(super) end: i64,
}

/// What every scenario shares.
pub(super) struct Env {
    pub(super) cluster: Cluster,
    pub(super) rust_bin: PathBuf,
    pub(super) go_bin: PathBuf,
    pub(super) logs: PathBuf,
    pub(super) t0: i64,
    pub(super) bars: Mutex<Vec<Bar>>,
}

/// A candidate process of either kind.
pub(super) struct Cand {
    imp: Imp,
    pub(super) identity: String,
    row: String,
    child: Child,
    pid: u32,
    events: Arc<Mutex<Vec<CandidateEvent>>>,
    pub(super) ended: Option<i64>,
}

impl Cand {
    pub(super) fn spawn(
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

    pub(super) fn events(&self) -> Vec<CandidateEvent> {
        self.events.lock().map(|e| e.clone()).unwrap_or_default()
    }

    pub(super) fn find(&self, pred: impl Fn(&CandidateEvent) -> bool) -> Option<CandidateEvent> {
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

    pub(super) async fn wait_leading(&self, timeout: Duration) -> anyhow::Result<CandidateEvent> {
        self.wait_for("started_leading", timeout, |e| e.event == "started_leading")
            .await
    }

    /// Waits until it has reported `leader` as the leader (best effort).
    pub(super) async fn settle(&self, leader: &str) {
        let _ = self
            .wait_for("new_leader", Duration::from_secs(10), |e| {
                e.event == "new_leader" && e.leader == leader
            })
            .await;
    }

    pub(super) fn signal(&self, sig: Signal) -> anyhow::Result<()> {
        kill(Pid::from_raw(i32::try_from(self.pid)?), sig)
            .with_context(|| format!("sending {sig} to {}", self.identity))
    }

    pub(super) fn rss_kib(&self) -> anyhow::Result<u64> {
        rss_kib(self.pid).with_context(|| format!("the RSS of {}", self.identity))
    }
}

/// `VmRSS` of a process in KiB. A read that fails (the process is gone, or its status has no `VmRSS`)
/// is an error, never a 0 in the figures.
pub(super) fn rss_kib(pid: u32) -> anyhow::Result<u64> {
    let path = format!("/proc/{pid}/status");
    let status = std::fs::read_to_string(&path).with_context(|| format!("reading {path}"))?;
    let line = status
        .lines()
        .find(|l| l.starts_with("VmRSS:"))
        .with_context(|| format!("{path} has no VmRSS line (a zombie?)"))?;
    line.split_whitespace()
        .nth(1)
        .and_then(|k| k.parse().ok())
        .with_context(|| format!("{path}: cannot read {line:?}"))
}

impl Env {
    /// Ends a candidate: SIGKILL (`crash`) or SIGTERM, waits for the exit, records its leading bars.
    pub(super) async fn retire(&self, mut c: Cand, crash: bool) {
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
