//! The elector: one candidate's event loop.
//!
//! The loop waits for the first of: `shutdown`, the term's deadline (when leading), a watch event, or
//! its timer. The timer is the next renew when leading; when following it is the observed expiry
//! instant, or "now" when the lock is missing, released or ours, or after an error the retry instant.
//! Every request it makes is bounded by the per-request timeout, and a renew is additionally cut off at
//! the term's deadline, so the loop always reacts to the deadline on time.
//!
//! Leading:
//! - renew every `retry_period` with one replace carrying the cached resourceVersion (no GET);
//! - on 409: count `leader_election_slowpath_total`, GET, and replace again if the lock is still ours;
//! - on success: the guard's deadline becomes `sent + renew_deadline`;
//! - a failed renew is retried every `retry_period` until the deadline; at the deadline the term ends
//!   (guard revoked, `Following` published) whether or not a request is still in flight;
//! - a foreign write seen on the watch (another holder, holder `""`) ends the term at once;
//! - a deletion of the lock object seen on the watch (or a 404 on renew) makes the leader re-create it
//!   at once with its current record: the term goes on. Standbys of this crate wait out a deleted
//!   record as if it were still there (see `expiry`), so the leader's re-creation wins; if someone
//!   else re-created it first (a client-go standby creates a missing lock on its next poll), the create
//!   fails with AlreadyExists, the leader re-reads, sees the other holder and steps down.
//!
//! After any term ends the elector is a standby again; it never exits on a lost term. A candidate whose
//! own identity is still in the record (its deadline passed but nobody took over) acquires again at once;
//! the conditional write proves nobody else wrote in between.
//!
//! Shutdown: `shutdown` is polled first on every turn. When it resolves while leading, the guard is
//! revoked; with `release_on_cancel` the lock is released if the cached record is still ours — holder
//! `""`, `leaseDurationSeconds: 1`, times now, transitions kept — with a replace carrying the cached
//! resourceVersion; on 409 it re-reads once and releases only if the record is still ours. The release
//! is bounded by `renew_deadline`. `Following` is published when the guard is revoked, *before* the
//! release write, so that no observer ever sees this candidate leading after another could have
//! acquired. Then, once another candidate is seen holding the released lock (or after 250 ms, so that
//! the event's request does not compete with the successor's acquiring write), the `stopped leading`
//! event is posted (waited for up to one request timeout) and `run`
//! returns `Ok`. If an acquire completes just as
//! `shutdown` resolves, `Leading` is published and then immediately released.
//!
//! If the `run` future is dropped while leading, the term ends (guard revoked) and `Following` is
//! published; the lock is not released (nothing can be awaited in a drop) and expires.
//!
//! Errors never end `run`: they are logged and retried — after `retry_period` with jitter, or for
//! Forbidden with a doubling backoff up to 60 s and a message naming the verb, resource, namespace and
//! RBAC rule to add.

use std::{
    future::Future,
    hash::{BuildHasher, Hasher},
    time::Duration,
};

use jiff::Timestamp;
use tokio::{
    sync::{mpsc, watch},
    time::Instant,
};
use tracing::Instrument;

use crate::{
    config::ElectionConfig,
    error::Error,
    events::{Events, LeaderEvent},
    expiry::{Decision, Observer},
    guard::{GuardControl, LapseReason},
    leadership::{Leadership, Term},
    lock::{Lock, RequestError, View, WriteError},
    metrics::Metrics,
    record::LeaderRecord,
    warm::{self, WarmTask},
    watch::{self as lockwatch, Seen, WatchMsg, WatchTask},
};

/// A candidate in one election. Build it with [`ElectorBuilder`](crate::ElectorBuilder), subscribe to
/// [`Elector::leadership`], then drive [`Elector::run`].
pub struct Elector {
    client: kube::Client,
    config: ElectionConfig,
    metrics: Metrics,
    tx: watch::Sender<Leadership>,
}

