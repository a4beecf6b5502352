//! `cargo xtask bench [--quick]`: our elector against client-go's, side by side, on one apiserver.
//!
//! One run starts its own control plane in `target/testbed/bench`, builds the Go harness and, from the
//! same module with `-tags candidateonly`, client-go's elector as a stand-alone process (so its RSS is
//! client-go's own, not the test bed's), and this workspace's Rust twin
//! (`crates/election/examples/lease-candidate.rs`, release profile, same flags and JSON-line events),
//! then measures, at 15/10/2 s (client-go's defaults) and 60/50/2 s (Crossplane's):
//!
//! - **graceful handover**: SIGTERM the leader (release on cancel); latency = the standby's
//!   `started_leading` − the moment the signal was sent, both `CLOCK_MONOTONIC`. Rust and Go run one
//!   after the other so they do not share the CPU;
//! - **crash failover**: SIGKILL the leader; latency = the standby's `started_leading` − the kill. These
//!   series mostly wait for the lease to expire, so all four run at once;
//! - **API requests per minute** of a leader and of a standby, counted in the audit log by the identity in
//!   the user agent, over a window that starts once the pair has settled (all eight processes at once);
//! - **idle RSS** (`VmRSS` of `/proc/<pid>/status`) of each, sampled in the middle of that window;
//! - **N candidates on one Lease** (15/10/2): requests per minute of all of them, then handovers;
//! - **provider-nop** (Rust only: there is no Go provider-nop in this tree): the time to bring NopResources
//!   that are Ready at once (`conditionAfter: 0s`) to Ready with `--max-reconcile-rate 50`, and its RSS.
//!
//! It writes `docs/benchmarks.md`, `docs/benchmarks.json` (with its provenance; the README's table is
//! rendered from it) and `docs/benchmarks.svg`. Expected wall time on 2 cores, after the
//! builds: `--quick` about 8 minutes (5 graceful and 3 + 1 crash repetitions, 60 s of counting, 20
//! candidates, 200 NopResources); the full run about 25 minutes (20 graceful and 10 + 10 crash
//! repetitions, dominated by ten 60/50/2 s crash failovers of about 65 s each, 3 minutes of counting, 50
//! candidates, 1 000 NopResources; the counting windows are 300 s, longer than the watch timeout). Both
//! release builds (the Rust candidate and provider-nop) finish before anything is measured. On a busy
//! machine they alone can take 10–15 minutes.
//!
//! Percentiles are nearest-rank, so with 5 samples p99 is the maximum.

mod builds;
mod candidate;
pub mod functions;
mod json;
mod many;
mod markdown;
mod nop;
mod plan;
mod rates;
mod series;
pub(crate) mod stats;
mod svg;

use std::{collections::BTreeMap, path::PathBuf, sync::Mutex, time::Instant};

use anyhow::Context;
use jiff::Timestamp;
use testenv::monotonic_ns as mono;

use release::{harness, runtime, target_dir};

use builds::{build_candidate, cargo_release};
use candidate::Env;
use many::{ManyResult, many};
use markdown::{loadavg, markdown};
use nop::{NopResult, nop};
use plan::{CROSSPLANE, DEFAULTS, FULL, Imp, Plan, QUICK};
use rates::{PairRates, rates};
use series::series;
use svg::svg;

/// Everything measured.
#[derive(Default)]
struct Results {
    graceful: BTreeMap<(Imp, u64), Vec<f64>>,
    crash: BTreeMap<(Imp, u64), Vec<f64>>,
    rates: BTreeMap<(Imp, u64), PairRates>,
    many: BTreeMap<Imp, ManyResult>,
    nop: Option<NopResult>,
    errors: Vec<String>,
}

