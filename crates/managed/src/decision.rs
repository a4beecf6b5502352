//! The pure decisions of the managed reconciler: what to do before connecting, and what to do with an
//! observation. Kept free of I/O so every branch of crossplane-runtime's order is unit-tested.

use apis::ManagementPolicies;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use crate::external::ExternalObservation;
use crate::meta;

/// The message of the safe-create rule.
pub const CREATE_INCOMPLETE: &str = "cannot determine creation result - remove the crossplane.io/external-create-pending annotation if it is safe to proceed";

/// What to do before connecting to the external system.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Before {
    /// `crossplane.io/paused: "true"` or `managementPolicies: []`: `Synced=False/ReconcilePaused`, stop.
    Paused,
    /// The management policies are not a supported combination: `ReconcileError`, stop.
    InvalidPolicy,
    /// Being deleted, and the policies say not to delete the external resource: remove the finalizer.
    Orphan,
    /// A create began and its outcome is unknown: `Creating` + `ReconcileError`, stop (no retry).
    CreateIncomplete,
    /// Go on: initialize, connect, observe.
    Proceed,
}

/// Steps 3–8 of crossplane-runtime's reconcile order.
pub fn before_connect(meta_: &ObjectMeta, policies: &ManagementPolicies, deterministic_name: bool) -> Before {
    if meta::is_paused(meta_) || policies.is_paused() {
        return Before::Paused;
    }
    if !policies.is_supported() {
        return Before::InvalidPolicy;
    }
    if meta_.deletion_timestamp.is_some() && !policies.should_delete() {
        return Before::Orphan;
    }
    if !deterministic_name && meta::create_incomplete(meta_) {
        return Before::CreateIncomplete;
    }
    Before::Proceed
}

/// What to do once the external resource has been observed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum After {
    /// Observe-only and nothing exists: `ReconcileError`, poll again.
    ObserveOnlyMissing,
    /// Created moments ago but not visible yet: event, retry soon.
    CreationPending,
    /// Being deleted, but other finalizers must go first: wait.
    WaitForOtherFinalizers,
    /// Being deleted and it exists: delete it, then verify.
    DeleteExternal,
    /// Being deleted and it is gone: remove the finalizer.
    RemoveFinalizer,
    /// Missing and creating is allowed: create.
    Create,
    /// It exists (or may not be created): late-initialize and/or update as flagged, else report success.
    Sync {
        /// Write the late-initialized spec back.
        late_initialize: bool,
        /// Call update.
        update: bool,
    },
}

/// Facts about the resource the post-observe decision needs besides the observation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Facts {
    /// `deletionTimestamp` is set.
    pub deleting: bool,
    /// `external-create-succeeded` lies within the creation grace period.
    pub created_recently: bool,
    /// Finalizers other than ours are present.
    pub other_finalizers: bool,
}

