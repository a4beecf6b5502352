//! The record on a `coordination.k8s.io/v1` Lease (pure; no I/O).
//!
//! The record lives in `spec`: `holderIdentity`, `leaseDurationSeconds`, `acquireTime`, `renewTime`
//! (MicroTime) and `leaseTransitions`. A write changes only those five fields and the configured labels;
//! every other field of the object — `spec.strategy`, `spec.preferredHolder`, unknown future fields,
//! other labels, annotations, owner references — is carried over untouched, because the object is
//! handled as JSON rather than through a typed struct that would drop what it does not know.

use std::collections::BTreeMap;

use kube::{
    api::{ApiResource, DynamicObject},
    core::TypeMeta,
};
use serde_json::{Map, Value, json};

use crate::{
    microtime,
    record::{LeaderRecord, Snapshot, duration_from, holder_from, transitions_from},
};

/// The Lease resource.
pub(crate) fn resource() -> ApiResource {
    ApiResource {
        group: "coordination.k8s.io".into(),
        version: "v1".into(),
        api_version: "coordination.k8s.io/v1".into(),
        kind: "Lease".into(),
        plural: "leases".into(),
    }
}

const RECORD_FIELDS: [&str; 7] = [
    "holderIdentity",
    "leaseDurationSeconds",
    "acquireTime",
    "renewTime",
    "leaseTransitions",
    "strategy",
    "preferredHolder",
];

/// Reads the record from a Lease. Never fails: see [`crate::record`] for how bad fields read.
pub(crate) fn snapshot(obj: &DynamicObject) -> Snapshot {
    let spec = obj.data.get("spec").and_then(Value::as_object);
    let field = |k: &str| spec.and_then(|s| s.get(k));
    let record = LeaderRecord {
        holder: holder_from(field("holderIdentity")),
        lease_duration_seconds: duration_from(field("leaseDurationSeconds")),
        acquire_time: microtime::parse_value(field("acquireTime")),
        renew_time: microtime::parse_value(field("renewTime")),
        transitions: transitions_from(field("leaseTransitions")),
    };
    // The raw form is the record fields exactly as found (client-go compares the record, which
    // includes strategy and preferredHolder since 1.31).
    let raw: Map<String, Value> = RECORD_FIELDS
        .iter()
        .map(|k| ((*k).to_string(), field(k).cloned().unwrap_or(Value::Null)))
        .collect();
    Snapshot {
        record,
        raw: Value::Object(raw).to_string(),
        unreadable: false,
    }
}

/// Writes `record` into `obj`'s spec and sets `labels`, preserving everything else.
pub(crate) fn apply(obj: &mut DynamicObject, record: &LeaderRecord, labels: &BTreeMap<String, String>) {
    if !obj.data.is_object() {
        obj.data = Value::Object(Map::new());
    }
    let data = obj.data.as_object_mut();
    let Some(data) = data else { return };
    let spec = data.entry("spec").or_insert_with(|| Value::Object(Map::new()));
    if !spec.is_object() {
        *spec = Value::Object(Map::new());
    }
    if let Some(spec) = spec.as_object_mut() {
        spec.insert("holderIdentity".into(), json!(record.holder));
        match record.lease_duration_seconds {
            Some(d) => spec.insert("leaseDurationSeconds".into(), json!(d)),
            None => spec.remove("leaseDurationSeconds"),
        };
        for (key, time) in [
            ("acquireTime", record.acquire_time),
            ("renewTime", record.renew_time),
        ] {
            match time {
                Some(t) => spec.insert(key.into(), json!(microtime::format_micro(t))),
                None => spec.remove(key),
            };
        }
        spec.insert("leaseTransitions".into(), json!(record.transitions));
    }
    set_labels(obj, labels);
    if obj.types.is_none() {
        obj.types = Some(TypeMeta {
            api_version: "coordination.k8s.io/v1".into(),
            kind: "Lease".into(),
        });
    }
}

/// A new Lease holding `record`.
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

