//! client-go's MultiLock (`configmapsleases`): the ConfigMap is the primary lock, the Lease the secondary
//! (pure merge rules; the writes are in [`super::Lock::write`]).
//!
//! Reading (client-go `MultiLock.Get`):
//! - primary missing → the lock is missing (the candidate creates it);
//! - Lease missing and the primary's holder is not this candidate → the primary's record (a legacy
//!   ConfigMap-only holder owns it);
//! - Lease missing and the primary's holder is this candidate → the lock is missing (create);
//! - both present with different holders → the primary's record with holder [`UNKNOWN_LEADER`];
//! - raw form: primary raw + `,` + secondary raw, so a change of either is a change.
//!
//! Writing: primary first, then the secondary, creating whichever is missing. The acquire or renew
//! succeeds only if both writes do.

use crate::record::{Snapshot, UNKNOWN_LEADER};

/// Merges the primary (ConfigMap) and secondary (Lease) records as client-go does. `None` = missing.
pub(crate) fn merge(
    primary: Option<Snapshot>,
    secondary: Option<Snapshot>,
    identity: &str,
) -> Option<Snapshot> {
    let primary = primary?;
    let Some(secondary) = secondary else {
        return (primary.record.holder != identity).then_some(primary);
    };
    let raw = format!("{},{}", primary.raw, secondary.raw);
    let mut record = primary.record;
    if record.holder != secondary.record.holder {
        record.holder = UNKNOWN_LEADER.to_string();
    }
    Some(Snapshot {
        record,
        raw,
        unreadable: primary.unreadable,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::LeaderRecord;

    fn snap(holder: &str, raw: &str) -> Snapshot {
        Snapshot {
            record: LeaderRecord {
                holder: holder.into(),
                lease_duration_seconds: Some(15),
                transitions: 3,
                ..LeaderRecord::default()
            },
            raw: raw.into(),
            unreadable: false,
        }
    }

    #[test]
    fn primary_missing_means_missing() {
        assert_eq!(merge(None, None, "me"), None);
        assert_eq!(merge(None, Some(snap("x", "s")), "me"), None);
    }

    #[test]
    fn lease_missing_legacy_holder_wins() {
        let m = merge(Some(snap("legacy", "p")), None, "me").expect("record");
        assert_eq!(m.record.holder, "legacy");
        assert_eq!(m.raw, "p");
        // A released primary is reported as released, so it can be acquired.
        assert!(
            merge(Some(snap("", "p")), None, "me")
                .expect("record")
                .record
                .is_released()
        );
    }

    #[test]
    fn lease_missing_and_primary_is_ours_means_create() {
        assert_eq!(merge(Some(snap("me", "p")), None, "me"), None);
    }

    #[test]
    fn disagreeing_holders_are_unknown() {
        let m = merge(Some(snap("a", "p")), Some(snap("b", "s")), "me").expect("record");
        assert_eq!(m.record.holder, UNKNOWN_LEADER);
        assert_eq!(m.record.transitions, 3);
        assert_eq!(m.raw, "p,s");
    }

    #[test]
    fn agreeing_holders_are_the_primary_record() {
        let m = merge(Some(snap("a", "p")), Some(snap("a", "s")), "me").expect("record");
        assert_eq!(m.record.holder, "a");
        assert_eq!(m.raw, "p,s");
        // Either side changing changes the raw form.
        assert_ne!(
            merge(Some(snap("a", "p")), Some(snap("a", "s2")), "me")
                .expect("r")
                .raw,
            m.raw
        );
    }

    #[test]
    fn unreadable_primary_stays_unreadable() {
        let mut p = snap(UNKNOWN_LEADER, "garbage");
        p.unreadable = true;
        let m = merge(Some(p), Some(snap("b", "s")), "me").expect("record");
        assert!(m.unreadable);
        assert_eq!(m.record.holder, UNKNOWN_LEADER);
    }
}
