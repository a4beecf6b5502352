//! `cargo xtask control-plane up|down|status`: a control plane that outlives the command.

use clap::Subcommand;

use crate::{harness, runtime, target_dir};

/// What to do with the long-lived control plane.
#[derive(Subcommand)]
pub enum Action {
    /// Start it (if not running) and print how to use kubectl on it.
    Up,
    /// Stop it.
    Down,
    /// Show its components and whether the apiserver is ready.
    Status,
}

pub fn run(action: Action) -> anyhow::Result<i32> {
    let dir = target_dir().join("testbed").join("dev");
    match action {
        Action::Up => {
            if dir.exists() {
                let mut cp = testenv::ControlPlane::adopt(&dir)?;
                if cp.status().iter().all(|(_, _, running)| *running) {
                    eprintln!("[testbed] already running");
                    print_exports(cp.cluster());
                    return Ok(0);
                }
                let _ = cp.stop();
                std::fs::remove_dir_all(&dir)?;
            }
            let harness = harness()?;
            let rt = runtime()?;
            let cp = rt.block_on(testenv::ControlPlane::start(&dir, &harness, true))?;
            eprintln!("[testbed] up at {}", cp.cluster().server);
            print_exports(cp.cluster());
            Ok(0)
        }
        Action::Down => {
            if !dir.exists() {
                eprintln!("[testbed] not running");
                return Ok(0);
            }
            testenv::ControlPlane::adopt(&dir)?.stop()?;
            std::fs::remove_dir_all(&dir)?;
            eprintln!("[testbed] stopped");
            Ok(0)
        }
        Action::Status => {
            if !dir.exists() {
                println!("not running (start it with `cargo xtask control-plane up`)");
                return Ok(1);
            }
            let mut cp = testenv::ControlPlane::adopt(&dir)?;
            let mut all = true;
            for (name, pid, running) in cp.status() {
                all &= running;
                let pid = pid.map(|p| p.to_string()).unwrap_or_else(|| "-".into());
                println!(
                    "{name:<24} pid {pid:<8} {}",
                    if running { "running" } else { "stopped" }
                );
            }
            println!("apiserver                {}", cp.cluster().server);
            Ok(if all { 0 } else { 1 })
        }
    }
}

fn print_exports(cluster: &testenv::Cluster) {
    println!("export KUBECONFIG={}", cluster.admin_kubeconfig.display());
    println!("export {}={}", testenv::ENV_TESTBED, cluster.dir.display());
}
