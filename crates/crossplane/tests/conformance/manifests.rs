//! The scenarios' manifests, our own, shaped after upstream's `test/e2e/manifests/apiextensions/
//! composition/*`: the same kinds, fields and values, with names made unique per scenario run.

use serde_json::{Value, json};

use super::harness::World;

/// A v2 XRD of `kind` (`plural`) in `group`, scope `scope`, with upstream's schema: `spec.coolField`
/// (a required string) and `status.coolerField`.
pub fn xrd_v2(w: &World, group: &str, kind: &str, plural: &str, scope: &str) -> Value {
    json!({
        "apiVersion": "apiextensions.crossplane.io/v2", "kind": "CompositeResourceDefinition",
        "metadata": {"name": format!("{plural}.{group}"), "labels": w.labels()},
        "spec": {"scope": scope, "group": group, "names": {"kind": kind, "plural": plural},
                 "versions": [{"name": "v1alpha1", "served": true, "referenceable": true,
                     "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                         "spec": {"type": "object", "properties": {"coolField": {"type": "string"}},
                                  "required": ["coolField"]},
                         "status": {"type": "object", "properties": {"coolerField": {"type": "string"}}}}}}}]}
    })
}

/// A v1 (legacy) XRD `XNopResource` with the claim `NopResource` in `group`, as upstream's
/// composition-selection and realtime-revision-selection definitions; `required` lists required spec
/// fields.
pub fn xrd_v1_with_claim(w: &World, group: &str, required: &[&str]) -> Value {
    let mut spec = json!({"type": "object", "properties": {
        "coolField": {"type": "string"},
        "numbers": {"type": "array", "items": {"type": "string"}}}});
    if !required.is_empty() {
        spec["required"] = json!(required);
    }
    json!({
        "apiVersion": "apiextensions.crossplane.io/v1", "kind": "CompositeResourceDefinition",
        "metadata": {"name": format!("xnopresources.{group}"), "labels": w.labels()},
        "spec": {"group": group,
                 "names": {"kind": "XNopResource", "plural": "xnopresources"},
                 "claimNames": {"kind": "NopResource", "plural": "nopresources"},
                 "connectionSecretKeys": ["test"],
                 "versions": [{"name": "v1alpha1", "served": true, "referenceable": true,
                     "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                         "spec": spec,
                         "status": {"type": "object", "properties": {"coolerField": {"type": "string"}}}}}}}]}
    })
}

/// A Composition `name` for `api_version`/`kind` of one function-dummy step whose input holds
/// `response` (a RunFunctionResponse as YAML would give it), with optional step `credentials`.
pub fn composition(
    w: &World,
    name: &str,
    api_version: &str,
    kind: &str,
    response: Value,
    credentials: Option<Value>,
) -> Value {
    let mut step = json!({
        "step": "be-a-dummy",
        "functionRef": {"name": w.function},
        "input": {"apiVersion": "dummy.fn.crossplane.io/v1beta1", "kind": "Response", "response": response},
    });
    if let Some(c) = credentials {
        step["credentials"] = c;
    }
    json!({
        "apiVersion": "apiextensions.crossplane.io/v1", "kind": "Composition",
        "metadata": {"name": name, "labels": w.labels()},
        "spec": {"compositeTypeRef": {"apiVersion": api_version, "kind": kind},
                 "mode": "Pipeline", "pipeline": [step]}
    })
}

/// Upstream's basic response: the XR's `status.coolerField`, the composed `resources`, a Normal result.
pub fn basic_response(resources: Value) -> Value {
    json!({
        "desired": {"composite": {"resource": {"status": {"coolerField": "I'M COOLER!"}}},
                    "resources": resources},
        "results": [{"severity": "SEVERITY_NORMAL", "message": "I am doing a compose!"}],
    })
}

/// The Secret upstream's basic scenarios hand to their step as credentials (data unused), and the
/// credentials naming it.
pub fn super_secret(w: &World) -> (Value, Value) {
    (
        json!({"apiVersion": "v1", "kind": "Secret",
               "metadata": {"namespace": w.system, "name": "super-secret", "labels": w.labels()}, "data": {}}),
        json!([{"name": "important-secret", "source": "Secret",
                "secretRef": {"namespace": w.system, "name": "super-secret"}}]),
    )
}

/// A ClusterRole aggregated to the core granting it NopResources, as the RBAC manager grants a
/// provider's kinds.
pub fn nop_role(w: &World) -> Value {
    let mut labels = w.labels();
    labels["rbac.crossplane.io/aggregate-to-crossplane"] = json!("true");
    json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
           "metadata": {"name": format!("crossplane:provider:provider-nop-{}:aggregate-to-crossplane", w.id),
                        "labels": labels},
           "rules": [{"apiGroups": ["nop.crossplane.io"], "resources": ["nopresources", "nopresources/status"],
                      "verbs": ["*"]}]})
}
