//! What a claim and its XR exchange (crossplane `claim/syncer_ssa.go`), as pure functions: the XR a
//! claim asks for, the fields the XR hands back to the claim's spec, and the claim's status.

use apis::apiextensions::labels::{LABEL_CLAIM_NAME, LABEL_CLAIM_NAMESPACE};
use apis::condition::{Condition, ConditionStatus};
use serde_json::{Map, Value, json};

/// Claim spec fields that are not propagated to the XR (the claim's own, and the XR's that the
/// composite reconciler owns). `compositionRef`, `compositionSelector`, `compositionUpdatePolicy` and
/// `compositionRevisionSelector` are, as upstream's `PropagateSpecProps`.
const STRIPPED_SPEC: &[&str] = &[
    "compositeDeletePolicy",
    "resourceRef",
    "writeConnectionSecretToRef",
    "compositionRevisionRef",
    "resourceRefs",
    "claimRef",
];

/// XR status fields that stay the XR's own.
const STRIPPED_STATUS: &[&str] = &["conditions", "connectionDetails", "claimConditionTypes"];

/// Whether a label or annotation key is reserved to Kubernetes (not copied from claim to XR).
fn reserved(key: &str) -> bool {
    let domain = key.split_once('/').map_or("", |(d, _)| d);
    domain == "kubernetes.io"
        || domain.ends_with(".kubernetes.io")
        || domain == "k8s.io"
        || domain.ends_with(".k8s.io")
}

fn copy_unreserved(from: Option<&Value>) -> Map<String, Value> {
    from.and_then(Value::as_object)
        .map(|m| {
            m.iter()
                .filter(|(k, _)| !reserved(k))
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect()
        })
        .unwrap_or_default()
}

/// The claim's reference as an XR's `spec.claimRef`.
pub fn claim_ref(claim: &Value) -> Value {
    json!({
        "apiVersion": claim["apiVersion"],
        "kind": claim["kind"],
        "name": claim.pointer("/metadata/name").cloned().unwrap_or(Value::Null),
        "namespace": claim.pointer("/metadata/namespace").cloned().unwrap_or(Value::Null),
    })
}

/// The XR `claim` asks for, named `name`, to be server-side applied: the claim's labels and
/// annotations (without Kubernetes' reserved keys) plus `crossplane.io/claim-name`/`-namespace`, the
/// claim's spec without its own fields (`compositionRef` too when the XRD enforces one,
/// `compositionRevisionRef` unless the XR is pinned with `Manual`), and `spec.claimRef`.
pub fn desired_xr(
    claim: &Value,
    xr: Option<&Value>,
    api_version: &str,
    kind: &str,
    name: &str,
    enforced_composition: bool,
) -> Value {
    let mut labels = copy_unreserved(claim.pointer("/metadata/labels"));
    labels.insert(
        LABEL_CLAIM_NAME.into(),
        claim.pointer("/metadata/name").cloned().unwrap_or(Value::Null),
    );
    labels.insert(
        LABEL_CLAIM_NAMESPACE.into(),
        claim
            .pointer("/metadata/namespace")
            .cloned()
            .unwrap_or(Value::Null),
    );
    let annotations = copy_unreserved(claim.pointer("/metadata/annotations"));
    let manual = xr
        .and_then(|x| x.pointer("/spec/compositionUpdatePolicy"))
        .and_then(Value::as_str)
        == Some("Manual");
    let mut spec: Map<String, Value> = claim
        .get("spec")
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    for f in STRIPPED_SPEC {
        if *f == "compositionRevisionRef" && manual {
            continue;
        }
        spec.remove(*f);
    }
    if enforced_composition {
        spec.remove("compositionRef");
    }
    spec.insert("claimRef".into(), claim_ref(claim));
    let mut meta = json!({"name": name, "labels": labels});
    if !annotations.is_empty() {
        meta["annotations"] = Value::Object(annotations);
    }
    json!({"apiVersion": api_version, "kind": kind, "metadata": meta, "spec": spec})
}

/// The spec fields the XR hands back to the claim, as a merge patch (`None` when nothing changes):
/// `resourceRef`, the XR's `compositionRef` when the claim has none (or the XRD enforces one), its
/// `compositionRevisionSelector` when the claim has none, and its `compositionRevisionRef` under the
/// `Automatic` policy.
pub fn claim_spec_patch(claim: &Value, xr: &Value, enforced_composition: bool) -> Option<Value> {
    let mut patch = Map::new();
    let resource_ref = json!({
        "apiVersion": xr["apiVersion"],
        "kind": xr["kind"],
        "name": xr.pointer("/metadata/name").cloned().unwrap_or(Value::Null),
    });
    if claim.pointer("/spec/resourceRef") != Some(&resource_ref) {
        patch.insert("resourceRef".into(), resource_ref);
    }
    if let Some(r) = xr.pointer("/spec/compositionRef")
        && (claim.pointer("/spec/compositionRef").is_none() || enforced_composition)
        && claim.pointer("/spec/compositionRef") != Some(r)
    {
        patch.insert("compositionRef".into(), r.clone());
    }
    if let Some(s) = xr.pointer("/spec/compositionRevisionSelector")
        && claim.pointer("/spec/compositionRevisionSelector").is_none()
    {
        patch.insert("compositionRevisionSelector".into(), s.clone());
    }
    let automatic = xr
        .pointer("/spec/compositionUpdatePolicy")
        .and_then(Value::as_str)
        .is_none_or(|p| p == "Automatic");
    if let Some(r) = xr.pointer("/spec/compositionRevisionRef")
        && automatic
        && claim.pointer("/spec/compositionRevisionRef") != Some(r)
    {
        patch.insert("compositionRevisionRef".into(), r.clone());
    }
    (!patch.is_empty()).then(|| json!({"spec": patch}))
}

