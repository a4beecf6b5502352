//! The release tooling behind `cargo xtask`: everything that turns the code into what ships and what the
//! README publishes.
//!
//! - [`generate`] writes `deploy/` (CRDs, per-binary kustomize bases, the fence) and, through [`chart`],
//!   the Helm chart; [`upstream`] and [`figures`] render the README's generated tables;
//! - [`image`] packs release binaries as OCI archives without a daemon, [`package`] adds the xpkg layer
//!   of each provider, [`registry`] names them;
//! - [`provenance`] records and checks where every artifact under `docs/` came from;
//! - [`prereq`] installs what a fresh Debian machine lacks for the suites and the node.
//!
//! The scenarios that measure and demonstrate (demo, node-bench, bench, chaos) live in the `e2e` crate;
//! `xtask` only parses flags and calls one function here or there.
#![forbid(unsafe_code)]

pub mod binaries;
pub mod chart;
pub mod figures;
pub mod generate;
pub mod image;
pub mod package;
pub mod prereq;
pub mod provenance;
pub mod registry;
pub mod upstream;

use std::path::PathBuf;

/// The Cargo target directory.
pub fn target_dir() -> PathBuf {
    testenv::cargo::target_dir()
}

/// Builds the Go harness if needed, with progress on stderr, and returns its path.
pub fn harness() -> anyhow::Result<PathBuf> {
    let start = std::time::Instant::now();
    let path = testenv::harness::ensure_built(&target_dir(), |line| eprintln!("[harness] {line}"))?;
    eprintln!(
        "[harness] ready: {} ({:.1}s)",
        path.display(),
        start.elapsed().as_secs_f64()
    );
    Ok(path)
}

/// `cargo`, without the variables cargo sets for the process it runs ([`testenv::cargo::command`]).
pub fn cargo() -> std::process::Command {
    testenv::cargo::command()
}

/// A tokio runtime for the async parts of the test bed.
pub fn runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    Ok(tokio::runtime::Builder::new_multi_thread().enable_all().build()?)
}
