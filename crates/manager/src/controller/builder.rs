//! A kube-runtime [`Controller`] for one term: [`ControllerBuilder`] wires the controller, its
//! reconcile metrics, per-object [`Backoff`] and error reporting in one place, and [`drive`]s it.
//!
//! Two gaps of kube-runtime that every controller of a manager would otherwise hit:
//!
//! - **Stopping before the cache synced.** `Controller::graceful_shutdown_on` ends the trigger stream
//!   and waits for in-flight reconciles, but kube holds the reconcile runner until the controller's
//!   cache has synced, and that wait does not end with the trigger stream. A controller whose first
//!   list never succeeds — its CustomResourceDefinition is not installed, or RBAC forbids the list — so
//!   ignores the end of its term, until the manager aborts it at the stop margin (a lost term) or at
//!   `--graceful-shutdown-timeout` (a SIGTERM, 30 s by default). [`drive`] drops such a controller as
//!   soon as the term ends: with its cache unsynced it has reconciled nothing, so nothing is cut short.
//! - **Watch errors are silent.** The controller stream yields the watchers' errors, and the watcher's
//!   own retry warnings are quieted by [`logging`](crate::config::logging). [`drive`] reports them: a Forbidden
//!   names the permission to grant, a 404 asks whether the CRD is installed, anything else carries the
//!   apiserver's message in words ([`api_error::explain_watch`], never a `Status` dump); at most one
//!   warning per minute, the rest at debug level.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use election::error_chain;
use futures::{FutureExt, Stream, StreamExt};
use kube::runtime::controller::Action;
use kube::runtime::{Controller, controller, reflector::Store, watcher};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::controller::api_error;
use crate::controller::backoff::Backoff;
use crate::controller::workqueue::WorkqueueMetrics;
use crate::metrics::{ReconcileMetrics, ReconcileResult};

/// How often the same controller warns about failing watches.
const WARN_EVERY: Duration = Duration::from_secs(60);

/// Drives `controller` (the stream of `Controller::run`, built with `graceful_shutdown_on(token)`) to
/// its end, logging watch errors under the controller's `name`. When `token` is cancelled while `store`
/// (the controller's cache, from `Controller::store`) has not synced yet, the controller is dropped at
/// once instead of waiting for a sync that may never come. Returns whether it was dropped that way.
pub async fn drive<K, T, E1, E2>(
    name: &str,
    token: &CancellationToken,
    store: Store<K>,
    controller: impl Stream<Item = Result<T, controller::Error<E1, E2>>>,
) -> bool
where
    K: kube::runtime::reflector::Lookup + Clone + 'static,
    K::DynamicType: Eq + std::hash::Hash + Clone,
    E1: std::error::Error + 'static,
    E2: std::error::Error + 'static,
{
    let mut last_warning: Option<Instant> = None;
    let run = controller.for_each(|item| {
        if let Err(controller::Error::QueueError(e)) = &item {
            let loud = last_warning.is_none_or(|at| at.elapsed() >= WARN_EVERY);
            if loud {
                last_warning = Some(Instant::now());
                tracing::warn!(controller = name, "{}", watch_error_message(e));
            } else {
                tracing::debug!(controller = name, error = %in_words(e), "watch failed again");
            }
        }
        futures::future::ready(())
    });
    let unsynced_stop = async {
        token.cancelled().await;
        if store.wait_until_ready().now_or_never().is_none() {
            return;
        }
        // Synced: kube's graceful shutdown finishes in-flight reconciles and ends the stream.
        std::future::pending::<()>().await;
    };
    tokio::select! {
        () = run => false,
        () = unsynced_stop => {
            tracing::info!(controller = name, "stopped before its cache synced (nothing was reconciled)");
            true
        }
    }
}

