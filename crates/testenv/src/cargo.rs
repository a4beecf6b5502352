//! Building a binary of this workspace from a test, so that a test that runs another package's binary
//! (the core's tests run provider-nop) uses the current code, never a stale build or a stand-in.
//!
//! Cargo names only a package's own binaries to its tests (`CARGO_BIN_EXE_*`); another package's are
//! built here with `cargo build -p <package> --bin <bin>` (a no-op when they are fresh) and found in
//! the target directory. A build that fails is the test's failure.

use std::path::PathBuf;
use std::process::Command;

use crate::{Error, Result};

/// The workspace's target directory: `CARGO_TARGET_DIR`, else `target/` at the repository root.
pub fn target_dir() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| crate::harness::repo_root().join("target"))
}

/// `cargo` (the one running this test, else the one on PATH), without the variables cargo sets for the
/// process it runs ([`clear_cargo_vars`]).
///
/// Build scripts such as ring's declare `rerun-if-env-changed` on `CARGO_MANIFEST_DIR` and
/// `CARGO_PKG_*`, which cargo checks in its own environment: a cargo started from `cargo xtask` or from a
/// test that inherited them would rebuild ring and everything above it, and the next cargo started from a
/// shell would rebuild them back.
pub fn command() -> Command {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut cmd = Command::new(cargo);
    clear_cargo_vars(&mut cmd);
    cmd
}

/// Removes from `cmd`'s environment the variables cargo set for this process about its package
/// (`CARGO_MANIFEST_DIR`, `CARGO_PKG_*`, `CARGO_BIN_EXE_*`, `OUT_DIR`, ...), which would be wrong for
/// any other package's process. `CARGO` itself is kept.
pub fn clear_cargo_vars(cmd: &mut Command) {
    for (key, _) in std::env::vars_os() {
        let k = key.to_string_lossy();
        let set_by_cargo = k.starts_with("CARGO_PKG_")
            || k.starts_with("CARGO_BIN_EXE_")
            || matches!(
                &*k,
                "CARGO_MANIFEST_DIR"
                    | "CARGO_MANIFEST_PATH"
                    | "CARGO_MANIFEST_LINKS"
                    | "CARGO_CRATE_NAME"
                    | "CARGO_BIN_NAME"
                    | "CARGO_PRIMARY_PACKAGE"
                    | "CARGO_TARGET_TMPDIR"
                    | "CARGO_RUSTC_CURRENT_DIR"
                    | "OUT_DIR"
            );
        if set_by_cargo {
            cmd.env_remove(&key);
        }
    }
}

/// Builds binary `bin` of workspace package `package` (debug profile) and returns its path.
pub fn binary(package: &str, bin: &str) -> Result<PathBuf> {
    let out = command()
        .args(["build", "--quiet", "-p", package, "--bin", bin])
        .current_dir(crate::harness::repo_root())
        .output()
        .map_err(|e| Error::Unexpected(format!("starting `cargo build -p {package} --bin {bin}`: {e}")))?;
    if !out.status.success() {
        return Err(Error::Unexpected(format!(
            "`cargo build -p {package} --bin {bin}` failed ({}); the test needs this binary:\n{}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        )));
    }
    let path = target_dir().join("debug").join(bin);
    if !path.is_file() {
        return Err(Error::Unexpected(format!(
            "`cargo build -p {package} --bin {bin}` succeeded but {} is not there",
            path.display()
        )));
    }
    Ok(path)
}
