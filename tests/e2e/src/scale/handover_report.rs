//! docs/scale.md's section and docs/scale.json's record of the handovers under load.

use std::fmt::Write as _;

use serde_json::{Value, json};

use super::handover::{Handovers, Sample, Stop};
use super::provider::Imp;
use crate::bench::stats::pct;

fn column(samples: &[Sample], f: impl Fn(&Sample) -> f64) -> Vec<f64> {
    let mut v: Vec<f64> = samples.iter().map(f).collect();
    v.sort_by(f64::total_cmp);
    v
}

fn p50_max(v: &[f64]) -> String {
    match v.last() {
        None => "–".to_owned(),
        Some(max) => format!("{:.0} / {max:.0}", pct(v, 50.0)),
    }
}

/// The section.
pub fn markdown(all: &[Handovers]) -> String {
    let mut md = String::new();
    let _ = writeln!(md, "## Handover under load");
    let _ = writeln!(md);
    let _ = writeln!(
        md,
        "Each provider again ran as two replicas on a control plane of its own, at its own default lease \
         timings, while {} NopResources changed one every {} ms. The leader was stopped, the stopped \
         replica started again as the new standby, and the next round stopped the new leader. Times run \
         from the signal, by the audit log: until the other replica wrote the Lease naming itself, and \
         until its first successful write to a NopResource (its first reconcile that did work; with a change \
         every {} ms, that can lag the takeover by up to that much).",
        super::handover::CHURNED,
        super::handover::CHANGE_EVERY.as_millis(),
        super::handover::CHANGE_EVERY.as_millis(),
    );
    let _ = writeln!(md);
    let _ = writeln!(
        md,
        "| Provider | Stop | Lease duration | Rounds | Old leader exited, p50 / max (ms) | Lease taken, p50 / max (ms) | First reconcile, p50 / max (ms) |"
    );
    let _ = writeln!(md, "|---|---|---:|---:|---:|---:|---:|");
    for h in all {
        for (stop, samples) in [(Stop::Graceful, &h.graceful), (Stop::Crash, &h.crash)] {
            let _ = writeln!(
                md,
                "| {} | {} | {} | {} | {} | {} | {} |",
                h.imp.label(),
                stop.label(),
                h.lease_duration_seconds
                    .map_or_else(|| "–".to_owned(), |s| format!("{s} s")),
                samples.len(),
                p50_max(&column(samples, |s| s.exited_ms)),
                p50_max(&column(samples, |s| s.lease_ms)),
                p50_max(&column(samples, |s| s.first_reconcile_ms)),
            );
        }
    }
    let _ = writeln!(md);
    for stop in [Stop::Graceful, Stop::Crash] {
        if let Some(r) = ratio(all, stop) {
            let _ = writeln!(
                md,
                "{}: crossplane-runtime / ours, first reconcile p50 ×{r:.2}.",
                stop.label()
            );
        }
    }
    let _ = writeln!(md);
    let _ = writeln!(
        md,
        "Between the Lease and the first reconcile, each new leader starts its controller: both list and \
         watch NopResources only once they lead. Each side runs at its defaults, so the crash rows mostly show each Lease's duration. On SIGTERM, \
         ours releases its Lease once its leader work has stopped; controller-runtime keeps its Lease until \
         it expires unless `LeaderElectionReleaseOnCancel` is set, which the peer leaves at its default."
    );
    md
}

/// The peer's first-reconcile p50 over ours, for `stop`.
fn ratio(all: &[Handovers], stop: Stop) -> Option<f64> {
    let p50 = |imp: Imp| {
        let h = all.iter().find(|h| h.imp == imp)?;
        let samples = match stop {
            Stop::Graceful => &h.graceful,
            Stop::Crash => &h.crash,
        };
        let v = column(samples, |s| s.first_reconcile_ms);
        (!v.is_empty()).then(|| pct(&v, 50.0))
    };
    Some(p50(Imp::Go)? / p50(Imp::Rust)?.max(f64::MIN_POSITIVE))
}

/// The record.
pub fn json(all: &[Handovers]) -> Value {
    json!(all)
}
