//! The term guard: leader work's self-fencing check.
//!
//! A [`Guard`] is valid while `now < deadline` and the term has not been ended. The deadline is
//! `sent + renew_deadline`, where `sent` is the [`tokio::time::Instant`] captured just before the last
//! *successful* acquire or renew request was sent — never when its reply arrived. The guard needs no help
//! from the elector to lapse: when the apiserver stops answering, the guard turns invalid at the deadline
//! by the clock alone, and [`Guard::lapsed`] resolves then.
//!
//! The elector ends a term early ("revokes" it) when it sees someone else write the lock, when it
//! releases the lock on shutdown, or when its `run` future is dropped. A revoked guard never becomes
//! valid again; a new term gets a new guard.

use std::time::Duration;

use tokio::{sync::watch, time::Instant};

/// Why a term ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LapseReason {
    /// No renew succeeded before `sent + renew_deadline`.
    DeadlinePassed,
    /// Someone else wrote the lock (another holder, a release by hand, a re-creation after a deletion):
    /// the leader stepped down.
    SteppedDown,
    /// The elector released the lock on shutdown.
    Released,
    /// The elector's `run` future ended or was dropped.
    ElectorStopped,
}

impl std::fmt::Display for LapseReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            LapseReason::DeadlinePassed => "the renew deadline passed without a successful renew",
            LapseReason::SteppedDown => "someone else wrote the lock, so this candidate stepped down",
            LapseReason::Released => "the lock was released on shutdown",
            LapseReason::ElectorStopped => "the elector stopped running",
        })
    }
}

/// The leadership term has ended; leader work must stop and must not write.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("the leadership term has ended ({reason}); stop leader work and do not write")]
pub struct TermLapsed {
    /// Why it ended.
    pub reason: LapseReason,
}

#[derive(Clone, Copy, Debug)]
struct GuardState {
    last_sent: Instant,
    deadline: Instant,
    ended: Option<LapseReason>,
}

/// Reports whether the current leadership term is still valid. Cheap to clone; check it before every
/// write that only the leader may make.
#[derive(Clone, Debug)]
pub struct Guard {
    rx: watch::Receiver<GuardState>,
}

impl Guard {
    fn state(&self) -> GuardState {
        let mut state = *self.rx.borrow();
        if state.ended.is_none() && self.rx.has_changed().is_err() {
            state.ended = Some(LapseReason::ElectorStopped);
        }
        state
    }

    /// True while `now < deadline` and the term has not been ended.
    pub fn is_valid(&self) -> bool {
        self.check().is_ok()
    }

    /// `Ok` while the term is valid; otherwise why it ended.
    pub fn check(&self) -> Result<(), TermLapsed> {
        let state = self.state();
        if let Some(reason) = state.ended {
            return Err(TermLapsed { reason });
        }
        if Instant::now() >= state.deadline {
            return Err(TermLapsed {
                reason: LapseReason::DeadlinePassed,
            });
        }
        Ok(())
    }

    /// `sent + renew_deadline` of the last successful renew (or the acquire).
    pub fn deadline(&self) -> Instant {
        self.state().deadline
    }

    /// When the last successful renew (or the acquire) request was sent.
    pub fn last_renew_sent(&self) -> Instant {
        self.state().last_sent
    }

    /// Resolves when the term ends: at the deadline at the latest, even if the apiserver never answers,
    /// or earlier when the elector ends the term.
    pub async fn lapsed(&self) {
        let mut rx = self.rx.clone();
        loop {
            let state = *rx.borrow_and_update();
            if state.ended.is_some() || Instant::now() >= state.deadline {
                return;
            }
            tokio::select! {
                () = tokio::time::sleep_until(state.deadline) => {}
                changed = rx.changed() => {
                    if changed.is_err() {
                        return; // the elector is gone: the term ended
                    }
                }
            }
        }
    }
}

/// The elector's side of a guard: extends the deadline after each successful renew and ends the term.
#[derive(Debug)]
pub(crate) struct GuardControl {
    tx: watch::Sender<GuardState>,
    renew_deadline: Duration,
}

impl GuardControl {
    /// A new term whose acquire request was sent at `sent`.
    pub(crate) fn new(sent: Instant, renew_deadline: Duration) -> Self {
        let (tx, _) = watch::channel(GuardState {
            last_sent: sent,
            deadline: deadline(sent, renew_deadline),
            ended: None,
        });
        Self { tx, renew_deadline }
    }

    /// A guard for leader work.
    pub(crate) fn guard(&self) -> Guard {
        Guard {
            rx: self.tx.subscribe(),
        }
    }

