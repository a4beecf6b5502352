//! The [`Manager`]: owns the clients, the metrics, the admin server and the runnables, and runs them.

use std::net::SocketAddr;
use std::time::Duration;

use election::{Elector, ElectorBuilder};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::config::client::{BinaryInfo, Clients, user_agent};
use crate::config::settings::{Settings, usage_error};
use crate::error::Error;
use crate::metrics::Metrics;
use crate::run::admin::{AdminServer, AdminState, Endpoints};
use crate::run::health::{DEFAULT_HEALTH_TOLERANCE, Health};
use crate::run::own_pod;
use crate::run::readiness::Readiness;
use crate::run::runnable::{self, AlwaysContext, AlwaysFn, GatedFn};
use crate::run::supervisor::Supervisor;
use crate::run::task_group::{BoxError, Failure, TaskGroup};
use crate::run::term::TermContext;

type ElectorHook = Box<dyn FnOnce(ElectorBuilder) -> ElectorBuilder + Send>;

/// Builds a [`Manager`] with options beyond the flags.
#[must_use = "call build() to get a manager"]
pub struct ManagerBuilder {
    settings: Settings,
    binary: BinaryInfo,
    clients: Option<Clients>,
    elector_hook: Option<ElectorHook>,
    health_tolerance: Duration,
    handle_signals: bool,
}

impl ManagerBuilder {
    /// Uses these clients instead of building them from `--kubeconfig` (the user agent is then yours to set).
    pub fn clients(mut self, clients: Clients) -> Self {
        self.clients = Some(clients);
        self
    }

    /// Adjusts the elector beyond the flags, e.g. `|b| b.labels(labels).lock_kind(LockKind::ConfigMapAndLease)`.
    pub fn elector(mut self, hook: impl FnOnce(ElectorBuilder) -> ElectorBuilder + Send + 'static) -> Self {
        self.elector_hook = Some(Box::new(hook));
        self
    }

    /// How long past the lease duration a leader may go without a renewal before `/healthz` fails
    /// (default 20 s).
    pub fn health_tolerance(mut self, tolerance: Duration) -> Self {
        self.health_tolerance = tolerance;
        self
    }

    /// Whether [`Manager::run`] installs SIGTERM/SIGINT handlers (default true). Without them, use
    /// [`Manager::shutdown_token`].
    pub fn handle_signals(mut self, handle: bool) -> Self {
        self.handle_signals = handle;
        self
    }

    /// Builds the clients (unless given), the metrics registry and the elector, and binds the admin
    /// listeners. Must run inside a tokio runtime.
    pub async fn build(self) -> Result<Manager, Error> {
        let settings = self.settings;
        let clients = match self.clients {
            Some(c) => c,
            None => {
                let ua = user_agent(&self.binary, &settings.identity);
                let lease_kubeconfig = settings.leader_election_kubeconfig.as_deref();
                Clients::new(settings.kubeconfig.as_deref(), lease_kubeconfig, &ua).await?
            }
        };
        let metrics = Metrics::new()?;
        // client-go counts every request of the process, the Lease traffic too.
        let host = crate::metrics::rest::host_of(&clients.config.cluster_url);
        let rest = metrics.rest_client();
        let clients = Clients {
            main: rest.wrap(clients.main, &host),
            lease: rest.wrap(clients.lease, &host),
            config: clients.config,
        };
        let elector = match &settings.election {
            None => None,
            Some(e) => {
                let builder = ElectorBuilder::new(
                    clients.lease.clone(),
                    &e.namespace,
                    &e.lease_name,
                    &settings.identity,
                )
                .timings(settings.timings)
                .release_on_cancel(e.release_on_cancel)
                .metrics(metrics.registry());
                let builder = match self.elector_hook {
                    Some(hook) => hook(builder),
                    None => builder,
                };
                Some(builder.build().map_err(usage_error)?)
            }
        };
        let admin =
            AdminServer::bind(settings.metrics_bind_address, settings.health_probe_bind_address).await?;
        Ok(Manager {
            settings,
            clients,
            metrics,
            readiness: Readiness::default(),
            admin,
            elector,
            gated: Vec::new(),
            always: Vec::new(),
            shutdown: CancellationToken::new(),
            health_tolerance: self.health_tolerance,
            handle_signals: self.handle_signals,
        })
    }
}

