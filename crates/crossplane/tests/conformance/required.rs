//! The required-resources and required-schemas scenarios of upstream's
//! `apiextensions_compositions_test.go` (`test/e2e/manifests/apiextensions/composition/required-*`): a
//! function asks for an existing ConfigMap (`requirements.resources`) or for the OpenAPI schema of a
//! kind (`requirements.schemas`), and reports on the XR's status what it received.
//!
//! What differs from upstream's run, and why: function-python is a function of ours with its contract
//! (`tests/functions/python.py`: the step input's script defines `compose(req, rsp)`), running as a
//! local process, so the wait for the Function's `Healthy` and `Active` is left out; the scripts are
//! ours. The installed Python SDK (crossplane-function-sdk-python 0.9.0) predates required schemas, so
//! the schema script uses that function's `schemas` helpers, which read and write those protocol
//! fields at upstream's field numbers.

use serde_json::{Value, json};

use super::harness::World;
use super::outcome::{COMPOSITIONS, record};
use crate::{MIN, SEC};

/// A namespaced v2 XRD `kind` (`plural`) in `group` with a required `spec.testField` and the status
/// fields `status` (name, type).
fn xrd(w: &World, group: &str, kind: &str, plural: &str, status: &[(&str, &str)]) -> Value {
    let props: serde_json::Map<String, Value> = status
        .iter()
        .map(|(n, t)| ((*n).to_owned(), json!({"type": t})))
        .collect();
    json!({
        "apiVersion": "apiextensions.crossplane.io/v2", "kind": "CompositeResourceDefinition",
        "metadata": {"name": format!("{plural}.{group}"), "labels": w.labels()},
        "spec": {"scope": "Namespaced", "group": group, "names": {"kind": kind, "plural": plural},
                 "versions": [{"name": "v1alpha1", "served": true, "referenceable": true,
                     "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                         "spec": {"type": "object", "properties": {"testField": {"type": "string"}},
                                  "required": ["testField"]},
                         "status": {"type": "object", "properties": props}}}}}]}
    })
}

/// A Composition `name` for `group`/v1alpha1 `kind` of one function-python step running `script`.
fn python_composition(w: &World, name: &str, group: &str, kind: &str, function: &str, script: &str) -> Value {
    json!({
        "apiVersion": "apiextensions.crossplane.io/v1", "kind": "Composition",
        "metadata": {"name": name, "labels": w.labels()},
        "spec": {"compositeTypeRef": {"apiVersion": format!("{group}/v1alpha1"), "kind": kind},
                 "mode": "Pipeline",
                 "pipeline": [{"step": "ask-and-report", "functionRef": {"name": function},
                               "input": {"apiVersion": "python.fn.crossplane.io/v1beta1", "kind": "Script",
                                         "script": script}}]}
    })
}

/// The script of the required-resources scenario: ask for ConfigMap `namespace/name` and report it.
fn resources_script(namespace: &str, name: &str) -> String {
    format!(
        r#"from crossplane.function import request, response
from crossplane.function.proto.v1 import run_function_pb2 as fnv1


def compose(req, rsp):
    # Ask the core for one ConfigMap, by name; it arrives in the next call.
    response.require_resources(rsp, name="the-configmap", api_version="v1", kind="ConfigMap",
                               match_name="{name}", namespace="{namespace}")
    got = "the-configmap" in req.required_resources
    value = ""
    if got:
        cm = request.get_required_resource(req, "the-configmap") or {{}}
        value = cm.get("data", {{}}).get("test-key", "")
    rsp.desired.composite.resource.update({{"status": {{
        "resourceReceived": got,
        "resourceHasExpectedData": value == "test-value",
        "receivedValue": value,
    }}}})
    rsp.results.append(fnv1.Result(severity=fnv1.SEVERITY_NORMAL,
                                   message=f"ConfigMap received: {{got}}, test-key: {{value!r}}"))
"#
    )
}

/// A ConfigMap `name` in `namespace` whose `test-key` is `value`.
fn configmap(w: &World, namespace: &str, name: &str, value: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap",
           "metadata": {"name": name, "namespace": namespace, "labels": w.labels()},
           "data": {"test-key": value, "another-key": "another-value"}})
}