/// What a failing watch means and what to do about it.
fn watch_error_message(e: &(dyn std::error::Error + 'static)) -> String {
    let status = find_status(e);
    match status {
        Some(s) if s.is_forbidden() => format!(
            "cannot list or watch a resource this controller needs: forbidden; grant this process's \
             service account list and watch on it (a ClusterRole rule, bound to the service account) \
             ({})",
            s.message
        ),
        Some(s) if s.is_not_found() => format!(
            "cannot list or watch a resource this controller needs: the apiserver does not serve it; is \
             its CustomResourceDefinition installed? ({})",
            s.message
        ),
        _ => format!(
            "cannot list or watch a resource this controller needs; retrying with backoff: {}",
            in_words(e)
        ),
    }
}

/// A watch stream's error in words: the apiserver's message and what to do
/// ([`api_error::explain_watch`]) for a watch or API error in its source chain (never kube's
/// `Display`, which ends in a `Debug` dump of the `Status`), the chain itself for anything else.
fn in_words(e: &(dyn std::error::Error + 'static)) -> String {
    chain(e)
        .find_map(|err| {
            if let Some(w) = err.downcast_ref::<watcher::Error>() {
                return Some(api_error::explain_watch(w));
            }
            err.downcast_ref::<kube::Error>().map(api_error::explain)
        })
        .unwrap_or_else(|| error_chain(e))
}

/// `e` and its sources, outermost first.
fn chain<'a>(
    e: &'a (dyn std::error::Error + 'static),
) -> impl Iterator<Item = &'a (dyn std::error::Error + 'static)> {
    std::iter::successors(Some(e), |err| err.source())
}

/// The apiserver's Status in an error's source chain, if any.
fn find_status<'a>(e: &'a (dyn std::error::Error + 'static)) -> Option<&'a kube::core::Status> {
    chain(e).find_map(|err| {
        if let Some(kube::Error::Api(s)) = err.downcast_ref::<kube::Error>() {
            return Some(&**s);
        }
        match err.downcast_ref::<watcher::Error>()? {
            watcher::Error::InitialListFailed(kube::Error::Api(s))
            | watcher::Error::WatchStartFailed(kube::Error::Api(s))
            | watcher::Error::WatchFailed(kube::Error::Api(s)) => Some(&**s),
            watcher::Error::WatchError(s) => Some(&**s),
            _ => None,
        }
    })
}

/// What a reconcile error says about retrying it.
pub trait ReconcileError: std::error::Error + Send + Sync + 'static {
    /// The fence refused a write: the term is over. The object waits for the next term's controller.
    fn is_not_leader(&self) -> bool;

    /// Someone else wrote first (409): retry in a second, without a warning.
    fn is_conflict(&self) -> bool {
        false
    }

    /// Retrying cannot help (controller-runtime's `TerminalError`): counted in
    /// `controller_runtime_terminal_reconcile_errors_total`, logged, and not requeued; the object waits for
    /// a change.
    fn is_terminal(&self) -> bool {
        false
    }
}

/// How a reconcile run by [`ControllerBuilder`] failed.
#[derive(Debug, thiserror::Error)]
pub enum Failure<E: std::error::Error + 'static> {
    /// The reconcile returned an error.
    #[error(transparent)]
    Reconcile(E),
    /// The reconcile panicked; the panic was recovered (controller-runtime's default `RecoverPanic`).
    #[error("reconcile panicked: {0}")]
    Panic(String),
    /// The reconcile ran past the controller's timeout (controller-runtime's `ReconciliationTimeout`).
    #[error("reconcile timed out after {0:?}")]
    Timeout(Duration),
}

/// Runs one reconcile as controller-runtime's controller does: a panic is recovered and returned as
/// [`Failure::Panic`], and with a `timeout` the reconcile is cancelled when it runs past it.
pub async fn guarded<T, E: std::error::Error + 'static>(
    reconcile: impl Future<Output = Result<T, E>>,
    timeout: Option<Duration>,
) -> Result<T, Failure<E>> {
    let caught = std::panic::AssertUnwindSafe(reconcile).catch_unwind();
    let outcome = match timeout {
        Some(limit) => match tokio::time::timeout(limit, caught).await {
            Ok(outcome) => outcome,
            Err(_) => return Err(Failure::Timeout(limit)),
        },
        None => caught.await,
    };
    match outcome {
        Ok(result) => result.map_err(Failure::Reconcile),
        Err(payload) => {
            let message = payload
                .downcast_ref::<&str>()
                .map(|s| (*s).to_owned())
                .or_else(|| payload.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "(no message)".to_owned());
            Err(Failure::Panic(message))
        }
    }
}