/// controller-runtime's Manager: runs gated work while leading, always-work everywhere, serves the admin
/// endpoints and shuts down cleanly.
pub struct Manager {
    settings: Settings,
    clients: Clients,
    metrics: Metrics,
    readiness: Readiness,
    admin: AdminServer,
    elector: Option<Elector>,
    gated: Vec<(String, GatedFn)>,
    always: Vec<(String, AlwaysFn)>,
    shutdown: CancellationToken,
    health_tolerance: Duration,
    handle_signals: bool,
}

impl Manager {
    /// A builder for options beyond the flags. `binary` names the user agent's binary and version.
    pub fn builder(settings: Settings, binary: BinaryInfo) -> ManagerBuilder {
        ManagerBuilder {
            settings,
            binary,
            clients: None,
            elector_hook: None,
            health_tolerance: DEFAULT_HEALTH_TOLERANCE,
            handle_signals: true,
        }
    }

    /// A manager with default options; see [`ManagerBuilder::build`].
    pub async fn new(settings: Settings, binary: BinaryInfo) -> Result<Self, Error> {
        Self::builder(settings, binary).build().await
    }

    /// The settings it runs with.
    pub fn settings(&self) -> &Settings {
        &self.settings
    }

    /// This replica's identity.
    pub fn identity(&self) -> &str {
        &self.settings.identity
    }

    /// The controllers' (unfenced) client; gated work gets a fenced one in its [`TermContext`].
    pub fn client(&self) -> &kube::Client {
        &self.clients.main
    }

    /// The metrics (registry and reconcile helper).
    pub fn metrics(&self) -> &Metrics {
        &self.metrics
    }

    /// The bound admin addresses and what each serves.
    pub fn admin_addrs(&self) -> Vec<(SocketAddr, Endpoints)> {
        self.admin.local_addrs()
    }

    /// Cancelling this token shuts the manager down as a signal would.
    pub fn shutdown_token(&self) -> CancellationToken {
        self.shutdown.clone()
    }

    /// Registers a gated runnable: called at the start of every term, cancelled and awaited at its end.
    /// An error (or panic) while not cancelled shuts the manager down with [`Error::Runnable`].
    pub fn add_gated<F, Fut, E>(&mut self, name: impl Into<String>, run: F) -> &mut Self
    where
        F: Fn(TermContext) -> Fut + Send + Sync + 'static,
        Fut: std::future::Future<Output = Result<(), E>> + Send + 'static,
        E: Into<BoxError>,
    {
        self.gated.push((name.into(), runnable::gated(run)));
        self
    }

    /// Registers an always-runnable: started once on every replica, cancelled at shutdown after gated
    /// work. `/readyz` waits until it calls [`AlwaysContext::mark_ready`].
    pub fn add_always<F, Fut, E>(&mut self, name: impl Into<String>, run: F) -> &mut Self
    where
        F: FnOnce(AlwaysContext) -> Fut + Send + 'static,
        Fut: std::future::Future<Output = Result<(), E>> + Send + 'static,
        E: Into<BoxError>,
    {
        self.always.push((name.into(), runnable::always(run)));
        self
    }

