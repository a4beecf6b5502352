//! The gate: starts gated work when a term starts and stops it, awaited, when the term ends.
//!
//! ## Stop ordering
//!
//! 1. The term ends: the elector publishes `Following`, or the term's guard lapses (whichever the
//!    supervisor sees first; it does not wait for the elector when the guard's deadline passes), or a
//!    shutdown or a fatal runnable failure is asked for.
//! 2. On a lost term the fence is revoked at once, so no further write leaves this replica.
//! 3. The term's token is cancelled; every gated runnable and every child is awaited. Past a bound (the
//!    stop margin `lease − renew` for a lost term, `--graceful-shutdown-timeout` for a shutdown) the
//!    rest are aborted and awaited briefly.
//! 4. The stop is measured and logged; on a lost term a stop longer than the margin is a warning, as it
//!    means another replica may have been acting while this one still was.
//! 5. Only then: back to standby, or exit non-zero (`--on-lost-leadership`), or, on shutdown, let the
//!    elector release the Lease. If some work survived even abortion, the Lease is not released: it is
//!    left to expire.

use std::sync::Arc;
use std::time::Duration;

use election::{Elector, Guard, Leadership};
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::config::args::OnLostLeadership;
use crate::error::Error;
use crate::fence::{Fence, wall_clock};
use crate::run::health::Health;
use crate::run::runnable::GatedFn;
use crate::run::task_group::{Failure, StopReport, TaskGroup};
use crate::run::term::{TermContext, TermInfo};
use election::Timings;

/// Everything the gate needs, moved out of the manager when it runs.
pub(crate) struct Supervisor {
    pub(crate) gated: Vec<(String, GatedFn)>,
    pub(crate) client: kube::Client,
    /// The main client's config, from which each term's own client is built.
    pub(crate) config: kube::Config,
    /// Counts the term clients' requests.
    pub(crate) rest_metrics: crate::RestClientMetrics,
    pub(crate) identity: String,
    pub(crate) lease: Option<String>,
    pub(crate) timings: Timings,
    pub(crate) on_lost: OnLostLeadership,
    pub(crate) graceful: Duration,
    pub(crate) shutdown: CancellationToken,
    pub(crate) failures_tx: mpsc::UnboundedSender<Failure>,
    pub(crate) failures_rx: mpsc::UnboundedReceiver<Failure>,
}

/// A term whose work is running.
struct ActiveTerm {
    group: TaskGroup,
    fence: Fence,
    guard: Option<Guard>,
    /// The elector's `Term::started`, to recognise the term.
    term_started: Instant,
}

/// Why a term's work is stopping.
enum StopCause {
    /// The term ended under us, detected at `at`.
    Lost { at: Instant, reason: String },
    /// Shutdown (signal, failure, or the end of the run).
    Shutdown,
}

/// What woke the elected loop.
enum Event {
    Shutdown,
    Failure(Failure),
    Lapsed,
    Changed,
    WatchClosed,
    ElectorEnded(Result<Result<(), election::Error>, tokio::task::JoinError>),
}

/// How this replica last logged leadership, to log each change once.
#[derive(PartialEq, Eq)]
enum Seen {
    Leading(Instant),
    Following(Option<String>),
}

impl Supervisor {
    fn lease_name(&self) -> &str {
        self.lease.as_deref().unwrap_or("(leader election off)")
    }

