//! The record on a ConfigMap, client-go's legacy `configmaps` lock (pure; no I/O).
//!
//! The record is JSON in the annotation `control-plane.alpha.kubernetes.io/leader`, with client-go's
//! `LeaderElectionRecord` field names: `holderIdentity`, `leaseDurationSeconds`, `acquireTime`,
//! `renewTime` (`metav1.Time`, whole seconds) and `leaderTransitions`. Only client-go ≤ 1.27 ever wrote
//! it, so the five fields are all that is written.
//!
//! Reading, as client-go does: a ConfigMap without the annotation holds an empty record (released); JSON
//! fields are read leniently like a Lease's. An annotation that is not a JSON object is where this crate
//! departs from client-go, which fails every attempt and never acquires: it is read as a record held by
//! [`UNKNOWN_LEADER`], valid for one configured lease duration after it was observed, and then
//! overwritten.

use std::collections::BTreeMap;

use kube::{
    api::{ApiResource, DynamicObject},
    core::TypeMeta,
};
use serde::Serialize;
use serde_json::{Map, Value};

use crate::{
    microtime,
    record::{LeaderRecord, Snapshot, UNKNOWN_LEADER, duration_from, holder_from, transitions_from},
};

/// client-go's `LeaderElectionRecordAnnotationKey`.
pub(crate) const ANNOTATION: &str = "control-plane.alpha.kubernetes.io/leader";

/// The ConfigMap resource.
pub(crate) fn resource() -> ApiResource {
    ApiResource {
        group: String::new(),
        version: "v1".into(),
        api_version: "v1".into(),
        kind: "ConfigMap".into(),
        plural: "configmaps".into(),
    }
}

/// client-go's `LeaderElectionRecord` JSON, in Go's field order.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct WireRecord {
    holder_identity: String,
    lease_duration_seconds: i64,
    acquire_time: Option<String>,
    renew_time: Option<String>,
    leader_transitions: i32,
}

/// The annotation text for `record`.
pub(crate) fn encode(record: &LeaderRecord) -> String {
    let wire = WireRecord {
        holder_identity: record.holder.clone(),
        lease_duration_seconds: record.lease_duration_seconds.unwrap_or(0),
        acquire_time: record.acquire_time.map(microtime::format_seconds),
        renew_time: record.renew_time.map(microtime::format_seconds),
        leader_transitions: record.transitions,
    };
    serde_json::to_string(&wire).unwrap_or_default()
}

/// Reads the record from annotation text (`None`: no annotation).
pub(crate) fn decode(annotation: Option<&str>) -> Snapshot {
    let Some(text) = annotation else {
        return Snapshot {
            record: LeaderRecord::default(),
            raw: String::new(),
            unreadable: false,
        };
    };
    match serde_json::from_str::<Map<String, Value>>(text) {
        Ok(map) => Snapshot {
            record: LeaderRecord {
                holder: holder_from(map.get("holderIdentity")),
                lease_duration_seconds: duration_from(map.get("leaseDurationSeconds")),
                acquire_time: microtime::parse_value(map.get("acquireTime")),
                renew_time: microtime::parse_value(map.get("renewTime")),
                transitions: transitions_from(map.get("leaderTransitions")),
            },
            raw: text.to_string(),
            unreadable: false,
        },
        Err(_) => Snapshot {
            record: LeaderRecord {
                holder: UNKNOWN_LEADER.to_string(),
                ..LeaderRecord::default()
            },
            raw: text.to_string(),
            unreadable: true,
        },
    }
}

/// Reads the record from a ConfigMap.
pub(crate) fn snapshot(obj: &DynamicObject) -> Snapshot {
    decode(
        obj.metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(ANNOTATION))
            .map(String::as_str),
    )
}

/// Writes `record` into the annotation and sets `labels`, preserving everything else.
pub(crate) fn apply(obj: &mut DynamicObject, record: &LeaderRecord, labels: &BTreeMap<String, String>) {
    obj.metadata
        .annotations
        .get_or_insert_with(BTreeMap::new)
        .insert(ANNOTATION.into(), encode(record));
    super::lease::set_labels(obj, labels);
    if obj.types.is_none() {
        obj.types = Some(TypeMeta {
            api_version: "v1".into(),
            kind: "ConfigMap".into(),
        });
    }
}

