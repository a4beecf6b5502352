//! One child process that a test started: the single type behind every process the test bed runs (the
//! control plane's components, controller replicas, client-go candidates, PostgreSQL, the Go peers).
//!
//! A [`Process`] only ever signals its own child, and only while that child has not been reaped, so a
//! recycled PID is never touched. Its output goes to a log file (or to pipes the caller reads), every
//! error names the process and its log, and dropping it kills and reaps the child unless it was
//! [detached](Process::detach).

use std::{
    fs::OpenOptions,
    path::{Path, PathBuf},
    process::{Child, ChildStderr, ChildStdout, Command, ExitStatus, Stdio},
    time::{Duration, Instant},
};

use nix::{
    sys::signal::{Signal, kill},
    unistd::Pid,
};

use crate::{Error, Result};

/// How often an exit is polled for.
const POLL: Duration = Duration::from_millis(20);

/// Where a process's standard output and error go.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Output {
    /// Both into the log file, which is truncated first.
    Log,
    /// Both appended to the log file (a component restarted keeps one log).
    AppendLog,
    /// As the caller set them on the [`Command`]; the log path only names the process in errors.
    AsConfigured,
}

/// A child process, killed and reaped when dropped.
#[derive(Debug)]
pub struct Process {
    name: String,
    child: Child,
    log: PathBuf,
    exit: Option<ExitStatus>,
    detached: bool,
}

impl Process {
    /// Spawns `cmd` as the process `name`, with standard input closed and its output as `output` says.
    pub fn spawn(name: &str, mut cmd: Command, log: &Path, output: Output) -> Result<Process> {
        cmd.stdin(Stdio::null());
        if output != Output::AsConfigured {
            if let Some(dir) = log.parent() {
                std::fs::create_dir_all(dir).map_err(Error::io("creating a log directory", dir))?;
            }
            let out = OpenOptions::new()
                .create(true)
                .write(true)
                .append(output == Output::AppendLog)
                .truncate(output == Output::Log)
                .open(log)
                .map_err(Error::io("opening a process log", log))?;
            let err = out.try_clone().map_err(Error::io("opening a process log", log))?;
            cmd.stdout(out).stderr(err);
        }
        let child = cmd
            .spawn()
            .map_err(Error::io("starting a process", Path::new(cmd.get_program())))?;
        Ok(Process {
            name: name.to_owned(),
            child,
            log: log.to_path_buf(),
            exit: None,
            detached: false,
        })
    }

    /// The process's name, as errors give it.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Its PID (also after it exited, until it is dropped).
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Its log file.
    pub fn log(&self) -> &Path {
        &self.log
    }

    /// The log so far (empty when it cannot be read).
    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Its standard output, when the caller asked for a pipe ([`Output::AsConfigured`]).
    pub fn take_stdout(&mut self) -> Option<ChildStdout> {
        self.child.stdout.take()
    }

    /// Its standard error, when the caller asked for a pipe ([`Output::AsConfigured`]).
    pub fn take_stderr(&mut self) -> Option<ChildStderr> {
        self.child.stderr.take()
    }

    /// How it exited, once it has (it is reaped then); `None` while it runs.
    pub fn try_exit(&mut self) -> Option<ExitStatus> {
        if self.exit.is_none() {
            self.exit = self.child.try_wait().ok().flatten();
        }
        self.exit
    }

    /// Whether it is alive (a paused process is alive).
    pub fn is_running(&mut self) -> bool {
        self.try_exit().is_none()
    }

    /// Sends `sig`; an error when it has exited.
    pub fn signal(&mut self, sig: Signal) -> Result<()> {
        if self.try_exit().is_some() {
            return Err(self.error(&format!("cannot send {sig}: it has exited")));
        }
        let raw = i32::try_from(self.child.id()).map_err(|_| self.error("its PID is out of range"))?;
        kill(Pid::from_raw(raw), sig).map_err(|e| self.error(&format!("sending {sig}: {e}")))
    }

    /// Sends SIGSTOP: it freezes, its sockets stay open and unanswered.
    pub fn pause(&mut self) -> Result<()> {
        self.signal(Signal::SIGSTOP)
    }

    /// Sends SIGCONT after [`Process::pause`].
    pub fn resume(&mut self) -> Result<()> {
        self.signal(Signal::SIGCONT)
    }

    /// Sends SIGTERM, and SIGCONT in case it is paused, without waiting.
    pub fn terminate(&mut self) -> Result<()> {
        self.signal(Signal::SIGTERM)?;
        let _ = self.signal(Signal::SIGCONT);
        Ok(())
    }

