//! node-bench's second series of deletions: both electors' leaders deleted again with the control plane
//! at a higher CPU weight ([`weight`]), and its section of docs/node.md.

use std::fmt::Write as _;
use std::path::Path;

use testenv::AuditEvent;

use super::handover::{self, Deletion, Split};
use super::{NAMESPACE, candidate, cpu, weight};

/// The deletions of the series with the control plane at [`weight::NICE`].
pub struct Weighted {
    /// Ours, and their splits once the audit log is read.
    pub ours: Vec<Deletion>,
    /// client-go's candidate's.
    pub theirs: Vec<Deletion>,
    /// Our splits.
    pub our_splits: Vec<Split>,
    /// client-go's splits.
    pub their_splits: Vec<Split>,
    /// The control plane's threads at the nice value when the series began, and when it ended (the
    /// threads started meanwhile inherit it).
    pub at_start: weight::Census,
    /// At the end.
    pub at_end: weight::Census,
}

impl Weighted {
    /// Splits every deletion with the audit log `events`; `lease` is provider-nop's.
    pub fn split(mut self, events: &[AuditEvent], lease: &str) -> Self {
        self.our_splits = self
            .ours
            .iter()
            .map(|d| handover::split(events, NAMESPACE, lease, d))
            .collect();
        self.their_splits = self
            .theirs
            .iter()
            .map(|d| handover::split(events, candidate::NAMESPACE, candidate::APP, d))
            .collect();
        self
    }
}

/// Deletes provider-nop's leader and client-go's candidate's `n` times each, with the control plane at
/// [`weight::NICE`]; the caller sets it back.
pub async fn run(client: &kube::Client, pod_logs: &Path, lease: &str, n: usize) -> anyhow::Result<Weighted> {
    let at_start = weight::set(weight::NICE)?;
    anyhow::ensure!(
        at_start.complete(),
        "some threads of the control plane are not at nice {} after it was set: {at_start:?}",
        weight::NICE
    );
    eprintln!(
        "[node] the control plane at nice {}: {} of {} threads",
        weight::NICE,
        at_start.total().0,
        at_start.total().1
    );
    let ours = handover::delete_leaders(client, pod_logs, NAMESPACE, "provider-nop", lease, n).await?;
    let theirs = handover::delete_leaders(
        client,
        pod_logs,
        candidate::NAMESPACE,
        candidate::APP,
        candidate::APP,
        n,
    )
    .await?;
    let at_end = weight::census(Path::new("/proc"), weight::NICE);
    Ok(Weighted {
        ours,
        theirs,
        our_splits: Vec::new(),
        their_splits: Vec::new(),
        at_start,
        at_end,
    })
}

/// One series of one elector, as a row of the section's table.
struct Row<'a> {
    weight: String,
    elector: &'static str,
    deletions: &'a [Deletion],
    splits: &'a [Split],
}

impl Row<'_> {
    fn handover(&self) -> (f64, f64, f64) {
        handover::summary(
            &self
                .splits
                .iter()
                .filter_map(|s| s.handover_ms)
                .collect::<Vec<f64>>(),
        )
    }

    fn render(&self) -> String {
        let (p50, p99, max) = self.handover();
        let timed = self.splits.iter().filter(|s| s.handover_ms.is_some()).count();
        let phases: Vec<handover::Phases> = self.splits.iter().filter_map(|s| s.phases).collect();
        let cell = |xs: Vec<f64>| {
            let (a, b, _) = handover::summary(&xs);
            format!("{a:.0} / {b:.0}")
        };
        let apiserver = cell(phases.iter().map(|p| p.delete + p.release + p.acquire).collect());
        let replicas = cell(phases.iter().map(|p| p.leader + p.standby).collect());
        let usage: Vec<&cpu::Usage> = self.deletions.iter().filter_map(|d| d.cpu.as_ref()).collect();
        let waiting = cell(usage.iter().map(|u| u.of(cpu::Component::Apiserver).1).collect());
        format!(
            "| {} | {} | {timed} of {} | {p50:.0} | {p99:.0} | {max:.0} | {apiserver} | {replicas} | {waiting} ({} read) |",
            self.weight,
            self.elector,
            self.deletions.len(),
            usage.len()
        )
    }
}

/// The section of docs/node.md: both series side by side, the ratio, and the goal with the control
/// plane weighted. `ours` and `theirs` are the first series, at the node's weight.
pub fn section(
    md: &mut String,
    ours: (&[Deletion], &[Split]),
    theirs: (&[Deletion], &[Split]),
    w: &Weighted,
) -> anyhow::Result<()> {
    let n = w.ours.len();
    let (s_at, s_all) = w.at_start.total();
    let (e_at, e_all) = w.at_end.total();
    writeln!(
        md,
        "## The same deletions with the control plane at a higher CPU weight"
    )?;
    writeln!(md)?;
    writeln!(
        md,
        "In a cluster, kube-apiserver, etcd, kube-controller-manager and kube-scheduler run on machines of \
         their own. Here they share 2 cores with the node, so the burst a deletion sets off there (the \
         kubelet, containerd and runc stopping the old container and starting the replacement) delays the \
         apiserver's answers too. To tell that share of the machine from the electors' own, the bench \
         deleted each elector's leader {n} more times, right after the series above, with every thread of \
         the control plane at nice {} ({s_at} of {s_all} threads when the series began, {e_at} of {e_all} \
         when it ended: threads started meanwhile inherit the value; tests/e2e/src/node/weight.rs): a \
         weight 9.3 times that of any other thread in the kernel's scheduler, so the control plane gets a \
         CPU first whenever it wants one. The replicas, the kubelet and containerd stay at the node's \
         weight, and nothing else changed: the same node, Pods, timings and rests. This is a setting of \
         the test bed, not of ours, and it applies to both electors alike; the figures above, at one \
         weight for everything, remain the published ones.",
        weight::NICE
    )?;
    writeln!(md)?;
    writeln!(
        md,
        "| Control plane's weight | Elector | Deletions timed | p50 (ms) | p99 (ms) | max (ms) | the apiserver's three writes, p50 / p99 (ms) | the replicas' two parts, p50 / p99 (ms) | kube-apiserver waiting for a CPU in the window, p50 / p99 (ms) |"
    )?;
    writeln!(md, "|---|---|---:|---:|---:|---:|---:|---:|---:|")?;
    let node = "the node's (nice 0)".to_string();
    let raised = format!("raised (nice {})", weight::NICE);
    let rows = [
        Row {
            weight: node.clone(),
            elector: "ours",
            deletions: ours.0,
            splits: ours.1,
        },
        Row {
            weight: raised.clone(),
            elector: "ours",
            deletions: &w.ours,
            splits: &w.our_splits,
        },
        Row {
            weight: node,
            elector: "client-go",
            deletions: theirs.0,
            splits: theirs.1,
        },
        Row {
            weight: raised,
            elector: "client-go",
            deletions: &w.theirs,
            splits: &w.their_splits,
        },
    ];
    for row in &rows {
        writeln!(md, "{}", row.render())?;
    }
    writeln!(md)?;
    let (o50, o99, _) = rows[1].handover();
    let (t50, t99, _) = rows[3].handover();
    writeln!(
        md,
        "With the control plane weighted, client-go / ours: p50 ×{:.1}, p99 ×{:.1}. The goal for ours, p99 ≤ \
         50 ms, with the control plane weighted: **{}** ({o99:.0} ms).",
        t50 / o50,
        t99 / o99,
        if o99 <= 50.0 { "met" } else { "not met" }
    )?;
    writeln!(md)?;
    Ok(())
}
