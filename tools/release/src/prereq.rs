//! The system tools the test suite and the demo use besides cargo and Go, found or installed before
//! anything runs, so that `cargo xtask test` and `cargo xtask demo` do all of the setup on a fresh
//! Debian machine.
//!
//! What is missing is installed with `apt-get` when this runs as root on a Debian-like system;
//! otherwise the command stops with one message that names the packages to install.

use std::path::Path;
use std::process::Command;

use anyhow::{Context, bail};

/// A tool the suites need, and the Debian package that provides it.
struct Tool {
    /// What it is for, for the messages.
    purpose: &'static str,
    /// The Debian packages to install.
    packages: &'static [&'static str],
    /// Whether it is already here.
    present: fn() -> bool,
    /// Whether the node (and so `cargo xtask demo`) needs it.
    node: bool,
}

fn on_path(name: &str) -> bool {
    std::env::var_os("PATH")
        .is_some_and(|paths| std::env::split_paths(&paths).any(|dir| dir.join(name).is_file()))
}

fn postgres_present() -> bool {
    std::fs::read_dir("/usr/lib/postgresql")
        .map(|versions| {
            versions
                .flatten()
                .any(|v| v.path().join("bin").join("initdb").is_file())
        })
        .unwrap_or(false)
}

fn faketime_present() -> bool {
    [
        "/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1",
        "/usr/lib/aarch64-linux-gnu/faketime/libfaketime.so.1",
    ]
    .iter()
    .any(|p| Path::new(p).is_file())
}

const TOOLS: &[Tool] = &[
    Tool {
        purpose: "PostgreSQL (initdb, postgres) for provider-sql's tests",
        packages: &["postgresql"],
        present: postgres_present,
        node: false,
    },
    Tool {
        purpose: "kubectl for the deploy/ dry-run and the bad-input suite",
        packages: &["kubectl"],
        present: || on_path("kubectl"),
        node: true,
    },
    Tool {
        purpose: "libfaketime for the fault schedule's clock-offset fault",
        packages: &["libfaketime"],
        present: faketime_present,
        node: false,
    },
    Tool {
        purpose: "skopeo and umoci to check the OCI images",
        packages: &["skopeo", "umoci"],
        present: || on_path("skopeo") && on_path("umoci"),
        node: false,
    },
    Tool {
        purpose: "containerd and runc for the test bed's node",
        packages: &["containerd", "runc"],
        present: || on_path("containerd") && on_path("ctr") && on_path("runc"),
        node: true,
    },
    Tool {
        purpose: "the CNI plugins (bridge, host-local) for the node's Pod network",
        packages: &["containernetworking-plugins"],
        present: || {
            Path::new("/usr/lib/cni/bridge").is_file() && Path::new("/usr/lib/cni/host-local").is_file()
        },
        node: true,
    },
    Tool {
        purpose: "ip and iptables for the node's bridge and its route to the apiserver",
        packages: &["iproute2", "iptables"],
        present: || on_path("ip") && on_path("iptables"),
        node: true,
    },
];

/// Whether this process runs as root.
pub fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
}

fn apt(args: &[&str]) -> anyhow::Result<()> {
    let status = Command::new("apt-get")
        .args(args)
        .env("DEBIAN_FRONTEND", "noninteractive")
        .status()
        .with_context(|| format!("running apt-get {}", args.join(" ")))?;
    if !status.success() {
        bail!("apt-get {} failed ({status})", args.join(" "));
    }
    Ok(())
}

/// Finds every tool, installing what is missing with apt-get when it can; fails with one message naming
/// the packages otherwise.
pub fn ensure() -> anyhow::Result<()> {
    install(TOOLS.iter().collect())
}

/// [`ensure`] for the node's tools alone (containerd, runc, the CNI plugins, ip, iptables, kubectl): what
/// `cargo xtask demo` needs to show its Pods.
pub fn ensure_node() -> anyhow::Result<()> {
    install(TOOLS.iter().filter(|t| t.node).collect())
}

fn install(tools: Vec<&Tool>) -> anyhow::Result<()> {
    let missing: Vec<&Tool> = tools.into_iter().filter(|t| !(t.present)()).collect();
    if missing.is_empty() {
        return Ok(());
    }
    let packages: Vec<&str> = missing.iter().flat_map(|t| t.packages.iter().copied()).collect();
    for t in &missing {
        eprintln!("[prereq] missing: {}", t.purpose);
    }
    if !(is_root() && on_path("apt-get")) {
        bail!(
            "missing system packages: {}. Install them (on Debian: sudo apt-get install {}) and run again",
            packages.join(", "),
            packages.join(" ")
        );
    }
    let start = std::time::Instant::now();
    eprintln!("[prereq] apt-get install {}", packages.join(" "));
    apt(&["update", "-qq"])?;
    let mut install = vec!["install", "-y", "-qq"];
    install.extend(&packages);
    if let Err(e) = apt(&install) {
        if !packages.contains(&"kubectl") {
            return Err(e);
        }
        // Debian names kubectl's package kubernetes-client in some releases.
        let renamed: Vec<&str> = packages
            .iter()
            .map(|p| if *p == "kubectl" { "kubernetes-client" } else { p })
            .collect();
        let mut install = vec!["install", "-y", "-qq"];
        install.extend(&renamed);
        apt(&install)?;
    }
    let still: Vec<&str> = missing
        .iter()
        .filter(|t| !(t.present)())
        .flat_map(|t| t.packages.iter().copied())
        .collect();
    if !still.is_empty() {
        bail!("still missing after apt-get install: {}", still.join(", "));
    }
    eprintln!(
        "[prereq] installed {} in {:.1}s",
        packages.join(" "),
        start.elapsed().as_secs_f64()
    );
    Ok(())
}

/// The Python packages of the function tests, pinned: function-pythonic (a real composition function,
/// console script `function-pythonic`) and, through it, the official SDK crossplane-function-sdk-python
/// that our own test function and the protocol interop test use.
const FUNCTION_PACKAGES: &[&str] = &[
    "crossplane-function-pythonic==0.1.4",
    "crossplane-function-sdk-python==0.9.0",
];

/// The virtualenv of the function tests, `target/function-venv`, created with `python3 -m venv` and
/// filled from PyPI when it lacks `function-pythonic`.
pub fn function_venv() -> anyhow::Result<()> {
    let venv = crate::target_dir().join("function-venv");
    if venv.join("bin").join("function-pythonic").is_file() {
        return Ok(());
    }
    eprintln!("[prereq] creating the function virtualenv {}", venv.display());
    let status = Command::new("python3")
        .args(["-m", "venv"])
        .arg(&venv)
        .status()
        .context("running python3 -m venv (install python3 and python3-venv)")?;
    if !status.success() {
        bail!(
            "python3 -m venv {} failed ({status}); install python3-venv and run again",
            venv.display()
        );
    }
    let status = Command::new(venv.join("bin").join("pip"))
        .args(["install", "--quiet"])
        .args(FUNCTION_PACKAGES)
        .status()
        .context("running pip in the function virtualenv")?;
    if !status.success() {
        bail!("pip install {} failed ({status})", FUNCTION_PACKAGES.join(" "));
    }
    Ok(())
}