/// How long a conflicting write waits before it is retried.
const CONFLICT_RETRY: Duration = Duration::from_secs(1);

/// What a reconcile that decides its own requeue returns ([`ControllerBuilder::run_requeues`]). It has
/// reported its own failures (conditions, events), so the builder times it, keeps the object's backoff
/// and puts it back in the work queue, but logs nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Requeue {
    /// Reconcile again after this long (a poll; `result="requeue_after"`).
    After(Duration),
    /// Reconcile again at once (`result="requeue"`).
    Immediately,
    /// Failed: reconcile again after the object's next backoff step (`result="error"`).
    Backoff,
    /// Done: wait for a change to the object (`result="success"`).
    Never,
    /// Not reconciled (held back by a rate limit, or the term ended first): back in the queue after this
    /// long, or wait for a change with `None`. Not counted as a reconcile.
    Skipped(Option<Duration>),
}

/// What a reconcile returned, in either of the builder's modes.
enum Verdict {
    /// [`ControllerBuilder::run`]: kube's `Action` (its errors go through the error policy).
    Action(Action),
    /// [`ControllerBuilder::run_requeues`].
    Requeue(Requeue),
}

/// The outcome mode has no reconcile errors: only a panic or a timeout reaches the error policy.
impl ReconcileError for std::convert::Infallible {
    fn is_not_leader(&self) -> bool {
        match *self {}
    }
}

/// One kube-runtime [`Controller`] run for one term, with reconcile metrics, per-object backoff and error
/// reporting in one place (kube-runtime's builder, plus what every controller of a manager needs):
///
/// ```text
/// ControllerBuilder::new("definition/compositeresourcedefinition", Controller::new(api, wc))
///     .metrics(&metrics)
///     .run(term.token(), reconcile, Arc::new(ctx))
///     .await;
/// ```
///
/// - every reconcile is timed into `controller_runtime_reconcile_*{controller}` (an `Ok` that waits for
///   a change is `success`, one that requeues is `requeue_after`, an `Err` is `error`; in the outcome
///   mode, [`Self::run_requeues`], by its [`Requeue`]), and the work queue into
///   `workqueue_*{name,controller}` as far as kube-runtime shows it ([`crate::controller::workqueue`]);
/// - a panicking reconcile is recovered, counted in `controller_runtime_reconcile_panics_total` and
///   retried with backoff, as controller-runtime does by default; with [`Self::timeout`] a reconcile that
///   runs too long is cancelled and counted in `controller_runtime_reconcile_timeouts_total`; an error
///   that says it is terminal ([`ReconcileError::is_terminal`]) is counted in
///   `controller_runtime_terminal_reconcile_errors_total` and not retried;
/// - an `Ok` forgets the object's failures; an `Err` is logged with its whole source chain and retried
///   after the object's next [`Backoff`] step, unless the term ended ([`ReconcileError::is_not_leader`]:
///   wait) or the write conflicted ([`ReconcileError::is_conflict`]: retry in a second, quietly); every
///   retry goes back into the work queue's series (`add_after`);
/// - the controller shuts down gracefully when the term's token is cancelled, and is dropped at once if
///   its cache never synced ([`drive`]).
#[must_use = "a controller does nothing until run() is awaited"]
pub struct ControllerBuilder<K>
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug + Send + Sync + 'static,
    K::DynamicType: Eq + std::hash::Hash + Clone,
{
    name: String,
    controller: Controller<K>,
    backoff: Backoff,
    metrics: Option<ReconcileMetrics>,
    timeout: Option<Duration>,
    workqueue: Option<WorkqueueMetrics>,
}

