//! A namespaced XR (the v2 default scope) composes namespaced resources (ConfigMaps) into its own
//! namespace, and deleting it deletes them. A cluster-scoped XR composes namespaced resources into the
//! namespace its template gives, and a composed resource keeps its name while its apply keeps failing.

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
    let xrds = xrd_api(&client);
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cluster_xr_composes_into_the_templates_namespace_with_stable_names() -> anyhow::Result<()> {
    let cluster = testenv::Cluster::shared()?;
    let client = cluster.client().await?;
    install_crds(&client).await?;
    let id = unique();
    let ns = cluster.namespace("cluster-xr").await?;
    // A namespace that does not exist yet: composing into it fails until it does.
    let later = format!("later-{id}");
    let selector = format!("crossplane-rs.io/test={id}");
    let core = Process::start(
        cluster.kubeconfig(),
        &["core", "start", "--watch-label-selector", &selector],
        &format!("cluster-xr-{id}"),
    )?;
    let group = format!("{id}.cluster.example.org");
    let xrd_name = format!("xcfgs.{group}");
    let xrds = xrd_api(&client);
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
        "spec": {"group": group, "scope": "Cluster", "names": {"kind": "XCfg", "plural": "xcfgs"},
                 "versions": [{"name": "v1", "referenceable": true, "served": true, "schema": {"openAPIV3Schema": {
                     "type": "object", "properties": {"spec": {"type": "object", "properties": {"greeting": {"type": "string"}}}}}}}]}
    })).await?;
    let resource = |name: &str, namespace: &str| {
        json!({
            "name": name,
            "base": {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"namespace": namespace}, "data": {}},
            "patches": [{"type": "FromCompositeFieldPath", "fromFieldPath": "spec.greeting", "toFieldPath": "data.greeting"}],
        })
    };
    apply(&comps, json!({
        "apiVersion": "apiextensions.crossplane.io/v1", "kind": "Composition",
        "metadata": {"name": format!("cfg-{id}"), "labels": {"crossplane-rs.io/test": id}},
        "spec": {"compositeTypeRef": {"apiVersion": format!("{group}/v1"), "kind": "XCfg"}, "mode": "Pipeline",
                 "pipeline": [{"step": "pt", "functionRef": {"name": "function-patch-and-transform"},
                   "input": {"apiVersion": "pt.fn.crossplane.io/v1beta1", "kind": "Resources",
                             "resources": [resource("config", &ns), resource("later", &later)]}}]}
    })).await?;
    wait_for("XRD Established", Duration::from_secs(30), || async {
        let x = json(&xrds.get(&xrd_name).await?);
        Ok(condition(&x, "Established").filter(|c| c["status"] == "True"))
    })
    .await?;
    let xrs = dynamic(&client, &group, "v1", "XCfg", "xcfgs");
    let xr_name = format!("cfg-{id}");
    wait_for("the XR applied", Duration::from_secs(30), || async {
        Ok(apply(
            &xrs,
            json!({"apiVersion": format!("{group}/v1"), "kind": "XCfg",
                              "metadata": {"name": xr_name}, "spec": {"greeting": "hello"}}),
        )
        .await
        .ok())
    })
    .await?;

    // The ConfigMap goes where its template says; the one for the missing namespace fails, named.
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), &ns);
    let by_xr = ListParams::default().labels(&format!("crossplane.io/composite={xr_name}"));
    let cm = wait_for(
        "the composed ConfigMap in its template's namespace",
        Duration::from_secs(30),
        || async { Ok(cms.list(&by_xr).await?.items.into_iter().next()) },
    )
    .await?;
    assert_eq!(
        cm.data.unwrap_or_default().get("greeting").map(String::as_str),
        Some("hello")
    );
    let refs = |x: &serde_json::Value| {
        x["spec"]["crossplane"]["resourceRefs"]
            .as_array()
            .cloned()
            .unwrap_or_default()
    };
    let pending = wait_for("the pending resource's ref", Duration::from_secs(30), || async {
        let x = json(&xrs.get(&xr_name).await?);
        Ok(refs(&x).into_iter().find(|r| r["namespace"] == later.as_str()))
    })
    .await?;
    let x = json(&xrs.get(&xr_name).await?);
    assert!(
        refs(&x)
            .iter()
            .any(|r| r["namespace"] == ns.as_str()
                && r["name"] == cm.metadata.name.as_deref().unwrap_or_default()),
        "resourceRefs name the ConfigMap's namespace: {:?}",
        refs(&x)
    );
    let synced = wait_for("Synced=False", Duration::from_secs(30), || async {
        let x = json(&xrs.get(&xr_name).await?);
        Ok(condition(&x, "Synced").filter(|c| c["status"] == "False"))
    })
    .await?;
    let message = synced["message"].as_str().unwrap_or_default();
    assert!(
        message.contains(&later) && !message.contains("Status {"),
        "{message}"
    );
    // Several failed reconciles later (the core logs each), the pending name is still the same.
    let log = core.log.clone();
    wait_for("three failed reconciles", Duration::from_secs(60), || async {
        let text = std::fs::read_to_string(&log)?;
        let failures = text
            .lines()
            // The controller builder logs each failed reconcile with the object's key.
            .filter(|l| {
                (l.contains("reconcile failed") || l.contains("cannot reconcile composite resource"))
                    && l.contains(&xr_name)
            })
            .count();
        Ok((failures >= 3).then_some(()))
    })
    .await?;
    let x = json(&xrs.get(&xr_name).await?);
    let now: Vec<_> = refs(&x)
        .into_iter()
        .filter(|r| r["namespace"] == later.as_str())
        .collect();
    assert_eq!(
        now,
        vec![pending.clone()],
        "the pending resource was renamed while its apply failed"
    );

    // Once the namespace exists, the resource is created under the name it had all along.
    let namespaces: Api<k8s_openapi::api::core::v1::Namespace> = Api::all(client.clone());
    namespaces
        .create(
            &kube::api::PostParams::default(),
            &serde_json::from_value(
                json!({"metadata": {"name": later, "labels": {"crossplane-rs.io/test": "true"}}}),
            )?,
        )
        .await?;
    let later_cms: Api<ConfigMap> = Api::namespaced(client.clone(), &later);
    let created = wait_for(
        "the ConfigMap in the new namespace",
        Duration::from_secs(60),
        || async { Ok(later_cms.list(&by_xr).await?.items.into_iter().next()) },
    )
    .await?;
    assert_eq!(created.metadata.name.as_deref(), pending["name"].as_str());

    xrs.delete(&xr_name, &DeleteParams::default()).await?;
    wait_for("ConfigMaps gone", Duration::from_secs(30), || async {
        Ok(
            (cms.list(&by_xr).await?.items.is_empty() && later_cms.list(&by_xr).await?.items.is_empty())
                .then_some(()),
        )
    })
    .await?;
    xrds.delete(&xrd_name, &DeleteParams::default()).await?;
    comps
        .delete(&format!("cfg-{id}"), &DeleteParams::default())
        .await?;
    Ok(())
}