    /// Runs until shutdown. `Ok` means a clean stop (exit 0): gated work stopped, Lease released if
    /// configured. See [`Error::exit_code`] for the rest.
    ///
    /// Order of events:
    /// 1. Signal handlers, then the always-runnables and the admin server start on every replica.
    /// 2. With leader election off, gated runnables start at once with a never-lapsing fence. With it on,
    ///    they start when the elector publishes `Leading` (never after a shutdown was asked for).
    /// 3. A term ends when the elector publishes `Following` or the term's guard lapses, whichever comes
    ///    first. The fence is revoked, then every gated runnable and child is cancelled and **awaited**
    ///    (aborted past the stop margin `lease − renew`). The stop is measured and logged, with a warning
    ///    if it exceeded the margin. Then the replica is a standby again, or `run` returns
    ///    [`Error::LostLeadership`] (`--on-lost-leadership=exit`).
    /// 4. On SIGTERM/SIGINT (or [`shutdown_token`](Self::shutdown_token)): gated work is cancelled and
    ///    awaited (aborted past `--graceful-shutdown-timeout`); only then is the elector told to stop, and
    ///    it releases the Lease if configured. If some work survived abortion, the Lease is not released.
    ///    Then always-runnables stop, the admin server last.
    /// 5. A runnable error or panic while running shuts down the same way and returns
    ///    [`Error::Runnable`].
    pub async fn run(self) -> Result<(), Error> {
        let Manager {
            settings,
            clients,
            metrics,
            readiness,
            admin,
            elector,
            gated,
            always,
            shutdown,
            health_tolerance,
            handle_signals,
        } = self;
        let signalled = CancellationToken::new();
        if handle_signals {
            crate::run::signals::install(shutdown.clone(), signalled.clone()).map_err(Error::Signals)?;
        }
        let own_pod = match (&settings.own_pod, &elector) {
            (Some(pod), Some(e)) => Some(tokio::spawn(own_pod::watch_own_pod(
                clients.main.clone(),
                pod.clone(),
                e.leadership(),
                shutdown.clone(),
            ))),
            _ => None,
        };
        let health = match &elector {
            Some(e) => {
                Health::with_election(e.leadership(), settings.timings.lease_duration, health_tolerance)
            }
            None => Health::without_election(),
        };

        let (failures_tx, failures_rx) = mpsc::unbounded_channel();
        let always_group = spawn_always(always, &clients.main, &readiness, failures_tx.clone());
        let rest_metrics = metrics.rest_client().clone();
        let admin_stop = CancellationToken::new();
        let admin_task = tokio::spawn(admin.serve(
            AdminState {
                health: health.clone(),
                readiness,
                metrics,
            },
            admin_stop.clone(),
        ));

        let supervisor = Supervisor {
            gated,
            client: clients.main.clone(),
            config: clients.config.clone(),
            rest_metrics,
            identity: settings.identity.clone(),
            lease: settings
                .election
                .as_ref()
                .map(|e| format!("{}/{}", e.namespace, e.lease_name)),
            timings: settings.timings,
            on_lost: settings.on_lost_leadership,
            graceful: settings.graceful_shutdown_timeout,
            shutdown: shutdown.clone(),
            failures_tx,
            failures_rx,
        };
        let outcome = match elector {
            None => supervisor.run_unelected().await,
            Some(elector) => supervisor.run_elected(elector, health).await,
        };

        // Left on the Pod's deletion: keep serving (webhooks, probes) until the kubelet's signal, so that
        // it finds no exited container to restart before it has seen the deletion itself.
        if let Some(task) = own_pod {
            wait_for_kubelet(task, handle_signals, &signalled).await;
        }

        // Always-runnables stop after leader work (and the release), the admin server last.
        let report = always_group.stop(settings.graceful_shutdown_timeout).await;
        if report.aborted > 0 {
            tracing::warn!(aborted = report.aborted, "always-runnables did not stop in time");
        }
        admin_stop.cancel();
        let _ = admin_task.await;
        match &outcome {
            Ok(()) => tracing::info!(identity = %settings.identity, "manager stopped"),
            Err(e) => {
                tracing::error!(identity = %settings.identity, error = %e, "manager stopped with an error")
            }
        }
        outcome
    }
}

/// Starts every always-runnable in a group of its own, each with its readiness registered.
fn spawn_always(
    always: Vec<(String, AlwaysFn)>,
    client: &kube::Client,
    readiness: &Readiness,
    failures_tx: mpsc::UnboundedSender<Failure>,
) -> TaskGroup {
    let group = TaskGroup::new(failures_tx);
    for (name, run) in always {
        let ctx = AlwaysContext {
            name: name.as_str().into(),
            client: client.clone(),
            token: group.token().clone(),
            ready: readiness.register(&name),
        };
        let _ = group.spawn(name, group.token().clone(), CancellationToken::new(), run(ctx));
    }
    group
}