    /// Kills it at once (SIGKILL) and reaps it; nothing to do when it has exited.
    pub fn kill(&mut self) {
        if self.try_exit().is_none() {
            let _ = self.child.kill();
            self.exit = self.child.wait().ok();
        }
    }

    /// Sends `sig` (and SIGCONT), waits up to `grace` for it to exit, then kills it. Returns how it
    /// exited; `None` when it had to be killed.
    pub fn stop_with(&mut self, sig: Signal, grace: Duration) -> Option<ExitStatus> {
        if let Some(status) = self.try_exit() {
            return Some(status);
        }
        if self.signal(sig).is_ok() {
            let _ = self.signal(Signal::SIGCONT);
        }
        match self.wait_exit(grace) {
            Ok(status) => Some(status),
            Err(_) => {
                self.kill();
                None
            }
        }
    }

    /// [`Process::stop_with`] SIGTERM.
    pub fn stop(&mut self, grace: Duration) -> Option<ExitStatus> {
        self.stop_with(Signal::SIGTERM, grace)
    }

    /// Waits up to `timeout` for it to exit, blocking the thread.
    pub fn wait_exit(&mut self, timeout: Duration) -> Result<ExitStatus> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(status) = self.try_exit() {
                return Ok(status);
            }
            if Instant::now() >= deadline {
                return Err(self.error(&format!("did not exit within {timeout:?}")));
            }
            std::thread::sleep(POLL);
        }
    }

    /// Waits up to `timeout` for it to exit, without blocking the runtime.
    pub async fn wait_exit_async(&mut self, timeout: Duration) -> Result<ExitStatus> {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            if let Some(status) = self.try_exit() {
                return Ok(status);
            }
            if tokio::time::Instant::now() >= deadline {
                return Err(self.error(&format!("did not exit within {timeout:?}")));
            }
            tokio::time::sleep(POLL).await;
        }
    }

    /// Lets the process outlive this handle (for `cargo xtask control-plane up`).
    pub fn detach(&mut self) {
        self.detached = true;
    }

    /// An error about this process that names its log.
    pub fn error(&self, message: &str) -> Error {
        Error::Component {
            component: self.name.clone(),
            message: message.to_owned(),
            log: self.log.clone(),
        }
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        if !self.detached {
            self.kill();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A fresh directory of this test's own under the system's temporary directory.
    fn scratch(test: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("testenv-process-{}-{test}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        dir
    }

    fn sh(script: &str, log: &Path) -> Process {
        let mut cmd = Command::new("sh");
        cmd.args(["-c", script]);
        match Process::spawn("sh", cmd, log, Output::Log) {
            Ok(p) => p,
            Err(e) => panic!("sh must start: {e}"),
        }
    }

    #[test]
    fn logs_output_and_reports_the_exit() {
        let log = scratch("exit").join("logs/echo.log");
        let mut p = sh("echo hello; exit 3", &log);
        let status = p.wait_exit(Duration::from_secs(10)).expect("it exits");
        assert_eq!(status.code(), Some(3));
        assert_eq!(p.log_text(), "hello\n");
        assert!(!p.is_running());
        let err = p
            .signal(Signal::SIGTERM)
            .expect_err("an exited process is not signalled");
        assert!(err.to_string().contains("it has exited"), "{err}");
    }

    #[test]
    fn stops_with_sigterm_and_kills_what_ignores_it() {
        let dir = scratch("stop");
        let mut polite = sh("sleep 30", &dir.join("polite.log"));
        assert!(polite.is_running());
        let status = polite.stop(Duration::from_secs(10)).expect("SIGTERM ends sleep");
        assert!(status.code().is_none(), "ended by a signal: {status:?}");

        let mut stubborn = sh(
            "trap '' TERM; echo ready; while :; do sleep 0.05; done",
            &dir.join("s.log"),
        );
        let start = Instant::now();
        while !stubborn.log_text().contains("ready") && start.elapsed() < Duration::from_secs(10) {
            std::thread::sleep(POLL);
        }
        assert!(
            stubborn.stop(Duration::from_millis(300)).is_none(),
            "it had to be killed"
        );
        assert!(!stubborn.is_running());
    }

    #[test]
    fn dropping_kills_the_child() {
        let p = sh("sleep 30", &scratch("drop").join("drop.log"));
        let pid = Pid::from_raw(i32::try_from(p.pid()).expect("a PID"));
        drop(p);
        // Reaped by the drop: no process with that PID is our child any more.
        assert!(nix::sys::wait::waitpid(pid, Some(nix::sys::wait::WaitPidFlag::WNOHANG)).is_err());
    }
}
