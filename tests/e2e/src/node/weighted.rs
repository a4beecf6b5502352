//! node-bench's second series of deletions: both electors' leaders deleted again with the control plane
//! at a higher CPU weight ([`weight`]), and its section of docs/node.md.

use std::fmt::Write as _;
use std::path::Path;

use testenv::AuditEvent;

use super::handover::{self, Deletion, Split};
use super::{NAMESPACE, candidate, cpu, weight};

/// The deletions of the series with the control plane in a CPU group of its own ([`weight::raise`]).
pub struct Weighted {
    /// Our deletions.
    pub ours: Vec<Deletion>,
    /// client-go's candidate's.
    pub theirs: Vec<Deletion>,
    /// Our splits, once [`Weighted::split`] read the audit log.
    pub our_splits: Vec<Split>,
    /// client-go's splits, likewise.
    pub their_splits: Vec<Split>,
    /// The control plane's threads in its group when the series began (threads started meanwhile
    /// inherit their process's group).
    pub at_start: weight::Census,
    /// At the end.
    pub at_end: weight::Census,
    /// The Pods' group's `cpu.shares`, as the kubelet set it.
    pub pods_shares: Option<u64>,
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

/// Deletes provider-nop's leader and client-go's candidate's `n` times each, with the control plane in
/// its own CPU group; the caller moves it back ([`weight::lower`]).
pub async fn run(client: &kube::Client, pod_logs: &Path, lease: &str, n: usize) -> anyhow::Result<Weighted> {
    let at_start = weight::raise()?;
    eprintln!(
        "[node] the control plane in CPU group {} (cpu.shares {}): {} of {} threads",
        weight::GROUP,
        weight::SHARES,
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
    let at_end = weight::census();
    Ok(Weighted {
        ours,
        theirs,
        our_splits: Vec::new(),
        their_splits: Vec::new(),
        at_start,
        at_end,
        pods_shares: weight::pods_shares(),
    })
}

/// One series of one elector, as a row of the section's table.
struct Row<'a> {
    weight: &'static str,
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

    /// The apiserver's three writes and the replicas' two parts of every split handover: (p50, p99) each.
    fn parts(&self) -> ((f64, f64), (f64, f64)) {
        let phases: Vec<handover::Phases> = self.splits.iter().filter_map(|s| s.phases).collect();
        let p50_p99 = |xs: Vec<f64>| {
            let (a, b, _) = handover::summary(&xs);
            (a, b)
        };
        (
            p50_p99(phases.iter().map(|p| p.delete + p.release + p.acquire).collect()),
            p50_p99(phases.iter().map(|p| p.leader + p.standby).collect()),
        )
    }

    fn render(&self) -> String {
        let (p50, p99, max) = self.handover();
        let timed = self.splits.iter().filter(|s| s.handover_ms.is_some()).count();
        let cell = |xs: Vec<f64>| {
            let (a, b, _) = handover::summary(&xs);
            format!("{a:.0} / {b:.0}")
        };
        let ((a50, a99), (r50, r99)) = self.parts();
        let apiserver = format!("{a50:.0} / {a99:.0}");
        let replicas = format!("{r50:.0} / {r99:.0}");
        let read: Vec<(&Deletion, &cpu::Usage)> = self
            .deletions
            .iter()
            .filter_map(|d| Some((d, d.cpu.as_ref()?)))
            .collect();
        let waiting = |of: &[cpu::Component]| {
            cell(
                read.iter()
                    .map(|(_, u)| of.iter().map(|c| u.of(*c).1).sum())
                    .collect(),
            )
        };
        let control_plane = waiting(&weight::CONTROL_PLANE);
        let node = waiting(&[cpu::Component::Kubelet, cpu::Component::Runtime]);
        let window = cell(read.iter().map(|(d, _)| d.window_ms).collect());
        format!(
            "| {} | {} | {timed} of {} | {p50:.0} | {p99:.0} | {max:.0} | {apiserver} | {replicas} | {window} | \
             {control_plane} | {node} | {} of {} |",
            self.weight,
            self.elector,
            self.deletions.len(),
            read.len(),
            self.deletions.len()
        )
    }
}

/// The section of docs/node.md: both series side by side, the ratio, and the goal with the control
/// plane weighted. `ours` and `theirs` are the first series, at one weight for everything.
pub fn section(
    md: &mut String,
    ours: (&[Deletion], &[Split]),
    theirs: (&[Deletion], &[Split]),
    w: &Weighted,
) -> anyhow::Result<()> {
    let n = w.ours.len();
    let (s_at, s_all) = w.at_start.total();
    let (e_at, e_all) = w.at_end.total();
    let pods = w
        .pods_shares
        .map_or_else(|| "shares this run could not read".to_owned(), |s| s.to_string());
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
         deleted each elector's leader {n} more times, right after the series above, with the control \
         plane in a CPU group of its own (cgroup v1, `cpu.shares` {}; {s_at} of its {s_all} threads in it \
         when the series began, {e_at} of {e_all} when it ended; tests/e2e/src/node/weight.rs). The kernel \
         shares the cores between groups by their shares: the Pods' group `kubepods` has {pods}, and in \
         the root group, where the kubelet, containerd, runc and the bench run, each session counts as one \
         of 1024. So the control plane gets a CPU first whenever it wants one, the nearest this machine \
         comes to machines of its own. The replicas, the kubelet and containerd keep their weights, and \
         nothing else changed: the same node, Pods, timings and rests. It is a setting of the test bed, \
         not of ours, and it applies to both electors alike; the figures above, at one weight for \
         everything, remain the published ones.",
        weight::SHARES
    )?;
    writeln!(md)?;
    writeln!(
        md,
        "The last four columns come from the scheduler's statistics over the bench's window (from just \
         before the delete until its watch saw the new holder), summed over each group's threads."
    )?;
    writeln!(md)?;
    writeln!(
        md,
        "| Control plane | Elector | Deletions timed | p50 (ms) | p99 (ms) | max (ms) | the apiserver's three writes, p50 / p99 (ms) | the replicas' two parts, p50 / p99 (ms) | the bench's window, p50 / p99 (ms) | the control plane waiting for a CPU, p50 / p99 (ms) | the kubelet and containerd waiting, p50 / p99 (ms) | windows read |"
    )?;
    writeln!(md, "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")?;
    let (shared, own) = ("sharing the cores", "in its own CPU group");
    let rows = [
        Row {
            weight: shared,
            elector: "ours",
            deletions: ours.0,
            splits: ours.1,
        },
        Row {
            weight: own,
            elector: "ours",
            deletions: &w.ours,
            splits: &w.our_splits,
        },
        Row {
            weight: shared,
            elector: "client-go",
            deletions: theirs.0,
            splits: theirs.1,
        },
        Row {
            weight: own,
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
        "With the control plane in its own CPU group, client-go / ours: p50 ×{:.1}, p99 ×{:.1}. The goal \
         for ours, p99 ≤ 50 ms, with the control plane in its own group: **{}** ({o99:.0} ms). One run's \
         p99 of 50 deletions is its slowest one, which varies from run to run.",
        t50 / o50,
        t99 / o99,
        if o99 <= 50.0 { "met" } else { "not met" }
    )?;
    writeln!(md)?;
    writeln!(md, "{}", shift(&rows[0], &rows[1]))?;
    writeln!(md)?;
    Ok(())
}

/// What the weight did to our handover's two shares, in a sentence: `shared` is the first series,
/// `own` the weighted one.
fn shift(shared: &Row<'_>, own: &Row<'_>) -> String {
    let ((sa50, sa99), (sr50, sr99)) = shared.parts();
    let ((oa50, oa99), (or50, or99)) = own.parts();
    let moved = |before: f64, after: f64| {
        if after < before {
            "fell"
        } else if after > before {
            "grew"
        } else {
            "stayed"
        }
    };
    let (apiserver, replicas) = (moved(sa99, oa99), moved(sr99, or99));
    let reading = match (apiserver, replicas) {
        ("fell", "grew") => {
            "The weight moved the wait rather than removing it: given the CPU first, the control plane \
             answers sooner, and our replicas, in the Pods' group, wait behind it while it serves the burst \
             the deletion set off. On 2 shared cores the tail is shared out, not removed; machines of the \
             control plane's own would shorten the first share without lengthening the second, which this \
             machine cannot show."
        }
        ("fell", _) => {
            "The weight shortened the apiserver's share without lengthening the replicas': on this run, \
             the control plane's wait for a CPU was part of the tail."
        }
        _ => {
            "The weight did not shorten the apiserver's share at the p99 in this run, so the control \
             plane's wait for a CPU does not explain the tail here."
        }
    };
    format!(
        "For ours, at the p99, the apiserver's three writes {apiserver} from {sa99:.0} to {oa99:.0} ms (p50 \
         {sa50:.0} to {oa50:.0}) with the control plane weighted, and the replicas' two parts {replicas} \
         from {sr99:.0} to {or99:.0} ms (p50 {sr50:.0} to {or50:.0}). {reading}"
    )
}
