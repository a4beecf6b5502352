//! `cargo xtask`: the project's automation.
//!
//! - `cargo xtask test [-- <cargo test args>]` builds the Go harness (cached), starts one local control
//!   plane, runs the whole workspace test suite against it, and stops it. This is the README's test command.
//! - `cargo xtask control-plane up|down|status` leaves a control plane running for people and kubectl.
//! - `cargo xtask generate [--check]` writes deploy/ (CRDs, RBAC, Deployments) from the code.
//! - `cargo xtask image [BINARY|--all]` packs release binaries as OCI image archives.
//! - `cargo xtask harness` only builds the harness.
//! - `cargo xtask bench [--quick]` measures our elector against client-go's and writes `docs/benchmarks.*`.
#![forbid(unsafe_code)]

mod bench;
mod control_plane;
mod generate;
mod image;
mod test;

use std::path::PathBuf;

use clap::{Parser, Subcommand};

/// crossplane-rs project automation.
#[derive(Parser)]
#[command(name = "cargo xtask", version)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Build the harness, start a control plane, run every test of the workspace against it, stop it.
    Test {
        /// Arguments passed to `cargo test` after `--workspace` (e.g. `-p election -- interop`).
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<String>,
    },
    /// Manage a long-lived local control plane for kubectl and manual testing.
    ControlPlane {
        #[command(subcommand)]
        action: control_plane::Action,
    },
    /// Write deploy/ from the code: CRDs, per-binary kustomize bases (Deployment, RBAC, PDB), kustomization.
    Generate {
        /// Only compare: exit non-zero, listing the files, when deploy/ differs from the code.
        #[arg(long)]
        check: bool,
    },
    /// Build release images of the binaries as OCI archives under target/images/ (no Docker daemon).
    Image {
        /// Binaries to build (all when none is named).
        binaries: Vec<String>,
        /// Build every binary.
        #[arg(long, conflicts_with = "binaries")]
        all: bool,
    },
    /// Build the Go harness (kube-apiserver, etcd, kube-controller-manager, client-go candidate) and print its path.
    Harness,
    /// Measure the Rust elector against client-go's on a fresh control plane; write docs/benchmarks.md and .svg.
    Bench {
        /// Fewer repetitions and shorter windows (about 8 minutes instead of about 25).
        #[arg(long)]
        quick: bool,
    },
}

fn main() {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Test { args } => test::run(&args),
        Command::ControlPlane { action } => control_plane::run(action),
        Command::Generate { check } => generate::run(check),
        Command::Image { binaries, all: _ } => image::run(&binaries).map(|_| 0),
        Command::Bench { quick } => bench::run(quick),
        Command::Harness => harness().map(|p| {
            println!("{}", p.display());
            0
        }),
    };
    match result {
        Ok(code) => std::process::exit(code),
        Err(e) => {
            eprintln!("xtask: error: {e:#}");
            std::process::exit(1);
        }
    }
}

/// The Cargo target directory.
fn target_dir() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| testenv::harness::repo_root().join("target"))
}

/// Builds the harness if needed, with progress on stderr, and returns its path.
fn harness() -> anyhow::Result<PathBuf> {
    let start = std::time::Instant::now();
    let path = testenv::harness::ensure_built(&target_dir(), |line| eprintln!("[harness] {line}"))?;
    eprintln!(
        "[harness] ready: {} ({:.1}s)",
        path.display(),
        start.elapsed().as_secs_f64()
    );
    Ok(path)
}

/// A tokio runtime for the async parts of the test bed.
fn runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    Ok(tokio::runtime::Builder::new_multi_thread().enable_all().build()?)
}
