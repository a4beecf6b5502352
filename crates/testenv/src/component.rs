//! One process of the control plane (etcd, kube-apiserver or kube-controller-manager), which can be
//! stopped, killed, paused, resumed and restarted on its own.
//!
//! A component only ever signals a PID it started itself, or, for a control plane started by another
//! process (`cargo xtask control-plane down`), a PID recorded in the state file whose command line still
//! names this test bed's harness and directory, so that a recycled PID is never touched.

use std::{
    fs::OpenOptions,
    os::unix::process::CommandExt,
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
    time::{Duration, Instant},
};

use nix::{
    sys::signal::{Signal, kill},
    unistd::Pid,
};

use crate::{Error, Result};

/// The environment variable with which the harness is told to exit when its parent exits.
const ENV_PARENT_PID: &str = "HARNESS_PARENT_PID";

/// A process of the control plane.
#[derive(Debug)]
pub struct Component {
    name: String,
    program: PathBuf,
    args: Vec<String>,
    log: PathBuf,
    child: Option<Child>,
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
            child: None,
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
        self.child.as_ref().map(Child::id).or(self.adopted)
    }

    /// Starts the process. It is an error to start a running component.
    pub fn start(&mut self) -> Result<()> {
        if self.is_running() {
            return Err(self.error("already running"));
        }
        let log = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log)
            .map_err(Error::io("opening a component log", &self.log))?;
        let err = log
            .try_clone()
            .map_err(Error::io("opening a component log", &self.log))?;
        let mut cmd = Command::new(&self.program);
        cmd.args(&self.args)
            .stdin(Stdio::null())
            .stdout(log)
            .stderr(err)
            // Its own process group: a Ctrl-C in the terminal reaches xtask, which stops it in order.
            .process_group(0);
        if self.tie_to_parent {
            cmd.env(ENV_PARENT_PID, std::process::id().to_string());
        }
        let child = cmd
            .spawn()
            .map_err(Error::io("starting a component", &self.program))?;
        self.child = Some(child);
        self.adopted = None;
        Ok(())
    }

    /// Whether the process is alive (a paused process is alive).
    pub fn is_running(&mut self) -> bool {
        if let Some(child) = self.child.as_mut() {
            return matches!(child.try_wait(), Ok(None));
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
        self.signal(Signal::SIGKILL)?;
        self.wait_exit(Duration::from_secs(10))
    }

    /// Sends SIGTERM (and SIGCONT, in case it is paused) and waits up to `grace` for it to exit, then kills it.
    pub fn stop(&mut self, grace: Duration) -> Result<()> {
        if !self.is_running() {
            self.child = None;
            self.adopted = None;
            return Ok(());
        }
        self.signal(Signal::SIGTERM)?;
        let _ = self.signal(Signal::SIGCONT);
        if self.wait_exit(grace).is_err() {
            self.kill()?;
        }
        Ok(())
    }

    /// Stops the process and starts it again with the same flags.
    pub fn restart(&mut self, grace: Duration) -> Result<()> {
        self.stop(grace)?;
        self.start()
    }

    fn signal(&mut self, sig: Signal) -> Result<()> {
        let child_pid = self
            .child
            .as_mut()
            .map(|child| matches!(child.try_wait(), Ok(None)).then(|| child.id()));
        let pid = match (child_pid, self.adopted) {
            (Some(Some(pid)), _) => pid,
            (Some(None), _) => return Err(self.error(&format!("cannot send {sig}: the process has exited"))),
            (None, Some(pid)) if self.owns(pid) => pid,
            _ => return Err(self.error(&format!("cannot send {sig}: not running"))),
        };
        let raw = i32::try_from(pid).map_err(|_| self.error("PID out of range"))?;
        kill(Pid::from_raw(raw), sig).map_err(|e| self.error(&format!("sending {sig}: {e}")))
    }

    fn wait_exit(&mut self, timeout: Duration) -> Result<()> {
        let start = Instant::now();
        loop {
            let exited = match self.child.as_mut() {
                Some(child) => !matches!(child.try_wait(), Ok(None)),
                None => match self.adopted {
                    Some(pid) => !self.owns(pid),
                    None => true,
                },
            };
            if exited {
                self.child = None;
                self.adopted = None;
                return Ok(());
            }
            if start.elapsed() > timeout {
                return Err(self.error(&format!("did not exit within {timeout:?}")));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
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

impl Drop for Component {
    fn drop(&mut self) {
        if let Some(child) = self.child.as_mut()
            && self.tie_to_parent
        {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}
