//! Where a demo lives, what `--keep` leaves behind, and `--down`, which cleans it up.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use nix::sys::signal::Signal;
use nix::unistd::Pid;
use serde::{Deserialize, Serialize};

use super::cleanup::{delete_examples, delete_rbac_and_namespace};
use super::session::Demo;
use super::{NS, XR, control_plane, runtime};

/// The control plane the demo runs on: `$CROSSPLANE_RS_TESTBED`, else the long-lived one.
pub(super) fn testbed_dir() -> PathBuf {
    let dir = std::env::var_os(testenv::ENV_TESTBED)
        .map(PathBuf::from)
        .unwrap_or_else(control_plane::dev_dir);
    dir.canonicalize().unwrap_or(dir)
}

/// The demo's logs and state live with its control plane, so demos on different control planes (the
/// test suite's private one, a person's long-lived one) never touch each other.
pub(super) fn demo_dir(testbed: &Path) -> PathBuf {
    testbed.join("demo")
}

pub(super) fn state_path(testbed: &Path) -> PathBuf {
    demo_dir(testbed).join("state.json")
}

/// Whether `pid` still runs `binary` (also when a rebuild has replaced the file since).
fn runs(pid: u32, binary: &Path) -> bool {
    std::fs::read_link(format!("/proc/{pid}/exe")).is_ok_and(|exe| {
        let exe = exe.to_string_lossy();
        exe.strip_suffix(" (deleted)").unwrap_or(&exe) == binary.to_string_lossy()
    })
}

/// What `--keep` leaves behind, for `--down`.
#[derive(Debug, Serialize, Deserialize)]
struct Kept {
    testbed: PathBuf,
    started_control_plane: bool,
    replicas: Vec<KeptReplica>,
}

#[derive(Debug, Serialize, Deserialize)]
struct KeptReplica {
    identity: String,
    pid: u32,
    binary: PathBuf,
}

/// Cleans up a demo left running by `--keep` on the control plane in `testbed`.
pub(super) fn down(testbed: &Path) -> Result<()> {
    let path = state_path(testbed);
    if !path.exists() {
        eprintln!("[demo] no demo is kept running");
        return Ok(());
    }
    let text = std::fs::read_to_string(&path)?;
    let kept: Kept = serde_json::from_str(&text).with_context(|| format!("parsing {}", path.display()))?;
    let state = testenv::State::load(&kept.testbed);
    let rt = runtime()?;
    if let Ok(state) = &state {
        let client = rt.block_on(state.cluster.client())?;
        rt.block_on(delete_examples(&client, true, |_| {}))?;
    }
    // Only processes that still run the binary the demo started.
    for r in kept.replicas.iter().filter(|r| runs(r.pid, &r.binary)) {
        let _ = nix::sys::signal::kill(Pid::from_raw(r.pid as i32), Signal::SIGTERM);
    }
    let deadline = Instant::now() + Duration::from_secs(15);
    for r in &kept.replicas {
        while runs(r.pid, &r.binary) {
            if Instant::now() > deadline {
                let _ = nix::sys::signal::kill(Pid::from_raw(r.pid as i32), Signal::SIGKILL);
                break;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
    if let Ok(state) = &state {
        let client = rt.block_on(state.cluster.client())?;
        rt.block_on(delete_rbac_and_namespace(&client))?;
    }
    drop(rt);
    std::fs::remove_file(&path)?;
    if kept.started_control_plane && testbed == control_plane::dev_dir() {
        eprintln!("[demo] stopping the control plane the demo started");
        control_plane::down()?;
    }
    eprintln!("[demo] cleaned up");
    Ok(())
}

impl Demo {
    /// Records the running replicas, so that `--down` (or the next demo) can stop them if this process
    /// ends without cleaning up: `--keep`, or killed.
    pub(super) fn save_state(&self) -> Result<()> {
        let kept = Kept {
            testbed: self.cluster.dir.clone(),
            started_control_plane: self.started_control_plane,
            replicas: self
                .replicas
                .iter()
                .filter_map(|r| {
                    Some(KeptReplica {
                        identity: r.identity.clone(),
                        pid: r.pid()?,
                        binary: r.binary.clone(),
                    })
                })
                .collect(),
        };
        let path = state_path(&self.cluster.dir);
        std::fs::write(&path, serde_json::to_string_pretty(&kept)?)
            .with_context(|| format!("writing {}", path.display()))
    }

    /// `--keep`: leaves the replicas running and says how to reach them.
    pub(super) fn keep(mut self) -> Result<i32> {
        self.save_state()?;
        for r in &mut self.replicas {
            r.detach();
        }
        let kc = self.cluster.admin_kubeconfig.display();
        println!(
            "\nThe demo keeps running ({} replicas; logs in {}).\n\n  export KUBECONFIG={kc}\n  kubectl get leases -n {NS}\n  kubectl get xapps,nopresources,objects\n  kubectl get configmap -n {NS} {XR}-config -o yaml\n  kubectl patch xapp {XR} --type merge -p '{{\"spec\":{{\"size\":\"small\"}}}}'\n\nClean up with `{down}` (before stopping the control plane).",
            self.replicas.len(),
            demo_dir(&self.cluster.dir).join("logs").display(),
            down = match std::env::var_os(testenv::ENV_TESTBED) {
                Some(dir) => format!(
                    "{}={} cargo xtask demo --down",
                    testenv::ENV_TESTBED,
                    PathBuf::from(dir).display()
                ),
                None => "cargo xtask demo --down".to_owned(),
            }
        );
        Ok(0)
    }
}