    /// A renew sent at `sent` succeeded. Never moves the deadline backwards; does nothing once ended.
    pub(crate) fn renewed(&self, sent: Instant) {
        let renew_deadline = self.renew_deadline;
        self.tx.send_if_modified(|s| {
            if s.ended.is_some() || sent < s.last_sent {
                return false;
            }
            s.last_sent = sent;
            s.deadline = deadline(sent, renew_deadline);
            true
        });
    }

    /// The current deadline.
    pub(crate) fn deadline(&self) -> Instant {
        self.tx.borrow().deadline
    }

    /// Ends the term (first reason wins).
    pub(crate) fn end(&self, reason: LapseReason) {
        self.tx.send_if_modified(|s| {
            if s.ended.is_some() {
                return false;
            }
            s.ended = Some(reason);
            true
        });
    }
}

impl Drop for GuardControl {
    fn drop(&mut self) {
        self.end(LapseReason::ElectorStopped);
    }
}

/// `sent + renew_deadline`; a deadline that cannot be represented counts as already passed.
fn deadline(sent: Instant, renew_deadline: Duration) -> Instant {
    sent.checked_add(renew_deadline).unwrap_or(sent)
}

#[cfg(test)]
mod tests {
    use super::*;

    const RENEW: Duration = Duration::from_secs(10);

    #[tokio::test(start_paused = true)]
    async fn valid_until_sent_plus_renew_deadline() {
        let sent = Instant::now();
        let control = GuardControl::new(sent, RENEW);
        let guard = control.guard();
        assert!(guard.is_valid());
        assert_eq!(guard.deadline(), sent + RENEW);
        assert_eq!(guard.last_renew_sent(), sent);
        tokio::time::advance(RENEW - Duration::from_millis(1)).await;
        assert!(guard.is_valid());
        tokio::time::advance(Duration::from_millis(1)).await;
        assert_eq!(
            guard.check(),
            Err(TermLapsed {
                reason: LapseReason::DeadlinePassed
            })
        );
    }

    #[tokio::test(start_paused = true)]
    async fn renew_extends_from_sent_not_from_reply() {
        let start = Instant::now();
        let control = GuardControl::new(start, RENEW);
        let guard = control.guard();
        tokio::time::advance(Duration::from_secs(2)).await;
        let sent = Instant::now();
        tokio::time::advance(Duration::from_secs(3)).await; // slow reply
        control.renewed(sent);
        assert_eq!(guard.deadline(), sent + RENEW);
        // An older success never moves the deadline back.
        control.renewed(start);
        assert_eq!(guard.deadline(), sent + RENEW);
        assert_eq!(control.deadline(), sent + RENEW);
    }

    #[tokio::test(start_paused = true)]
    async fn lapsed_resolves_at_the_deadline_without_help() {
        let start = Instant::now();
        let control = GuardControl::new(start, RENEW);
        let guard = control.guard();
        guard.lapsed().await;
        assert_eq!(Instant::now(), start + RENEW);
        assert!(!guard.is_valid());
        drop(control);
    }

    #[tokio::test(start_paused = true)]
    async fn lapsed_follows_renewals_and_revocation() {
        let start = Instant::now();
        let control = GuardControl::new(start, RENEW);
        let guard = control.guard();
        let waiter = tokio::spawn({
            let guard = guard.clone();
            async move {
                guard.lapsed().await;
                Instant::now()
            }
        });
        tokio::time::advance(Duration::from_secs(5)).await;
        control.renewed(Instant::now()); // deadline now start + 15s
        tokio::time::advance(Duration::from_secs(7)).await;
        assert!(!waiter.is_finished());
        control.end(LapseReason::SteppedDown);
        let at = waiter.await.expect("waiter");
        assert_eq!(at, start + Duration::from_secs(12));
        let e = guard.check().expect_err("revoked");
        assert_eq!(e.reason, LapseReason::SteppedDown);
        assert!(e.to_string().contains("someone else wrote the lock"));
        // Ending is final, and renewals after it change nothing.
        control.end(LapseReason::Released);
        control.renewed(Instant::now());
        assert_eq!(
            guard.check(),
            Err(TermLapsed {
                reason: LapseReason::SteppedDown
            })
        );
    }

    #[tokio::test(start_paused = true)]
    async fn dropping_the_control_ends_the_term() {
        let control = GuardControl::new(Instant::now(), RENEW);
        let guard = control.guard();
        drop(control);
        assert_eq!(
            guard.check(),
            Err(TermLapsed {
                reason: LapseReason::ElectorStopped
            })
        );
        guard.lapsed().await;
    }
}
