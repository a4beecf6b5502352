//! The handover of two replicas of a provider under load, ours against the crossplane-runtime peer:
//! while NopResources keep changing, the leader gets SIGTERM (graceful) or SIGKILL (crash), and the
//! audit log gives the time from the signal until the other replica held the Lease, and until its
//! first successful write to a NopResource (its first reconcile that did work). Each side runs at its
//! own default lease timings, which the report names from the Lease records it wrote.

use std::{
    path::{Path, PathBuf},
    time::{Duration, Instant},
};

use anyhow::bail;
use jiff::Timestamp;
use kube::api::PostParams;
use nix::sys::signal::Signal;
use serde::Serialize;

use super::provider::{self, Flags, Imp, LEASE, Replica};
use crate::churn::Churn;

/// How many NopResources keep changing during the handovers.
pub(super) const CHURNED: usize = 50;
/// One change every this long, round robin.
pub(super) const CHANGE_EVERY: Duration = Duration::from_millis(50);
/// How long one handover may take until the new leader's first reconcile (a crash waits out the
/// Lease: 60 s for ours).
const HANDOVER_TIMEOUT: Duration = Duration::from_secs(180);

/// How the leader was stopped.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum Stop {
    /// SIGTERM: the replica may release its Lease and finish its work.
    Graceful,
    /// SIGKILL: the Lease must expire.
    Crash,
}

impl Stop {
    fn signal(self) -> Signal {
        match self {
            Stop::Graceful => Signal::SIGTERM,
            Stop::Crash => Signal::SIGKILL,
        }
    }

    /// Its name in the report.
    pub fn label(self) -> &'static str {
        match self {
            Stop::Graceful => "graceful (SIGTERM)",
            Stop::Crash => "crash (SIGKILL)",
        }
    }
}

/// One handover, in ms from the signal.
#[derive(Clone, Copy, Debug, Serialize)]
pub struct Sample {
    /// Until the old leader's process had exited.
    pub exited_ms: f64,
    /// Until the other replica's first write of the Lease naming itself.
    pub lease_ms: f64,
    /// Until the other replica's first successful write to a NopResource.
    pub first_reconcile_ms: f64,
}

/// The handovers of one provider.
#[derive(Clone, Debug, Serialize)]
pub struct Handovers {
    /// Which provider.
    pub imp: Imp,
    /// The lease duration its Lease records name, in seconds.
    pub lease_duration_seconds: Option<i64>,
    /// The graceful handovers.
    pub graceful: Vec<Sample>,
    /// The crash handovers.
    pub crash: Vec<Sample>,
    /// NopResource changes made while they ran.
    pub changes: u64,
}

/// Runs `graceful` and then `crash` handovers of `imp` on a fresh control plane in `dir`.
pub async fn run(
    imp: Imp,
    binary: &Path,
    harness: &Path,
    dir: &Path,
    flags: Flags,
    (graceful, crash): (usize, usize),
) -> anyhow::Result<Handovers> {
    super::on_fresh_control_plane(dir, harness, async |cp| {
        let pool = Pool {
            imp,
            binary,
            cluster: cp.cluster(),
            logs: dir.join("logs"),
            flags,
        };
        pool.handovers(graceful, crash).await
    })
    .await
}

/// Two replicas of one provider on one control plane.
struct Pool<'a> {
    imp: Imp,
    binary: &'a Path,
    cluster: &'a testenv::Cluster,
    logs: PathBuf,
    flags: Flags,
}

