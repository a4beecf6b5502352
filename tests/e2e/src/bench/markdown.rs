//! `docs/benchmarks.md`: the machine, the results table, the goals and the samples.

use std::{fmt::Write as _, time::Duration};

use jiff::Timestamp;

use super::Results;
use super::many::ManyResult;
use super::plan::{CROSSPLANE, DEFAULTS, Imp, Plan};
use super::rates::PairRates;
use super::stats::pct;

fn command_line(cmd: &str, args: &[&str]) -> String {
    std::process::Command::new(cmd)
        .args(args)
        .output()
        .ok()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "unknown".into())
}

fn mem_total() -> String {
    std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|m| {
            m.lines()
                .find(|l| l.starts_with("MemTotal:"))
                .and_then(|l| l.split_whitespace().nth(1).and_then(|k| k.parse::<f64>().ok()))
        })
        .map(|k| format!("{:.1} GiB", k / 1024.0 / 1024.0))
        .unwrap_or_else(|| "unknown".into())
}

fn fmt_ms(x: f64) -> String {
    if x.is_nan() {
        "–".into()
    } else if x >= 10_000.0 {
        format!("{:.2} s", x / 1000.0)
    } else {
        format!("{x:.1} ms")
    }
}

fn ratio(rust: f64, go: f64) -> String {
    if rust.is_nan() || go.is_nan() || go == 0.0 {
        "–".into()
    } else {
        format!("{:.3}", rust / go)
    }
}

/// A table row: name, how to read the figure, unit.
type RateRow = (&'static str, fn(PairRates) -> f64, &'static str);
/// A table row of the many-candidates figures.
type ManyRow = (&'static str, fn(&ManyResult) -> f64, &'static str);

/// The 1-, 5- and 15-minute load averages.
pub(super) fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|l| l.split_whitespace().take(3).collect::<Vec<_>>().join(" / "))
        .unwrap_or_else(|_| "unknown".into())
}

pub(super) fn markdown(
    r: &Results,
    plan: Plan,
    quick: bool,
    began: Timestamp,
    elapsed: Duration,
    load_start: &str,
    provenance: &serde_json::Value,
) -> anyhow::Result<String> {
    let mut s = String::new();
    writeln!(s, "# Benchmarks: crossplane-rs `election` vs client-go\n")?;
    writeln!(
        s,
        "Written by `cargo xtask bench{}` on {} ({:.1} min). Do not edit by hand; rerun it. {}\n",
        if quick { " --quick" } else { "" },
        began.strftime("%Y-%m-%d %H:%M UTC"),
        elapsed.as_secs_f64() / 60.0,
        release::provenance::markdown_line(provenance)
    )?;
    machine(&mut s, plan, quick, load_start)?;
    writeln!(s, "## Results\n")?;
    writeln!(s, "| Figure | Timings | n | Rust | client-go | Rust/Go |")?;
    writeln!(s, "|---|---|---|---|---|---|")?;
    handover_rows(&mut s, r)?;
    rate_rows(&mut s, r, plan)?;
    many_rows(&mut s, r, plan)?;
    nop_rows(&mut s, r)?;
    goals(&mut s, r)?;
    samples(&mut s, r, plan)?;
    writeln!(s, "\nThe picture: [benchmarks.svg](benchmarks.svg).")?;
    Ok(s)
}

/// The machine, the versions, the mode and how the figures are taken.
fn machine(s: &mut String, plan: Plan, quick: bool, load_start: &str) -> std::fmt::Result {
    writeln!(s, "## Machine and versions\n")?;
    writeln!(s, "| | |\n|---|---|")?;
    writeln!(s, "| CPUs (`nproc`) | {} |", command_line("nproc", &[]))?;
    writeln!(s, "| Memory | {} |", mem_total())?;
    writeln!(s, "| Kernel | {} |", command_line("uname", &["-sr"]))?;
    writeln!(s, "| rustc | {} |", command_line("rustc", &["--version"]))?;
    writeln!(s, "| go | {} |", command_line("go", &["version"]))?;
    writeln!(
        s,
        "| Kubernetes (apiserver, client-go) | {} |",
        testenv::KUBERNETES_VERSION
    )?;
    writeln!(s, "| etcd | {} |", testenv::ETCD_VERSION)?;
    writeln!(
        s,
        "| Mode | {} |\n",
        if quick {
            format!(
                "`--quick`: {} graceful and {} / {} crash repetitions (15/10/2, 60/50/2), {} s counting window, {} candidates, {} NopResources",
                plan.graceful_reps,
                plan.crash_reps_defaults,
                plan.crash_reps_crossplane,
                plan.rate_window.as_secs(),
                plan.many,
                plan.nop_count
            )
        } else {
            "full".into()
        }
    )?;
    writeln!(
        s,
        "Both candidates are processes with the same flags and JSON events: client-go's `leaderelection` \
         (`tests/control-plane` built alone with `-tags candidateonly`, so only client-go is linked in) \
         and `crates/election/examples/lease-candidate.rs` (release build), \
         against one kube-apiserver + etcd on this machine. Latencies are `CLOCK_MONOTONIC` from the \
         signal sent by the bench to the standby's `started_leading`. Percentiles are nearest-rank (with \
         fewer than 100 samples, p99 is the maximum). Request counts come from the apiserver's audit log, \
         by the identity in each candidate's user agent. Rust/Go < 1 means Rust is faster or cheaper.\n"
    )?;
    writeln!(
        s,
        "The machine is shared: load \
         average {} at the start and {} at the end of the run.\n",
        load_start,
        loadavg()
    )?;
    Ok(())
}

