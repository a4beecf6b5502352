//! One process of the control plane (etcd, kube-apiserver or kube-controller-manager), which can be
//! stopped, killed, paused, resumed and restarted on its own.
//!
//! A component only ever signals a PID it started itself, or, for a control plane started by another
//! process (`cargo xtask control-plane down`), a PID recorded in the state file whose command line still
//! names this test bed's harness and directory, so that a recycled PID is never touched.

use std::{
    os::unix::process::CommandExt,
    path::{Path, PathBuf},
    process::Command,
    time::{Duration, Instant},
};

use nix::{
    sys::signal::{Signal, kill},
    unistd::Pid,
};

use crate::{
    Error, Result,
    process::{Output, Process},
};

/// The environment variable with which the harness is told to exit when its parent exits.
const ENV_PARENT_PID: &str = "HARNESS_PARENT_PID";

/// A process of the control plane.
#[derive(Debug)]
pub struct Component {
    name: String,
    program: PathBuf,
    args: Vec<String>,
    log: PathBuf,
    process: Option<Process>,
    /// The PID of a process started by another process (see the module docs).
    adopted: Option<u32>,
    tie_to_parent: bool,
}

impl Component {
    pub(crate) fn new(name: &str, program: &Path, args: Vec<String>, log: PathBuf) -> Self {
        Component {
            name: name.to_string(),
            program: program.to_path_buf(),
            args,
            log,
            process: None,
            adopted: None,
            tie_to_parent: true,
        }
    }

    pub(crate) fn adopt(name: &str, program: &Path, log: PathBuf, pid: u32) -> Self {
        let mut c = Component::new(name, program, Vec::new(), log);
        c.adopted = Some(pid);
        c
    }

    /// Lets the process outlive this one (for `cargo xtask control-plane up`).
    pub(crate) fn detach_from_parent(&mut self) {
        self.tie_to_parent = false;
        if let Some(p) = self.process.as_mut() {
            p.detach();
        }
    }

    /// The component's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Its log file (stdout and stderr, appended across restarts).
    pub fn log(&self) -> &Path {
        &self.log
    }

    /// Its PID, while it runs.
    pub fn pid(&self) -> Option<u32> {
        self.process.as_ref().map(Process::pid).or(self.adopted)
    }

    /// Starts the process. It is an error to start a running component.
    pub fn start(&mut self) -> Result<()> {
        if self.is_running() {
            return Err(self.error("already running"));
        }
        let mut cmd = Command::new(&self.program);
        // Its own process group: a Ctrl-C in the terminal reaches xtask, which stops it in order.
        cmd.args(&self.args).process_group(0);
        if self.tie_to_parent {
            cmd.env(ENV_PARENT_PID, std::process::id().to_string());
        }
        let mut process = Process::spawn(&self.name, cmd, &self.log, Output::AppendLog)?;
        if !self.tie_to_parent {
            process.detach();
        }
        self.process = Some(process);
        self.adopted = None;
        Ok(())
    }

    /// Whether the process is alive (a paused process is alive).
    pub fn is_running(&mut self) -> bool {
        if let Some(p) = self.process.as_mut() {
            return p.is_running();
        }
        match self.adopted {
            Some(pid) => self.owns(pid),
            None => false,
        }
    }

    /// Sends SIGSTOP: the process freezes, its sockets stay open and unanswered.
    pub fn pause(&mut self) -> Result<()> {
        self.signal(Signal::SIGSTOP)
    }

    /// Sends SIGCONT after [`Component::pause`].
    pub fn resume(&mut self) -> Result<()> {
        self.signal(Signal::SIGCONT)
    }

    /// Sends SIGKILL and reaps the process.
    pub fn kill(&mut self) -> Result<()> {
        if let Some(p) = self.process.as_mut() {
            if !p.is_running() {
                return Err(self.error("cannot send SIGKILL: the process has exited"));
            }
            p.kill();
            self.process = None;
            return Ok(());
        }
        self.signal(Signal::SIGKILL)?;
        self.wait_adopted(Duration::from_secs(10))
    }

    /// Sends SIGTERM (and SIGCONT, in case it is paused) and waits up to `grace` for it to exit, then kills it.
    pub fn stop(&mut self, grace: Duration) -> Result<()> {
        if let Some(mut p) = self.process.take() {
            p.stop(grace);
            return Ok(());
        }
        if !self.is_running() {
            self.adopted = None;
            return Ok(());
        }
        self.signal(Signal::SIGTERM)?;
        let _ = self.signal(Signal::SIGCONT);
        if self.wait_adopted(grace).is_err() {
            self.signal(Signal::SIGKILL)?;
            self.wait_adopted(Duration::from_secs(10))?;
        }
        Ok(())
    }

    /// Stops the process and starts it again with the same flags.
    pub fn restart(&mut self, grace: Duration) -> Result<()> {
        self.stop(grace)?;
        self.start()
    }

    fn signal(&mut self, sig: Signal) -> Result<()> {
        if let Some(p) = self.process.as_mut() {
            return p.signal(sig);
        }
        let pid = match self.adopted {
            Some(pid) if self.owns(pid) => pid,
            _ => return Err(self.error(&format!("cannot send {sig}: not running"))),
        };
        let raw = i32::try_from(pid).map_err(|_| self.error("PID out of range"))?;
        kill(Pid::from_raw(raw), sig).map_err(|e| self.error(&format!("sending {sig}: {e}")))
    }

    /// Waits for an adopted process (not our child, so it cannot be reaped) to be gone.
    fn wait_adopted(&mut self, timeout: Duration) -> Result<()> {
        let start = Instant::now();
        while let Some(pid) = self.adopted {
            if !self.owns(pid) {
                self.adopted = None;
                break;
            }
            if start.elapsed() > timeout {
                return Err(self.error(&format!("did not exit within {timeout:?}")));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        Ok(())
    }

    /// Whether `pid` is alive and is this component's harness process (its command line names the
    /// harness binary and the subcommand).
    fn owns(&self, pid: u32) -> bool {
        let Ok(cmdline) = std::fs::read(format!("/proc/{pid}/cmdline")) else {
            return false;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            return false;
        };
        // A zombie (state Z) has exited.
        let state = stat.rsplit(')').next().and_then(|s| s.split_whitespace().next());
        if state == Some("Z") {
            return false;
        }
        let args: Vec<&[u8]> = cmdline.split(|b| *b == 0).collect();
        let program = self.program.as_os_str().as_encoded_bytes();
        args.first() == Some(&program) && args.get(1) == Some(&self.name.as_bytes())
    }

    fn error(&self, message: &str) -> Error {
        Error::Component {
            component: self.name.clone(),
            message: message.to_string(),
            log: self.log.clone(),
        }
    }
}