impl std::fmt::Debug for Elector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Elector")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

impl Elector {
    pub(crate) fn new(client: kube::Client, config: ElectionConfig, metrics: Metrics) -> Self {
        let (tx, _) = watch::channel(Leadership::Following { leader: None });
        Self {
            client,
            config,
            metrics,
            tx,
        }
    }

    /// This candidate's leadership, updated on every change. Starts as `Following { leader: None }`.
    pub fn leadership(&self) -> watch::Receiver<Leadership> {
        self.tx.subscribe()
    }

    /// The validated configuration.
    pub fn config(&self) -> &ElectionConfig {
        &self.config
    }

    /// Competes until `shutdown` resolves; see the module docs. Resolve `shutdown` only after leader
    /// work has stopped: the lock may be released right after. Returns `Err` only when the election
    /// cannot continue at all; API failures are retried.
    pub async fn run(self, shutdown: impl Future<Output = ()> + Send) -> Result<(), Error> {
        let span = tracing::info_span!(
            "leader_election",
            identity = %self.config.identity,
            lease = %self.config.describe(),
            lock = self.config.lock_kind.client_go_name(),
            transitions = tracing::field::Empty,
        );
        let runner = Runner::new(self, span.clone());
        runner.run(shutdown).instrument(span).await
    }
}

struct Leading {
    control: GuardControl,
    next_renew: Instant,
    /// The record of this term's last successful write, re-created if the lock is deleted.
    record: LeaderRecord,
}

enum Role {
    Following,
    Leading(Leading),
}

enum Wake {
    Shutdown,
    Deadline,
    Watch(Option<WatchMsg>),
    Timer,
}

enum Renewal {
    Renewed(Instant, LeaderRecord),
    Lost(String),
    Failed(RequestError),
}

struct Runner {
    config: ElectionConfig,
    lock: Lock,
    observer: Observer,
    tx: watch::Sender<Leadership>,
    metrics: Metrics,
    events: Events,
    watch_rx: mpsc::Receiver<WatchMsg>,
    _watches: Vec<WatchTask>,
    _warm: Option<WarmTask>,
    role: Role,
    not_before: Option<Instant>,
    failures: u32,
    span: tracing::Span,
}

const FORBIDDEN_BACKOFF_MAX: Duration = Duration::from_secs(60);
/// How long a leader that has stopped waits for a successor to take the lock before it posts its
/// `stopped leading` event anyway: a watching standby takes a released lock within tens of
/// milliseconds, and a process with no successor exits at most this much later.
const SUCCESSOR_WAIT: Duration = Duration::from_millis(250);