/// A new ConfigMap holding `record`.
pub(crate) fn new_object(
    namespace: &str,
    name: &str,
    record: &LeaderRecord,
    labels: &BTreeMap<String, String>,
) -> DynamicObject {
    let mut obj = DynamicObject::new(name, &resource()).within(namespace);
    apply(&mut obj, record, labels);
    obj
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn ts(s: &str) -> jiff::Timestamp {
        s.parse().expect("ts")
    }

    #[test]
    fn encodes_like_client_go() {
        let rec = LeaderRecord {
            holder: "me".into(),
            lease_duration_seconds: Some(15),
            acquire_time: Some(ts("2026-07-24T10:15:30.999Z")),
            renew_time: Some(ts("2026-07-24T10:15:40Z")),
            transitions: 2,
        };
        assert_eq!(
            encode(&rec),
            r#"{"holderIdentity":"me","leaseDurationSeconds":15,"acquireTime":"2026-07-24T10:15:30Z","renewTime":"2026-07-24T10:15:40Z","leaderTransitions":2}"#
        );
        let released = rec.released(ts("2026-07-24T10:16:00Z"));
        assert_eq!(
            encode(&released),
            r#"{"holderIdentity":"","leaseDurationSeconds":1,"acquireTime":"2026-07-24T10:16:00Z","renewTime":"2026-07-24T10:16:00Z","leaderTransitions":2}"#
        );
    }

    #[test]
    fn round_trips_at_second_precision() {
        let rec = LeaderRecord {
            holder: "me".into(),
            lease_duration_seconds: Some(60),
            acquire_time: Some(ts("2026-07-24T10:15:30Z")),
            renew_time: Some(ts("2026-07-24T10:15:32Z")),
            transitions: 9,
        };
        let s = decode(Some(&encode(&rec)));
        assert_eq!(s.record, rec);
        assert!(!s.unreadable);
    }

    #[test]
    fn reads_what_go_wrote() {
        let go = r#"{"holderIdentity":"go-1","leaseDurationSeconds":15,"acquireTime":"2026-07-24T10:15:30Z","renewTime":"2026-07-24T10:15:32Z","leaderTransitions":1,"strategy":"","preferredHolder":""}"#;
        let s = decode(Some(go));
        assert_eq!(s.record.holder, "go-1");
        assert_eq!(s.record.transitions, 1);
        assert_eq!(s.raw, go);
    }

    #[test]
    fn missing_annotation_is_released() {
        let s = decode(None);
        assert!(s.record.is_released());
        assert!(!s.unreadable);
        let obj: DynamicObject = serde_json::from_value(json!({
            "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": {"k": "v"}
        }))
        .expect("cm");
        assert!(snapshot(&obj).record.is_released());
    }

    #[test]
    fn garbage_annotation_is_an_unknown_holder() {
        for text in ["not json", "", "[1,2]", "\"string\"", "{\"holderIdentity\":"] {
            let s = decode(Some(text));
            assert!(s.unreadable, "{text:?}");
            assert_eq!(s.record.holder, UNKNOWN_LEADER);
            assert_eq!(s.raw, text);
        }
        // Valid JSON with bad fields is a lenient read, not garbage.
        let s = decode(Some(
            r#"{"holderIdentity":null,"leaseDurationSeconds":"x","renewTime":"soon"}"#,
        ));
        assert!(!s.unreadable);
        assert!(s.record.is_released());
        assert_eq!(s.record.lease_duration_seconds, None);
    }

    #[test]
    fn apply_keeps_data_labels_and_other_annotations() {
        let mut obj: DynamicObject = serde_json::from_value(json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "c", "annotations": {"other": "x", ANNOTATION: "garbage"}, "labels": {"l": "1"}},
            "data": {"k": "v"}
        }))
        .expect("cm");
        let rec = LeaderRecord::claim(Some(&snapshot(&obj).record), "me", 15, ts("2026-07-24T10:00:00Z"));
        assert_eq!(rec.transitions, 1);
        apply(&mut obj, &rec, &BTreeMap::from([("app".into(), "y".into())]));
        assert_eq!(obj.data["data"]["k"], "v");
        let ann = obj.metadata.annotations.as_ref().expect("annotations");
        assert_eq!(ann.get("other").map(String::as_str), Some("x"));
        assert_eq!(snapshot(&obj).record.holder, "me");
        let labels = obj.metadata.labels.as_ref().expect("labels");
        assert_eq!(labels.len(), 2);
        let fresh = new_object("ns", "c", &rec, &BTreeMap::new());
        assert_eq!(serde_json::to_value(&fresh).expect("json")["kind"], "ConfigMap");
    }
}
