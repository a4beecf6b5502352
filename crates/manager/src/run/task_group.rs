//! A group of tasks that stop together: cancelled, **awaited**, and aborted only past a bound.
//!
//! One group holds a term's gated runnables and every child they spawn; another holds the always-runnables.
//! Spawning and ending take the same lock, so a child spawned while the group is being stopped is either
//! tracked (and awaited) or refused with [`TermEnded`]: nothing outlives the group untracked.
//!
//! A task that fails (returns `Err` or panics) while its token is not cancelled is reported on the
//! failure channel; the manager treats that as fatal, as controller-runtime does. Errors after
//! cancellation are expected (a fenced write refused mid-stop) and only logged.

use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use futures::FutureExt;
use tokio::sync::mpsc;
use tokio::task::AbortHandle;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

/// What runnables return: any error, boxed.
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// Once a task is aborted, how long to wait for tokio to drop it before giving up on it.
const ABORT_GRACE: Duration = Duration::from_secs(1);

/// The term (or the group) has ended; nothing more can be spawned into it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("the term has ended: no new leader work can start in it")]
pub struct TermEnded;

/// A task that failed while it was supposed to be running.
#[derive(Debug)]
pub(crate) struct Failure {
    pub(crate) name: String,
    pub(crate) error: String,
}

/// How a group stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct StopReport {
    /// From cancellation until every task was gone (or the abort grace ran out).
    pub(crate) elapsed: Duration,
    /// How many tasks had to be aborted because they outlived the bound.
    pub(crate) aborted: usize,
    /// True when every task is gone; false if some ignored even abortion (blocking code).
    pub(crate) all_stopped: bool,
}

#[derive(Clone)]
pub(crate) struct TaskGroup {
    inner: Arc<Inner>,
}

struct Inner {
    token: CancellationToken,
    tracker: TaskTracker,
    state: Mutex<State>,
    failures: mpsc::UnboundedSender<Failure>,
}

#[derive(Default)]
struct State {
    ended: bool,
    tasks: Vec<(String, AbortHandle)>,
}

impl TaskGroup {
    pub(crate) fn new(failures: mpsc::UnboundedSender<Failure>) -> Self {
        Self {
            inner: Arc::new(Inner {
                token: CancellationToken::new(),
                tracker: TaskTracker::new(),
                state: Mutex::new(State::default()),
                failures,
            }),
        }
    }

    /// The group's token; every task's token is this one or a child of it.
    pub(crate) fn token(&self) -> &CancellationToken {
        &self.inner.token
    }

    /// Spawns `fut` as task `name`. `token` is the task's own token (the group's or a child of it): a
    /// failure after it was cancelled is not reported as fatal. `done` is cancelled when the task ends.
    pub(crate) fn spawn<F>(
        &self,
        name: String,
        token: CancellationToken,
        done: CancellationToken,
        fut: F,
    ) -> Result<(), TermEnded>
    where
        F: Future<Output = Result<(), BoxError>> + Send + 'static,
    {
        let mut state = self.inner.state.lock().unwrap_or_else(PoisonError::into_inner);
        if state.ended {
            return Err(TermEnded);
        }
        let failures = self.inner.failures.clone();
        let task_name = name.clone();
        let handle = self.inner.tracker.spawn(async move {
            let _done = done.drop_guard();
            let outcome = AssertUnwindSafe(fut).catch_unwind().await;
            let error = match outcome {
                Ok(Ok(())) => {
                    tracing::debug!(runnable = %task_name, "runnable returned");
                    return;
                }
                Ok(Err(e)) => e.to_string(),
                Err(panic) => format!("panicked: {}", panic_message(panic.as_ref())),
            };
            if token.is_cancelled() {
                tracing::info!(runnable = %task_name, %error, "runnable ended with an error while stopping");
            } else {
                tracing::error!(runnable = %task_name, %error, "runnable failed");
                let _ = failures.send(Failure {
                    name: task_name,
                    error,
                });
            }
        });
        state.tasks.retain(|(_, h)| !h.is_finished());
        state.tasks.push((name, handle.abort_handle()));
        Ok(())
    }

    /// Cancels every task and waits for all of them; past `bound`, aborts the rest and waits a little
    /// more. Refuses new tasks from the moment it is called.
    pub(crate) async fn stop(&self, bound: Duration) -> StopReport {
        let started = Instant::now();
        self.inner
            .state
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .ended = true;
        self.inner.token.cancel();
        self.inner.tracker.close();
        if tokio::time::timeout(bound, self.inner.tracker.wait())
            .await
            .is_ok()
        {
            return StopReport {
                elapsed: started.elapsed(),
                aborted: 0,
                all_stopped: true,
            };
        }
        let mut aborted = 0;
        for (name, handle) in &self
            .inner
            .state
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .tasks
        {
            if !handle.is_finished() {
                tracing::warn!(runnable = %name, bound_ms = crate::run::supervisor::millis(bound), "runnable did not stop in time; aborting");
                handle.abort();
                aborted += 1;
            }
        }
        let all_stopped = tokio::time::timeout(ABORT_GRACE, self.inner.tracker.wait())
            .await
            .is_ok();
        StopReport {
            elapsed: started.elapsed(),
            aborted,
            all_stopped,
        }
    }
}

