//! The demo's run: its state, the scenario in order, and waiting while the live view refreshes.

use std::io::IsTerminal;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{Result, bail, ensure};
use kube::Client;
use testenv::Cluster;

use super::Options;
use super::audit::AuditTail;
use super::cleanup::delete_examples;
use super::handover::Handover;
use super::replica::Replica;
use super::state::demo_dir;

#[derive(Debug, Default)]
pub(super) struct Results {
    pub(super) graceful: Option<Handover>,
    pub(super) crash: Option<Handover>,
    pub(super) propagated: Option<Duration>,
    pub(super) ready: Option<Duration>,
}

pub(super) struct Demo {
    pub(super) cluster: Cluster,
    pub(super) client: Client,
    pub(super) bin_dir: PathBuf,
    pub(super) options: Options,
    pub(super) started_control_plane: bool,
    pub(super) tty: bool,
    pub(super) wall: Instant,
    pub(super) replicas: Vec<Replica>,
    pub(super) events: Vec<String>,
    pub(super) audit: AuditTail,
    last_draw: Option<Instant>,
    pub(super) results: Results,
    /// Whether the example resources were deleted already (in `--ci`).
    pub(super) deleted: bool,
    /// Whether the scenario is through and only the live view runs (so Ctrl-C is the normal end).
    pub(super) running: bool,
}

impl Demo {
    pub(super) async fn new(
        cluster: Cluster,
        bin_dir: PathBuf,
        options: Options,
        started_control_plane: bool,
        wall: Instant,
    ) -> Result<Self> {
        let client = cluster.client().await?;
        let audit = AuditTail::new(&cluster.audit_log);
        Ok(Demo {
            tty: !options.ci && std::io::stdout().is_terminal(),
            cluster,
            client,
            bin_dir,
            options,
            started_control_plane,
            wall,
            replicas: Vec::new(),
            events: Vec::new(),
            audit,
            last_draw: None,
            results: Results::default(),
            deleted: false,
            running: false,
        })
    }

    /// Records a line of what happened: in the live view's log, or printed at once without a TTY.
    pub(super) fn note(&mut self, msg: impl Into<String>) {
        let line = format!("{:>6.1}s  {}", self.wall.elapsed().as_secs_f64(), msg.into());
        if !self.tty {
            println!("[demo] {line}");
        }
        self.events.push(line);
    }

    pub(super) async fn scenario(&mut self) -> Result<()> {
        std::fs::create_dir_all(demo_dir(&self.cluster.dir).join("logs"))?;
        self.install().await?;
        self.start_replicas().await?;
        self.apply_examples().await?;
        self.handovers().await?;
        if self.options.ci {
            self.print_view().await;
            delete_examples(&self.client, false, |m| {
                println!("[demo] {m}");
            })
            .await?;
            self.deleted = true;
            return Ok(());
        }
        if self.options.keep {
            return Ok(());
        }
        self.note("running; Ctrl-C cleans everything up (or run with --keep to leave it running)");
        self.running = true;
        let mut printed = Instant::now();
        loop {
            self.tick().await;
            // Without a TTY (output to a file or a pipe), a snapshot every 15 seconds.
            if !self.tty && printed.elapsed() >= Duration::from_secs(15) {
                self.print_view().await;
                printed = Instant::now();
            }
        }
    }

    /// Polls `f` until it returns `Some`, refreshing the live view meanwhile.
    pub(super) async fn wait<T, F, Fut>(&mut self, what: &str, timeout: Duration, mut f: F) -> Result<T>
    where
        F: FnMut(Client) -> Fut,
        Fut: Future<Output = Result<Option<T>>>,
    {
        let deadline = Instant::now() + timeout;
        let mut last_err = None;
        loop {
            match f(self.client.clone()).await {
                Ok(Some(v)) => return Ok(v),
                Ok(None) => {}
                Err(e) => last_err = Some(e),
            }
            for r in &mut self.replicas {
                ensure!(
                    r.running() || r.process.is_none(),
                    "replica {} exited; its log: {}",
                    r.identity,
                    r.log.display()
                );
            }
            if Instant::now() > deadline {
                bail!(
                    "timed out after {timeout:?} waiting for {what}{}",
                    last_err
                        .map(|e| format!(" (last error: {e:#})"))
                        .unwrap_or_default()
                );
            }
            self.tick().await;
        }
    }

    pub(super) async fn pause(&mut self, d: Duration) {
        let until = Instant::now() + d;
        while Instant::now() < until {
            self.tick().await;
        }
    }

    /// Reads the audit log, redraws the live view (at most twice a second, with a TTY) and sleeps a little.
    async fn tick(&mut self) {
        let _ = self.audit.poll();
        if self.tty
            && self
                .last_draw
                .is_none_or(|t| t.elapsed() >= Duration::from_millis(500))
        {
            let view = self.view().await;
            // Home, each line cleared to its end, the rest of the screen cleared: no flicker.
            let mut screen = String::from("\x1b[H");
            for line in view.lines() {
                screen.push_str(line);
                screen.push_str("\x1b[K\n");
            }
            screen.push_str("\x1b[J");
            print!("{screen}");
            use std::io::Write as _;
            let _ = std::io::stdout().flush();
            self.last_draw = Some(Instant::now());
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}