/// Graceful handover and crash failover, p50 and p99, at both timings.
fn handover_rows(s: &mut String, r: &Results) -> std::fmt::Result {
    for (name, map) in [("Graceful handover", &r.graceful), ("Crash failover", &r.crash)] {
        for t in [DEFAULTS, CROSSPLANE] {
            let rs = map.get(&(Imp::Rust, t.tag()));
            let go = map.get(&(Imp::Go, t.tag()));
            let n = rs.map(Vec::len).or(go.map(Vec::len)).unwrap_or(0);
            for p in [50.0, 99.0] {
                let a = rs.map(|v| pct(v, p)).unwrap_or(f64::NAN);
                let b = go.map(|v| pct(v, p)).unwrap_or(f64::NAN);
                writeln!(
                    s,
                    "| {name} p{p} | {} | {n} | {} | {} | {} |",
                    t.label(),
                    fmt_ms(a),
                    fmt_ms(b),
                    ratio(a, b)
                )?;
            }
        }
    }
    Ok(())
}

/// Requests per minute and idle RSS of a leader and a standby, at both timings.
fn rate_rows(s: &mut String, r: &Results, plan: Plan) -> std::fmt::Result {
    for t in [DEFAULTS, CROSSPLANE] {
        let rs = r.rates.get(&(Imp::Rust, t.tag())).copied();
        let go = r.rates.get(&(Imp::Go, t.tag())).copied();
        let rows: [RateRow; 6] = [
            ("Leader writes/min", |p| p.leader_writes, ""),
            ("Leader reads/min", |p| p.leader_reads, ""),
            ("Standby requests/min", |p| p.standby, ""),
            (
                "Standby watches opened in the window",
                |p| p.standby_watches as f64,
                "",
            ),
            ("Leader idle RSS", |p| p.leader_rss as f64 / 1024.0, " MiB"),
            ("Standby idle RSS", |p| p.standby_rss as f64 / 1024.0, " MiB"),
        ];
        for (name, f, unit) in rows {
            let a = rs.map(f).unwrap_or(f64::NAN);
            let b = go.map(f).unwrap_or(f64::NAN);
            writeln!(
                s,
                "| {name} | {} | {} s | {a:.1}{unit} | {b:.1}{unit} | {} |",
                t.label(),
                plan.rate_window.as_secs(),
                ratio(a, b)
            )?;
        }
    }
    Ok(())
}

/// The many-candidates run: requests, RSS and handovers.
fn many_rows(s: &mut String, r: &Results, plan: Plan) -> std::fmt::Result {
    let m = |imp: Imp| r.many.get(&imp).cloned();
    let (mr, mg) = (m(Imp::Rust), m(Imp::Go));
    let many_rows: [ManyRow; 3] = [
        ("all candidates, requests/min", |x| x.total_per_min, ""),
        ("per standby, requests/min", |x| x.per_standby_per_min, ""),
        ("mean RSS per candidate", |x| x.mean_rss as f64 / 1024.0, " MiB"),
    ];
    for (name, f, unit) in many_rows {
        let a = mr.as_ref().map(f).unwrap_or(f64::NAN);
        let b = mg.as_ref().map(f).unwrap_or(f64::NAN);
        writeln!(
            s,
            "| {} candidates: {name} | 15/10/2 s | {} s | {a:.1}{unit} | {b:.1}{unit} | {} |",
            plan.many,
            plan.many_window.as_secs(),
            ratio(a, b)
        )?;
    }
    for p in [50.0, 99.0] {
        let a = mr.as_ref().map(|x| pct(&x.handovers, p)).unwrap_or(f64::NAN);
        let b = mg.as_ref().map(|x| pct(&x.handovers, p)).unwrap_or(f64::NAN);
        writeln!(
            s,
            "| {} candidates: graceful handover p{p} | 15/10/2 s | {} | {} | {} | {} |",
            plan.many,
            plan.many_handovers,
            fmt_ms(a),
            fmt_ms(b),
            ratio(a, b)
        )?;
    }
    Ok(())
}