fn panic_message(panic: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = panic.downcast_ref::<&str>() {
        (*s).to_owned()
    } else if let Some(s) = panic.downcast_ref::<String>() {
        s.clone()
    } else {
        "(non-string panic payload)".to_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    fn group() -> (TaskGroup, mpsc::UnboundedReceiver<Failure>) {
        let (tx, rx) = mpsc::unbounded_channel();
        (TaskGroup::new(tx), rx)
    }

    #[tokio::test(start_paused = true)]
    async fn stop_awaits_cooperative_tasks() {
        let (g, _rx) = group();
        let stopped = Arc::new(AtomicUsize::new(0));
        for i in 0..3u64 {
            let token = g.token().clone();
            let stopped = stopped.clone();
            g.spawn(
                format!("t{i}"),
                token.clone(),
                CancellationToken::new(),
                async move {
                    token.cancelled().await;
                    // Cleanup takes a while; stop must wait for it.
                    tokio::time::sleep(Duration::from_millis(100 * (i + 1))).await;
                    stopped.fetch_add(1, Ordering::SeqCst);
                    Ok(())
                },
            )
            .expect("spawn");
        }
        let report = g.stop(Duration::from_secs(5)).await;
        assert_eq!(stopped.load(Ordering::SeqCst), 3);
        assert_eq!(
            report,
            StopReport {
                elapsed: Duration::from_millis(300),
                aborted: 0,
                all_stopped: true
            }
        );
        assert_eq!(
            g.spawn(
                "late".into(),
                g.token().clone(),
                CancellationToken::new(),
                async { Ok(()) }
            ),
            Err(TermEnded)
        );
    }

    #[tokio::test(start_paused = true)]
    async fn stop_aborts_tasks_past_the_bound() {
        let (g, _rx) = group();
        let done = CancellationToken::new();
        g.spawn("stubborn".into(), g.token().clone(), done.clone(), async {
            tokio::time::sleep(Duration::from_secs(3600)).await;
            Ok(())
        })
        .expect("spawn");
        let report = g.stop(Duration::from_secs(2)).await;
        assert_eq!(report.aborted, 1);
        assert!(report.all_stopped);
        assert!(report.elapsed >= Duration::from_secs(2) && report.elapsed < Duration::from_secs(3));
        assert!(done.is_cancelled(), "done fires when an aborted task is dropped");
    }

    #[tokio::test]
    async fn failures_are_reported_only_while_running() {
        let (g, mut rx) = group();
        g.spawn("bad".into(), g.token().clone(), CancellationToken::new(), async {
            Err("boom".into())
        })
        .expect("spawn");
        let f = rx.recv().await.expect("failure");
        assert_eq!((f.name.as_str(), f.error.as_str()), ("bad", "boom"));

        g.spawn(
            "panics".into(),
            g.token().clone(),
            CancellationToken::new(),
            async {
                panic!("kaboom");
            },
        )
        .expect("spawn");
        let f = rx.recv().await.expect("failure");
        assert_eq!(f.error, "panicked: kaboom");

        let token = g.token().clone();
        g.spawn(
            "after-cancel".into(),
            token.clone(),
            CancellationToken::new(),
            async move {
                token.cancelled().await;
                Err("refused: not the leader".into())
            },
        )
        .expect("spawn");
        g.stop(Duration::from_secs(1)).await;
        assert!(rx.try_recv().is_err(), "an error after cancellation is not fatal");
    }

    #[tokio::test(start_paused = true)]
    async fn children_spawned_by_tasks_are_awaited_too() {
        let (g, _rx) = group();
        let child_stopped = Arc::new(AtomicUsize::new(0));
        let g2 = g.clone();
        let flag = child_stopped.clone();
        let parent_token = g.token().clone();
        g.spawn(
            "parent".into(),
            parent_token.clone(),
            CancellationToken::new(),
            async move {
                let child_token = g2.token().child_token();
                let t = child_token.clone();
                g2.spawn(
                    "child".into(),
                    child_token,
                    CancellationToken::new(),
                    async move {
                        t.cancelled().await;
                        tokio::time::sleep(Duration::from_millis(500)).await;
                        flag.fetch_add(1, Ordering::SeqCst);
                        Ok(())
                    },
                )?;
                parent_token.cancelled().await;
                Ok(())
            },
        )
        .expect("spawn");
        tokio::task::yield_now().await;
        let report = g.stop(Duration::from_secs(5)).await;
        assert_eq!(child_stopped.load(Ordering::SeqCst), 1);
        assert_eq!(report.elapsed, Duration::from_millis(500));
    }
}
