//! kubectl against a test bed: the one place the tests, the demo and the node bench run it.

use std::path::Path;
use std::process::Command;

use crate::{Error, Result};

/// Runs `kubectl --kubeconfig <kubeconfig> <args>` and returns its stdout; a failure carries its stderr.
pub fn run(kubeconfig: &Path, args: &[&str]) -> Result<String> {
    let failed = |stderr: String| Error::Kubectl {
        args: args.join(" "),
        stderr,
    };
    let out = Command::new("kubectl")
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .args(args)
        .output()
        .map_err(|e| failed(e.to_string()))?;
    if !out.status.success() {
        let (stdout, stderr) = (
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr),
        );
        let mut text = stderr.trim().to_owned();
        if !stdout.trim().is_empty() {
            text = format!("{text}\n{}", stdout.trim());
        }
        return Err(failed(text));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// `kubectl apply --server-side -f/-k <path>`: `-k` for a kustomization directory, `-f` for a file.
pub fn apply(kubeconfig: &Path, path: &Path) -> Result<String> {
    let flag = if path.is_dir() { "-k" } else { "-f" };
    run(
        kubeconfig,
        &["apply", "--server-side", flag, &path.display().to_string()],
    )
}