impl Pool<'_> {
    async fn handovers(&self, graceful: usize, crash: usize) -> anyhow::Result<Handovers> {
        let client = self.cluster.client().await?;
        provider::install_crd(&client).await?;
        let namespace = self.cluster.namespace("handover").await?;
        std::fs::create_dir_all(&self.logs)?;
        let mut replicas = vec![
            self.spawn(&namespace, "handover-a")?,
            self.spawn(&namespace, "handover-b")?,
        ];
        let nops = testenv::workload::nop_api(&client);
        for i in 0..CHURNED {
            let nop = testenv::workload::ready_nop(&format!("churn-{i}"));
            nops.create(&PostParams::default(), &nop).await?;
        }
        crate::churn::wait_settled(nops.clone(), "churn", CHURNED, HANDOVER_TIMEOUT).await?;
        let churn = Churn::start(nops, "churn", CHURNED, CHANGE_EVERY);
        let mut out = Handovers {
            imp: self.imp,
            lease_duration_seconds: None,
            graceful: Vec::new(),
            crash: Vec::new(),
            changes: 0,
        };
        let stops =
            std::iter::repeat_n(Stop::Graceful, graceful).chain(std::iter::repeat_n(Stop::Crash, crash));
        let mut result = Ok(());
        for (round, stop) in stops.enumerate() {
            match self.once(&client, &namespace, &mut replicas, stop).await {
                Ok(s) => {
                    eprintln!(
                        "[scale] {} handover {} {}: Lease after {:.0} ms, first reconcile after {:.0} ms",
                        self.imp.label(),
                        round + 1,
                        stop.label(),
                        s.lease_ms,
                        s.first_reconcile_ms
                    );
                    match stop {
                        Stop::Graceful => out.graceful.push(s),
                        Stop::Crash => out.crash.push(s),
                    }
                }
                Err(e) => {
                    result = Err(e);
                    break;
                }
            }
        }
        out.changes = churn.stop().await?;
        for r in &mut replicas {
            r.stop().await;
        }
        result?;
        out.lease_duration_seconds = self
            .cluster
            .audit()
            .read_containing(LEASE)?
            .events
            .iter()
            .find_map(testenv::AuditEvent::lock_duration_seconds);
        Ok(out)
    }

    fn spawn(&self, namespace: &str, identity: &str) -> anyhow::Result<Replica> {
        Replica::spawn(
            self.imp,
            self.binary,
            self.cluster.kubeconfig(),
            namespace,
            identity,
            self.flags,
            &self.logs,
        )
    }

    /// Stops the leader with `stop`, measures the handover, and starts the stopped replica again.
    async fn once(
        &self,
        client: &kube::Client,
        namespace: &str,
        replicas: &mut [Replica],
        stop: Stop,
    ) -> anyhow::Result<Sample> {
        let leader = provider::wait_leader(client, namespace, replicas).await?;
        let next = replicas[1 - leader].identity.clone();
        replicas[1 - leader].wait_serving().await?;
        let signalled = Timestamp::now();
        let started = Instant::now();
        replicas[leader].signal(stop.signal())?;
        replicas[leader].wait_exit().await;
        let exited_ms = started.elapsed().as_secs_f64() * 1000.0;
        let (lease, reconciled) = self.wait_first_reconcile(&next, signalled).await?;
        let old = replicas[leader].identity.clone();
        replicas[leader] = self.spawn(namespace, &old)?;
        let ms = |t: Timestamp| t.duration_since(signalled).as_secs_f64() * 1000.0;
        Ok(Sample {
            exited_ms,
            lease_ms: ms(lease),
            first_reconcile_ms: ms(reconciled),
        })
    }

    /// Reads the audit log until replica `next` has written the Lease naming itself and then a
    /// NopResource after `since`; returns when each was received.
    async fn wait_first_reconcile(
        &self,
        next: &str,
        since: Timestamp,
    ) -> anyhow::Result<(Timestamp, Timestamp)> {
        let start = Instant::now();
        loop {
            let events = self.cluster.audit().read_containing(next)?.events;
            let mine = || {
                events.iter().filter(|e| {
                    e.received >= since
                        && e.agent_identity() == Some(next)
                        && e.is_write()
                        && (200..300).contains(&e.code)
                })
            };
            let lease = mine()
                .filter(|e| {
                    e.resource == "leases" && e.name == LEASE && e.lock_holder().as_deref() == Some(next)
                })
                .map(|e| e.received)
                .min();
            if let Some(lease) = lease
                && let Some(reconciled) = mine()
                    .filter(|e| e.resource == "nopresources" && e.received >= lease)
                    .map(|e| e.received)
                    .min()
            {
                return Ok((lease, reconciled));
            }
            if start.elapsed() > HANDOVER_TIMEOUT {
                bail!(
                    "{} replica {next} did not take Lease {LEASE} and write a NopResource within {}s of \
                     the leader's stop (Lease taken: {}; logs in {})",
                    self.imp.label(),
                    HANDOVER_TIMEOUT.as_secs(),
                    lease.is_some(),
                    self.logs.display()
                );
            }
            // The audit log is a file the apiserver appends to: read it again shortly.
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    }
}
