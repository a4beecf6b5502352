//! The leader record and its transitions (pure; no I/O).
//!
//! The record is client-go's `LeaderElectionRecord`: holder, lease duration, acquire and renew times, and
//! the transition count. Reading is lenient (see the crate docs for each bad-input case):
//!
//! - a holder that is `null`, missing, not a string, or `""` reads as `""`: released;
//! - a duration that is missing, not an integer, 0 or negative reads as "expired at once" (client-go
//!   treats a missing duration as 0); one above [`MAX_LEASE_DURATION`] is clamped to it;
//! - an unreadable time reads as "no time";
//! - a missing or unreadable transition count reads as 0, and counts outside `0..=i32::MAX` are clamped.
//!
//! Writing follows client-go's `tryAcquireOrRenew`: the holder is this identity, the duration is the
//! configured one, `renewTime` is now; `acquireTime` and `leaseTransitions` are kept while the same
//! holder renews, and on a change of holder `acquireTime` is now and transitions go up by one. A release
//! writes holder `""`, duration 1 s and both times now, keeping the transitions.

use std::time::Duration;

use jiff::Timestamp;

use crate::timings::MAX_LEASE_DURATION;

/// client-go's `UnknownLeader`: the holder reported when a MultiLock's two records disagree, and the
/// holder this crate reports for an unreadable ConfigMap record.
pub const UNKNOWN_LEADER: &str = "leaderelection.k8s.io/unknown";

/// A leader record as read from, or written to, a lock object.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct LeaderRecord {
    /// `""` when released (or null/missing on the wire).
    pub holder: String,
    /// As found; `None` when missing or unreadable.
    pub lease_duration_seconds: Option<i64>,
    pub acquire_time: Option<Timestamp>,
    pub renew_time: Option<Timestamp>,
    pub transitions: i32,
}

/// A record as observed on the lock, with what observers compare to detect a change.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Snapshot {
    pub record: LeaderRecord,
    /// The raw form of the record (JSON of the record fields, or the annotation text). Two observations
    /// are the same record exactly when their raw forms are equal, as in client-go.
    pub raw: String,
    /// The record could not be read at all (a ConfigMap annotation that is not JSON). It is treated as
    /// held by [`UNKNOWN_LEADER`] for one configured lease duration after it was observed.
    pub unreadable: bool,
}

/// How a record's `leaseDurationSeconds` is interpreted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum RecordDuration {
    /// A usable duration.
    Valid(Duration),
    /// Missing, 0 or negative: the record is expired as soon as it is observed.
    ExpiredAtOnce,
    /// Above [`MAX_LEASE_DURATION`]: clamped to it.
    Clamped { found: i64 },
}

impl RecordDuration {
    /// Interprets a raw `leaseDurationSeconds`.
    pub(crate) fn of(seconds: Option<i64>) -> Self {
        match seconds {
            None => RecordDuration::ExpiredAtOnce,
            Some(s) if s <= 0 => RecordDuration::ExpiredAtOnce,
            Some(s) => match u64::try_from(s) {
                Ok(secs) if Duration::from_secs(secs) <= MAX_LEASE_DURATION => {
                    RecordDuration::Valid(Duration::from_secs(secs))
                }
                _ => RecordDuration::Clamped { found: s },
            },
        }
    }

    /// The duration to add to the observation instant.
    pub(crate) fn duration(self) -> Duration {
        match self {
            RecordDuration::Valid(d) => d,
            RecordDuration::ExpiredAtOnce => Duration::ZERO,
            RecordDuration::Clamped { .. } => MAX_LEASE_DURATION,
        }
    }
}

impl LeaderRecord {
    /// True when nobody holds the record (holder `""`).
    pub(crate) fn is_released(&self) -> bool {
        self.holder.is_empty()
    }

    /// The holder, `None` when released.
    pub(crate) fn holder(&self) -> Option<&str> {
        (!self.holder.is_empty()).then_some(self.holder.as_str())
    }

    /// The record `identity` writes to acquire or renew, given the record it last observed (`None` when
    /// the lock does not exist yet).
    pub(crate) fn claim(
        observed: Option<&LeaderRecord>,
        identity: &str,
        lease_duration_seconds: i32,
        now: Timestamp,
    ) -> LeaderRecord {
        let (acquire_time, transitions) = match observed {
            None => (now, 0),
            Some(old) if old.holder == identity => (old.acquire_time.unwrap_or(now), old.transitions),
            Some(old) => (now, old.transitions.saturating_add(1)),
        };
        LeaderRecord {
            holder: identity.to_string(),
            lease_duration_seconds: Some(i64::from(lease_duration_seconds)),
            acquire_time: Some(acquire_time),
            renew_time: Some(now),
            transitions,
        }
    }

    /// The released form of `self`: holder `""`, duration 1 s, times now, transitions kept.
    pub(crate) fn released(&self, now: Timestamp) -> LeaderRecord {
        LeaderRecord {
            holder: String::new(),
            lease_duration_seconds: Some(1),
            acquire_time: Some(now),
            renew_time: Some(now),
            transitions: self.transitions,
        }
    }
}

/// Reads a transition count leniently: missing or non-integer → 0; clamped to `0..=i32::MAX`. A
/// negative count (possible only in a ConfigMap's free-form record) would make the apiserver refuse the
/// Lease write of a migration lock.
pub(crate) fn transitions_from(v: Option<&serde_json::Value>) -> i32 {
    match v.and_then(serde_json::Value::as_i64) {
        Some(n) => i32::try_from(n.max(0)).unwrap_or(i32::MAX),
        None => 0,
    }
}

/// Reads a holder leniently: anything but a string → `""`.
pub(crate) fn holder_from(v: Option<&serde_json::Value>) -> String {
    v.and_then(serde_json::Value::as_str)
        .unwrap_or_default()
        .to_string()
}