    fn start_term(
        &self,
        guard: Option<Guard>,
        transitions: Option<i32>,
        term_started: Instant,
    ) -> ActiveTerm {
        let fence = match &guard {
            Some(g) => Fence::new(g.clone(), &self.identity, self.lease_name()),
            None => Fence::never_lapsing(&self.identity),
        };
        let group = TaskGroup::new(self.failures_tx.clone());
        // Each term's work gets its own client, fenced once more under kube's request buffer.
        let term_client = crate::config::client::term_client(&self.config, &fence, &self.rest_metrics)
            .unwrap_or_else(|e| {
                tracing::error!(error = %e, "cannot build the term's client; using the main client");
                self.client.clone()
            });
        let info = Arc::new(TermInfo {
            identity: self.identity.clone(),
            lease: self.lease.clone(),
            transitions,
            started: Instant::now(),
        });
        for (name, run) in &self.gated {
            let ctx = TermContext::new(
                name,
                term_client.clone(),
                fence.clone(),
                group.clone(),
                info.clone(),
            );
            let fut = run(ctx);
            // A fresh group accepts every spawn.
            let _ = group.spawn(name.clone(), group.token().clone(), CancellationToken::new(), fut);
        }
        tracing::info!(
            identity = %self.identity,
            lease = %self.lease_name(),
            runnables = self.gated.len(),
            "leader work started"
        );
        ActiveTerm {
            group,
            fence,
            guard,
            term_started,
        }
    }

    async fn stop_term(&self, term: ActiveTerm, cause: StopCause) -> StopReport {
        let margin = self.timings.stop_margin();
        match cause {
            StopCause::Lost { at, reason } => {
                term.fence.revoke("the term ended");
                let bound = margin.saturating_sub(at.elapsed());
                let report = term.group.stop(bound).await;
                let stop = at.elapsed();
                let deadline = term.guard.as_ref().map(Guard::deadline);
                let now = Instant::now();
                let before_deadline = deadline.is_none_or(|d| now <= d);
                // How long before another replica could acquire (sent + lease ≥ deadline + margin).
                let slack_ms = deadline.map_or(0, |d| signed_ms(d + margin, now));
                let fields = (millis(stop), millis(margin), report.aborted);
                if stop > margin || !report.all_stopped {
                    tracing::warn!(
                        identity = %self.identity, lease = %self.lease_name(), %reason,
                        stop_ms = fields.0, margin_ms = fields.1, aborted = fields.2, slack_ms,
                        stopped_before_guard_deadline = before_deadline,
                        guard_deadline = %deadline.map(wall_clock).unwrap_or_default(),
                        "leader work took longer than the stop margin to stop"
                    );
                } else {
                    tracing::info!(
                        identity = %self.identity, lease = %self.lease_name(), %reason,
                        stop_ms = fields.0, margin_ms = fields.1, aborted = fields.2, slack_ms,
                        stopped_before_guard_deadline = before_deadline,
                        guard_deadline = %deadline.map(wall_clock).unwrap_or_default(),
                        "leader work stopped after the term ended"
                    );
                }
                report
            }
            StopCause::Shutdown => {
                let report = term.group.stop(self.graceful).await;
                term.fence.revoke("the replica shut down");
                tracing::info!(
                    identity = %self.identity, lease = %self.lease_name(),
                    stop_ms = millis(report.elapsed),
                    graceful_timeout_ms = millis(self.graceful),
                    aborted = report.aborted,
                    all_stopped = report.all_stopped,
                    "leader work stopped for shutdown"
                );
                report
            }
        }
    }

    /// Leader election off: every gated runnable runs now, with a never-lapsing fence.
    pub(crate) async fn run_unelected(mut self) -> Result<(), Error> {
        tracing::info!(identity = %self.identity, "leader election is off: running all runnables");
        let term = self.start_term(None, None, Instant::now());
        let outcome = tokio::select! {
            () = self.shutdown.cancelled() => Ok(()),
            Some(f) = self.failures_rx.recv() => Err(Error::Runnable { name: f.name, error: f.error }),
        };
        let report = self.stop_term(term, StopCause::Shutdown).await;
        if !report.all_stopped {
            return Err(Error::StopIncomplete(report.aborted));
        }
        outcome
    }

