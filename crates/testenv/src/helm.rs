//! Helm, for the chart's lint, template and dry-run test: built from its Go module at a pinned version
//! with `go install` (nothing prebuilt is downloaded), cached under `target/helm/<version>/`.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::error::{Error, Result};

/// The Helm release the chart is checked with (`helm.sh/helm/v3`, served by the Go module proxy).
pub const VERSION: &str = "v3.22.0";

/// Where [`ensure_built`] puts the binary under `target_dir`.
pub fn path(target_dir: &Path) -> PathBuf {
    target_dir.join("helm").join(VERSION).join("helm")
}

/// The binary built by `cargo xtask test` for this repository, or a clear error saying how to get it.
pub fn find() -> Result<PathBuf> {
    let p = path(&crate::cargo::target_dir());
    if p.is_file() {
        Ok(p)
    } else {
        Err(Error::Build(format!(
            "helm is not built at {}: run the tests with `cargo xtask test`, which builds it",
            p.display()
        )))
    }
}

/// Builds Helm into [`path`] unless it is there already, and returns its path.
pub fn ensure_built(target_dir: &Path) -> Result<PathBuf> {
    let binary = path(target_dir);
    if binary.is_file() {
        return Ok(binary);
    }
    let dir = binary
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_else(|| target_dir.to_path_buf());
    let out = Command::new("go")
        .args([
            "install",
            "-trimpath",
            &format!("helm.sh/helm/v3/cmd/helm@{VERSION}"),
        ])
        .env("GOBIN", &dir)
        .env("CGO_ENABLED", "0")
        .output()
        .map_err(Error::io("running `go install` for helm (is Go on PATH?)", "go"))?;
    if !out.status.success() || !binary.is_file() {
        return Err(Error::Build(format!(
            "go install helm.sh/helm/v3/cmd/helm@{VERSION} failed:\n{}",
            String::from_utf8_lossy(&out.stderr)
        )));
    }
    Ok(binary)
}
