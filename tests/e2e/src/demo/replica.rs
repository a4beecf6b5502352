//! One replica of a deployment: a local process of its binary.

use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use nix::sys::signal::Signal;
use nix::unistd::Pid;

/// One replica: a local process of a binary.
pub(super) struct Replica {
    pub(super) deployment: &'static str,
    pub(super) identity: String,
    pub(super) binary: PathBuf,
    pub(super) args: Vec<String>,
    pub(super) log: PathBuf,
    pub(super) child: Option<Child>,
    /// Left running when the demo exits (`--keep`).
    pub(super) detached: bool,
}

impl Replica {
    pub(super) fn spawn(&mut self) -> Result<()> {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log)
            .with_context(|| format!("opening {}", self.log.display()))?;
        let child = Command::new(&self.binary)
            .args(&self.args)
            .env("POD_NAME", &self.identity)
            .env_remove("KUBECONFIG")
            .env_remove("LEADER_ELECTION")
            .env_remove("POD_NAMESPACE")
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log)
            // Its own process group: Ctrl-C reaches the demo, which stops the replicas itself.
            .process_group(0)
            .spawn()
            .with_context(|| format!("starting {}", self.binary.display()))?;
        self.child = Some(child);
        Ok(())
    }

    pub(super) fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    pub(super) fn running(&mut self) -> bool {
        self.child
            .as_mut()
            .is_some_and(|c| matches!(c.try_wait(), Ok(None)))
    }

    pub(super) fn signal(&self, signal: Signal) -> Result<()> {
        let pid = self.pid().context("the replica is not running")?;
        nix::sys::signal::kill(Pid::from_raw(pid as i32), signal)
            .with_context(|| format!("sending {signal} to {}", self.identity))
    }

    /// Waits until the process has exited; false on time-out.
    pub(super) async fn exited(&mut self, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        while self.running() {
            if Instant::now() > deadline {
                return false;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        true
    }

    /// SIGTERM (the replica releases its Lease and exits), SIGKILL after ten seconds.
    pub(super) async fn stop(&mut self) {
        if !self.running() {
            return;
        }
        let _ = self.signal(Signal::SIGTERM);
        if !self.exited(Duration::from_secs(10)).await {
            let _ = self.signal(Signal::SIGKILL);
            self.exited(Duration::from_secs(5)).await;
        }
    }
}

impl Drop for Replica {
    fn drop(&mut self) {
        if self.detached {
            return;
        }
        if let Some(child) = self.child.as_mut()
            && matches!(child.try_wait(), Ok(None))
        {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}
