//! docs/scale.md and docs/scale.json from the runs.

use std::fmt::Write as _;

use serde_json::{Value, json};

use super::{
    core,
    provider::{Flags, Imp, Run},
};

/// What bounded a run, from its own figures: the rate limit when its reconciles per second reached 90 %
/// of `--max-reconcile-rate`, the CPU when the leader used 90 % of a core, else the apiserver.
pub fn bound(run: &Run, flags: Flags) -> &'static str {
    if run.reconciles_per_second() >= 0.9 * f64::from(flags.max_reconcile_rate) {
        "the rate limit"
    } else if run.leader.cpu_seconds / run.ready_seconds.max(f64::MIN_POSITIVE) >= 0.9 {
        "CPU"
    } else {
        "the apiserver"
    }
}

fn find(runs: &[Run], imp: Imp, size: usize) -> Option<&Run> {
    runs.iter().find(|r| r.imp == imp && r.size == size)
}

fn sizes(runs: &[Run]) -> Vec<usize> {
    let mut s: Vec<usize> = runs.iter().map(|r| r.size).collect();
    s.sort_unstable();
    s.dedup();
    s
}

/// The document: the providers' section when `runs` holds any, the cores' when `cores` does.
pub fn markdown(runs: &[Run], cores: &[core::Run], flags: Flags, provenance: &Value) -> String {
    let mut md = String::new();
    let _ = writeln!(md, "# At scale: ours against upstream's");
    let _ = writeln!(md);
    let _ = writeln!(
        md,
        "Written by `{}`. {}",
        provenance["command"]
            .as_str()
            .unwrap_or("cargo xtask bench --scale"),
        release::provenance::markdown_line(provenance)
    );
    let _ = writeln!(md);
    if !runs.is_empty() {
        providers(&mut md, runs, flags);
    }
    if !cores.is_empty() {
        md.push_str(&super::core_report::markdown(cores));
    }
    md
}

/// The section on providers.
fn providers(md: &mut String, runs: &[Run], flags: Flags) {
    let _ = writeln!(md, "## Providers: ours against crossplane-runtime");
    let _ = writeln!(md);
    let _ = writeln!(
        md,
        "Each provider ran as two replicas, a leader and a standby on Lease \
         `crossplane-leader-election-provider-nop`, on a control plane of its own, one provider at a time: \
         ours ({}, release build) and the peer ({}, our NopResource provider in Go on crossplane-runtime's \
         managed reconciler and controller-runtime, `tests/peers/provider-nop-go`). Both got \
         `--max-reconcile-rate {}` (each takes it as its global reconcile rate and its number of workers) \
         and `--poll {}s`, so that resources already Ready are not polled again during a run. The \
         NopResources were created by {} requests at a time and are Ready at once (`conditionAfter: 0s`): \
         the run measures the provider. Time runs from the first create until a watch has seen every \
         resource Ready; CPU is user plus system time over that window; peak RSS is `VmHWM`; requests are \
         the replicas' own, from the audit log, over the same window.",
        Imp::Rust.label(),
        Imp::Go.label(),
        flags.max_reconcile_rate,
        flags.poll_seconds,
        16
    );
    let _ = writeln!(md);
    let _ = writeln!(
        md,
        "| Resources | Provider | Ready after | Ready/s | Reconciles/s | Watch errors / re-lists | CPU s, leader / standby | Peak RSS MiB, leader / standby | Requests per resource (by verb) | Lease requests | Bound by |"
    );
    let _ = writeln!(md, "|---:|---|---:|---:|---:|---:|---:|---:|---|---:|---|");
    for size in sizes(runs) {
        for imp in [Imp::Rust, Imp::Go] {
            let Some(r) = find(runs, imp, size) else { continue };
            let verbs = r
                .requests
                .iter()
                .map(|(v, n)| format!("{v} {:.2}", *n as f64 / r.size as f64))
                .collect::<Vec<_>>()
                .join(", ");
            let _ = writeln!(
                md,
                "| {size} | {} | {:.1} s | {:.0} | {:.0} | {} / {} | {:.1} / {:.1} | {:.0} / {:.0} | {:.2} ({verbs}) | {} | {} |",
                imp.label(),
                r.ready_seconds,
                r.per_second(),
                r.reconciles_per_second(),
                r.watch_errors,
                r.watch_relists,
                r.leader.cpu_seconds,
                r.standby.cpu_seconds,
                r.leader.peak_rss_mib,
                r.standby.peak_rss_mib,
                r.requests_per_resource(),
                r.lease_requests,
                bound(r, flags),
            );
        }
    }
    let _ = writeln!(md);
    ratios(md, runs);
}

/// The providers' ratios, and how to read "bound by".
fn ratios(md: &mut String, runs: &[Run]) {
    let _ = writeln!(md, "### Ratios (the peer's figure over ours)");
    let _ = writeln!(md);
    let _ = writeln!(
        md,
        "| Resources | Time to Ready | Leader CPU s | Leader peak RSS | Standby peak RSS | Requests per resource |"
    );
    let _ = writeln!(md, "|---:|---:|---:|---:|---:|---:|");
    for size in sizes(runs) {
        let (Some(ours), Some(peer)) = (find(runs, Imp::Rust, size), find(runs, Imp::Go, size)) else {
            continue;
        };
        let ratio = |a: f64, b: f64| {
            if b > 0.0 {
                format!("×{:.1}", a / b)
            } else {
                "–".to_owned()
            }
        };
        let _ = writeln!(
            md,
            "| {size} | {} | {} | {} | {} | {} |",
            ratio(peer.ready_seconds, ours.ready_seconds),
            ratio(peer.leader.cpu_seconds, ours.leader.cpu_seconds),
            ratio(peer.leader.peak_rss_mib, ours.leader.peak_rss_mib),
            ratio(peer.standby.peak_rss_mib, ours.standby.peak_rss_mib),
            ratio(peer.requests_per_resource(), ours.requests_per_resource()),
        );
    }
    let _ = writeln!(md);
    let _ = writeln!(
        md,
        "How cost grows: compare each provider's rows across sizes. \"Bound by\" is read from the row's own \
         figures: the rate limit when reconciles per second reach 90 % of `--max-reconcile-rate`, CPU when \
         the leader kept 90 % of a core busy, else the apiserver (on this 2-core machine the apiserver, \
         etcd and the provider share the CPU)."
    );
    let _ = writeln!(md);
}

/// The JSON record: the providers' runs under `runs`, the cores' under `cores`.
pub fn json(runs: &[Run], cores: &[core::Run], flags: Flags, provenance: &Value) -> Value {
    json!({
        "provenance": provenance,
        "cores": super::core_report::json(cores),
        "flags": flags,
        "runs": runs.iter().map(|r| json!({
            "provider": r.imp,
            "size": r.size,
            "create_seconds": r.create_seconds,
            "ready_seconds": r.ready_seconds,
            "ready_per_second": r.per_second(),
            "reconciles": r.reconciles,
            "reconciles_per_second": r.reconciles_per_second(),
            "leader": r.leader,
            "standby": r.standby,
            "requests_by_verb": r.requests,
            "requests_per_resource": r.requests_per_resource(),
            "lease_requests": r.lease_requests,
            "bound_by": bound(r, flags),
        })).collect::<Vec<_>>(),
    })
}