/// What the wrapped reconcile shares: the caller's context and the builder's policy.
struct Shared<Ctx> {
    ctx: Arc<Ctx>,
    name: String,
    backoff: Backoff,
    metrics: Option<ReconcileMetrics>,
    timeout: Option<Duration>,
    workqueue: Option<WorkqueueMetrics>,
}

impl<Ctx> Shared<Ctx> {
    /// Puts `key` back into the work queue's series after `delay` (where the queue is tracked).
    fn add_after(&self, key: &str, delay: Duration) {
        if let Some(w) = &self.workqueue {
            w.add_after(&self.name, key, delay);
        }
    }

    /// A failed reconcile of `key` will be retried after `delay`.
    fn retry(&self, key: &str, delay: Duration) {
        if let Some(w) = &self.workqueue {
            w.retry(&self.name);
        }
        self.add_after(key, delay);
    }

    /// What a finished reconcile of `key` means: its metrics label (`None`: nothing was reconciled) and
    /// the next step, the object's backoff kept.
    fn settle<E: std::error::Error + 'static>(
        &self,
        key: &str,
        result: Result<Verdict, Failure<E>>,
    ) -> (Option<ReconcileResult>, Result<Action, Failure<E>>) {
        let requeue = match result {
            Err(e) => return (Some(ReconcileResult::Error), Err(e)),
            Ok(Verdict::Action(action)) => {
                self.backoff.succeed(key);
                let ok = Ok(action);
                return (Some(result_of::<Failure<E>>(&ok)), ok);
            }
            Ok(Verdict::Requeue(requeue)) => requeue,
        };
        let (label, delay) = match requeue {
            Requeue::After(d) => (Some(ReconcileResult::RequeueAfter), Some(d)),
            Requeue::Immediately => (Some(ReconcileResult::Requeue), Some(Duration::ZERO)),
            Requeue::Never => (Some(ReconcileResult::Success), None),
            Requeue::Skipped(delay) => (None, delay),
            Requeue::Backoff => {
                let delay = self.backoff.fail(key);
                self.retry(key, delay);
                return (Some(ReconcileResult::Error), Ok(Action::requeue(delay)));
            }
        };
        if label.is_some() {
            self.backoff.succeed(key);
        }
        if let Some(delay) = delay {
            self.add_after(key, delay);
        }
        (
            label,
            Ok(delay.map_or_else(Action::await_change, Action::requeue)),
        )
    }

    /// kube-runtime's error policy: what a failed reconcile of `key` waits for.
    fn error_policy<E: ReconcileError>(&self, key: &str, e: &Failure<E>) -> Action {
        if let Failure::Reconcile(e) = e {
            if e.is_not_leader() {
                return Action::await_change();
            }
            if e.is_terminal() {
                if let Some(m) = &self.metrics {
                    m.terminal_error(&self.name);
                }
                tracing::warn!(controller = %self.name, object = %key, error = %error_chain(e), "reconcile failed; not retried until the object changes");
                return Action::await_change();
            }
        }
        let delay = if matches!(e, Failure::Reconcile(e) if e.is_conflict()) {
            CONFLICT_RETRY
        } else {
            tracing::warn!(controller = %self.name, object = %key, error = %error_chain(e), "reconcile failed");
            self.backoff.fail(key)
        };
        self.retry(key, delay);
        Action::requeue(delay)
    }
}

/// The result label of a reconcile, as controller-runtime names it.
pub fn result_of<E>(result: &Result<Action, E>) -> ReconcileResult {
    match result {
        Err(_) => ReconcileResult::Error,
        Ok(a) if *a == Action::await_change() => ReconcileResult::Success,
        Ok(_) => ReconcileResult::RequeueAfter,
    }
}

/// `obj`'s key in the work queue metrics and the backoff ([`object_key`]).
pub fn key<K: kube::Resource>(obj: &K) -> String {
    let meta = obj.meta();
    object_key(
        meta.namespace.as_deref(),
        meta.name.as_deref().unwrap_or_default(),
    )
}

/// An object's key in the work queue metrics and the backoff: `namespace/name`, or `name`.
pub fn object_key(namespace: Option<&str>, name: &str) -> String {
    match namespace {
        Some(ns) => format!("{ns}/{name}"),
        None => name.to_owned(),
    }
}

