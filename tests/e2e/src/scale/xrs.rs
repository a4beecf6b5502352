//! `n` namespaced XRs of one kind, each composing 3 ConfigMaps through one function step (the Python
//! SDK function of [`super::function`]), created at once ([`super::tally`] counts them Ready).

use anyhow::Context;
use kube::{
    Api,
    api::{ApiResource, DynamicObject, GroupVersionKind, PostParams},
};
use serde_json::json;

/// The XRs' group.
const GROUP: &str = "xr.scale.crossplane-rs.io";

/// The script each call runs: 3 ConfigMaps, each marked ready.
const SCRIPT: &str = r#"
from crossplane.function import resource
from crossplane.function.proto.v1 import run_function_pb2 as fnv1

def compose(req, rsp):
    for i in range(3):
        name = f"cm-{i}"
        resource.update(rsp.desired.resources[name], {"apiVersion": "v1", "kind": "ConfigMap", "data": {"index": str(i)}})
        rsp.desired.resources[name].ready = fnv1.READY_TRUE
"#;

/// The XR kind.
pub fn api(client: &kube::Client) -> Api<DynamicObject> {
    Api::all_with(
        client.clone(),
        &ApiResource::from_gvk(&GroupVersionKind::gvk(GROUP, "v1", "XApp")),
    )
}

/// The XRD of the XRs and their Composition: one step, the function.
pub async fn install(client: &kube::Client) -> anyhow::Result<()> {
    let xrd: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "apiextensions.crossplane.io/v2", "kind": "CompositeResourceDefinition",
        "metadata": {"name": format!("xapps.{GROUP}")},
        "spec": {"scope": "Namespaced", "group": GROUP, "names": {"kind": "XApp", "plural": "xapps"},
                 "versions": [{"name": "v1", "served": true, "referenceable": true, "schema": {"openAPIV3Schema": {
                     "type": "object", "properties": {"spec": {"type": "object", "properties": {"value": {"type": "string"}}}}}}}]},
    }))?;
    super::xrds::api(client)
        .create(&PostParams::default(), &xrd)
        .await
        .context("creating the XRs' XRD")?;
    let composition: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "apiextensions.crossplane.io/v1", "kind": "Composition",
        "metadata": {"name": "scale"},
        "spec": {"compositeTypeRef": {"apiVersion": format!("{GROUP}/v1"), "kind": "XApp"}, "mode": "Pipeline",
                 "pipeline": [{"step": "compose", "functionRef": {"name": super::function::NAME},
                               "input": {"apiVersion": "python.fn.crossplane.io/v1beta1", "kind": "Script", "script": SCRIPT}}]},
    }))?;
    let gvk = GroupVersionKind::gvk("apiextensions.crossplane.io", "v1", "Composition");
    Api::<DynamicObject>::all_with(client.clone(), &ApiResource::from_gvk(&gvk))
        .create(&PostParams::default(), &composition)
        .await
        .context("creating the XRs' Composition")?;
    Ok(())
}

/// The XR kind in `ns`.
pub fn namespaced(client: &kube::Client, ns: &str) -> Api<DynamicObject> {
    let gvk = GroupVersionKind::gvk(GROUP, "v1", "XApp");
    Api::namespaced_with(client.clone(), ns, &ApiResource::from_gvk(&gvk))
}

/// XR number `i`.
pub fn xr(i: usize) -> anyhow::Result<DynamicObject> {
    Ok(serde_json::from_value(json!({
        "apiVersion": format!("{GROUP}/v1"), "kind": "XApp",
        "metadata": {"name": format!("xr-{i:04}")}, "spec": {"value": format!("{i}")},
    }))?)
}

/// Creates XRs `0..n` in `ns` at once ([`super::create_all`]).
pub async fn create(client: &kube::Client, ns: &str, n: usize) -> anyhow::Result<()> {
    super::create_all(&namespaced(client, ns), n, "XR", xr).await
}

/// Whether `obj` is `Ready=True`.
pub fn ready(obj: &DynamicObject) -> bool {
    obj.data["status"]["conditions"]
        .as_array()
        .is_some_and(|cs| cs.iter().any(|c| c["type"] == "Ready" && c["status"] == "True"))
}
