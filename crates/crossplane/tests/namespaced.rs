//! A namespaced XR (the v2 default scope) composes namespaced resources (ConfigMaps) into its own
//! namespace, and deleting it deletes them.

mod support;

use std::time::Duration;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::Api;
use kube::api::{DeleteParams, ListParams};
use serde_json::json;
use support::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn namespaced_xr_composes_into_its_namespace() -> anyhow::Result<()> {
    let cluster = testenv::Cluster::shared()?;
    let client = cluster.client().await?;
    install_crds(&client).await?;
    let id = unique();
    let ns = cluster.namespace("xr-ns").await?;
    let selector = format!("crossplane-rs.io/test={id}");
    let _core = Process::start(
        cluster.kubeconfig(),
        &["core", "start", "--watch-label-selector", &selector],
        &format!("ns-{id}"),
    )?;
    let group = format!("{id}.ns.example.org");
    let xrd_name = format!("xapps.{group}");
    let xrds = dynamic(
        &client,
        "apiextensions.crossplane.io",
        "v2",
        "CompositeResourceDefinition",
        "compositeresourcedefinitions",
    );
    let comps = dynamic(
        &client,
        "apiextensions.crossplane.io",
        "v1",
        "Composition",
        "compositions",
    );
    apply(&xrds, json!({
        "apiVersion": "apiextensions.crossplane.io/v2", "kind": "CompositeResourceDefinition",
        "metadata": {"name": xrd_name, "labels": {"crossplane-rs.io/test": id}},
        "spec": {"group": group, "names": {"kind": "XApp", "plural": "xapps"},
                 "versions": [{"name": "v1", "referenceable": true, "served": true, "schema": {"openAPIV3Schema": {
                     "type": "object", "properties": {"spec": {"type": "object", "properties": {"greeting": {"type": "string"}}}}}}}]}
    })).await?;
    apply(&comps, json!({
        "apiVersion": "apiextensions.crossplane.io/v1", "kind": "Composition",
        "metadata": {"name": format!("app-{id}"), "labels": {"crossplane-rs.io/test": id}},
        "spec": {"compositeTypeRef": {"apiVersion": format!("{group}/v1"), "kind": "XApp"}, "mode": "Pipeline",
                 "pipeline": [{"step": "pt", "functionRef": {"name": "function-patch-and-transform"},
                   "input": {"apiVersion": "pt.fn.crossplane.io/v1beta1", "kind": "Resources", "resources": [{
                     "name": "config",
                     "base": {"apiVersion": "v1", "kind": "ConfigMap", "data": {}},
                     "patches": [{"type": "FromCompositeFieldPath", "fromFieldPath": "spec.greeting", "toFieldPath": "data.greeting",
                                  "transforms": [{"type": "string", "string": {"type": "Convert", "convert": "ToUpper"}}]}],
                     "readinessChecks": [{"type": "NonEmpty", "fieldPath": "data.greeting"}]}]}}]}
    })).await?;
    wait_for("XRD Established", Duration::from_secs(30), || async {
        let x = json(&xrds.get(&xrd_name).await?);
        Ok(condition(&x, "Established").filter(|c| c["status"] == "True"))
    })
    .await?;
    let crds: Api<
        k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition,
    > = Api::all(client.clone());
    assert_eq!(crds.get(&xrd_name).await?.spec.scope, "Namespaced");

    let ar = kube::core::ApiResource {
        group: group.clone(),
        version: "v1".into(),
        api_version: format!("{group}/v1"),
        kind: "XApp".into(),
        plural: "xapps".into(),
    };
    let xrs: Api<kube::api::DynamicObject> = Api::namespaced_with(client.clone(), &ns, &ar);
    apply(
        &xrs,
        json!({"apiVersion": format!("{group}/v1"), "kind": "XApp",
                       "metadata": {"name": "app", "namespace": ns}, "spec": {"greeting": "hello"}}),
    )
    .await?;
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), &ns);
    let by_xr = ListParams::default().labels("crossplane.io/composite=app");
    let cm = wait_for("the composed ConfigMap", Duration::from_secs(30), || async {
        Ok(cms.list(&by_xr).await?.items.into_iter().next())
    })
    .await?;
    assert_eq!(
        cm.data.unwrap_or_default().get("greeting").map(String::as_str),
        Some("HELLO")
    );
    assert_eq!(cm.metadata.namespace.as_deref(), Some(ns.as_str()));
    wait_for("XR Ready", Duration::from_secs(30), || async {
        let x = json(&xrs.get("app").await?);
        Ok(condition(&x, "Ready").filter(|c| c["status"] == "True"))
    })
    .await?;
    let x = json(&xrs.get("app").await?);
    assert_eq!(x["spec"]["crossplane"]["resourceRefs"][0]["namespace"], ns);

    xrs.delete("app", &DeleteParams::default()).await?;
    wait_for("ConfigMap gone", Duration::from_secs(30), || async {
        Ok(cms.list(&by_xr).await?.items.is_empty().then_some(()))
    })
    .await?;
    xrds.delete(&xrd_name, &DeleteParams::default()).await?;
    comps
        .delete(&format!("app-{id}"), &DeleteParams::default())
        .await?;
    wait_for("XRD gone", Duration::from_secs(30), || async {
        Ok(xrds.get_opt(&xrd_name).await?.is_none().then_some(()))
    })
    .await?;
    Ok(())
}