async fn sleep_until_opt(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

/// `d × [1, 2.2)`, client-go's jitter factor 1.2.
fn jittered(d: Duration) -> Duration {
    let random = std::collections::hash_map::RandomState::new()
        .build_hasher()
        .finish();
    let frac = (random % 1_000_000) as f64 / 1_000_000.0;
    d + d.mul_f64(1.2 * frac)
}

impl Runner {
    fn new(elector: Elector, span: tracing::Span) -> Self {
        let Elector {
            client,
            config,
            metrics,
            tx,
        } = elector;
        let lock = Lock::new(client.clone(), &config);
        let (watch_tx, watch_rx) = mpsc::channel(16);
        let watches = lock
            .objects()
            .iter()
            .map(|which| {
                lockwatch::spawn(
                    lock.api(*which),
                    *which,
                    config.namespace.clone(),
                    config.name.clone(),
                    watch_tx.clone(),
                )
            })
            .collect();
        let warm = config.keep_warm.map(|period| {
            warm::spawn(
                client.clone(),
                tx.subscribe(),
                period,
                config.timings.request_timeout(),
            )
        });
        let events = Events::new(client, &config.identity, config.timings.request_timeout());
        metrics.set_leading(&config.name, false);
        Self {
            config,
            lock,
            observer: Observer::default(),
            tx,
            metrics,
            events,
            watch_rx,
            _watches: watches,
            _warm: warm,
            role: Role::Following,
            not_before: None,
            failures: 0,
            span,
        }
    }

    async fn run(mut self, shutdown: impl Future<Output = ()> + Send) -> Result<(), Error> {
        let mut shutdown = std::pin::pin!(shutdown);
        loop {
            let now = Instant::now();
            let (timer, deadline) = match &self.role {
                Role::Leading(l) => (Some(l.next_renew), Some(l.control.deadline())),
                Role::Following => (Some(self.follower_wake(now)), None),
            };
            let wake = tokio::select! {
                biased;
                () = &mut shutdown => Wake::Shutdown,
                () = sleep_until_opt(deadline) => Wake::Deadline,
                msg = self.watch_rx.recv() => Wake::Watch(msg),
                () = sleep_until_opt(timer) => Wake::Timer,
            };
            match wake {
                Wake::Shutdown => break,
                Wake::Deadline => self.step_down(
                    LapseReason::DeadlinePassed,
                    "no renew succeeded before the renew deadline".into(),
                ),
                Wake::Watch(None) => return Err(Error::WatchEnded),
                Wake::Watch(Some(msg)) => self.on_watch(msg),
                Wake::Timer => match self.role {
                    Role::Following => self.follower_turn().await,
                    Role::Leading(_) => self.renew().await,
                },
            }
        }
        self.shut_down().await;
        Ok(())
    }

    fn identity(&self) -> &str {
        &self.config.identity
    }

    // === following ===

    fn follower_wake(&self, now: Instant) -> Instant {
        let at = match self
            .observer
            .decide(self.identity(), self.config.timings.lease_duration, now)
        {
            Decision::Refresh | Decision::Acquire => now,
            Decision::WaitUntil(at) => at,
        };
        self.not_before.map_or(at, |nb| at.max(nb))
    }

    async fn follower_turn(&mut self) {
        match self.observer.decide(
            self.identity(),
            self.config.timings.lease_duration,
            Instant::now(),
        ) {
            Decision::WaitUntil(_) => {}
            Decision::Refresh => match self.lock.refresh().await {
                Ok(()) => {
                    self.succeeded();
                    self.observe();
                }
                Err(e) => self.failed(&e),
            },
            Decision::Acquire => self.acquire().await,
        }
    }

    async fn acquire(&mut self) {
        let observed = match self.lock.view() {
            View::Present(s) => Some(s.record),
            View::Missing => None,
            View::Unknown => return,
        };
        let record = LeaderRecord::claim(
            observed.as_ref(),
            &self.config.identity,
            self.config.timings.lease_duration_seconds(),
            Timestamp::now(),
        );
        let sent = Instant::now();
        match self.lock.write(&record).await {
            Ok(()) => {
                self.succeeded();
                self.observe();
                self.become_leader(sent, record);
            }
            Err(WriteError::Conflict(e) | WriteError::NotFound(e)) => {
                tracing::debug!(error = %e, "acquire lost a race; re-reading the lock");
                match self.lock.refresh().await {
                    Ok(()) => self.observe(),
                    Err(e) => self.failed(&e),
                }
            }
            Err(WriteError::Request(e)) => self.failed(&e),
        }
    }

    fn become_leader(&mut self, sent: Instant, record: LeaderRecord) {
        let transitions = record.transitions;
        let control = GuardControl::new(sent, self.config.timings.renew_deadline);
        if Instant::now() >= control.deadline() {
            tracing::warn!("acquired the lock too slowly to lead (renew deadline already passed); retrying");
            return;
        }
        let term = Term::new(control.guard(), transitions, sent);
        self.role = Role::Leading(Leading {
            control,
            next_renew: Instant::now() + self.config.timings.retry_period,
            record,
        });
        self.metrics.set_leading(&self.config.name, true);
        self.tx.send_replace(Leadership::Leading { term });
        self.span.record("transitions", transitions);
        tracing::info!(transitions, "became leader");
        self.events
            .post(LeaderEvent::BecameLeader, self.lock.object_refs());
    }

    fn succeeded(&mut self) {
        if self.failures > 0 {
            tracing::info!(failures = self.failures, "leader election requests succeed again");
        }
        self.failures = 0;
        self.not_before = None;
    }

    fn failed(&mut self, e: &RequestError) {
        self.failures = self.failures.saturating_add(1);
        let delay = if e.is_forbidden() {
            let exp = self.failures.saturating_sub(1).min(16);
            self.config
                .timings
                .retry_period
                .saturating_mul(1 << exp)
                .min(FORBIDDEN_BACKOFF_MAX)
        } else {
            jittered(self.config.timings.retry_period)
        };
        self.not_before = Some(Instant::now() + delay);
        if e.is_forbidden() || e.is_unreachable() {
            // One clear error per streak; the retries that follow are logged at debug.
            if self.failures == 1 {
                tracing::error!(retry_in = ?delay, "{e}");
            } else {
                tracing::debug!(retry_in = ?delay, failures = self.failures, "{e}");
            }
        } else {
            tracing::warn!(error = %e, retry_in = ?delay, "leader election request failed; retrying");
        }
    }

    // === leading ===

    async fn renew(&mut self) {
        let Role::Leading(leading) = &self.role else {
            return;
        };
        let deadline = leading.control.deadline();
        let outcome = tokio::select! {
            r = self.renew_once() => Some(r),
            () = tokio::time::sleep_until(deadline) => None,
        };
        match outcome {
            None => self.step_down(
                LapseReason::DeadlinePassed,
                "the renew request did not complete before the renew deadline".into(),
            ),
            Some(Renewal::Lost(why)) => self.step_down(LapseReason::SteppedDown, why),
            Some(Renewal::Renewed(sent, record)) => {
                if let Role::Leading(l) = &mut self.role {
                    l.control.renewed(sent);
                    l.next_renew = Instant::now() + self.config.timings.retry_period;
                    l.record = record;
                }
            }
            Some(Renewal::Failed(e)) => {
                if e.is_forbidden() {
                    tracing::error!("{e}");
                } else {
                    tracing::warn!(error = %e, "failed to renew the lease; retrying until the renew deadline");
                }
                if let Role::Leading(l) = &mut self.role {
                    l.next_renew = Instant::now() + self.config.timings.retry_period;
                }
            }
        }
    }

    fn ours(&self) -> Result<LeaderRecord, String> {
        match self.lock.view() {
            View::Present(s) if s.record.holder == self.config.identity => Ok(s.record),
            View::Present(s) if s.record.is_released() => Err("the lock was released by someone else".into()),
            View::Present(s) => Err(format!("{} holds the lock now", s.record.holder)),
            View::Missing => Err("the lock object was deleted".into()),
            View::Unknown => Err("the lock state is unknown".into()),
        }
    }

    /// The record a renew builds on: the cached one while it is ours, or this term's last written
    /// record when the lock is missing (deleted under the leader: it is re-created).
    fn renew_base(&self) -> Result<LeaderRecord, String> {
        let Role::Leading(leading) = &self.role else {
            return Err("not leading".into());
        };
        match self.lock.view() {
            View::Missing | View::Unknown => Ok(leading.record.clone()),
            View::Present(_) => self.ours(),
        }
    }

    async fn renew_once(&mut self) -> Renewal {
        let lease_secs = self.config.timings.lease_duration_seconds();
        let base = match self.renew_base() {
            Ok(r) => r,
            Err(why) => return Renewal::Lost(why),
        };
        let record = LeaderRecord::claim(Some(&base), &self.config.identity, lease_secs, Timestamp::now());
        let sent = Instant::now();
        let fallback = match self.lock.write(&record).await {
            Ok(()) => {
                self.observe();
                return Renewal::Renewed(sent, record);
            }
            Err(WriteError::Request(e)) => return Renewal::Failed(e),
            Err(WriteError::Conflict(e) | WriteError::NotFound(e)) => e,
        };
        // Slow path: someone wrote (or deleted) the lock since our last write. Re-read, and renew again
        // only if it is still ours (or re-create it if it is gone).
        self.metrics.slowpath(&self.config.name);
        tracing::debug!(error = %fallback, "renew conflicted; falling back to get and replace");
        if let Err(e) = self.lock.refresh().await {
            return Renewal::Failed(e);
        }
        self.observe();
        let base = match self.renew_base() {
            Ok(r) => r,
            Err(why) => return Renewal::Lost(why),
        };
        let record = LeaderRecord::claim(Some(&base), &self.config.identity, lease_secs, Timestamp::now());
        let sent = Instant::now();
        match self.lock.write(&record).await {
            Ok(()) => {
                self.observe();
                Renewal::Renewed(sent, record)
            }
            Err(WriteError::Conflict(e) | WriteError::NotFound(e) | WriteError::Request(e)) => {
                Renewal::Failed(e)
            }
        }
    }

    fn step_down(&mut self, reason: LapseReason, why: String) {
        let Role::Leading(leading) = std::mem::replace(&mut self.role, Role::Following) else {
            return;
        };
        leading.control.end(reason);
        self.metrics.set_leading(&self.config.name, false);
        let leader = self.observed_leader();
        self.tx.send_replace(Leadership::Following {
            leader: leader.clone(),
        });
        tracing::warn!(reason = %reason, detail = %why, leader = leader.as_deref().unwrap_or(""), "stopped leading");
        self.events
            .post(LeaderEvent::StoppedLeading, self.lock.object_refs());
    }

    // === observing ===

    fn observed_leader(&self) -> Option<String> {
        self.observer.holder().filter(|h| *h != self.config.identity)
    }

    /// Notes the cache's current record with the expiry clock; logs and publishes holder changes.
    fn observe(&mut self) {
        let change = self.observer.observe(self.lock.view(), Instant::now());
        if let Some(found) = change.clamped_from {
            tracing::warn!(
                lease_duration_seconds = found,
                clamped_to = crate::MAX_LEASE_DURATION.as_secs(),
                "the lock's leaseDurationSeconds is implausibly large; clamping it"
            );
        }
        if let Some(holder) = change.holder {
            if holder.as_deref() != Some(self.config.identity.as_str()) {
                tracing::info!(leader = holder.as_deref().unwrap_or(""), "observed a new leader");
            }
            if matches!(self.role, Role::Following) {
                let leader = self.observed_leader();
                self.tx.send_if_modified(|l| match l {
                    Leadership::Following { leader: current } if *current == leader => false,
                    _ => {
                        *l = Leadership::Following { leader };
                        true
                    }
                });
            }
        }
    }

    fn on_watch(&mut self, msg: WatchMsg) {
        let changed = match msg.seen {
            Seen::Applied(obj) => self.lock.accept(msg.which, *obj),
            Seen::Deleted(obj) => self.lock.accept_deleted(msg.which, &obj),
            Seen::Absent => self.lock.accept_absent(msg.which),
        };
        if !changed {
            return;
        }
        self.observe();
        if !matches!(self.role, Role::Leading(_)) {
            return;
        }
        match self.lock.view() {
            View::Unknown => {}
            // Deleted under the leader: re-create it now rather than at the next renew.
            View::Missing => {
                if let Role::Leading(l) = &mut self.role {
                    l.next_renew = Instant::now();
                }
            }
            View::Present(_) => {
                if let Err(why) = self.ours() {
                    self.step_down(LapseReason::SteppedDown, why);
                }
            }
        }
    }

    // === shutdown ===

    async fn shut_down(&mut self) {
        let Role::Leading(leading) = std::mem::replace(&mut self.role, Role::Following) else {
            return;
        };
        // The caller's leader work has stopped; end the term and say so before the lock can change hands.
        leading.control.end(if self.config.release_on_cancel {
            LapseReason::Released
        } else {
            LapseReason::ElectorStopped
        });
        self.metrics.set_leading(&self.config.name, false);
        self.tx.send_replace(Leadership::Following { leader: None });
        if self.config.release_on_cancel {
            let budget = self.config.timings.renew_deadline;
            if tokio::time::timeout(budget, self.release()).await.is_err() {
                tracing::warn!(budget = ?budget, "releasing the lock took too long; it will expire instead");
            }
        }
        tracing::info!(released = self.config.release_on_cancel, "stopped leading");
        if self.config.release_on_cancel {
            self.await_successor(SUCCESSOR_WAIT).await;
        }
        let posted = self
            .events
            .post(LeaderEvent::StoppedLeading, self.lock.object_refs());
        let _ = tokio::time::timeout(self.config.timings.request_timeout(), posted).await;
    }

    /// Waits until the lock is seen held by another candidate, or `bound` has passed. The `stopped
    /// leading` event is posted after this: posted at once, it would reach the apiserver together with
    /// a watching standby's acquiring write, and slow the handover down.
    async fn await_successor(&mut self, bound: Duration) {
        let until = Instant::now() + bound;
        while self.observed_leader().is_none() {
            tokio::select! {
                msg = self.watch_rx.recv() => match msg {
                    Some(msg) => self.on_watch(msg),
                    None => return,
                },
                () = tokio::time::sleep_until(until) => return,
            }
        }
    }

    async fn release(&mut self) {
        for attempt in 0..2 {
            let record = match self.ours() {
                Ok(r) => r.released(Timestamp::now()),
                Err(why) => {
                    tracing::info!(detail = %why, "not releasing the lock: it is no longer ours");
                    return;
                }
            };
            match self.lock.write(&record).await {
                Ok(()) => {
                    self.observe();
                    tracing::debug!("released the lock");
                    return;
                }
                Err(WriteError::Conflict(e)) if attempt == 0 => {
                    tracing::debug!(error = %e, "release conflicted; re-reading once");
                    if let Err(e) = self.lock.refresh().await {
                        tracing::warn!(error = %e, "cannot re-read the lock to release it; it will expire instead");
                        return;
                    }
                    self.observe();
                }
                Err(e) => {
                    tracing::warn!(error = %e, "cannot release the lock; it will expire instead");
                    return;
                }
            }
        }
    }
}

impl Drop for Runner {
    /// `run` ended or was dropped (cancelled): a term still open ends, and `Following` is the last
    /// value subscribers see.
    fn drop(&mut self) {
        if let Role::Leading(leading) = std::mem::replace(&mut self.role, Role::Following) {
            leading.control.end(LapseReason::ElectorStopped);
            self.metrics.set_leading(&self.config.name, false);
            self.tx.send_replace(Leadership::Following { leader: None });
            tracing::warn!("stopped leading: the elector stopped running");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn is_send<T: Send>(_: &T) {}
    fn is_send_sync<T: Send + Sync>() {}

    #[allow(dead_code)]
    fn run_future_is_send(elector: Elector) {
        is_send(&elector.run(std::future::ready(())));
    }

    #[test]
    fn published_types_are_send_and_sync() {
        is_send_sync::<Leadership>();
        is_send_sync::<crate::Guard>();
        is_send_sync::<Elector>();
    }

    #[test]
    fn jitter_stays_within_client_go_bounds() {
        let d = Duration::from_secs(2);
        for _ in 0..100 {
            let j = jittered(d);
            assert!(j >= d && j < d.mul_f64(2.2), "{j:?}");
        }
    }
}
