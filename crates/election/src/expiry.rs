//! Expiry by local observation, and the standby's decision (pure; no I/O).
//!
//! Remote timestamps are never trusted. Each time the observed record *changes* — its raw form differs
//! from the last one seen — the candidate notes its own monotonic [`tokio::time::Instant`]. The record
//! is expired at that instant plus the record's own `leaseDurationSeconds` (not the local config, as
//! client-go since 1.27), interpreted by [`RecordDuration`]:
//!
//! - missing, 0 or negative → expired at once;
//! - above [`MAX_LEASE_DURATION`](crate::MAX_LEASE_DURATION) → clamped to it (the elector logs a warning);
//! - an unreadable record (ConfigMap annotation that is not JSON) → the configured lease duration.
//!
//! Arithmetic never overflows: durations are bounded, and an unrepresentable instant counts as expired
//! at the observation instant.
//!
//! A standby acquires at once when the lock is missing, released (holder `""`, including `null` or
//! missing), or already held by its own identity (a restart, or a term that lapsed without anyone taking
//! over — the conditional write proves nobody did); otherwise at the expiry instant.
//!
//! A deletion is not a release. When the lock disappears after this candidate saw it held by someone
//! else, that record is waited out as if it were still there (its holder may still be acting, and
//! re-creates it at once if it is alive); only then is the lock created. A lock that was missing from
//! the first observation is created at once, as client-go does.

use std::time::Duration;

use tokio::time::Instant;

use crate::{
    lock::View,
    record::{RecordDuration, Snapshot},
};

/// What the standby should do next.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Decision {
    /// The lock has not been read yet: read it.
    Refresh,
    /// Acquire now (create when missing).
    Acquire,
    /// Nothing to do before this instant, unless the record changes first.
    WaitUntil(Instant),
}

/// What changed with an observation.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Change {
    /// The record (or its presence) changed; the expiry clock restarted.
    pub record: bool,
    /// The holder changed (`None` = missing or released).
    pub holder: Option<Option<String>>,
    /// The new record's duration was clamped from this many seconds.
    pub clamped_from: Option<i64>,
}

/// The last observed state of the lock and when it was observed to change.
#[derive(Clone, Debug, Default)]
pub(crate) struct Observer {
    last: Option<(View, Instant)>,
    /// While the lock is missing: the record seen before it was deleted, and when it was observed.
    before_deletion: Option<(Snapshot, Instant)>,
}

fn holder_of(view: &View) -> Option<String> {
    match view {
        View::Present(s) => s.record.holder().map(str::to_string),
        View::Missing | View::Unknown => None,
    }
}

impl Observer {
    /// Notes what the cache shows now. The instant restarts only when the record changed.
    pub(crate) fn observe(&mut self, view: View, now: Instant) -> Change {
        if view == View::Unknown {
            return Change::default();
        }
        let same = |a: &View, b: &View| match (a, b) {
            (View::Present(x), View::Present(y)) => x.raw == y.raw,
            (x, y) => x == y,
        };
        if let Some((last, _)) = &self.last
            && same(last, &view)
        {
            return Change::default();
        }
        let old_holder = self.last.as_ref().map(|(v, _)| holder_of(v));
        let new_holder = holder_of(&view);
        let clamped_from = match &view {
            View::Present(s) if !s.unreadable => match RecordDuration::of(s.record.lease_duration_seconds) {
                RecordDuration::Clamped { found } => Some(found),
                _ => None,
            },
            _ => None,
        };
        self.before_deletion = match (&self.last, &view) {
            (Some((View::Present(old), at)), View::Missing) => Some((old.clone(), *at)),
            (_, View::Missing) => self.before_deletion.take(),
            _ => None,
        };
        self.last = Some((view, now));
        Change {
            record: true,
            holder: (old_holder.as_ref() != Some(&new_holder)).then_some(new_holder),
            clamped_from,
        }
    }

    /// The last observed view, if any.
    pub(crate) fn view(&self) -> Option<&View> {
        self.last.as_ref().map(|(v, _)| v)
    }

    /// The holder last observed (`None` when unknown, missing or released).
    pub(crate) fn holder(&self) -> Option<String> {
        self.view().and_then(holder_of)
    }

    /// When the observed record expires; `None` when nothing is held.
    #[cfg(test)]
    pub(crate) fn expires_at(&self, unreadable_duration: Duration) -> Option<Instant> {
        let (View::Present(snapshot), at) = self.last.as_ref()? else {
            return None;
        };
        Some(expiry(snapshot, *at, unreadable_duration))
    }