/// provider-nop's resources to Ready and its RSS.
fn nop_rows(s: &mut String, r: &Results) -> std::fmt::Result {
    match &r.nop {
        Some(n) => {
            writeln!(
                s,
                "| provider-nop: {} NopResources created → all Ready | 60/50/2 s, `--max-reconcile-rate 50` | 1 | {:.1} s (creates took {:.1} s) | no Go provider-nop here | – |",
                n.count, n.ready_secs, n.create_secs
            )?;
            writeln!(
                s,
                "| provider-nop idle RSS (leading, no resources) | | 1 | {:.1} MiB | – | – |",
                n.idle_rss as f64 / 1024.0
            )?;
            writeln!(
                s,
                "| provider-nop RSS with {} resources | | 1 | {:.1} MiB | – | – |",
                n.count,
                n.loaded_rss as f64 / 1024.0
            )?;
        }
        None => writeln!(s, "| provider-nop | | | failed | – | – |")?,
    }
    Ok(())
}

/// Every sample, and the errors of the run.
fn samples(s: &mut String, r: &Results, plan: Plan) -> std::fmt::Result {
    writeln!(s, "\n## Samples (ms)\n")?;
    for (name, map) in [("graceful", &r.graceful), ("crash", &r.crash)] {
        for ((imp, tag), v) in map.iter() {
            let list: Vec<String> = v.iter().map(|x| format!("{x:.1}")).collect();
            writeln!(s, "- {} {name} {tag}/…: {}", imp.name(), list.join(", "))?;
        }
    }
    for (imp, x) in &r.many {
        let list: Vec<String> = x.handovers.iter().map(|x| format!("{x:.1}")).collect();
        writeln!(
            s,
            "- {} {} candidates handover: {}",
            imp.name(),
            plan.many,
            list.join(", ")
        )?;
    }
    if !r.errors.is_empty() {
        writeln!(s, "\n## Errors in this run\n")?;
        for e in &r.errors {
            writeln!(s, "- {e}")?;
        }
    }
    Ok(())
}

/// Issue 8's goals, checked against this run.
fn goals(s: &mut String, r: &Results) -> std::fmt::Result {
    let mark = |ok: bool| if ok { "met" } else { "**missed**" };
    writeln!(s, "\n## Goals (issue 8)\n")?;
    writeln!(s, "| Goal | This run | |\n|---|---|---|")?;
    for t in [DEFAULTS, CROSSPLANE] {
        let rs = r.graceful.get(&(Imp::Rust, t.tag())).map(|v| pct(v, 99.0));
        let go = r.graceful.get(&(Imp::Go, t.tag())).map(|v| pct(v, 99.0));
        if let (Some(a), Some(b)) = (rs, go) {
            writeln!(
                s,
                "| graceful handover p99 ≤ 250 ms and ≥ 10× faster than client-go ({}) | {} vs {} ({:.0}×) | {} |",
                t.label(),
                fmt_ms(a),
                fmt_ms(b),
                b / a,
                mark(a <= 250.0 && b / a >= 10.0)
            )?;
        }
        if let Some(v) = r.crash.get(&(Imp::Rust, t.tag())) {
            let p = pct(v, 99.0);
            let limit = t.lease.as_secs_f64() * 1000.0 + 250.0;
            writeln!(
                s,
                "| crash failover p99 ≤ lease + 250 ms ({}) | {} ≤ {} | {} |",
                t.label(),
                fmt_ms(p),
                fmt_ms(limit),
                mark(p <= limit)
            )?;
        }
        if let Some(p) = r.rates.get(&(Imp::Rust, t.tag())) {
            writeln!(
                s,
                "| standby ≤ 1 request/min ({}) | {:.2}/min | {} |",
                t.label(),
                p.standby,
                mark(p.standby <= 1.0)
            )?;
            writeln!(
                s,
                "| leader ≤ 30 writes/min, no reads ({}) | {:.1} writes/min, {:.1} reads/min | {} |",
                t.label(),
                p.leader_writes,
                p.leader_reads,
                mark(p.leader_writes <= 30.5 && p.leader_reads == 0.0)
            )?;
        }
    }
    if let Some(n) = &r.nop {
        let mib = n.idle_rss as f64 / 1024.0;
        writeln!(
            s,
            "| provider idle RSS ≤ 20 MiB (provider-nop, release build) | {mib:.1} MiB | {} |",
            mark(mib <= 20.0)
        )?;
    }
    writeln!(
        s,
        "\nA request is counted once, when it was received, by the identity in its user agent. A standby's \
         watch is one long-running request, opened before the window and renewed by kube-rs when the \
         apiserver ends it (kube asks for a `timeoutSeconds` of about 290 s); the full run's window is 300 s \
         so that it catches a renewal, and the table counts the watches opened in it. Besides its watch, \
         our standby sends one `GET /version` every 80 s, which keeps a connection of its pool ready for \
         its acquiring write (`crates/election/src/warm.rs`; a 60 s window holds 0 or 1 of them): its \
         steady state is about 0.75 + 0.2 = 0.95 requests/min, none of them on the Lease or etcd; \
         client-go's standby polls the Lease with a GET every retry period (2–4.4 s with jitter). The leader's writes at a 2 s retry period are \
         at most 30/min by construction (one conditional replace per retry period)."
    )?;
    Ok(())
}
