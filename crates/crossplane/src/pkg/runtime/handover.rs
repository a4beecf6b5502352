//! The upgrade with no gap and one writer: how an inactive revision's Deployment hands over to the
//! package's current revision.
//!
//! Upstream deletes the old Deployment as soon as the old revision goes Inactive, before the new one
//! runs, so for a while nothing runs at all. Here:
//! 1. The package manager deactivates the old revision only once the current one is healthy, which
//!    with a runtime means its Deployment is Available (`super::health`). Until then the old one keeps
//!    running and leading; a revision that never becomes healthy never takes over.
//! 2. Both revisions' Pods stand for the same Lease (`LEADER_ELECTION_ID`, [`super::plan::lease_name`]),
//!    so while they overlap exactly one of them acts, and the new ones wait as standbys.
//! 3. Once the old revision is Inactive and the current one Available, the old Deployment is scaled to
//!    0 ([`Step::ScaleDown`]): its leader sees its Pod go away, stops its work and releases the Lease,
//!    and a standby of the current revision acquires it at once. The old replica count is kept in an
//!    annotation ([`ANNOTATION_SCALED_FROM`]).
//! 4. The old Deployment is deleted only once a Pod of the current revision holds the Lease
//!    ([`Step::Delete`]). If the current revision stops being Available before that, the old
//!    Deployment is scaled back ([`Step::Restore`]).
//!
//! A function elects nothing: its old Deployment goes once the current one is Available (its Service
//! selects both revisions' Pods throughout). [`decide`] is the whole decision, a pure function.

use std::collections::BTreeSet;

/// The annotation on an old Deployment that the handover scaled down: the replicas it had.
pub const ANNOTATION_SCALED_FROM: &str = "pkg.crossplane.io/handover-scaled-from";

/// Who holds the package's Lease.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Leader {
    /// A Pod of the package's current revision.
    Current,
    /// A Pod of this (old) revision.
    Previous,
    /// Nobody we know: released, or held by a Pod that is gone.
    Nobody,
}

/// The old revision's Deployment, as observed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Old {
    /// Its `spec.replicas`.
    pub replicas: i32,
    /// How many of its Pods still exist.
    pub pods: usize,
    /// The replicas it had before the handover scaled it down.
    pub scaled_from: Option<i32>,
}

/// What the handover sees.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Observed {
    /// The old revision's Deployment, if it still exists.
    pub old: Option<Old>,
    /// Whether the package's current revision's Deployment is Available.
    pub current_available: bool,
    /// Whether the runtime elects a leader (providers do, functions do not).
    pub elects: bool,
    /// Who holds the Lease.
    pub leader: Leader,
}

/// What to do next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// Nothing is left to hand over.
    Done,
    /// Keep the old Deployment as it is and look again.
    Wait,
    /// Scale the old Deployment to 0, so its leader releases the Lease.
    ScaleDown,
    /// Scale the old Deployment back to these replicas: the current revision is not Available.
    Restore(i32),
    /// Delete the old Deployment.
    Delete,
}

/// The next step of the handover.
pub fn decide(o: Observed) -> Step {
    let Some(old) = o.old else {
        return Step::Done;
    };
    if !o.current_available {
        return match old.scaled_from {
            Some(n) if old.replicas == 0 && n > 0 => Step::Restore(n),
            _ => Step::Wait,
        };
    }
    if !o.elects {
        return Step::Delete;
    }
    match o.leader {
        Leader::Current => Step::Delete,
        Leader::Previous if old.replicas > 0 => Step::ScaleDown,
        Leader::Previous => Step::Wait,
        Leader::Nobody if old.replicas > 0 => Step::ScaleDown,
        // Scaled down and every old Pod gone: nothing of the old revision can act any more.
        Leader::Nobody if old.pods == 0 => Step::Delete,
        Leader::Nobody => Step::Wait,
    }
}

/// Whether the Lease holder `holder` is the Pod `pod`: our binaries use the Pod's name, client-go's
/// default is `<hostname>_<uuid>` (the hostname is the Pod's name).
pub fn held_by(holder: &str, pod: &str) -> bool {
    !holder.is_empty()
        && (holder == pod || holder.strip_prefix(pod).is_some_and(|rest| rest.starts_with('_')))
}

