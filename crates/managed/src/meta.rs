//! Pure rules over a managed resource's metadata: the external name, the safe-create annotations, pause,
//! the per-resource poll interval and the finalizer.

use std::time::Duration;

use apis::meta::{
    ANNOTATION_EXTERNAL_CREATE_FAILED, ANNOTATION_EXTERNAL_CREATE_PENDING,
    ANNOTATION_EXTERNAL_CREATE_SUCCEEDED, ANNOTATION_EXTERNAL_NAME, ANNOTATION_PAUSED,
    ANNOTATION_POLL_INTERVAL, FINALIZER_MANAGED,
};
use jiff::Timestamp;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

fn annotation<'a>(meta: &'a ObjectMeta, key: &str) -> Option<&'a str> {
    meta.annotations.as_ref()?.get(key).map(String::as_str)
}

fn set_annotation(meta: &mut ObjectMeta, key: &str, value: String) {
    meta.annotations
        .get_or_insert_with(Default::default)
        .insert(key.to_owned(), value);
}

fn timestamp(meta: &ObjectMeta, key: &str) -> Option<Timestamp> {
    annotation(meta, key).and_then(|v| v.parse().ok())
}

/// RFC 3339 with second precision, as Go's `time.RFC3339` writes.
fn rfc3339(t: Timestamp) -> String {
    t.strftime("%Y-%m-%dT%H:%M:%SZ").to_string()
}

/// `crossplane.io/external-name`, if set and not empty.
pub fn external_name(meta: &ObjectMeta) -> Option<&str> {
    annotation(meta, ANNOTATION_EXTERNAL_NAME).filter(|v| !v.is_empty())
}

/// Sets `crossplane.io/external-name`.
pub fn set_external_name(meta: &mut ObjectMeta, name: &str) {
    set_annotation(meta, ANNOTATION_EXTERNAL_NAME, name.to_owned());
}

/// Sets `crossplane.io/external-create-pending` to `now`.
pub fn set_create_pending(meta: &mut ObjectMeta, now: Timestamp) {
    set_annotation(meta, ANNOTATION_EXTERNAL_CREATE_PENDING, rfc3339(now));
}

/// Sets `crossplane.io/external-create-succeeded` to `now`.
pub fn set_create_succeeded(meta: &mut ObjectMeta, now: Timestamp) {
    set_annotation(meta, ANNOTATION_EXTERNAL_CREATE_SUCCEEDED, rfc3339(now));
}

/// Sets `crossplane.io/external-create-failed` to `now`.
pub fn set_create_failed(meta: &mut ObjectMeta, now: Timestamp) {
    set_annotation(meta, ANNOTATION_EXTERNAL_CREATE_FAILED, rfc3339(now));
}

/// The safe-create rule: a create began (`external-create-pending`) and neither a success nor a failure
/// was recorded at or after it. The outcome is then unknown, and creating again could leak a duplicate.
pub fn create_incomplete(meta: &ObjectMeta) -> bool {
    let Some(pending) = timestamp(meta, ANNOTATION_EXTERNAL_CREATE_PENDING) else {
        return false;
    };
    let after = |key| timestamp(meta, key).is_some_and(|t| t >= pending);
    !after(ANNOTATION_EXTERNAL_CREATE_SUCCEEDED) && !after(ANNOTATION_EXTERNAL_CREATE_FAILED)
}

/// Whether a create succeeded less than `grace` before `now` (the external resource may not be visible
/// yet).
pub fn create_succeeded_within(meta: &ObjectMeta, now: Timestamp, grace: Duration) -> bool {
    timestamp(meta, ANNOTATION_EXTERNAL_CREATE_SUCCEEDED).is_some_and(|t| {
        let age = now.duration_since(t);
        age.is_positive() && age.unsigned_abs() < grace || age.is_zero()
    })
}

/// `crossplane.io/paused: "true"`.
pub fn is_paused(meta: &ObjectMeta) -> bool {
    annotation(meta, ANNOTATION_PAUSED) == Some("true")
}

/// A valid, positive `crossplane.io/poll-interval`, if set.
pub fn poll_interval(meta: &ObjectMeta) -> Option<Duration> {
    annotation(meta, ANNOTATION_POLL_INTERVAL)
        .and_then(|v| manager::duration::parse_duration(v).ok())
        .filter(|d| !d.is_zero())
}

