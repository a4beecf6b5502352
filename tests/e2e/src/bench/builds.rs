//! The release builds the bench measures: the Rust candidate and provider-nop.

use std::path::PathBuf;

use anyhow::bail;

use release::target_dir;

/// Builds the Rust candidate (release) and returns its path.
pub(super) fn build_candidate() -> anyhow::Result<PathBuf> {
    cargo_release(&["-p", "election", "--example", "lease-candidate"])?;
    Ok(target_dir()
        .join("release")
        .join("examples")
        .join("lease-candidate"))
}

/// Runs `cargo build --release <args>` in the workspace.
pub(super) fn cargo_release(args: &[&str]) -> anyhow::Result<()> {
    eprintln!("[bench] cargo build --release {}", args.join(" "));
    let status = release::cargo()
        .args(["build", "--release"])
        .args(args)
        .current_dir(testenv::harness::repo_root())
        .status()?;
    if !status.success() {
        bail!("cargo build --release {} failed", args.join(" "));
    }
    Ok(())
}
