//! `cargo xtask test`: one control plane for the whole run.
//!
//! The whole workspace's run builds every test binary first, then runs them in two [`lanes`]: the suites
//! mostly wait on lease timers and Pods (one alone keeps 2 cores 10–50 % busy), so two at once take
//! about half the time of `cargo test`'s one after another. A run narrowed by arguments
//! (`cargo xtask test -- -p election`) is `cargo test`'s own.

mod lanes;
pub mod plan;

use std::ffi::OsStr;
use std::path::Path;
use std::time::Instant;

use anyhow::Context;

use release::{harness, runtime, target_dir};

/// How many test binaries run at once in the whole workspace's run.
pub const LANES: u16 = 2;

/// Runs the workspace tests against a fresh control plane and returns the run's exit code: the whole
/// workspace in `lanes` lanes without `args`, else `cargo test` with them.
pub fn run(args: &[String], lanes: usize) -> anyhow::Result<i32> {
    if args.is_empty() {
        with_control_plane(&[], |envs| in_lanes(envs, lanes))
    } else {
        run_with_env(args, &[])
    }
}

/// `cargo test --no-fail-fast` with `args` (the whole workspace unless they name a package) against a
/// fresh control plane, with extra environment variables for the tests; returns cargo's exit code.
pub fn run_with_env(args: &[String], envs: &[(&str, &Path)]) -> anyhow::Result<i32> {
    with_control_plane(envs, |envs| {
        // `cargo xtask test -- -p election` narrows the run; otherwise the whole workspace runs.
        let narrowed = args
            .iter()
            .any(|a| a == "-p" || a.starts_with("--package") || a.starts_with("-p"));
        let mut cargo = release::cargo();
        // Every suite runs, so one failure does not hide the state of the others; the exit code still fails.
        cargo.args(["test", "--no-fail-fast"]);
        if !narrowed {
            cargo.arg("--workspace");
        }
        let status = cargo
            .args(args)
            .envs(envs.iter().copied())
            .status()
            .context("running cargo test")?;
        Ok(status.code().unwrap_or(1))
    })
}

/// Builds what the tests need (the harness, helm, the function's virtualenv), starts a fresh control
/// plane, runs `tests` with the variables that name it (and `envs`), and stops it.
fn with_control_plane(
    envs: &[(&str, &Path)],
    tests: impl FnOnce(&[(&str, &OsStr)]) -> anyhow::Result<i32>,
) -> anyhow::Result<i32> {
    release::prereq::ensure()?;
    release::prereq::function_venv()?;
    let harness = harness()?;
    let start = Instant::now();
    let helm = testenv::helm::ensure_built(&target_dir()).context("building helm for the chart test")?;
    eprintln!(
        "[helm] ready: {} ({:.1}s)",
        helm.display(),
        start.elapsed().as_secs_f64()
    );
    let dir = target_dir().join("testbed").join("test");
    if dir.exists() {
        std::fs::remove_dir_all(&dir)
            .with_context(|| format!("removing the old test bed {}", dir.display()))?;
    }
    let rt = runtime()?;
    let start = Instant::now();
    eprintln!(
        "[testbed] starting etcd, kube-apiserver and kube-controller-manager in {}",
        dir.display()
    );
    let mut cp = rt
        .block_on(testenv::ControlPlane::start(&dir, &harness, false))
        .context("starting the test control plane")?;
    eprintln!(
        "[testbed] ready at {} in {:.1}s",
        cp.cluster().server,
        start.elapsed().as_secs_f64()
    );
    let mut all: Vec<(&str, &OsStr)> = vec![(testenv::ENV_TESTBED, cp.cluster().dir.as_os_str())];
    all.extend(envs.iter().map(|(k, v)| (*k, v.as_os_str())));
    let code = tests(&all);
    eprintln!("[testbed] stopping");
    cp.stop().context("stopping the test control plane")?;
    code
}

/// Builds every test binary of the workspace, runs them in `lanes` lanes, then the doc tests; prints a
/// summary and returns 0 only if every binary passed.
fn in_lanes(envs: &[(&str, &OsStr)], lanes: usize) -> anyhow::Result<i32> {
    let build = release::cargo()
        .args([
            "test",
            "--workspace",
            "--no-run",
            "--message-format=json-render-diagnostics",
        ])
        .stderr(std::process::Stdio::inherit())
        .output()
        .context("running cargo test --no-run")?;
    if !build.status.success() {
        eprintln!("[test] the test build failed ({})", build.status);
        return Ok(build.status.code().unwrap_or(1));
    }
    let binaries = plan::binaries(&String::from_utf8_lossy(&build.stdout));
    anyhow::ensure!(
        !binaries.is_empty(),
        "cargo test --no-run built no test binary: nothing would be tested"
    );
    let count = binaries.len();
    let logs = target_dir().join("test-logs");
    let summary = lanes::run(binaries, lanes, envs, &logs, &lanes::stdout)?;
    eprintln!(
        "[test] {count} test binaries in {lanes} lanes took {:.0}s; one after another they took {:.0}s \
         (each one's output is in {})",
        summary.wall.as_secs_f64(),
        summary.serial.as_secs_f64(),
        logs.display()
    );
    // The doc tests, which no test binary holds.
    let doc = release::cargo()
        .args(["test", "--workspace", "--doc"])
        .envs(envs.iter().copied())
        .output()
        .context("running cargo test --doc")?;
    let doc_out = String::from_utf8_lossy(&doc.stdout);
    print!("{doc_out}");
    eprint!("{}", String::from_utf8_lossy(&doc.stderr));
    let counts = summary.counts + plan::Counts::of(&doc_out);
    let mut failed = summary.failed;
    if !doc.status.success() {
        failed.push(format!("the doc tests ({})", doc.status));
    }
    // A run in which no test passed proves nothing, whatever the exit codes said.
    if counts.passed == 0 {
        failed.push(format!("the run as a whole: no test passed in {count} binaries"));
    }
    for f in &failed {
        eprintln!("[test] FAILED: {f}");
    }
    println!(
        "tests: {} passed, {} failed, {} skipped",
        counts.passed, counts.failed, counts.ignored
    );
    Ok(if failed.is_empty() && counts.failed == 0 {
        0
    } else {
        101
    })
}
