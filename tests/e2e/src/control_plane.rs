//! `cargo xtask control-plane up|down|status`: a control plane that outlives the command.

use clap::Subcommand;

use release::{harness, runtime, target_dir};

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

/// Runs `action` on the control plane under `target/testbed/dev`; returns the exit code.
pub fn run(action: Action) -> anyhow::Result<i32> {
    let dir = dev_dir();
    match action {
        Action::Up => {
            let (cluster, _) = up()?;
            print_exports(&cluster);
            Ok(0)
        }
        Action::Down => {
            if !dir.exists() {
                eprintln!("[testbed] not running");
                return Ok(0);
            }
            down()?;
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

/// The long-lived control plane's directory.
pub fn dev_dir() -> std::path::PathBuf {
    target_dir().join("testbed").join("dev")
}

/// Starts the long-lived control plane unless it is running; returns it and whether this call started it.
pub fn up() -> anyhow::Result<(testenv::Cluster, bool)> {
    let dir = dev_dir();
    if dir.exists() {
        let mut cp = testenv::ControlPlane::adopt(&dir)?;
        if cp.status().iter().all(|(_, _, running)| *running) {
            eprintln!("[testbed] already running");
            return Ok((cp.cluster().clone(), false));
        }
        let _ = cp.stop();
        std::fs::remove_dir_all(&dir)?;
    }
    let harness = harness()?;
    let rt = runtime()?;
    let cp = rt.block_on(testenv::ControlPlane::start(&dir, &harness, true))?;
    eprintln!("[testbed] up at {}", cp.cluster().server);
    Ok((cp.cluster().clone(), true))
}

/// Stops the long-lived control plane and removes its directory.
pub fn down() -> anyhow::Result<()> {
    let dir = dev_dir();
    testenv::ControlPlane::adopt(&dir)?.stop()?;
    std::fs::remove_dir_all(&dir)?;
    Ok(())
}

fn print_exports(cluster: &testenv::Cluster) {
    println!("export KUBECONFIG={}", cluster.admin_kubeconfig.display());
    println!("export {}={}", testenv::ENV_TESTBED, cluster.dir.display());
}