/// After leaving on its own Pod's deletion, a replica keeps serving (webhooks, probes) until the
/// kubelet's signal, so that the kubelet finds no exited container to restart before it has seen the
/// deletion itself.
async fn wait_for_kubelet(
    task: tokio::task::JoinHandle<own_pod::Outcome>,
    handle_signals: bool,
    signalled: &CancellationToken,
) {
    let left = if task.is_finished() {
        matches!(task.await, Ok(own_pod::Outcome::LeftOnDeletion))
    } else {
        task.abort();
        false
    };
    if left && handle_signals {
        tracing::info!("leader work stopped and the lease released; waiting for SIGTERM to exit");
        signalled.cancelled().await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::args::Args;
    use crate::config::settings::Defaults;
    use crate::run::term::ChildHandle;
    use clap::Parser;
    use std::sync::{Arc, Mutex};

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        manager: Args,
    }

    /// A manager with leader election off, no listeners, no signal handlers, and a client pointing at a
    /// closed port (nothing here talks to an apiserver).
    async fn manager(extra: &[&str]) -> Manager {
        let argv = ["bin", "--metrics-bind-address=0", "--health-probe-bind-address=0"];
        let cli = Cli::try_parse_from(argv.iter().chain(extra)).expect("args");
        let settings = cli.manager.resolve(&Defaults::new("test")).expect("settings");
        let uri: http::Uri = "http://127.0.0.1:9".parse().expect("uri");
        let clients = Clients::from_config(kube::Config::new(uri)).expect("clients");
        Manager::builder(
            settings,
            BinaryInfo {
                name: "test",
                version: "0",
            },
        )
        .clients(clients)
        .handle_signals(false)
        .build()
        .await
        .expect("manager")
    }

    type Log = Arc<Mutex<Vec<String>>>;

    fn push(log: &Log, s: impl Into<String>) {
        log.lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .push(s.into());
    }

    #[tokio::test]
    async fn gated_work_and_children_stop_before_always_runnables() {
        let mut mgr = manager(&[]).await;
        let log: Log = Arc::default();
        let fences: Arc<Mutex<Vec<crate::Fence>>> = Arc::default();
        let children: Arc<Mutex<Vec<ChildHandle>>> = Arc::default();
        let (started_tx, started_rx) = tokio::sync::oneshot::channel();
        let started_tx = Arc::new(Mutex::new(Some(started_tx)));

        let l = log.clone();
        mgr.add_always("cache", move |ctx: AlwaysContext| async move {
            ctx.mark_ready();
            ctx.cancelled().await;
            push(&l, "always stopped");
            Ok::<(), BoxError>(())
        });
        let (l, f, c) = (log.clone(), fences.clone(), children.clone());
        mgr.add_gated("controller", move |ctx: TermContext| {
            let (l, f, c, tx) = (l.clone(), f.clone(), c.clone(), started_tx.clone());
            async move {
                assert!(ctx.term().lease.is_none() && ctx.fence().guard().is_none());
                f.lock().expect("lock").push(ctx.fence().clone());
                let lc = l.clone();
                let child = ctx.spawn_child("per-xrd", move |child: TermContext| async move {
                    child.cancelled().await;
                    tokio::time::sleep(Duration::from_millis(200)).await; // slow cleanup is awaited
                    push(&lc, "child stopped");
                    Ok::<(), BoxError>(())
                })?;
                c.lock().expect("lock").push(child);
                if let Some(tx) = tx.lock().expect("lock").take() {
                    let _ = tx.send(());
                }
                ctx.cancelled().await;
                tokio::time::sleep(Duration::from_millis(50)).await;
                push(&l, "gated stopped");
                Ok::<(), BoxError>(())
            }
        });
        let shutdown = mgr.shutdown_token();
        let run = tokio::spawn(mgr.run());
        started_rx.await.expect("gated work started");
        let fence = fences.lock().expect("lock")[0].clone();
        assert!(fence.is_valid());
        let child = children.lock().expect("lock")[0].clone();
        assert!(!child.is_finished());

        shutdown.cancel();
        run.await.expect("join").expect("clean stop");
        let log = log.lock().expect("lock").clone();
        assert_eq!(log.len(), 3, "{log:?}");
        assert_eq!(log[2], "always stopped", "always-runnables stop last: {log:?}");
        assert!(child.is_finished());
        assert!(
            !fence.is_valid(),
            "writes are refused once the term's work has stopped"
        );
    }

    #[tokio::test]
    async fn a_stopped_child_leaves_the_term_running() {
        let mut mgr = manager(&[]).await;
        let (tx, rx) = tokio::sync::oneshot::channel::<bool>();
        let tx = Arc::new(Mutex::new(Some(tx)));
        mgr.add_gated("parent", move |ctx: TermContext| {
            let tx = tx.clone();
            async move {
                let child = ctx.spawn_child("child", |c: TermContext| async move {
                    c.cancelled().await;
                    Ok::<(), BoxError>(())
                })?;
                child.stop();
                child.finished().await;
                if let Some(tx) = tx.lock().expect("lock").take() {
                    let _ = tx.send(ctx.is_cancelled());
                }
                ctx.cancelled().await;
                Ok::<(), BoxError>(())
            }
        });
        let shutdown = mgr.shutdown_token();
        let run = tokio::spawn(mgr.run());
        assert!(!rx.await.expect("child stopped"), "the parent's term goes on");
        shutdown.cancel();
        run.await.expect("join").expect("clean stop");
    }

    #[tokio::test]
    async fn a_failing_runnable_stops_the_manager_with_its_error() {
        let mut mgr = manager(&[]).await;
        let stopped = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let s = stopped.clone();
        mgr.add_gated("healthy", move |ctx: TermContext| {
            let s = s.clone();
            async move {
                ctx.cancelled().await;
                s.store(true, std::sync::atomic::Ordering::SeqCst);
                Ok::<(), BoxError>(())
            }
        });
        mgr.add_gated("broken", |_ctx: TermContext| async {
            Err::<(), _>("cannot reconcile")
        });
        let err = mgr.run().await.expect_err("fails");
        assert!(
            matches!(&err, Error::Runnable { name, error } if name == "broken" && error == "cannot reconcile")
        );
        assert_eq!(err.exit_code(), 1);
        assert!(
            stopped.load(std::sync::atomic::Ordering::SeqCst),
            "other work is stopped and awaited"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn graceful_timeout_bounds_the_stop() {
        let mut mgr = manager(&["--graceful-shutdown-timeout=3s"]).await;
        mgr.add_gated("stubborn", |_ctx: TermContext| async {
            tokio::time::sleep(Duration::from_secs(3600)).await;
            Ok::<(), BoxError>(())
        });
        let shutdown = mgr.shutdown_token();
        let run = tokio::spawn(mgr.run());
        tokio::time::sleep(Duration::from_millis(10)).await;
        let t0 = tokio::time::Instant::now();
        shutdown.cancel();
        run.await.expect("join").expect("aborted work counts as stopped");
        let took = t0.elapsed();
        assert!(
            took >= Duration::from_secs(3) && took < Duration::from_secs(4),
            "{took:?}"
        );
    }

    #[test]
    fn elector_config_errors_name_the_flag() {
        use election::ConfigError;
        let e = usage_error(ConfigError::Empty { field: "namespace" });
        assert_eq!(e.flag, "leader-election-namespace");
        let e = usage_error(ConfigError::ReservedIdentity);
        assert_eq!(e.flag, "leader-election-identity");
        let e = usage_error(ConfigError::LeaseNotAboveRenew {
            lease: Duration::from_secs(1),
            renew: Duration::from_secs(2),
        });
        assert_eq!(e.flag, "renew-deadline");
        assert_eq!(Error::from(e).exit_code(), 2);
    }
}