    /// Leader election on: follow the elector, gate the work, release on shutdown.
    pub(crate) async fn run_elected(mut self, elector: Elector, health: Health) -> Result<(), Error> {
        let config = elector.config().clone();
        let mut leadership = elector.leadership();
        let (release_tx, elector_task) = spawn_elector(elector, health.clone());
        let mut elector_task = Some(elector_task);
        let mut active: Option<ActiveTerm> = None;
        let mut finished_term: Option<Instant> = None;
        let mut seen: Option<Seen> = None;
        let mut watch_open = true;

        let mut outcome: Result<(), Error> = loop {
            // Act on the current view.
            let view = leadership.borrow_and_update().clone();
            self.log_change(&view, &mut seen);
            let mut lost: Option<String> = None;
            match &view {
                Leadership::Leading { term } => {
                    if active.as_ref().is_some_and(|a| a.term_started != term.started()) {
                        lost = Some("a new term began before the old one was seen to end".to_owned());
                    } else if active.is_none()
                        && finished_term != Some(term.started())
                        && !self.shutdown.is_cancelled()
                        && term.guard().is_valid()
                    {
                        active = Some(self.start_term(
                            Some(term.guard()),
                            Some(term.transitions()),
                            term.started(),
                        ));
                    }
                }
                Leadership::Following { .. } if active.is_some() => {
                    lost = Some("the elector reports this replica is no longer leading".to_owned());
                }
                Leadership::Following { .. } => {}
            }
            if let Some(reason) = lost {
                if let Some(err) = self.lose(&mut active, &mut finished_term, reason).await {
                    break Err(err);
                }
                continue;
            }

            let guard = active.as_ref().and_then(|a| a.guard.clone());
            let event = tokio::select! {
                biased;
                () = self.shutdown.cancelled() => Event::Shutdown,
                Some(f) = self.failures_rx.recv() => Event::Failure(f),
                () = lapsed(guard) => Event::Lapsed,
                changed = leadership.changed(), if watch_open => {
                    if changed.is_ok() { Event::Changed } else { Event::WatchClosed }
                }
                result = join(&mut elector_task) => Event::ElectorEnded(result),
            };
            match event {
                Event::Shutdown => break Ok(()),
                Event::Failure(f) => {
                    break Err(Error::Runnable {
                        name: f.name,
                        error: f.error,
                    });
                }
                Event::Changed => {}
                Event::WatchClosed => watch_open = false,
                Event::Lapsed => {
                    let reason = active
                        .as_ref()
                        .and_then(|a| a.guard.as_ref())
                        .and_then(|g| g.check().err())
                        .map_or_else(|| "the term's guard lapsed".to_owned(), |e| e.reason.to_string());
                    if let Some(err) = self.lose(&mut active, &mut finished_term, reason).await {
                        break Err(err);
                    }
                }
                Event::ElectorEnded(result) => {
                    elector_task = None;
                    break Err(match result {
                        Ok(Ok(())) => Error::ElectorStopped(String::new()),
                        Ok(Err(e)) => Error::Election(e),
                        Err(e) => Error::ElectorStopped(format!(": {e}")),
                    });
                }
            }
        };

        // Shutdown (or a fatal error): stop leader work first, then let the elector release.
        let mut release = true;
        if let Some(term) = active.take() {
            let report = self.stop_term(term, StopCause::Shutdown).await;
            if !report.all_stopped {
                release = false;
                outcome = outcome.and(Err(Error::StopIncomplete(report.aborted)));
            }
        }
        if let Some(task) = elector_task {
            self.stop_elector(task, release_tx, release, &config).await;
            health.elector_stopped();
        }
        outcome
    }

