//! `cargo xtask chaos [--changes N] [--nop-resources N] [--xrs N] [--fence-after N]`: the full fault
//! schedule of issue 8 (see `tests/e2e/src/schedule/`) on a control plane of its own, until at least
//! `N` leadership changes (100 by default) with 200 NopResources. The first part runs with
//! self-fencing alone; after `--fence-after` changes (half by default) the server-side fence is
//! installed, so the run reports both modes. It prints the summary and writes every figure to
//! `docs/reliability.md` and `docs/reliability.json`. The bounded version runs in `cargo xtask test`
//! (`tests/e2e/tests/faults.rs`: 30 changes, the fence and both Go peers after 20).

use std::time::{Duration, Instant};

use crate::schedule::{self, Binaries, Config, Timings};
use anyhow::{Context, bail};

use release::{harness, provenance, runtime, target_dir};

/// The schedule's size.
pub struct Options {
    /// Stop once this many leadership changes were seen.
    pub changes: usize,
    /// Stand-alone NopResources.
    pub nop_resources: usize,
    /// XRs.
    pub xrs: usize,
    /// Install the server-side fence after this many leadership changes.
    pub fence_after: usize,
    /// Break one part on purpose to see the verdict fail (nothing is written to docs/ then).
    pub sabotage: Option<schedule::Sabotage>,
}

/// Parses `--sabotage`'s value.
pub fn parse_sabotage(s: &str) -> Result<schedule::Sabotage, String> {
    schedule::Sabotage::ALL
        .into_iter()
        .find(|x| x.name() == s)
        .ok_or_else(|| {
            let names: Vec<&str> = schedule::Sabotage::ALL.iter().map(|x| x.name()).collect();
            format!("unknown sabotage {s:?}; one of: {}", names.join(", "))
        })
}

/// Builds the replica binaries, starts a control plane, runs the schedule and returns the exit code.
pub fn run(options: &Options) -> anyhow::Result<i32> {
    let started = Instant::now();
    let command = format!(
        "cargo xtask chaos --changes {} --nop-resources {} --xrs {} --fence-after {}",
        options.changes, options.nop_resources, options.xrs, options.fence_after
    );
    let provenance = provenance::for_artifact("reliability.json", &command)?;
    let harness = harness()?;
    eprintln!("[chaos] cargo build -p e2e --bins");
    let status = release::cargo()
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
        fence_after: Some(options.fence_after),
        client_go: true,
        go_provider: true,
        // About 1.1 changes per fault and 6 s per fault, with room to spare.
        time_limit: Duration::from_secs(60 + 15 * options.changes as u64),
        timings: Timings::FAST,
        log_dir: dir.join("replicas"),
        verbose: true,
        sabotage: options.sabotage,
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
    println!("verdict:\n{}", report.verdict_text(options.changes));
    let minutes = started.elapsed().as_secs_f64() / 60.0;
    if let Some(s) = options.sabotage {
        println!(
            "sabotage {}: docs/ left as they are; the verdict above must have FAILED",
            s.name()
        );
    } else {
        write_docs(&report, options, minutes, provenance)?;
    }
    println!(
        "cargo xtask chaos: {minutes:.1} min in all; replica logs and the audit log under {}",
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

/// Writes `docs/reliability.md` and `docs/reliability.json` from the report.
fn write_docs(
    report: &schedule::Report,
    options: &Options,
    minutes: f64,
    provenance: serde_json::Value,
) -> anyhow::Result<()> {
    let docs = testenv::harness::repo_root().join("docs");
    let verdict = if report.passed(options.changes) {
        "PASSED"
    } else {
        "FAILED"
    };
    let how = format!(
        "Written by `cargo xtask chaos --changes {} --nop-resources {} --xrs {} --fence-after {}` on {} \
         ({minutes:.1} min on this machine; verdict: **{verdict}**). Three provider-nop and three core \
         replicas, each process with a ServiceAccount token bound to a pod of its own, were hit by the \
         faults below one after another until at least {} leadership changes. The first {} changes ran \
         with self-fencing alone; then the server-side fence (`deploy/fencing`) was installed, and \
         client-go's candidate and the Go provider (provider-nop-go, on crossplane-runtime) joined \
         provider-nop's pool until the faults ended. Every \
         write of a replica is attributed by the pod its token is bound to and judged by the \
         apiserver's answer, with no grace window (see `tests/e2e/src/schedule/check.rs`). {}",
        options.changes,
        options.nop_resources,
        options.xrs,
        options.fence_after,
        jiff::Timestamp::now().strftime("%Y-%m-%d %H:%M UTC"),
        options.changes,
        options.fence_after,
        provenance::markdown_line(&provenance),
    );
    let md = docs.join("reliability.md");
    std::fs::write(&md, report.to_markdown(&how)).with_context(|| format!("writing {}", md.display()))?;
    let mut json = report.to_json();
    json["provenance"] = provenance;
    json["verdict"] = verdict.into();
    json["verdict_controls"] = report
        .verdict(options.changes)
        .iter()
        .map(|c| serde_json::json!({"control": c.name, "figure": c.figure, "held": c.held}))
        .collect();
    json["minutes"] = format!("{minutes:.1}").into();
    json["options"] = serde_json::json!({
        "changes": options.changes,
        "nop_resources": options.nop_resources,
        "xrs": options.xrs,
        "fence_after": options.fence_after,
    });
    let path = docs.join("reliability.json");
    std::fs::write(&path, serde_json::to_string_pretty(&json)? + "\n")
        .with_context(|| format!("writing {}", path.display()))?;
    eprintln!("[chaos] wrote {} and {}", md.display(), path.display());
    Ok(())
}
