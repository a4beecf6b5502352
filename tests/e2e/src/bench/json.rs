//! `docs/benchmarks.json`: every figure of a run, keyed as the README's table reads them
//! (`rust_15` is our elector at 15/10/2 s, `go_60` client-go's at 60/50/2 s).

use std::collections::BTreeMap;
use std::time::Duration;

use serde_json::{Value, json};

use super::Results;
use super::plan::{CROSSPLANE, DEFAULTS, Imp, Plan};
use super::stats::pct;

fn key(imp: Imp, tag: u64) -> String {
    format!("{}_{tag}", imp.short())
}

/// A series: its size, p50, p99 and samples (ms).
fn series(map: &BTreeMap<(Imp, u64), Vec<f64>>) -> Value {
    let mut out = serde_json::Map::new();
    for ((imp, tag), v) in map {
        out.insert(
            key(*imp, *tag),
            json!({"n": v.len(), "p50_ms": pct(v, 50.0), "p99_ms": pct(v, 99.0), "samples_ms": v}),
        );
    }
    Value::Object(out)
}

/// The run's figures.
pub(super) fn to_json(r: &Results, plan: Plan, quick: bool, elapsed: Duration) -> Value {
    let mut rates = serde_json::Map::new();
    for ((imp, tag), p) in &r.rates {
        rates.insert(
            key(*imp, *tag),
            json!({
                "leader_writes_per_min": p.leader_writes,
                "leader_reads_per_min": p.leader_reads,
                "standby_requests_per_min": p.standby,
                "standby_watches_opened": p.standby_watches,
                "leader_idle_rss_kib": p.leader_rss,
                "standby_idle_rss_kib": p.standby_rss,
            }),
        );
    }
    let mut many = serde_json::Map::new();
    for (imp, m) in &r.many {
        many.insert(
            imp.short().to_owned(),
            json!({
                "candidates": plan.many,
                "requests_per_min": m.total_per_min,
                "per_standby_requests_per_min": m.per_standby_per_min,
                "mean_rss_kib": m.mean_rss,
                "handovers_ms": m.handovers,
            }),
        );
    }
    json!({
        "mode": if quick { "quick" } else { "full" },
        "minutes": elapsed.as_secs_f64() / 60.0,
        "timings": {
            "15": DEFAULTS.label(),
            "60": CROSSPLANE.label(),
        },
        "plan": {
            "graceful_repetitions": plan.graceful_reps,
            "crash_repetitions_15": plan.crash_reps_defaults,
            "crash_repetitions_60": plan.crash_reps_crossplane,
            "rate_window_s": plan.rate_window.as_secs(),
            "many_window_s": plan.many_window.as_secs(),
        },
        "graceful": series(&r.graceful),
        "crash": series(&r.crash),
        "rates": rates,
        "many": many,
        "nop": r.nop.as_ref().map(|n| json!({
            "count": n.count,
            "create_s": n.create_secs,
            "ready_s": n.ready_secs,
            "idle_rss_kib": n.idle_rss,
            "loaded_rss_kib": n.loaded_rss,
        })),
        "errors": r.errors,
    })
}
