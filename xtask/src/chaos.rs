//! `cargo xtask chaos [--changes N] [--nop-resources N] [--xrs N]`: the full fault schedule of issue 8
//! (see `tests/e2e/src/schedule/`) on a control plane of its own, until at least `N` leadership
//! changes (100 by default) with 200 NopResources; prints changes per fault kind, the checker's result
//! and the time taken. The bounded version runs in `cargo xtask test` (`tests/e2e/tests/faults.rs`).

use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use e2e::schedule::{self, Binaries, Config, Timings};

use crate::{harness, runtime, target_dir};

/// The schedule's size.
pub struct Options {
    /// Stop once this many leadership changes were seen.
    pub changes: usize,
    /// Stand-alone NopResources.
    pub nop_resources: usize,
    /// XRs.
    pub xrs: usize,
}

/// Builds the replica binaries, starts a control plane, runs the schedule and returns the exit code.
pub fn run(options: &Options) -> anyhow::Result<i32> {
    let started = Instant::now();
    let harness = harness()?;
    eprintln!("[chaos] cargo build -p e2e --bins");
    let status = crate::cargo()
        .args(["build", "-p", "e2e", "--bins"])
        .current_dir(testenv::harness::repo_root())
        .status()
        .context("running cargo build")?;
    if !status.success() {
        bail!("cargo build -p e2e --bins failed");
    }
    let dir = target_dir().join("testbed").join("chaos");
    if dir.exists() {
        std::fs::remove_dir_all(&dir).with_context(|| format!("removing {}", dir.display()))?;
    }
    let config = Config {
        binaries: Binaries::in_dir(&target_dir().join("debug")),
        nop_resources: options.nop_resources,
        xrs: options.xrs,
        min_changes: options.changes,
        // About 1.1 changes per fault and 6 s per fault, with room to spare.
        time_limit: Duration::from_secs(60 + 15 * options.changes as u64),
        timings: Timings::FAST,
        log_dir: dir.join("replicas"),
        verbose: true,
    };
    let rt = runtime()?;
    let report = rt.block_on(async {
        let mut cp = testenv::ControlPlane::start(&dir.join("control-plane"), &harness, false)
            .await
            .context("starting the control plane")?;
        eprintln!("[chaos] control plane at {}", cp.cluster().server);
        let report = schedule::run(&mut cp, &config).await;
        cp.stop().context("stopping the control plane")?;
        report
    })?;
    println!("{}", report.summary());
    println!(
        "cargo xtask chaos: {:.1} min in all; replica logs and the audit log under {}",
        started.elapsed().as_secs_f64() / 60.0,
        dir.display()
    );
    if report.passed(options.changes) {
        println!("PASSED");
        Ok(0)
    } else {
        println!("FAILED");
        Ok(1)
    }
}