/// `cargo xtask bench [--quick]`.
pub fn run(quick: bool) -> anyhow::Result<i32> {
    let plan = if quick { QUICK } else { FULL };
    let began = Instant::now();
    let began_wall = Timestamp::now();
    let harness = harness()?;
    let go_bin = testenv::harness::ensure_candidate_built(&target_dir())
        .context("building client-go's stand-alone lease candidate")?;
    let rust_bin = build_candidate()?;
    // Every build is done before anything is measured, so that no compiler shares the CPU with a
    // measurement (provider-nop's release build, with LTO, takes minutes).
    cargo_release(&["-p", "provider-nop", "--bin", "provider-nop"])?;
    let nop_bin = target_dir().join("release").join("provider-nop");
    let command = if quick {
        "cargo xtask bench --quick"
    } else {
        "cargo xtask bench"
    };
    let provenance = release::provenance::for_artifact("benchmarks.json", command)?;
    let dir = target_dir().join("testbed").join("bench");
    if dir.exists() {
        std::fs::remove_dir_all(&dir).with_context(|| format!("removing {}", dir.display()))?;
    }
    let logs = dir.join("candidates");
    let rt = runtime()?;
    eprintln!("[bench] starting the control plane in {}", dir.display());
    let mut cp = rt
        .block_on(testenv::ControlPlane::start(&dir, &harness, false))
        .context("starting the bench control plane")?;
    std::fs::create_dir_all(&logs)?;
    let env = Env {
        cluster: cp.cluster().clone(),
        rust_bin,
        go_bin,
        logs,
        t0: mono(),
        bars: Mutex::new(Vec::new()),
    };
    let load_start = loadavg();
    let results = rt.block_on(measure(&env, plan, nop_bin));
    let t1 = mono();
    eprintln!("[bench] stopping the control plane");
    cp.stop().context("stopping the bench control plane")?;
    let elapsed = began.elapsed();
    let root = testenv::harness::repo_root();
    let docs = root.join("docs");
    std::fs::create_dir_all(&docs)?;
    let bars = env.bars.lock().map(|b| b.clone()).unwrap_or_default();
    std::fs::write(
        docs.join("benchmarks.md"),
        markdown(
            &results,
            plan,
            quick,
            began_wall,
            elapsed,
            &load_start,
            &provenance,
        )?,
    )?;
    let mut json = json::to_json(&results, plan, quick, elapsed);
    json["provenance"] = provenance;
    json["load_average_at_the_end"] = loadavg().into();
    std::fs::write(
        docs.join("benchmarks.json"),
        serde_json::to_string_pretty(&json)? + "\n",
    )?;
    std::fs::write(docs.join("benchmarks.svg"), svg(&results, &bars, env.t0, t1))?;
    eprintln!(
        "[bench] wrote docs/benchmarks.md, docs/benchmarks.json and docs/benchmarks.svg in {:.1} min",
        elapsed.as_secs_f64() / 60.0
    );
    for e in &results.errors {
        eprintln!("[bench] error: {e}");
    }
    Ok(if results.errors.is_empty() { 0 } else { 1 })
}

async fn measure(env: &Env, plan: Plan, nop_bin: PathBuf) -> Results {
    let mut r = Results::default();
    let err = |r: &mut Results, what: &str, e: anyhow::Error| {
        eprintln!("[bench] {what} failed: {e:#}");
        r.errors.push(format!("{what}: {e:#}"));
    };
    // Graceful handovers, one series at a time.
    for t in [DEFAULTS, CROSSPLANE] {
        for imp in [Imp::Rust, Imp::Go] {
            match series(env, imp, t, plan.graceful_reps, false).await {
                Ok(v) => {
                    r.graceful.insert((imp, t.tag()), v);
                }
                Err(e) => err(&mut r, &format!("{} graceful {}", imp.name(), t.label()), e),
            }
        }
    }
    // Crash failovers: all four series at once.
    eprintln!("[bench] crash failovers (waiting out the leases)");
    let (a, b, c, d) = tokio::join!(
        series(env, Imp::Rust, DEFAULTS, plan.crash_reps_defaults, true),
        series(env, Imp::Go, DEFAULTS, plan.crash_reps_defaults, true),
        series(env, Imp::Rust, CROSSPLANE, plan.crash_reps_crossplane, true),
        series(env, Imp::Go, CROSSPLANE, plan.crash_reps_crossplane, true),
    );
    for (key, res) in [
        ((Imp::Rust, DEFAULTS), a),
        ((Imp::Go, DEFAULTS), b),
        ((Imp::Rust, CROSSPLANE), c),
        ((Imp::Go, CROSSPLANE), d),
    ] {
        match res {
            Ok(v) => {
                r.crash.insert((key.0, key.1.tag()), v);
            }
            Err(e) => err(&mut r, &format!("{} crash {}", key.0.name(), key.1.label()), e),
        }
    }
    match rates(env, plan.rate_window).await {
        Ok(v) => r.rates = v,
        Err(e) => err(&mut r, "request rates", e),
    }
    match many(env, plan.many, plan.many_window, plan.many_handovers).await {
        Ok(v) => r.many = v,
        Err(e) => err(&mut r, "many candidates", e),
    }
    match nop(env, &nop_bin, plan.nop_count).await {
        Ok(v) => r.nop = Some(v),
        Err(e) => err(&mut r, "provider-nop", e),
    }
    r
}
