//! One replica of a deployment: a local process of its binary.

use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use anyhow::{Context, Result};
use nix::sys::signal::Signal;
use testenv::process::{Output, Process};

/// One replica: a local process of a binary.
pub(super) struct Replica {
    pub(super) deployment: &'static str,
    pub(super) identity: String,
    pub(super) binary: PathBuf,
    pub(super) args: Vec<String>,
    pub(super) log: PathBuf,
    pub(super) process: Option<Process>,
    /// Left running when the demo exits (`--keep`).
    pub(super) detached: bool,
}

impl Replica {
    pub(super) fn spawn(&mut self) -> Result<()> {
        let mut cmd = Command::new(&self.binary);
        cmd.args(&self.args)
            .env("POD_NAME", &self.identity)
            .env_remove("KUBECONFIG")
            .env_remove("LEADER_ELECTION")
            .env_remove("POD_NAMESPACE")
            // Its own process group: Ctrl-C reaches the demo, which stops the replicas itself.
            .process_group(0);
        let mut process = Process::spawn(&self.identity, cmd, &self.log, Output::AppendLog)
            .with_context(|| format!("starting {}", self.binary.display()))?;
        if self.detached {
            process.detach();
        }
        self.process = Some(process);
        Ok(())
    }

    /// Leaves the process running when the demo exits (`--keep`).
    pub(super) fn detach(&mut self) {
        self.detached = true;
        if let Some(p) = self.process.as_mut() {
            p.detach();
        }
    }

    pub(super) fn pid(&self) -> Option<u32> {
        self.process.as_ref().map(Process::pid)
    }

    pub(super) fn running(&mut self) -> bool {
        self.process.as_mut().is_some_and(Process::is_running)
    }

    pub(super) fn signal(&mut self, signal: Signal) -> Result<()> {
        let process = self.process.as_mut().context("the replica is not running")?;
        Ok(process.signal(signal)?)
    }

    /// Waits until the process has exited; false on time-out.
    pub(super) async fn exited(&mut self, timeout: Duration) -> bool {
        match self.process.as_mut() {
            Some(p) => p.wait_exit_async(timeout).await.is_ok(),
            None => true,
        }
    }

    /// SIGTERM (the replica releases its Lease and exits), SIGKILL after ten seconds.
    pub(super) async fn stop(&mut self) {
        if !self.running() {
            return;
        }
        let _ = self.signal(Signal::SIGTERM);
        if !self.exited(Duration::from_secs(10)).await
            && let Some(p) = self.process.as_mut()
        {
            p.kill();
        }
    }
}
