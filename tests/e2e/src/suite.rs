//! `cargo xtask test`: one control plane for the whole run.

use std::time::Instant;

use anyhow::Context;

use release::{harness, runtime, target_dir};

/// Runs the workspace tests against a fresh control plane and returns cargo's exit code.
pub fn run(args: &[String]) -> anyhow::Result<i32> {
    run_with_env(args, &[])
}

/// [`run`], with extra environment variables for the tests.
pub fn run_with_env(args: &[String], envs: &[(&str, &std::path::Path)]) -> anyhow::Result<i32> {
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
        .env(testenv::ENV_TESTBED, &cp.cluster().dir)
        .envs(envs.iter().copied())
        .status()
        .context("running cargo test")?;
    eprintln!("[testbed] stopping");
    cp.stop().context("stopping the test control plane")?;
    Ok(status.code().unwrap_or(1))
}
