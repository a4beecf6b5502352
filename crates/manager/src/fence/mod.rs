//! The fence: the one check every leader-only write makes first.
//!
//! A [`Fence`] wraps the term's [`election::Guard`]. With leader election off there is no guard and the
//! fence never lapses on its own. The manager also *revokes* a fence the moment it decides the term is over
//! (a `Following` from the elector, or the guard lapsing), so a write racing the stop is refused even in
//! the instant before the elector's own bookkeeping catches up.
//!
//! The check runs in the client's tower stack ([`crate::fence::gate`]); a refused write reaches the caller as a
//! [`kube::Error`], which [`is_not_leader`] recognises.

pub mod gate;

use std::sync::{Arc, OnceLock};
use std::time::SystemTime;

use election::Guard;
use tokio::time::Instant;

/// A write was refused because this replica's term has ended.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("not the leader: term of {identity} on lease {lease} ended at {ended_at} ({reason}); write refused")]
pub struct NotLeader {
    /// This replica's identity.
    pub identity: String,
    /// `namespace/name` of the Lease, or `(leader election off)`.
    pub lease: String,
    /// When the term ended, RFC 3339 UTC (wall clock, converted from the monotonic deadline).
    pub ended_at: String,
    /// Why it ended.
    pub reason: String,
}

/// Checks whether leader-only writes are still allowed. Cheap to clone.
#[derive(Clone, Debug)]
pub struct Fence {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    guard: Option<Guard>,
    identity: String,
    lease: String,
    revoked: OnceLock<(Instant, &'static str)>,
}

impl Fence {
    /// A fence over a term's guard.
    pub fn new(guard: Guard, identity: impl Into<String>, lease: impl Into<String>) -> Self {
        Self::build(Some(guard), identity.into(), lease.into())
    }

    /// A fence that only the manager's revocation (when the work stops) ends: for running without leader
    /// election.
    pub fn never_lapsing(identity: impl Into<String>) -> Self {
        Self::build(None, identity.into(), "(leader election off)".to_owned())
    }

    fn build(guard: Option<Guard>, identity: String, lease: String) -> Self {
        Self {
            inner: Arc::new(Inner {
                guard,
                identity,
                lease,
                revoked: OnceLock::new(),
            }),
        }
    }

    /// The term's guard; `None` with leader election off.
    pub fn guard(&self) -> Option<&Guard> {
        self.inner.guard.as_ref()
    }

    /// `Ok` while writes are allowed; otherwise why not, in words fit for an error log.
    pub fn check(&self) -> Result<(), NotLeader> {
        if let Some(&(at, reason)) = self.inner.revoked.get() {
            return Err(self.refusal(at, reason.to_owned()));
        }
        let Some(guard) = &self.inner.guard else {
            return Ok(());
        };
        guard.check().map_err(|lapsed| {
            let deadline = guard.deadline();
            let at = deadline.min(Instant::now());
            self.refusal(at, lapsed.reason.to_string())
        })
    }

    /// True while writes are allowed.
    pub fn is_valid(&self) -> bool {
        self.check().is_ok()
    }

    /// Ends the term for writes now; the first reason sticks. The manager calls it when a term ends.
    pub fn revoke(&self, reason: &'static str) {
        let _ = self.inner.revoked.set((Instant::now(), reason));
    }

    fn refusal(&self, at: Instant, reason: String) -> NotLeader {
        NotLeader {
            identity: self.inner.identity.clone(),
            lease: self.inner.lease.clone(),
            ended_at: wall_clock(at),
            reason,
        }
    }
}

/// True when `e` is the fence refusing a write (the term has ended), wherever in its source chain the
/// refusal sits: the one question callers ask of a failed write before reporting it. The refusal itself
/// is [`crate::fence::gate::refusal`].
pub fn is_not_leader(e: &kube::Error) -> bool {
    crate::fence::gate::refusal(e).is_some()
}

/// Formats a monotonic instant as the wall-clock time it corresponds to (RFC 3339, UTC).
pub(crate) fn wall_clock(at: Instant) -> String {
    let now = Instant::now();
    let wall = if at <= now {
        SystemTime::now().checked_sub(now - at)
    } else {
        SystemTime::now().checked_add(at - now)
    };
    wall.and_then(|w| jiff::Timestamp::try_from(w).ok())
        .map_or_else(|| "an unknown time".to_owned(), |t| format!("{t:.3}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn never_lapsing_fence_allows_until_revoked() {
        let f = Fence::never_lapsing("me");
        assert!(f.guard().is_none());
        assert!(f.is_valid());
        f.revoke("shutting down");
        f.revoke("ignored: first reason sticks");
        let e = f.check().expect_err("revoked");
        assert_eq!(e.identity, "me");
        assert_eq!(e.reason, "shutting down");
        let msg = e.to_string();
        assert!(
            msg.starts_with("not the leader: term of me on lease (leader election off) ended at "),
            "{msg}"
        );
        assert!(msg.ends_with("(shutting down); write refused"), "{msg}");
        assert!(e.ended_at.ends_with('Z'), "{}", e.ended_at);
    }

    #[test]
    fn clones_share_revocation() {
        let f = Fence::never_lapsing("me");
        let g = f.clone();
        f.revoke("lost");
        assert!(!g.is_valid());
    }
}
