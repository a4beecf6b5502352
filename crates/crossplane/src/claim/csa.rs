//! The client-side claim sync (`--enable-ssa-claims=false`; crossplane `claim/syncer_csa.go`), as pure
//! functions. The XR gets the claim's labels, annotations and spec merged in with a JSON merge patch
//! (RFC 7386): keys the claim no longer has stay on the XR, as upstream's client-side apply leaves
//! them. The claim gets back, besides the refs of [`super::sync::claim_spec_patch`], the XR's external
//! name and every XR spec field it lacks (the XR's own `claimRef`, `resourceRefs`,
//! `compositionRevisionRef` and `writeConnectionSecretToRef` excepted), fields it has keeping their
//! values (upstream's mergo merge without override). Its status is the server-side sync's.

use apis::meta::ANNOTATION_EXTERNAL_NAME;
use serde_json::{Map, Value, json};

/// XR spec fields that are not handed back to the claim (upstream's `CompositeResourceSpecProps` of a
/// legacy XR less `PropagateSpecProps`).
const XR_OWN_SPEC: &[&str] = &[
    "claimRef",
    "resourceRefs",
    "compositionRevisionRef",
    "writeConnectionSecretToRef",
    "crossplane",
];

/// Applies JSON merge patch `patch` to `target` (RFC 7386).
pub fn merge_patch(target: &mut Value, patch: &Value) {
    let Some(p) = patch.as_object() else {
        *target = patch.clone();
        return;
    };
    if !target.is_object() {
        *target = json!({});
    }
    if let Some(t) = target.as_object_mut() {
        for (k, v) in p {
            if v.is_null() {
                t.remove(k);
            } else {
                merge_patch(t.entry(k.clone()).or_insert(Value::Null), v);
            }
        }
    }
}

/// The JSON merge patch that turns `old` into `new` (`None` when they are equal).
pub fn merge_diff(old: &Value, new: &Value) -> Option<Value> {
    if old == new {
        return None;
    }
    let (Some(o), Some(n)) = (old.as_object(), new.as_object()) else {
        return Some(new.clone());
    };
    let mut patch = Map::new();
    for (k, v) in n {
        let before = o.get(k).unwrap_or(&Value::Null);
        if let Some(d) = merge_diff(before, v) {
            patch.insert(
                k.clone(),
                if before.is_object() && v.is_object() {
                    d
                } else {
                    v.clone()
                },
            );
        }
    }
    for k in o.keys().filter(|k| !n.contains_key(*k)) {
        patch.insert(k.clone(), Value::Null);
    }
    Some(Value::Object(patch))
}

fn external_name(obj: &Value) -> Option<&Value> {
    obj.pointer("/metadata/annotations")
        .and_then(|a| a.get(ANNOTATION_EXTERNAL_NAME))
        .filter(|v| v.as_str().is_some_and(|s| !s.is_empty()))
}

/// The merge patch that syncs existing XR `xr` with `desired` ([`super::sync::desired_xr`]): the XR
/// keeps its own external name, and the patch carries the `resourceVersion` read. `None` when it
/// would change nothing (upstream skips a no-op update).
pub fn xr_patch(mut desired: Value, xr: &Value) -> Option<Value> {
    if let Some(en) = external_name(xr) {
        desired["metadata"]["annotations"][ANNOTATION_EXTERNAL_NAME] = en.clone();
    }
    let mut after = xr.clone();
    merge_patch(&mut after, &desired);
    if after == *xr {
        return None;
    }
    desired["metadata"]["resourceVersion"] = xr
        .pointer("/metadata/resourceVersion")
        .cloned()
        .unwrap_or(Value::Null);
    Some(desired)
}