/// The XR's status fields the claim shows (everything but the XR's own conditions and connection
/// bookkeeping).
pub fn status_overlay(xr: &Value) -> Value {
    let mut status: Map<String, Value> = xr
        .get("status")
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    for f in STRIPPED_STATUS {
        status.remove(*f);
    }
    Value::Object(status)
}

/// The claim's conditions for a bound XR: `Synced=True`, the XR's conditions named in
/// `status.claimConditionTypes`, and `Ready`: `Available` when the XR is Ready, else `Waiting`.
pub fn conditions(xr: &Value) -> Vec<Condition> {
    let xr_conditions = super::super::composite::status::current(xr);
    let mut out = vec![Condition::reconcile_success()];
    if let Some(types) = xr
        .pointer("/status/claimConditionTypes")
        .and_then(Value::as_array)
    {
        for t in types.iter().filter_map(Value::as_str) {
            if let Some(c) = apis::condition::get(&xr_conditions, t) {
                out.push(c.clone());
            }
        }
    }
    if apis::condition::is_true(&xr_conditions, "Ready") {
        out.push(Condition::available());
    } else {
        out.push(
            Condition::new("Ready", ConditionStatus::False, "Waiting")
                .with_message("Claim is waiting for composite resource to become Ready"),
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn claim() -> Value {
        json!({
            "apiVersion": "example.org/v1", "kind": "Thing",
            "metadata": {"name": "c", "namespace": "ns",
                         "labels": {"team": "a", "app.kubernetes.io/managed-by": "x"},
                         "annotations": {"kubectl.kubernetes.io/last-applied-configuration": "{}", "note": "n"}},
            "spec": {"size": 3, "compositionSelector": {"matchLabels": {"p": "q"}},
                     "compositeDeletePolicy": "Foreground", "writeConnectionSecretToRef": {"name": "s"},
                     "resourceRef": {"apiVersion": "example.org/v1", "kind": "XThing", "name": "c-abcde"},
                     "compositionRevisionRef": {"name": "r"}}
        })
    }

    #[test]
    fn the_xr_gets_the_claims_spec_labels_and_claim_ref() {
        let xr = desired_xr(&claim(), None, "example.org/v1", "XThing", "c-abcde", false);
        assert_eq!(xr["metadata"]["name"], "c-abcde");
        assert_eq!(
            xr["metadata"]["labels"],
            json!({"team": "a", LABEL_CLAIM_NAME: "c", LABEL_CLAIM_NAMESPACE: "ns"})
        );
        assert_eq!(xr["metadata"]["annotations"], json!({"note": "n"}));
        assert_eq!(
            xr["spec"],
            json!({"size": 3, "compositionSelector": {"matchLabels": {"p": "q"}},
                   "claimRef": {"apiVersion": "example.org/v1", "kind": "Thing", "name": "c", "namespace": "ns"}})
        );
        let pinned = json!({"spec": {"compositionUpdatePolicy": "Manual"}});
        let xr = desired_xr(
            &claim(),
            Some(&pinned),
            "example.org/v1",
            "XThing",
            "c-abcde",
            false,
        );
        assert_eq!(xr["spec"]["compositionRevisionRef"], json!({"name": "r"}));
        let mut c = claim();
        c["spec"]["compositionRef"] = json!({"name": "mine"});
        let xr = desired_xr(&c, None, "example.org/v1", "XThing", "c-abcde", true);
        assert!(xr["spec"].get("compositionRef").is_none());
    }

    #[test]
    fn the_claim_gets_refs_back_and_the_xrs_status() {
        let xr = json!({"apiVersion": "example.org/v1", "kind": "XThing", "metadata": {"name": "c-abcde"},
                        "spec": {"compositionRef": {"name": "comp"}, "compositionRevisionRef": {"name": "comp-1"}},
                        "status": {"conditions": [], "claimConditionTypes": [], "address": "x",
                                   "connectionDetails": {"lastPublishedTime": "t"}}});
        let p = claim_spec_patch(&claim(), &xr, false).expect("patch");
        assert_eq!(p["spec"]["compositionRef"], json!({"name": "comp"}));
        assert_eq!(p["spec"]["compositionRevisionRef"], json!({"name": "comp-1"}));
        assert!(p["spec"].get("resourceRef").is_none(), "already bound: {p}");
        assert_eq!(status_overlay(&xr), json!({"address": "x"}));
        let conds = conditions(&xr);
        assert_eq!(conds[1].reason, "Waiting");
    }

    #[test]
    fn ready_and_claim_condition_types_come_from_the_xr() {
        let ready = Condition::available();
        let custom = Condition::new("DatabaseReady", ConditionStatus::True, "Up");
        let xr = json!({"status": {"conditions": [ready, custom], "claimConditionTypes": ["DatabaseReady"]}});
        let types: Vec<_> = conditions(&xr).into_iter().map(|c| (c.type_, c.reason)).collect();
        assert_eq!(
            types,
            [
                ("Synced".to_owned(), "ReconcileSuccess".to_owned()),
                ("DatabaseReady".to_owned(), "Up".to_owned()),
                ("Ready".to_owned(), "Available".to_owned()),
            ]
        );
    }
}