/// Who leads, from the holders of the Leases in the namespace and the Pods of each revision.
pub fn leader<'a>(
    holders: impl IntoIterator<Item = &'a str>,
    current: &BTreeSet<String>,
    previous: &BTreeSet<String>,
) -> Leader {
    let holders: Vec<&str> = holders.into_iter().collect();
    let any = |pods: &BTreeSet<String>| holders.iter().any(|h| pods.iter().any(|p| held_by(h, p)));
    if any(current) {
        Leader::Current
    } else if any(previous) {
        Leader::Previous
    } else {
        Leader::Nobody
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const RUNNING: Old = Old {
        replicas: 2,
        pods: 2,
        scaled_from: None,
    };
    const SCALED: Old = Old {
        replicas: 0,
        pods: 2,
        scaled_from: Some(2),
    };
    const EMPTY: Old = Old {
        replicas: 0,
        pods: 0,
        scaled_from: Some(2),
    };

    fn obs(old: Option<Old>, available: bool, leader: Leader) -> Observed {
        Observed {
            old,
            current_available: available,
            elects: true,
            leader,
        }
    }

    #[test]
    fn nothing_to_hand_over_without_an_old_deployment() {
        assert_eq!(decide(obs(None, true, Leader::Current)), Step::Done);
        assert_eq!(decide(obs(None, false, Leader::Nobody)), Step::Done);
    }

    #[test]
    fn a_current_revision_that_is_not_available_leaves_the_old_one_running() {
        for leader in [Leader::Previous, Leader::Nobody, Leader::Current] {
            assert_eq!(decide(obs(Some(RUNNING), false, leader)), Step::Wait);
        }
        // … and one that stops being Available brings the old one back.
        assert_eq!(decide(obs(Some(SCALED), false, Leader::Nobody)), Step::Restore(2));
        assert_eq!(
            decide(obs(Some(EMPTY), false, Leader::Previous)),
            Step::Restore(2)
        );
    }

    #[test]
    fn the_old_leader_is_scaled_away_only_once_the_current_revision_is_available() {
        assert_eq!(
            decide(obs(Some(RUNNING), true, Leader::Previous)),
            Step::ScaleDown
        );
        assert_eq!(decide(obs(Some(RUNNING), true, Leader::Nobody)), Step::ScaleDown);
        assert_eq!(decide(obs(Some(SCALED), true, Leader::Previous)), Step::Wait);
        assert_eq!(decide(obs(Some(SCALED), true, Leader::Nobody)), Step::Wait);
    }

    #[test]
    fn the_old_deployment_goes_once_the_current_revision_leads() {
        assert_eq!(decide(obs(Some(SCALED), true, Leader::Current)), Step::Delete);
        assert_eq!(decide(obs(Some(RUNNING), true, Leader::Current)), Step::Delete);
        assert_eq!(decide(obs(Some(EMPTY), true, Leader::Nobody)), Step::Delete);
    }

    #[test]
    fn a_function_hands_over_once_the_current_revision_is_available() {
        let mut o = obs(Some(RUNNING), true, Leader::Nobody);
        o.elects = false;
        assert_eq!(decide(o), Step::Delete);
        o.current_available = false;
        assert_eq!(decide(o), Step::Wait);
    }

    #[test]
    fn holders_are_matched_to_pods() {
        assert!(held_by("p-1", "p-1"));
        assert!(held_by("p-1_3f2a", "p-1"));
        assert!(!held_by("p-10", "p-1"));
        assert!(!held_by("", ""));
        let cur: BTreeSet<String> = ["new-a".to_string()].into();
        let old: BTreeSet<String> = ["old-a".to_string(), "old-b".to_string()].into();
        assert_eq!(leader(["old-b"], &cur, &old), Leader::Previous);
        assert_eq!(leader(["x", "new-a_uuid"], &cur, &old), Leader::Current);
        assert_eq!(leader([""], &cur, &old), Leader::Nobody);
        assert_eq!(leader(["gone"], &cur, &old), Leader::Nobody);
    }
}