/// Merges `src` into `dst` without overriding (upstream's mergo merge): keys `dst` lacks are added,
/// objects merge key by key, and a value `dst` has is kept unless it is empty (null, false, 0, "",
/// [] or {}).
pub fn merge_missing(dst: &mut Value, src: &Value) {
    let (Some(d), Some(s)) = (dst.as_object_mut(), src.as_object()) else {
        return;
    };
    for (k, v) in s {
        if v.is_null() {
            continue;
        }
        match d.get_mut(k) {
            None => {
                d.insert(k.clone(), v.clone());
            }
            Some(slot) if slot.is_object() && v.is_object() => merge_missing(slot, v),
            Some(slot) if composition::gojson::is_zero(slot) => *slot = v.clone(),
            Some(_) => {}
        }
    }
}

/// The merge patch that hands XR `xr` back to `claim` (`None` when nothing changes): the XR's external
/// name, its `compositionRef` when the claim has none (or the XRD enforces one), its
/// `compositionRevisionSelector` when the claim has none, its `compositionRevisionRef` under an
/// explicit `Automatic` policy (none if the XR has none), then every XR spec field the claim lacks. The
/// patch carries the claim's `resourceVersion`, as upstream's update does.
pub fn claim_patch(claim: &Value, xr: &Value, enforced_composition: bool) -> Option<Value> {
    let mut next = json!({
        "metadata": {"annotations": claim.pointer("/metadata/annotations").cloned().unwrap_or(json!({}))},
        "spec": claim.get("spec").cloned().unwrap_or(json!({})),
    });
    let before = next.clone();
    if let Some(en) = external_name(xr) {
        next["metadata"]["annotations"][ANNOTATION_EXTERNAL_NAME] = en.clone();
    }
    let spec = &mut next["spec"];
    if let Some(r) = xr.pointer("/spec/compositionRef")
        && (spec.get("compositionRef").is_none() || enforced_composition)
    {
        spec["compositionRef"] = r.clone();
    }
    if let Some(s) = xr.pointer("/spec/compositionRevisionSelector")
        && spec.get("compositionRevisionSelector").is_none()
    {
        spec["compositionRevisionSelector"] = s.clone();
    }
    if xr
        .pointer("/spec/compositionUpdatePolicy")
        .and_then(Value::as_str)
        == Some("Automatic")
        && let Some(m) = spec.as_object_mut()
    {
        match xr.pointer("/spec/compositionRevisionRef") {
            Some(r) => m.insert("compositionRevisionRef".into(), r.clone()),
            None => m.remove("compositionRevisionRef"),
        };
    }
    let mut handed = xr.get("spec").cloned().unwrap_or(json!({}));
    if let Some(m) = handed.as_object_mut() {
        for f in XR_OWN_SPEC {
            m.remove(*f);
        }
    }
    merge_missing(spec, &handed);
    let mut patch = merge_diff(&before, &next)?;
    patch["apiVersion"] = claim["apiVersion"].clone();
    patch["kind"] = claim["kind"].clone();
    patch["metadata"]["resourceVersion"] = claim
        .pointer("/metadata/resourceVersion")
        .cloned()
        .unwrap_or(Value::Null);
    Some(patch)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn xr() -> Value {
        json!({"apiVersion": "example.org/v1", "kind": "XThing",
               "metadata": {"name": "c-abcde", "resourceVersion": "7",
                            "labels": {"foo": "1", "bar": "2"},
                            "annotations": {"test/bar": "2", ANNOTATION_EXTERNAL_NAME: "theirs"}},
               "spec": {"coolField": "cool", "numbers": ["one", "three"],
                        "parameters": {"tags": {"tag": "v1", "newtag": "v2"}},
                        "compositionRef": {"name": "comp"}, "compositionUpdatePolicy": "Automatic",
                        "compositionRevisionRef": {"name": "comp-1"}, "resourceRefs": [],
                        "claimRef": {"name": "c"}}})
    }

    #[test]
    fn merge_patch_and_diff_agree() {
        let old = json!({"a": {"b": 1, "c": [1, 2]}, "d": "x"});
        let new = json!({"a": {"b": 2, "c": [1]}, "e": {"f": true}});
        let p = merge_diff(&old, &new).expect("a diff");
        assert_eq!(p, json!({"a": {"b": 2, "c": [1]}, "d": null, "e": {"f": true}}));
        let mut applied = old.clone();
        merge_patch(&mut applied, &p);
        assert_eq!(applied, new);
        assert_eq!(merge_diff(&new, &new), None);
    }

    #[test]
    fn what_the_claim_drops_stays_on_the_xr() {
        // The claim now has foo and foo2, test/foo2, numbers [one, five], tags without newtag.
        let desired = json!({"apiVersion": "example.org/v1", "kind": "XThing",
            "metadata": {"name": "c-abcde", "labels": {"foo": "1", "foo2": "3"},
                         "annotations": {"test/foo2": "4", ANNOTATION_EXTERNAL_NAME: "mine"}},
            "spec": {"coolField": "cool", "numbers": ["one", "five"], "parameters": {"tags": {"tag": "v1"}},
                     "claimRef": {"name": "c"}}});
        let patch = xr_patch(desired, &xr()).expect("a change");
        assert_eq!(patch["metadata"]["resourceVersion"], "7");
        assert_eq!(
            patch["metadata"]["annotations"][ANNOTATION_EXTERNAL_NAME],
            "theirs"
        );
        let mut after = xr();
        merge_patch(&mut after, &patch);
        assert_eq!(
            after["metadata"]["labels"],
            json!({"foo": "1", "bar": "2", "foo2": "3"})
        );
        assert_eq!(after["metadata"]["annotations"]["test/bar"], "2");
        assert_eq!(after["spec"]["numbers"], json!(["one", "five"]));
        assert_eq!(
            after["spec"]["parameters"]["tags"],
            json!({"tag": "v1", "newtag": "v2"})
        );
        assert_eq!(after["spec"]["compositionRevisionRef"], json!({"name": "comp-1"}));
        // Positive control of the no-op check: the same claim again changes nothing.
        let same = json!({"apiVersion": "example.org/v1", "kind": "XThing",
            "metadata": {"name": "c-abcde", "labels": {"foo": "1"}}, "spec": {"coolField": "cool"}});
        assert_eq!(xr_patch(same, &xr()), None);
    }

    #[test]
    fn the_claim_gets_what_it_lacks_and_keeps_what_it_has() {
        let claim = json!({"apiVersion": "example.org/v1", "kind": "Thing",
            "metadata": {"name": "c", "namespace": "ns", "resourceVersion": "3"},
            "spec": {"coolField": "mine", "numbers": ["one"], "parameters": {"tags": {"tag": "v0"}},
                     "compositionRevisionRef": {"name": "old"}}});
        let p = claim_patch(&claim, &xr(), false).expect("a patch");
        assert_eq!(
            p,
            json!({"apiVersion": "example.org/v1", "kind": "Thing",
                   "metadata": {"annotations": {ANNOTATION_EXTERNAL_NAME: "theirs"}, "resourceVersion": "3"},
                   "spec": {"parameters": {"tags": {"newtag": "v2"}}, "compositionRef": {"name": "comp"},
                            "compositionUpdatePolicy": "Automatic",
                            "compositionRevisionRef": {"name": "comp-1"}}})
        );
        let mut after = claim.clone();
        merge_patch(&mut after, &p);
        assert!(
            claim_patch(&after, &xr(), false).is_none(),
            "not a fixpoint: {after}"
        );
        // The enforced Composition wins over the claim's.
        let mut mine = after.clone();
        mine["spec"]["compositionRef"] = json!({"name": "mine"});
        let p = claim_patch(&mine, &xr(), true).expect("a patch");
        assert_eq!(p["spec"], json!({"compositionRef": {"name": "comp"}}));
        assert!(claim_patch(&mine, &xr(), false).is_none());
    }
}