/// Whether the managed-resource finalizer is present.
pub fn has_finalizer(meta: &ObjectMeta) -> bool {
    meta.finalizers
        .as_ref()
        .is_some_and(|f| f.iter().any(|x| x == FINALIZER_MANAGED))
}

/// Adds the managed-resource finalizer; returns whether it was missing.
pub fn add_finalizer(meta: &mut ObjectMeta) -> bool {
    if has_finalizer(meta) {
        return false;
    }
    meta.finalizers
        .get_or_insert_with(Vec::new)
        .push(FINALIZER_MANAGED.to_owned());
    true
}

/// Removes the managed-resource finalizer; returns whether it was present.
pub fn remove_finalizer(meta: &mut ObjectMeta) -> bool {
    let Some(f) = meta.finalizers.as_mut() else {
        return false;
    };
    let before = f.len();
    f.retain(|x| x != FINALIZER_MANAGED);
    before != f.len()
}

/// Finalizers other than ours (and other than the apiserver's own deletion-mode markers).
pub fn other_finalizers(meta: &ObjectMeta) -> Vec<&str> {
    meta.finalizers
        .iter()
        .flatten()
        .map(String::as_str)
        .filter(|f| *f != FINALIZER_MANAGED && *f != "foregroundDeletion" && *f != "orphan")
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn meta(pairs: &[(&str, &str)]) -> ObjectMeta {
        ObjectMeta {
            annotations: Some(
                pairs
                    .iter()
                    .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                    .collect(),
            ),
            ..ObjectMeta::default()
        }
    }

    const T1: &str = "2026-01-01T00:00:01Z";
    const T2: &str = "2026-01-01T00:00:02Z";

    #[test]
    fn safe_create_rule() {
        assert!(!create_incomplete(&meta(&[])));
        assert!(create_incomplete(&meta(&[(
            ANNOTATION_EXTERNAL_CREATE_PENDING,
            T1
        )])));
        assert!(!create_incomplete(&meta(&[
            (ANNOTATION_EXTERNAL_CREATE_PENDING, T1),
            (ANNOTATION_EXTERNAL_CREATE_SUCCEEDED, T1)
        ])));
        assert!(!create_incomplete(&meta(&[
            (ANNOTATION_EXTERNAL_CREATE_PENDING, T1),
            (ANNOTATION_EXTERNAL_CREATE_FAILED, T2)
        ])));
        // A newer pending than the last outcome: a second create began and its outcome is unknown.
        assert!(create_incomplete(&meta(&[
            (ANNOTATION_EXTERNAL_CREATE_PENDING, T2),
            (ANNOTATION_EXTERNAL_CREATE_SUCCEEDED, T1)
        ])));
    }

    #[test]
    fn annotations_round_trip() {
        let mut m = ObjectMeta::default();
        let now: Timestamp = T1.parse().expect("ts");
        set_create_pending(&mut m, now);
        assert_eq!(annotation(&m, ANNOTATION_EXTERNAL_CREATE_PENDING), Some(T1));
        assert!(create_incomplete(&m));
        set_create_succeeded(&mut m, now);
        assert!(!create_incomplete(&m));
        assert!(create_succeeded_within(&m, now, Duration::from_secs(30)));
        let later: Timestamp = "2026-01-01T00:01:00Z".parse().expect("ts");
        assert!(!create_succeeded_within(&m, later, Duration::from_secs(30)));
        assert_eq!(external_name(&m), None);
        set_external_name(&mut m, "x");
        assert_eq!(external_name(&m), Some("x"));
    }

    #[test]
    fn pause_poll_and_finalizer() {
        assert!(is_paused(&meta(&[(ANNOTATION_PAUSED, "true")])));
        assert!(!is_paused(&meta(&[(ANNOTATION_PAUSED, "false")])));
        assert_eq!(
            poll_interval(&meta(&[(ANNOTATION_POLL_INTERVAL, "5s")])),
            Some(Duration::from_secs(5))
        );
        assert_eq!(poll_interval(&meta(&[(ANNOTATION_POLL_INTERVAL, "bogus")])), None);
        let mut m = ObjectMeta::default();
        assert!(add_finalizer(&mut m));
        assert!(!add_finalizer(&mut m));
        assert!(has_finalizer(&m));
        m.finalizers.get_or_insert_with(Vec::new).push("other".into());
        assert_eq!(other_finalizers(&m), vec!["other"]);
        assert!(remove_finalizer(&mut m));
        assert!(!has_finalizer(&m));
    }
}