impl<K> ControllerBuilder<K>
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug + Send + Sync + 'static,
    K::DynamicType: Eq + std::hash::Hash + Clone + std::fmt::Debug + Unpin,
{
    /// A controller named `name` (the metrics' `controller` label and the logs') over `controller`
    /// (its watches and owns already set), with the default backoff (1 s doubling to 60 s).
    pub fn new(name: impl Into<String>, controller: Controller<K>) -> Self {
        Self {
            name: name.into(),
            controller,
            backoff: Backoff::default(),
            metrics: None,
            timeout: None,
            workqueue: None,
        }
    }

    /// Cancels a reconcile that runs longer than `limit` (controller-runtime's `ReconciliationTimeout`,
    /// off by default as there): it counts in `controller_runtime_reconcile_timeouts_total` and is
    /// retried with backoff.
    pub fn timeout(mut self, limit: Duration) -> Self {
        self.timeout = Some(limit);
        self
    }

    /// Sets the per-object backoff after failures.
    pub fn backoff(mut self, backoff: Backoff) -> Self {
        self.backoff = backoff;
        self
    }

    /// Records reconciles in `metrics` (the series of this controller start at zero), and the work
    /// queue in the [`WorkqueueMetrics`] linked to them (those of [`crate::Metrics`] are).
    pub fn metrics(mut self, metrics: &ReconcileMetrics) -> Self {
        metrics.register_controller(&self.name);
        self.metrics = Some(metrics.clone());
        match metrics.workqueue() {
            Some(w) => self.workqueue(w),
            None => self,
        }
    }

    /// Records the work queue's `workqueue_*{name,controller}` series in `workqueue`, as far as
    /// kube-runtime lets them be observed (see [`crate::controller::workqueue`]).
    pub fn workqueue(mut self, workqueue: &WorkqueueMetrics) -> Self {
        workqueue.register_controller(&self.name);
        self.workqueue = Some(workqueue.clone());
        self
    }

    /// Runs the controller until `token` is cancelled and in-flight reconciles have finished. Returns
    /// whether it was dropped before its cache synced (see [`drive`]).
    pub async fn run<Ctx, F, Fut, E>(self, token: &CancellationToken, mut reconcile: F, ctx: Arc<Ctx>) -> bool
    where
        Ctx: Send + Sync + 'static,
        F: FnMut(Arc<K>, Arc<Ctx>) -> Fut,
        Fut: Future<Output = Result<Action, E>> + Send + 'static,
        E: ReconcileError,
    {
        self.run_verdicts(
            token,
            move |obj, ctx| reconcile(obj, ctx).map(|r| r.map(Verdict::Action)),
            ctx,
        )
        .await
    }

    /// The outcome mode, for a reconcile that reports its own failures and decides its own requeue
    /// ([`Requeue`]); otherwise as [`Self::run`].
    pub async fn run_requeues<Ctx, F, Fut>(
        self,
        token: &CancellationToken,
        mut reconcile: F,
        ctx: Arc<Ctx>,
    ) -> bool
    where
        Ctx: Send + Sync + 'static,
        F: FnMut(Arc<K>, Arc<Ctx>) -> Fut,
        Fut: Future<Output = Requeue> + Send + 'static,
    {
        self.run_verdicts(
            token,
            move |obj, ctx| {
                reconcile(obj, ctx).map(|r| Ok::<_, std::convert::Infallible>(Verdict::Requeue(r)))
            },
            ctx,
        )
        .await
    }

    async fn run_verdicts<Ctx, F, Fut, E>(
        self,
        token: &CancellationToken,
        mut reconcile: F,
        ctx: Arc<Ctx>,
    ) -> bool
    where
        Ctx: Send + Sync + 'static,
        F: FnMut(Arc<K>, Arc<Ctx>) -> Fut,
        Fut: Future<Output = Result<Verdict, E>> + Send + 'static,
        E: ReconcileError,
    {
        let shared = Arc::new(Shared {
            ctx,
            name: self.name.clone(),
            backoff: self.backoff,
            metrics: self.metrics,
            timeout: self.timeout,
            workqueue: self.workqueue,
        });
        let workqueue = shared.workqueue.clone();
        let queue_metrics = workqueue.clone();
        let name = self.name.clone();
        let store = self.controller.store();
        let stream = self
            .controller
            .graceful_shutdown_on(token.clone().cancelled_owned())
            .run(
                move |obj: Arc<K>, shared: Arc<Shared<Ctx>>| {
                    let fut = reconcile(obj.clone(), shared.ctx.clone());
                    async move {
                        let key = key(obj.as_ref());
                        let _work = shared
                            .workqueue
                            .as_ref()
                            .map(|w| w.start_item(&shared.name, &key));
                        let started = std::time::Instant::now();
                        let result = guarded(fut, shared.timeout).await;
                        if let Some(m) = &shared.metrics {
                            match &result {
                                Err(Failure::Panic(_)) => m.panicked(&shared.name),
                                Err(Failure::Timeout(_)) => m.timed_out(&shared.name),
                                _ => {}
                            }
                        }
                        let (label, result) = shared.settle(&key, result);
                        if let (Some(m), Some(label)) = (&shared.metrics, label) {
                            m.observe(&shared.name, label, started.elapsed());
                        }
                        result
                    }
                },
                |obj: Arc<K>, e: &Failure<E>, shared: Arc<Shared<Ctx>>| {
                    shared.error_policy(&key(obj.as_ref()), e)
                },
                shared,
            )
            .inspect(move |item| {
                // kube-runtime let the object go without a reconcile: it left the queue.
                if let (Some(w), Err(controller::Error::ObjectNotFound(r))) = (&workqueue, item) {
                    w.dropped(&name, &object_key(r.namespace.as_deref(), &r.name));
                }
            });
        let dropped = drive(&self.name, token, store, stream).await;
        if let Some(w) = &queue_metrics {
            w.clear_queue(&self.name);
        }
        dropped
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, thiserror::Error)]
    #[error("outer")]
    struct Outer(#[source] std::io::Error);

    #[test]
    fn chain_joins_sources_without_repeats() {
        let e = Outer(std::io::Error::new(
            std::io::ErrorKind::ConnectionRefused,
            "refused",
        ));
        assert_eq!(error_chain(&e), "outer: refused");
    }

    #[test]
    fn results_map_to_controller_runtime_labels() {
        let ok = |a: Action| result_of::<std::io::Error>(&Ok(a));
        assert_eq!(ok(Action::await_change()), ReconcileResult::Success);
        assert_eq!(
            ok(Action::requeue(Duration::from_secs(1))),
            ReconcileResult::RequeueAfter
        );
        let err: Result<Action, std::io::Error> = Err(std::io::Error::other("x"));
        assert_eq!(result_of(&err), ReconcileResult::Error);
    }

    #[test]
    fn forbidden_and_not_found_say_what_to_do() {
        let status = |code: u16, reason: &str| {
            kube::core::Status::failure(&format!("{reason} message"), reason).with_code(code)
        };
        let forbidden =
            watcher::Error::InitialListFailed(kube::Error::Api(Box::new(status(403, "Forbidden"))));
        let m = watch_error_message(&forbidden);
        assert!(
            m.contains("grant this process's service account list and watch"),
            "{m}"
        );
        assert!(m.contains("Forbidden message"), "{m}");
        let missing = watcher::Error::InitialListFailed(kube::Error::Api(Box::new(status(404, "NotFound"))));
        let m = watch_error_message(&missing);
        assert!(m.contains("CustomResourceDefinition installed"), "{m}");
    }

    #[test]
    fn other_watch_failures_carry_the_apiservers_words_not_a_status_dump() {
        let overloaded =
            || kube::core::Status::failure("storage is (re)initializing", "TooManyRequests").with_code(429);
        let listed = watcher::Error::InitialListFailed(kube::Error::Api(Box::new(overloaded())));
        assert!(
            error_chain(&listed).contains("Status {"),
            "positive control: kube's Display dumps the Status"
        );
        for e in [listed, watcher::Error::WatchError(Box::new(overloaded()))] {
            let m = watch_error_message(&e);
            assert!(
                m.starts_with(
                    "cannot list or watch a resource this controller needs; retrying with backoff: \
                     storage is (re)initializing (the apiserver is overloaded"
                ),
                "{m}"
            );
            assert!(!m.contains("Status {") && !m.contains("ApiError"), "{m}");
        }
        let plain = std::io::Error::other("connection reset");
        assert!(watch_error_message(&plain).ends_with("connection reset"));
    }

    #[derive(Debug, thiserror::Error)]
    #[error("plain failure")]
    struct Plain;

    #[tokio::test]
    async fn guarded_recovers_panics_and_cuts_at_the_timeout() {
        let ok = guarded(async { Ok::<_, Plain>(1) }, None).await;
        assert!(matches!(ok, Ok(1)));
        let err = guarded(async { Err::<(), _>(Plain) }, None).await;
        assert!(matches!(err, Err(Failure::Reconcile(Plain))));
        let boom = guarded(
            async {
                if true {
                    panic!("boom {}", 42);
                }
                Ok::<(), Plain>(())
            },
            None,
        )
        .await;
        match boom {
            Err(Failure::Panic(m)) => assert_eq!(m, "boom 42"),
            other => panic!("expected a recovered panic, got {other:?}"),
        }
        let slow = guarded(
            async {
                std::future::pending::<()>().await;
                Ok::<(), Plain>(())
            },
            Some(Duration::from_millis(10)),
        )
        .await;
        assert!(matches!(slow, Err(Failure::Timeout(d)) if d == Duration::from_millis(10)));
        let err: Result<Action, Failure<Plain>> = Err(Failure::Panic("x".into()));
        assert_eq!(result_of(&err), ReconcileResult::Error);
    }

    fn shared() -> Shared<()> {
        Shared {
            ctx: Arc::new(()),
            name: "test".into(),
            backoff: Backoff::default(),
            metrics: None,
            timeout: None,
            workqueue: None,
        }
    }

    #[test]
    fn requeues_keep_the_backoff_and_label_the_result() {
        let s = shared();
        let settle = |r: Requeue| {
            let (label, action) = s.settle::<std::convert::Infallible>("k", Ok(Verdict::Requeue(r)));
            (label, action.ok())
        };
        let secs = |n| Some(Action::requeue(Duration::from_secs(n)));
        assert_eq!(settle(Requeue::Backoff), (Some(ReconcileResult::Error), secs(1)));
        assert_eq!(settle(Requeue::Backoff), (Some(ReconcileResult::Error), secs(2)));
        // Held back: not a reconcile, and the failures stay.
        assert_eq!(
            settle(Requeue::Skipped(Some(Duration::from_secs(5)))),
            (None, secs(5))
        );
        assert_eq!(
            settle(Requeue::Skipped(None)),
            (None, Some(Action::await_change()))
        );
        assert_eq!(s.backoff.failures("k"), 2);
        assert_eq!(
            settle(Requeue::After(Duration::from_secs(10))),
            (Some(ReconcileResult::RequeueAfter), secs(10))
        );
        assert_eq!(s.backoff.failures("k"), 0);
        assert_eq!(
            settle(Requeue::Immediately),
            (Some(ReconcileResult::Requeue), secs(0))
        );
        assert_eq!(
            settle(Requeue::Never),
            (Some(ReconcileResult::Success), Some(Action::await_change()))
        );
        // The result mode: an Ok forgets the failures, an Err is an error.
        s.backoff.fail("k");
        let (label, _) = s.settle::<Plain>("k", Ok(Verdict::Action(Action::await_change())));
        assert_eq!(
            (label, s.backoff.failures("k")),
            (Some(ReconcileResult::Success), 0)
        );
        let (label, _) = s.settle::<Plain>("k", Err(Failure::Reconcile(Plain)));
        assert_eq!(label, Some(ReconcileResult::Error));
    }
}
