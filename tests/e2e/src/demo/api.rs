//! Kubernetes helpers: the demo's API resources, reading objects as JSON, applying and deleting them.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, ensure};
use k8s_openapi::api::coordination::v1::Lease;
use kube::api::{ApiResource, DeleteParams, DynamicObject, GroupVersionKind, Patch, PatchParams};
use kube::discovery::Scope;
use kube::{Api, Client};
use serde_json::{Value, json};

use super::{ANNOTATION_RESOURCE_NAME, LABEL_COMPOSITE, MANAGER, NS, XR};

fn resource(group: &str, version: &str, kind: &str, plural: &str) -> ApiResource {
    ApiResource {
        group: group.into(),
        version: version.into(),
        api_version: if group.is_empty() {
            version.into()
        } else {
            format!("{group}/{version}")
        },
        kind: kind.into(),
        plural: plural.into(),
    }
}

pub(super) fn xrd_resource() -> ApiResource {
    resource(
        "apiextensions.crossplane.io",
        "v2",
        "CompositeResourceDefinition",
        "compositeresourcedefinitions",
    )
}
pub(super) fn composition_resource() -> ApiResource {
    resource("apiextensions.crossplane.io", "v1", "Composition", "compositions")
}
pub(super) fn xr_resource() -> ApiResource {
    resource("demo.crossplane-rs.io", "v1", "XApp", "xapps")
}
pub(super) fn nop_resource() -> ApiResource {
    resource("nop.crossplane.io", "v1alpha1", "NopResource", "nopresources")
}
pub(super) fn object_resource() -> ApiResource {
    resource("kubernetes.crossplane.io", "v1alpha2", "Object", "objects")
}
pub(super) fn provider_config_resource() -> ApiResource {
    resource(
        "kubernetes.crossplane.io",
        "v1alpha1",
        "ProviderConfig",
        "providerconfigs",
    )
}

pub(super) fn examples_dir() -> PathBuf {
    testenv::harness::repo_root().join("examples").join("demo")
}

pub(super) fn to_json(o: DynamicObject) -> Value {
    serde_json::to_value(o).unwrap_or(Value::Null)
}

/// The status of condition `type_`.
pub(super) fn condition(obj: &Value, type_: &str) -> Option<String> {
    obj.pointer("/status/conditions")?
        .as_array()?
        .iter()
        .find(|c| c["type"] == type_)
        .and_then(|c| c["status"].as_str())
        .map(str::to_owned)
}

pub(super) async fn get_json(client: &Client, ar: &ApiResource, name: &str) -> Result<Value> {
    let api: Api<DynamicObject> = Api::all_with(client.clone(), ar);
    Ok(api.get_opt(name).await?.map(to_json).unwrap_or(Value::Null))
}

/// The resources of kind `ar` the demo XR composed.
pub(super) async fn composed(client: &Client, ar: &ApiResource) -> Result<Vec<Value>> {
    let api: Api<DynamicObject> = Api::all_with(client.clone(), ar);
    let mut items: Vec<Value> = api
        .list(&kube::api::ListParams::default().labels(&format!("{LABEL_COMPOSITE}={XR}")))
        .await?
        .items
        .into_iter()
        .map(to_json)
        .collect();
    items.sort_by(|a, b| {
        a["metadata"]["annotations"][ANNOTATION_RESOURCE_NAME]
            .as_str()
            .cmp(&b["metadata"]["annotations"][ANNOTATION_RESOURCE_NAME].as_str())
    });
    Ok(items)
}

/// The holder of the Lease `name` in the demo's namespace (empty when none).
pub(super) async fn holder(client: &Client, name: &str) -> Result<String> {
    let lease = Api::<Lease>::namespaced(client.clone(), NS).get_opt(name).await?;
    Ok(lease
        .and_then(|l| l.spec)
        .and_then(|s| s.holder_identity)
        .unwrap_or_default())
}

pub(super) fn read_example(path: &Path) -> Result<Value> {
    let text = std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    serde_saphyr::from_str(&text).with_context(|| format!("parsing {}", path.display()))
}

/// The API of an object given as JSON, found through discovery.
pub(super) async fn api_for(client: &Client, obj: &Value) -> Result<Api<DynamicObject>> {
    let api_version = obj["apiVersion"].as_str().context("apiVersion")?;
    let kind = obj["kind"].as_str().context("kind")?;
    let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
    let (ar, caps) = kube::discovery::pinned_kind(client, &GroupVersionKind::gvk(group, version, kind))
        .await
        .with_context(|| format!("discovering {api_version} {kind}"))?;
    Ok(match caps.scope {
        Scope::Namespaced => Api::namespaced_with(
            client.clone(),
            obj["metadata"]["namespace"].as_str().unwrap_or(NS),
            &ar,
        ),
        Scope::Cluster => Api::all_with(client.clone(), &ar),
    })
}

/// Server-side applies `obj` (as admin).
pub(super) async fn apply(client: &Client, obj: &Value) -> Result<()> {
    let name = obj["metadata"]["name"].as_str().context("metadata.name")?;
    api_for(client, obj)
        .await?
        .patch(name, &PatchParams::apply(MANAGER).force(), &Patch::Apply(obj))
        .await
        .with_context(|| format!("applying {} {name}", obj["kind"]))?;
    Ok(())
}

/// Deletes `name` of `ar` (cluster-scoped) and waits until it is gone; with `force`, finalizers left
/// after the time-out (a controller that no longer runs) are removed.
pub(super) async fn delete_and_wait(
    client: &Client,
    ar: &ApiResource,
    name: &str,
    timeout: Duration,
    force: bool,
) -> Result<()> {
    let api: Api<DynamicObject> = Api::all_with(client.clone(), ar);
    match api.delete(name, &DeleteParams::background()).await {
        Ok(_) => {}
        Err(kube::Error::Api(s)) if s.code == 404 => return Ok(()),
        Err(e) => return Err(e.into()),
    }
    let deadline = Instant::now() + timeout;
    while api.get_opt(name).await?.is_some() {
        if Instant::now() > deadline {
            ensure!(force, "{} {name} was not deleted within {timeout:?}", ar.kind);
            let _ = api
                .patch(
                    name,
                    &PatchParams::default(),
                    &Patch::Merge(json!({"metadata": {"finalizers": null}})),
                )
                .await;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    Ok(())
}