    /// What a standby with `identity` should do at `now`.
    pub(crate) fn decide(&self, identity: &str, unreadable_duration: Duration, now: Instant) -> Decision {
        match &self.last {
            None => Decision::Refresh,
            Some((View::Unknown, _)) => Decision::Refresh,
            Some((View::Missing, _)) => match &self.before_deletion {
                // A deletion is not a release: someone else's record is waited out as if it had
                // not been deleted, because its holder may still be acting until then.
                Some((s, at)) if !s.record.is_released() && s.record.holder != identity => {
                    let expires = expiry(s, *at, unreadable_duration);
                    if now >= expires {
                        Decision::Acquire
                    } else {
                        Decision::WaitUntil(expires)
                    }
                }
                _ => Decision::Acquire,
            },
            Some((View::Present(s), at)) => {
                if s.record.is_released() || s.record.holder == identity {
                    return Decision::Acquire;
                }
                let expires = expiry(s, *at, unreadable_duration);
                if now >= expires {
                    Decision::Acquire
                } else {
                    Decision::WaitUntil(expires)
                }
            }
        }
    }
}

/// `observed_at + duration`, per the module rules.
fn expiry(snapshot: &Snapshot, observed_at: Instant, unreadable_duration: Duration) -> Instant {
    let duration = if snapshot.unreadable {
        unreadable_duration
    } else {
        RecordDuration::of(snapshot.record.lease_duration_seconds).duration()
    };
    observed_at.checked_add(duration).unwrap_or(observed_at)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::LeaderRecord;

    const CONFIGURED: Duration = Duration::from_secs(15);

    fn held(holder: &str, secs: Option<i64>, raw: &str) -> View {
        View::Present(Snapshot {
            record: LeaderRecord {
                holder: holder.into(),
                lease_duration_seconds: secs,
                ..LeaderRecord::default()
            },
            raw: raw.into(),
            unreadable: false,
        })
    }

    #[tokio::test(start_paused = true)]
    async fn expires_a_lease_duration_after_the_last_observed_change() {
        let mut o = Observer::default();
        let t0 = Instant::now();
        assert_eq!(o.decide("me", CONFIGURED, t0), Decision::Refresh);
        let c = o.observe(held("other", Some(15), "r1"), t0);
        assert!(c.record);
        assert_eq!(c.holder, Some(Some("other".into())));
        assert_eq!(
            o.decide("me", CONFIGURED, t0),
            Decision::WaitUntil(t0 + Duration::from_secs(15))
        );

        // The same record seen again does not restart the clock.
        tokio::time::advance(Duration::from_secs(10)).await;
        assert_eq!(
            o.observe(held("other", Some(15), "r1"), Instant::now()),
            Change::default()
        );
        assert_eq!(o.expires_at(CONFIGURED), Some(t0 + Duration::from_secs(15)));

        // A renewal (raw changes, same holder) restarts it, without a holder change.
        let t1 = Instant::now();
        let c = o.observe(held("other", Some(15), "r2"), t1);
        assert!(c.record);
        assert_eq!(c.holder, None);
        assert_eq!(
            o.decide("me", CONFIGURED, t1),
            Decision::WaitUntil(t1 + Duration::from_secs(15))
        );

        // Nothing for a whole duration: expired, exactly at the instant.
        tokio::time::advance(Duration::from_secs(15) - Duration::from_millis(1)).await;
        assert!(matches!(
            o.decide("me", CONFIGURED, Instant::now()),
            Decision::WaitUntil(_)
        ));
        tokio::time::advance(Duration::from_millis(1)).await;
        assert_eq!(o.decide("me", CONFIGURED, Instant::now()), Decision::Acquire);
    }

    #[tokio::test(start_paused = true)]
    async fn uses_the_record_duration_not_the_config() {
        let mut o = Observer::default();
        let t0 = Instant::now();
        o.observe(held("other", Some(60), "r"), t0);
        assert_eq!(o.expires_at(CONFIGURED), Some(t0 + Duration::from_secs(60)));
    }

    #[tokio::test(start_paused = true)]
    async fn released_missing_and_own_records_are_acquired_at_once() {
        let now = Instant::now();
        let mut o = Observer::default();
        o.observe(held("", Some(1), "released"), now);
        assert_eq!(o.decide("me", CONFIGURED, now), Decision::Acquire);
        assert_eq!(o.holder(), None);
        let mut o = Observer::default();
        o.observe(View::Missing, now);
        assert_eq!(o.decide("me", CONFIGURED, now), Decision::Acquire);
        let mut o = Observer::default();
        o.observe(held("me", Some(15), "mine"), now);
        assert_eq!(o.decide("me", CONFIGURED, now), Decision::Acquire);
    }

    #[tokio::test(start_paused = true)]
    async fn bad_durations() {
        let now = Instant::now();
        for secs in [None, Some(0), Some(-7)] {
            let mut o = Observer::default();
            o.observe(held("other", secs, "r"), now);
            assert_eq!(o.decide("me", CONFIGURED, now), Decision::Acquire, "{secs:?}");
        }
        let mut o = Observer::default();
        let c = o.observe(held("other", Some(i64::from(i32::MAX)), "r"), now);
        assert_eq!(c.clamped_from, Some(i64::from(i32::MAX)));
        assert_eq!(o.expires_at(CONFIGURED), Some(now + crate::MAX_LEASE_DURATION));
        let mut o = Observer::default();
        o.observe(held("other", Some(i64::MAX), "r"), now);
        assert_eq!(
            o.decide("me", CONFIGURED, now),
            Decision::WaitUntil(now + crate::MAX_LEASE_DURATION)
        );
    }

    #[tokio::test(start_paused = true)]
    async fn unreadable_record_holds_for_the_configured_duration() {
        let now = Instant::now();
        let mut o = Observer::default();
        o.observe(
            View::Present(Snapshot {
                record: LeaderRecord {
                    holder: crate::UNKNOWN_LEADER.into(),
                    ..LeaderRecord::default()
                },
                raw: "garbage".into(),
                unreadable: true,
            }),
            now,
        );
        assert_eq!(
            o.decide("me", CONFIGURED, now),
            Decision::WaitUntil(now + CONFIGURED)
        );
        tokio::time::advance(CONFIGURED).await;
        assert_eq!(o.decide("me", CONFIGURED, Instant::now()), Decision::Acquire);
    }

    #[tokio::test(start_paused = true)]
    async fn a_deletion_is_waited_out_like_the_record_it_removed() {
        let t0 = Instant::now();
        let mut o = Observer::default();
        o.observe(held("other", Some(15), "r1"), t0);
        tokio::time::advance(Duration::from_secs(5)).await;
        let c = o.observe(View::Missing, Instant::now());
        assert_eq!(c.holder, Some(None));
        assert_eq!(
            o.decide("me", CONFIGURED, Instant::now()),
            Decision::WaitUntil(t0 + Duration::from_secs(15))
        );
        // Seeing it missing again (a re-list) changes nothing.
        o.observe(View::Missing, Instant::now());
        assert_eq!(
            o.decide("me", CONFIGURED, Instant::now()),
            Decision::WaitUntil(t0 + Duration::from_secs(15))
        );
        tokio::time::advance(Duration::from_secs(10)).await;
        assert_eq!(o.decide("me", CONFIGURED, Instant::now()), Decision::Acquire);

        // Deleting a released record, or one's own, leaves it free at once.
        let mut o = Observer::default();
        o.observe(held("", Some(1), "released"), Instant::now());
        o.observe(View::Missing, Instant::now());
        assert_eq!(o.decide("me", CONFIGURED, Instant::now()), Decision::Acquire);
        let mut o = Observer::default();
        o.observe(held("me", Some(15), "mine"), Instant::now());
        o.observe(View::Missing, Instant::now());
        assert_eq!(o.decide("me", CONFIGURED, Instant::now()), Decision::Acquire);

        // Re-created: the new record counts from now.
        let mut o = Observer::default();
        o.observe(held("other", Some(15), "r1"), Instant::now());
        o.observe(View::Missing, Instant::now());
        let t1 = Instant::now();
        o.observe(held("other", Some(15), "r2"), t1);
        o.observe(View::Missing, t1);
        assert_eq!(
            o.decide("me", CONFIGURED, t1),
            Decision::WaitUntil(t1 + Duration::from_secs(15))
        );
    }

    #[tokio::test(start_paused = true)]
    async fn unknown_is_ignored_and_missing_to_present_is_a_change() {
        let now = Instant::now();
        let mut o = Observer::default();
        assert_eq!(o.observe(View::Unknown, now), Change::default());
        assert_eq!(o.decide("me", CONFIGURED, now), Decision::Refresh);
        assert!(o.observe(View::Missing, now).record);
        assert_eq!(o.observe(View::Missing, now), Change::default());
        let c = o.observe(held("x", Some(15), "r"), now);
        assert_eq!(c.holder, Some(Some("x".into())));
        let c = o.observe(View::Missing, now);
        assert_eq!(c.holder, Some(None));
    }
}