/// Steps 12–20 of crossplane-runtime's reconcile order.
pub fn after_observe(obs: &ExternalObservation, policies: &ManagementPolicies, facts: Facts) -> After {
    if !obs.resource_exists && policies.is_observe_only() {
        return After::ObserveOnlyMissing;
    }
    if !obs.resource_exists && facts.created_recently && !facts.deleting {
        return After::CreationPending;
    }
    if facts.deleting {
        if facts.other_finalizers {
            return After::WaitForOtherFinalizers;
        }
        if obs.resource_exists && policies.should_delete() {
            return After::DeleteExternal;
        }
        return After::RemoveFinalizer;
    }
    if !obs.resource_exists && policies.should_create() {
        return After::Create;
    }
    After::Sync {
        late_initialize: obs.resource_late_initialized && policies.should_late_initialize(),
        update: !obs.resource_up_to_date && policies.should_update(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use apis::meta::{ANNOTATION_EXTERNAL_CREATE_PENDING, ANNOTATION_PAUSED};
    use apis::{DeletionPolicy, ManagementAction::*};
    use jiff::Timestamp;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

    fn meta_with(annotations: &[(&str, &str)], deleting: bool) -> ObjectMeta {
        ObjectMeta {
            annotations: Some(
                annotations
                    .iter()
                    .map(|(k, v)| ((*k).into(), (*v).into()))
                    .collect(),
            ),
            deletion_timestamp: deleting.then(|| Time(Timestamp::now())),
            ..ObjectMeta::default()
        }
    }

    fn all() -> ManagementPolicies {
        ManagementPolicies::new(&[All], None)
    }

    const NOT_DELETING: Facts = Facts {
        deleting: false,
        created_recently: false,
        other_finalizers: false,
    };
    const DELETING: Facts = Facts {
        deleting: true,
        created_recently: false,
        other_finalizers: false,
    };

    fn obs(exists: bool, up_to_date: bool) -> ExternalObservation {
        ExternalObservation {
            resource_exists: exists,
            resource_up_to_date: up_to_date,
            ..ExternalObservation::default()
        }
    }

    #[test]
    fn pause_wins_over_everything() {
        let m = meta_with(&[(ANNOTATION_PAUSED, "true")], true);
        assert_eq!(before_connect(&m, &all(), false), Before::Paused);
        let empty = ManagementPolicies::new(&[], None);
        assert_eq!(
            before_connect(&meta_with(&[], false), &empty, false),
            Before::Paused
        );
    }

    #[test]
    fn invalid_policy_and_orphan() {
        let bad = ManagementPolicies::new(&[All, Observe], None);
        assert_eq!(
            before_connect(&meta_with(&[], false), &bad, false),
            Before::InvalidPolicy
        );
        let orphan = ManagementPolicies::new(&[All], Some(DeletionPolicy::Orphan));
        assert_eq!(
            before_connect(&meta_with(&[], true), &orphan, false),
            Before::Orphan
        );
        let no_delete = ManagementPolicies::new(&[Observe, Create, Update], None);
        assert_eq!(
            before_connect(&meta_with(&[], true), &no_delete, false),
            Before::Orphan
        );
        assert_eq!(
            before_connect(&meta_with(&[], false), &no_delete, false),
            Before::Proceed
        );
    }

    #[test]
    fn safe_create_blocks_unless_deterministic() {
        let m = meta_with(
            &[(ANNOTATION_EXTERNAL_CREATE_PENDING, "2026-01-01T00:00:00Z")],
            false,
        );
        assert_eq!(before_connect(&m, &all(), false), Before::CreateIncomplete);
        assert_eq!(before_connect(&m, &all(), true), Before::Proceed);
    }

    #[test]
    fn observation_outcomes() {
        let p = all();
        assert_eq!(after_observe(&obs(false, false), &p, NOT_DELETING), After::Create);
        assert_eq!(
            after_observe(&obs(true, true), &p, NOT_DELETING),
            After::Sync {
                late_initialize: false,
                update: false
            }
        );
        assert_eq!(
            after_observe(&obs(true, false), &p, NOT_DELETING),
            After::Sync {
                late_initialize: false,
                update: true
            }
        );
        let recent = Facts {
            created_recently: true,
            ..NOT_DELETING
        };
        assert_eq!(
            after_observe(&obs(false, false), &p, recent),
            After::CreationPending
        );
        let observe = ManagementPolicies::new(&[Observe], None);
        assert_eq!(
            after_observe(&obs(false, false), &observe, NOT_DELETING),
            After::ObserveOnlyMissing
        );
        let no_update = ManagementPolicies::new(&[Observe, Create, Delete], None);
        assert_eq!(
            after_observe(&obs(true, false), &no_update, NOT_DELETING),
            After::Sync {
                late_initialize: false,
                update: false
            }
        );
        let mut li = obs(true, true);
        li.resource_late_initialized = true;
        assert_eq!(
            after_observe(&li, &p, NOT_DELETING),
            After::Sync {
                late_initialize: true,
                update: false
            }
        );
        let no_li = ManagementPolicies::new(&[Observe, Create, Update, Delete], None);
        assert_eq!(
            after_observe(&li, &no_li, NOT_DELETING),
            After::Sync {
                late_initialize: false,
                update: false
            }
        );
    }

    #[test]
    fn deletion_outcomes() {
        let p = all();
        assert_eq!(
            after_observe(&obs(true, true), &p, DELETING),
            After::DeleteExternal
        );
        assert_eq!(
            after_observe(&obs(false, true), &p, DELETING),
            After::RemoveFinalizer
        );
        let others = Facts {
            other_finalizers: true,
            ..DELETING
        };
        assert_eq!(
            after_observe(&obs(true, true), &p, others),
            After::WaitForOtherFinalizers
        );
    }
}