/// Reads a duration leniently: anything but an integer → `None`. Floats with no fraction count.
pub(crate) fn duration_from(v: Option<&serde_json::Value>) -> Option<i64> {
    let v = v?;
    v.as_i64().or_else(|| {
        v.as_f64().filter(|f| f.fract() == 0.0 && f.is_finite()).map(|f| {
            // Saturating float → int conversion; the value is clamped later anyway.
            f as i64
        })
    })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn at(s: &str) -> Timestamp {
        s.parse().expect("timestamp")
    }

    #[test]
    fn create_starts_at_zero_transitions() {
        let now = at("2026-07-24T10:00:00Z");
        let r = LeaderRecord::claim(None, "a", 15, now);
        assert_eq!(r.holder, "a");
        assert_eq!(r.lease_duration_seconds, Some(15));
        assert_eq!(r.acquire_time, Some(now));
        assert_eq!(r.renew_time, Some(now));
        assert_eq!(r.transitions, 0);
    }

    #[test]
    fn renew_keeps_acquire_time_and_transitions() {
        let t0 = at("2026-07-24T10:00:00Z");
        let t1 = at("2026-07-24T10:00:02Z");
        let held = LeaderRecord::claim(None, "a", 15, t0);
        let renewed = LeaderRecord::claim(Some(&held), "a", 15, t1);
        assert_eq!(renewed.acquire_time, Some(t0));
        assert_eq!(renewed.renew_time, Some(t1));
        assert_eq!(renewed.transitions, 0);
        // A renew over a record with an unreadable acquireTime writes now.
        let mut broken = held.clone();
        broken.acquire_time = None;
        assert_eq!(
            LeaderRecord::claim(Some(&broken), "a", 15, t1).acquire_time,
            Some(t1)
        );
    }

    #[test]
    fn takeover_counts_one_transition() {
        let t0 = at("2026-07-24T10:00:00Z");
        let t1 = at("2026-07-24T10:00:20Z");
        let held = LeaderRecord {
            transitions: 4,
            ..LeaderRecord::claim(None, "a", 15, t0)
        };
        let taken = LeaderRecord::claim(Some(&held), "b", 60, t1);
        assert_eq!(taken.holder, "b");
        assert_eq!(taken.transitions, 5);
        assert_eq!(taken.acquire_time, Some(t1));
        assert_eq!(taken.lease_duration_seconds, Some(60));
        // The count saturates instead of overflowing.
        let max = LeaderRecord {
            transitions: i32::MAX,
            ..held
        };
        assert_eq!(LeaderRecord::claim(Some(&max), "b", 15, t1).transitions, i32::MAX);
    }

    #[test]
    fn release_then_reacquire_by_the_same_identity_is_a_transition() {
        let t0 = at("2026-07-24T10:00:00Z");
        let t1 = at("2026-07-24T10:00:05Z");
        let t2 = at("2026-07-24T10:00:06Z");
        let held = LeaderRecord::claim(None, "a", 15, t0);
        let released = held.released(t1);
        assert_eq!(released.holder, "");
        assert!(released.is_released());
        assert_eq!(released.holder(), None);
        assert_eq!(released.lease_duration_seconds, Some(1));
        assert_eq!(released.acquire_time, Some(t1));
        assert_eq!(released.renew_time, Some(t1));
        assert_eq!(released.transitions, 0);
        let again = LeaderRecord::claim(Some(&released), "a", 15, t2);
        assert_eq!(again.transitions, 1);
        assert_eq!(again.acquire_time, Some(t2));
    }

    #[test]
    fn durations() {
        assert_eq!(RecordDuration::of(None), RecordDuration::ExpiredAtOnce);
        assert_eq!(RecordDuration::of(Some(0)), RecordDuration::ExpiredAtOnce);
        assert_eq!(RecordDuration::of(Some(-5)), RecordDuration::ExpiredAtOnce);
        assert_eq!(
            RecordDuration::of(Some(15)),
            RecordDuration::Valid(Duration::from_secs(15))
        );
        assert_eq!(
            RecordDuration::of(Some(3600)),
            RecordDuration::Valid(MAX_LEASE_DURATION)
        );
        assert_eq!(
            RecordDuration::of(Some(3601)),
            RecordDuration::Clamped { found: 3601 }
        );
        assert_eq!(RecordDuration::of(Some(i64::MAX)).duration(), MAX_LEASE_DURATION);
        assert_eq!(RecordDuration::of(Some(-1)).duration(), Duration::ZERO);
    }

    #[test]
    fn lenient_field_readers() {
        assert_eq!(holder_from(None), "");
        assert_eq!(holder_from(Some(&json!(null))), "");
        assert_eq!(holder_from(Some(&json!(7))), "");
        assert_eq!(holder_from(Some(&json!("x"))), "x");
        assert_eq!(duration_from(Some(&json!(15))), Some(15));
        assert_eq!(duration_from(Some(&json!(15.0))), Some(15));
        assert_eq!(duration_from(Some(&json!(15.5))), None);
        assert_eq!(duration_from(Some(&json!("15"))), None);
        assert_eq!(duration_from(Some(&json!(1e300))), Some(i64::MAX));
        assert_eq!(duration_from(None), None);
        assert_eq!(transitions_from(Some(&json!(3))), 3);
        assert_eq!(transitions_from(Some(&json!(1_i64 << 40))), i32::MAX);
        assert_eq!(transitions_from(Some(&json!(-(1_i64 << 40)))), 0);
        assert_eq!(transitions_from(Some(&json!(-5))), 0);
        assert_eq!(transitions_from(Some(&json!("3"))), 0);
        assert_eq!(transitions_from(None), 0);
    }
}