    /// Lets the elector release the Lease (when `release`, leader work having stopped) and waits for it
    /// within the renew deadline and a request's timeout; otherwise drops it, so that the Lease expires.
    async fn stop_elector(
        &self,
        mut task: JoinHandle<Result<(), election::Error>>,
        release_tx: oneshot::Sender<()>,
        release: bool,
        config: &election::ElectionConfig,
    ) {
        if !release {
            // Dropping the elector without resolving its shutdown never releases the Lease.
            task.abort();
            tracing::warn!(identity = %self.identity, lease = %self.lease_name(),
                "leader work did not stop; the lease is not released and will expire");
            return;
        }
        let _ = release_tx.send(());
        let bound = config.timings.renew_deadline + config.timings.request_timeout();
        match tokio::time::timeout(bound, &mut task).await {
            Ok(Ok(Ok(()))) => tracing::info!(
                identity = %self.identity, lease = %self.lease_name(),
                release_on_cancel = config.release_on_cancel, "leader elector stopped"
            ),
            Ok(Ok(Err(e))) => tracing::warn!(error = %e, "leader elector ended with an error"),
            Ok(Err(e)) => tracing::warn!(error = %e, "leader elector task failed"),
            Err(_) => {
                tracing::warn!(bound_ms = millis(bound), "leader elector did not stop in time");
                task.abort();
            }
        }
    }

    /// Stops the active term as lost. Returns the error to exit with in `exit` mode.
    async fn lose(
        &self,
        active: &mut Option<ActiveTerm>,
        finished_term: &mut Option<Instant>,
        reason: String,
    ) -> Option<Error> {
        let term = active.take()?;
        let at = Instant::now();
        *finished_term = Some(term.term_started);
        self.stop_term(
            term,
            StopCause::Lost {
                at,
                reason: reason.clone(),
            },
        )
        .await;
        match self.on_lost {
            OnLostLeadership::Standby => {
                tracing::info!(identity = %self.identity, lease = %self.lease_name(), "back to standby");
                None
            }
            OnLostLeadership::Exit => Some(Error::LostLeadership {
                identity: self.identity.clone(),
                lease: self.lease_name().to_owned(),
                reason,
            }),
        }
    }

    /// One structured line per leadership change.
    fn log_change(&self, view: &Leadership, seen: &mut Option<Seen>) {
        let now = match view {
            Leadership::Leading { term } => Seen::Leading(term.started()),
            Leadership::Following { leader } => Seen::Following(leader.clone()),
        };
        if seen.as_ref() == Some(&now) {
            return;
        }
        match view {
            Leadership::Leading { term } => tracing::info!(
                identity = %self.identity, lease = %self.lease_name(), holder = %self.identity,
                transitions = term.transitions(), leading = true, "leadership changed: this replica leads"
            ),
            Leadership::Following { leader } => tracing::info!(
                identity = %self.identity, lease = %self.lease_name(),
                holder = %leader.as_deref().unwrap_or(""), leading = false,
                "leadership changed: this replica follows"
            ),
        }
        *seen = Some(now);
    }
}

/// Resolves when the guard lapses; never without a guard.
async fn lapsed(guard: Option<Guard>) {
    match guard {
        Some(g) => g.lapsed().await,
        None => std::future::pending().await,
    }
}

/// Awaits the elector task, or forever once it has been taken.
async fn join<T>(task: &mut Option<JoinHandle<T>>) -> Result<T, tokio::task::JoinError> {
    match task {
        Some(t) => t.await,
        None => std::future::pending().await,
    }
}

/// Whole milliseconds, as a log field (`u128` would be logged as a string).
pub(crate) fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// `a − b` in milliseconds, negative when `a` is earlier.
fn signed_ms(a: Instant, b: Instant) -> i64 {
    let ms = |d: Duration| i64::try_from(d.as_millis()).unwrap_or(i64::MAX);
    if a >= b { ms(a - b) } else { -ms(b - a) }
}

/// Runs `elector` on a task of its own until the returned sender resolves its shutdown (it then
/// releases the Lease when so configured); `health` learns when it stops.
fn spawn_elector(
    elector: Elector,
    health: Health,
) -> (oneshot::Sender<()>, JoinHandle<Result<(), election::Error>>) {
    let (release_tx, release_rx) = oneshot::channel::<()>();
    let task = tokio::spawn(async move {
        let result = elector
            .run(async move {
                let _ = release_rx.await;
            })
            .await;
        health.elector_stopped();
        result
    });
    (release_tx, task)
}
