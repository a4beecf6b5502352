//! Whether a server-side apply would change nothing. A configuration is stamped with the hash of its
//! own JSON; an object that carries that stamp, and on which every field of the configuration still
//! holds, needs no apply. The stamp catches a field the configuration no longer sets (which an apply
//! would remove); the field check catches someone else's change to a field the configuration sets.
//!
//! An apply that changes nothing still costs the apiserver a full decode, merge and validation; for a
//! CRD, whose schema is validated, that is most of a reconcile's cost.

use serde_json::Value;
use sha2::{Digest, Sha256};

/// The annotation holding the hash of the configuration last applied.
pub const ANNOTATION: &str = "crossplane-rs.io/applied-hash";

/// The hash of `config`'s JSON, hex, without any stamp it already has.
pub fn hash(config: &Value) -> String {
    let mut unstamped = config.clone();
    if let Some(meta) = unstamped.get_mut("metadata").and_then(Value::as_object_mut) {
        let emptied = meta
            .get_mut("annotations")
            .and_then(Value::as_object_mut)
            .is_some_and(|a| {
                a.remove(ANNOTATION);
                a.is_empty()
            });
        if emptied {
            meta.remove("annotations");
        }
    }
    let digest = Sha256::digest(unstamped.to_string().as_bytes());
    digest.iter().map(|b| format!("{b:02x}")).collect()
}

/// `config` with its hash in [`ANNOTATION`].
pub fn stamp(mut config: Value) -> Value {
    let h = hash(&config);
    if let Some(meta) = config.get_mut("metadata").and_then(Value::as_object_mut) {
        let annotations = meta
            .entry("annotations")
            .or_insert_with(|| Value::Object(serde_json::Map::new()));
        if let Some(a) = annotations.as_object_mut() {
            a.insert(ANNOTATION.to_owned(), Value::String(h));
        }
    }
    config
}

/// Whether `existing` already holds the stamped configuration `config`: it carries the same stamp,
/// and every field `config` sets holds in it.
pub fn unchanged(config: &Value, existing: &Value) -> bool {
    stamp_of(config).is_some_and(|s| stamp_of(existing) == Some(s)) && holds(config, existing)
}

/// The stamp `v` carries, if any.
pub fn stamp_of(v: &Value) -> Option<&str> {
    v.get("metadata")?.get("annotations")?.get(ANNOTATION)?.as_str()
}

/// Whether every field of `want` holds in `have`: objects key by key, arrays element by element and of
/// the same length, anything else equal. A null, an empty object or an empty array in `want` matches a
/// missing key: the apiserver leaves empty maps and lists out of the objects it stores for built-in
/// types (Go's `omitempty`), so a CRD rendered with `labels: {}` comes back without `labels`.
pub fn holds(want: &Value, have: &Value) -> bool {
    difference(want, have).is_none()
}

/// Whether `v` is null, an empty object or an empty array.
fn is_nothing(v: &Value) -> bool {
    match v {
        Value::Null => true,
        Value::Object(o) => o.is_empty(),
        Value::Array(a) => a.is_empty(),
        _ => false,
    }
}

/// The path of the first field of `want` that does not hold in `have` (see [`holds`]), as in
/// `.spec.versions[0].name`, or `None` when every field holds.
pub fn difference(want: &Value, have: &Value) -> Option<String> {
    match (want, have) {
        (Value::Object(w), Value::Object(h)) => w.iter().find_map(|(k, v)| match h.get(k) {
            None if is_nothing(v) => None,
            None => Some(format!(".{k}")),
            Some(hv) => difference(v, hv).map(|rest| format!(".{k}{rest}")),
        }),
        (Value::Array(w), Value::Array(h)) if w.len() != h.len() => {
            Some(format!(" (length {} wanted, {} found)", w.len(), h.len()))
        }
        (Value::Array(w), Value::Array(h)) => w
            .iter()
            .zip(h)
            .enumerate()
            .find_map(|(i, (a, b))| difference(a, b).map(|rest| format!("[{i}]{rest}"))),
        _ if want == have => None,
        _ => Some(String::new()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn defaults_the_server_added_still_hold() {
        let want = json!({"spec": {"names": {"kind": "X"}, "versions": [{"name": "v1"}]}});
        let have = json!({"spec": {"names": {"kind": "X", "listKind": "XList"}, "versions": [{"name": "v1", "storage": true}],
                                   "conversion": {"strategy": "None"}}});
        assert!(holds(&want, &have));
    }

    #[test]
    fn a_changed_value_a_missing_key_or_another_length_does_not_hold() {
        let want = json!({"spec": {"names": {"kind": "X"}, "versions": [{"name": "v1"}]}});
        assert!(!holds(
            &want,
            &json!({"spec": {"names": {"kind": "Y"}, "versions": [{"name": "v1"}]}})
        ));
        assert!(!holds(&want, &json!({"spec": {"versions": [{"name": "v1"}]}})));
        assert!(!holds(
            &want,
            &json!({"spec": {"names": {"kind": "X"}, "versions": [{"name": "v1"}, {"name": "v2"}]}})
        ));
        assert!(holds(&json!({"a": null}), &json!({})));
    }

    #[test]
    fn an_empty_map_or_list_holds_where_the_server_left_it_out() {
        // The apiserver stores a CRD applied with `labels: {}` without `labels`.
        let want = json!({"metadata": {"name": "x", "labels": {}, "finalizers": []}});
        assert!(holds(&want, &json!({"metadata": {"name": "x"}})));
        assert!(!holds(
            &json!({"metadata": {"labels": {"a": "b"}}}),
            &json!({"metadata": {}})
        ));
        assert_eq!(
            difference(
                &json!({"metadata": {"labels": {"a": "b"}}}),
                &json!({"metadata": {}})
            ),
            Some(".metadata.labels".to_owned())
        );
        assert_eq!(
            difference(
                &json!({"spec": {"v": [{"n": 1}]}}),
                &json!({"spec": {"v": [{"n": 2}]}})
            ),
            Some(".spec.v[0].n".to_owned())
        );
        assert_eq!(
            difference(&json!({"spec": {"v": [1]}}), &json!({"spec": {"v": [1, 2]}})),
            Some(".spec.v (length 1 wanted, 2 found)".to_owned())
        );
    }

    #[test]
    fn only_the_same_stamp_and_fields_are_unchanged() {
        let config = stamp(json!({"metadata": {"name": "x"}, "spec": {"a": 1, "b": 2}}));
        let mut existing = config.clone();
        existing["status"] = json!({"conditions": []});
        assert!(unchanged(&config, &existing));

        // A field the configuration no longer sets changes the stamp.
        let smaller = stamp(json!({"metadata": {"name": "x"}, "spec": {"a": 1}}));
        assert!(!unchanged(&smaller, &existing));

        // Someone else's change to a field the configuration sets.
        existing["spec"]["a"] = json!(5);
        assert!(!unchanged(&config, &existing));

        // No stamp at all.
        assert!(!unchanged(&json!({"spec": {"a": 1}}), &json!({"spec": {"a": 1}})));
    }

    #[test]
    fn the_hash_ignores_its_own_stamp() {
        let config = json!({"metadata": {"name": "x"}, "spec": {"a": 1}});
        assert_eq!(hash(&config), hash(&stamp(config.clone())));
    }
}