/// Merges the configured labels into the object's labels (configured values win).
pub(crate) fn set_labels(obj: &mut DynamicObject, labels: &BTreeMap<String, String>) {
    if labels.is_empty() {
        return;
    }
    let existing = obj.metadata.labels.get_or_insert_with(BTreeMap::new);
    for (k, v) in labels {
        existing.insert(k.clone(), v.clone());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lease(spec: Value) -> DynamicObject {
        serde_json::from_value(json!({
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": {
                "name": "l", "namespace": "ns", "resourceVersion": "42",
                "labels": {"keep": "me"}, "annotations": {"a": "b"}
            },
            "spec": spec,
        }))
        .expect("lease json")
    }

    fn ts(s: &str) -> jiff::Timestamp {
        s.parse().expect("ts")
    }

    #[test]
    fn reads_a_client_go_record() {
        let s = snapshot(&lease(json!({
            "holderIdentity": "go-1",
            "leaseDurationSeconds": 15,
            "acquireTime": "2026-07-24T10:15:30.123456Z",
            "renewTime": "2026-07-24T10:15:40.000001Z",
            "leaseTransitions": 3,
        })));
        assert_eq!(s.record.holder, "go-1");
        assert_eq!(s.record.lease_duration_seconds, Some(15));
        assert_eq!(s.record.acquire_time, Some(ts("2026-07-24T10:15:30.123456Z")));
        assert_eq!(s.record.renew_time, Some(ts("2026-07-24T10:15:40.000001Z")));
        assert_eq!(s.record.transitions, 3);
        assert!(!s.unreadable);
    }

    #[test]
    fn bad_fields_never_fail() {
        for spec in [
            json!({}),
            json!(null),
            json!("garbage"),
            json!({"holderIdentity": null, "leaseDurationSeconds": null}),
            json!({"holderIdentity": "", "leaseDurationSeconds": 0, "renewTime": "yesterday"}),
            json!({"holderIdentity": 5, "leaseDurationSeconds": -3, "acquireTime": 7, "leaseTransitions": "x"}),
        ] {
            let s = snapshot(&lease(spec.clone()));
            assert!(s.record.is_released(), "{spec}");
            assert!(s.record.lease_duration_seconds.unwrap_or(0) <= 0, "{spec}");
            assert_eq!(s.record.renew_time, None);
            assert_eq!(s.record.transitions, 0);
        }
        let mut no_spec = lease(json!({}));
        no_spec.data = json!({});
        assert!(snapshot(&no_spec).record.is_released());
    }

    #[test]
    fn raw_changes_exactly_when_a_record_field_changes() {
        let a = lease(
            json!({"holderIdentity": "x", "leaseDurationSeconds": 15, "renewTime": "2026-07-24T10:00:00.000000Z"}),
        );
        let mut b = a.clone();
        b.metadata.resource_version = Some("43".into());
        b.metadata.labels = None;
        assert_eq!(snapshot(&a).raw, snapshot(&b).raw);
        let c = lease(
            json!({"holderIdentity": "x", "leaseDurationSeconds": 15, "renewTime": "2026-07-24T10:00:00.000001Z"}),
        );
        assert_ne!(snapshot(&a).raw, snapshot(&c).raw);
        let d = lease(
            json!({"holderIdentity": "x", "leaseDurationSeconds": 15, "renewTime": "2026-07-24T10:00:00.000000Z", "preferredHolder": "y"}),
        );
        assert_ne!(snapshot(&a).raw, snapshot(&d).raw);
    }

    #[test]
    fn write_preserves_strategy_preferred_holder_labels_and_annotations() {
        let mut obj = lease(json!({
            "holderIdentity": "old",
            "leaseDurationSeconds": 15,
            "leaseTransitions": 2,
            "strategy": "OldestEmulationVersion",
            "preferredHolder": "someone",
            "futureField": {"x": 1},
        }));
        let now = ts("2026-07-24T10:15:30.123456789Z");
        let rec = LeaderRecord::claim(Some(&snapshot(&obj).record), "me", 60, now);
        let labels = BTreeMap::from([("app".to_string(), "x".to_string())]);
        apply(&mut obj, &rec, &labels);
        let spec = &obj.data["spec"];
        assert_eq!(spec["holderIdentity"], "me");
        assert_eq!(spec["leaseDurationSeconds"], 60);
        assert_eq!(spec["acquireTime"], "2026-07-24T10:15:30.123456Z");
        assert_eq!(spec["renewTime"], "2026-07-24T10:15:30.123456Z");
        assert_eq!(spec["leaseTransitions"], 3);
        assert_eq!(spec["strategy"], "OldestEmulationVersion");
        assert_eq!(spec["preferredHolder"], "someone");
        assert_eq!(spec["futureField"], json!({"x": 1}));
        let labels = obj.metadata.labels.as_ref().expect("labels");
        assert_eq!(labels.get("keep").map(String::as_str), Some("me"));
        assert_eq!(labels.get("app").map(String::as_str), Some("x"));
        assert_eq!(
            obj.metadata
                .annotations
                .as_ref()
                .and_then(|a| a.get("a"))
                .map(String::as_str),
            Some("b")
        );
        assert_eq!(obj.metadata.resource_version.as_deref(), Some("42"));
        // What we wrote reads back as what we meant.
        assert_eq!(
            snapshot(&obj).record,
            LeaderRecord {
                acquire_time: Some(ts("2026-07-24T10:15:30.123456Z")),
                renew_time: Some(ts("2026-07-24T10:15:30.123456Z")),
                ..rec
            }
        );
    }

    #[test]
    fn release_writes_empty_holder_and_one_second() {
        let mut obj =
            lease(json!({"holderIdentity": "me", "leaseDurationSeconds": 15, "leaseTransitions": 7}));
        let rec = snapshot(&obj).record.released(ts("2026-07-24T10:00:00Z"));
        apply(&mut obj, &rec, &BTreeMap::new());
        let spec = &obj.data["spec"];
        assert_eq!(spec["holderIdentity"], "");
        assert_eq!(spec["leaseDurationSeconds"], 1);
        assert_eq!(spec["acquireTime"], "2026-07-24T10:00:00.000000Z");
        assert_eq!(spec["renewTime"], "2026-07-24T10:00:00.000000Z");
        assert_eq!(spec["leaseTransitions"], 7);
    }

    #[test]
    fn new_object_is_a_lease() {
        let rec = LeaderRecord::claim(None, "me", 15, ts("2026-07-24T10:00:00Z"));
        let obj = new_object("ns", "l", &rec, &BTreeMap::new());
        let v = serde_json::to_value(&obj).expect("json");
        assert_eq!(v["apiVersion"], "coordination.k8s.io/v1");
        assert_eq!(v["kind"], "Lease");
        assert_eq!(v["metadata"]["name"], "l");
        assert_eq!(v["metadata"]["namespace"], "ns");
        assert_eq!(v["spec"]["holderIdentity"], "me");
        assert_eq!(v["spec"]["leaseTransitions"], 0);
    }
}