pub async fn test_required_resources() -> anyhow::Result<()> {
    record("TestRequiredResources", COMPOSITIONS, async {
        let mut w = World::start("required-resources").await?;
        let function = w.serve_function("python.py", "function-python-resources").await?;
        let group = format!("{}.example.org", w.id);
        let setup = vec![
            xrd(&w, &group, "ResourceTest", "resourcetests",
                &[("resourceReceived", "boolean"), ("resourceHasExpectedData", "boolean"),
                  ("receivedValue", "string")]),
            python_composition(&w, &format!("resource-test-composition-{}", w.id), &group, "ResourceTest",
                               &function, &resources_script(&w.ns, "test-configmap")),
            configmap(&w, &w.ns, "test-configmap", "test-value"),
        ];
        // CreatePrerequisites.
        w.apply_all(&setup).await?;
        w.has_condition(MIN, &setup[0], "Established", "True", "WatchingCompositeResource").await?;

        // CreateXR, XRIsReady.
        let xr = json!({"apiVersion": format!("{group}/v1alpha1"), "kind": "ResourceTest",
                        "metadata": {"namespace": w.ns, "name": "test-resource-request"},
                        "spec": {"testField": "test"}});
        w.apply_all(std::slice::from_ref(&xr)).await?;
        w.has_condition(MIN, &xr, "Ready", "True", "Available").await?;
        w.has_condition(MIN, &xr, "Synced", "True", "ReconcileSuccess").await?;

        // ResourceWasReceived, ResourceHasExpectedData, XRReflectsInitialValue.
        w.has_field(MIN, &xr, "/status/resourceReceived", &json!(true)).await?;
        w.has_field(MIN, &xr, "/status/resourceHasExpectedData", &json!(true)).await?;
        w.has_field(MIN, &xr, "/status/receivedValue", &json!("test-value")).await?;

        // UpdateRequiredResource, XRReactsToRequiredResourceChange: within 30 s, before the function's
        // 60 s TTL or the core's poll would reconcile the XR, so the watch on what it required did.
        let changed = std::time::Instant::now();
        w.apply(&configmap(&w, &w.ns, "test-configmap", "updated-value")).await?;
        w.has_field(30 * SEC, &xr, "/status/receivedValue", &json!("updated-value")).await?;
        let reacted = changed.elapsed();

        // DeleteXR, DeletePrerequisites.
        w.delete_all(MIN, &[xr]).await?;
        w.delete_all(3 * MIN, &setup).await?;
        Ok(format!(
            "the function received ConfigMap {}/test-configmap; its change reached the XR's status in {:.1} s",
            w.ns,
            reacted.as_secs_f64()
        ))
    })
    .await
}

/// The script of the required-schemas scenario: ask for the ConfigMap schema and report what arrived.
/// `schemas` is the function's stand-in for the SDK helpers 0.9.0 lacks.
const SCHEMAS_SCRIPT: &str = r#"from crossplane.function.proto.v1 import run_function_pb2 as fnv1


def compose(req, rsp):
    # Ask the core for the OpenAPI schema of ConfigMap; it arrives in the next call.
    schemas.require_schema(rsp, "configmap-schema", "v1", "ConfigMap")
    schema = schemas.get_required_schema(req, "configmap-schema")
    got = schema is not None
    props = (schema or {}).get("properties", {})
    has_properties = "data" in props or "binaryData" in props
    # ObjectMeta, a reference in the apiserver's document, must arrive inlined.
    meta = props.get("metadata", {})
    flattened = "properties" in meta and "$ref" not in meta
    rsp.desired.composite.resource.update({"status": {
        "schemaReceived": got,
        "schemaHasProperties": has_properties,
        "schemaHasFlattenedRefs": flattened,
    }})
    rsp.results.append(fnv1.Result(severity=fnv1.SEVERITY_NORMAL,
        message=f"schema received: {got}, properties: {has_properties}, references inlined: {flattened}"))
"#;

pub async fn test_required_schemas() -> anyhow::Result<()> {
    record("TestRequiredSchemas", COMPOSITIONS, async {
        let mut w = World::start("required-schemas").await?;
        let function = w.serve_function("python.py", "function-python-schemas").await?;
        let group = format!("{}.example.org", w.id);
        let setup = vec![
            xrd(
                &w,
                &group,
                "SchemaTest",
                "schematests",
                &[
                    ("schemaReceived", "boolean"),
                    ("schemaHasProperties", "boolean"),
                    ("schemaHasFlattenedRefs", "boolean"),
                ],
            ),
            python_composition(
                &w,
                &format!("schema-test-composition-{}", w.id),
                &group,
                "SchemaTest",
                &function,
                SCHEMAS_SCRIPT,
            ),
        ];
        // CreatePrerequisites.
        w.apply_all(&setup).await?;
        w.has_condition(MIN, &setup[0], "Established", "True", "WatchingCompositeResource")
            .await?;

        // CreateXR, XRIsReady.
        let xr = json!({"apiVersion": format!("{group}/v1alpha1"), "kind": "SchemaTest",
                        "metadata": {"namespace": w.ns, "name": "test-schema-request"},
                        "spec": {"testField": "test"}});
        w.apply_all(std::slice::from_ref(&xr)).await?;
        w.has_condition(MIN, &xr, "Ready", "True", "Available").await?;
        w.has_condition(MIN, &xr, "Synced", "True", "ReconcileSuccess")
            .await?;

        // SchemaWasReceived, SchemaHasExpectedProperties, SchemaHasFlattenedRefs.
        w.has_field(MIN, &xr, "/status/schemaReceived", &json!(true))
            .await?;
        w.has_field(MIN, &xr, "/status/schemaHasProperties", &json!(true))
            .await?;
        w.has_field(MIN, &xr, "/status/schemaHasFlattenedRefs", &json!(true))
            .await?;

        // DeleteXR, DeletePrerequisites.
        w.delete_all(MIN, &[xr]).await?;
        w.delete_all(3 * MIN, &setup).await?;
        Ok(
            "the function received the ConfigMap schema from the apiserver's OpenAPI v3, with data and an \
            inlined ObjectMeta"
                .into(),
        )
    })
    .await
}
