//! Tearing the demo down: the example resources, then the RBAC and the namespace.

use std::time::{Duration, Instant};

use anyhow::{Result, ensure};
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kube::api::DeleteParams;
use kube::{Api, Client};

use super::api::{
    api_for, composed, composition_resource, delete_and_wait, nop_resource, object_resource,
    provider_config_resource, xr_resource, xrd_resource,
};
use super::report::show;
use super::{NS, XR, demo_deployments, generate};

/// Deletes the example resources in order, while the controllers still run: the XR (and so what it
/// composed), the Composition and XRD (and so the XR's CRD), the ProviderConfig.
pub(super) async fn delete_examples(client: &Client, force: bool, mut note: impl FnMut(&str)) -> Result<()> {
    let start = Instant::now();
    let wait = Duration::from_secs(60);
    // The XR's CRD may not exist (any more): then there is no XR either.
    let xr_crd: Api<
        k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition,
    > = Api::all(client.clone());
    if xr_crd.get_opt("xapps.demo.crossplane-rs.io").await?.is_some() {
        delete_and_wait(client, &xr_resource(), XR, wait, force).await?;
    }
    let deadline = Instant::now() + wait;
    loop {
        let left = composed(client, &nop_resource()).await?.len()
            + composed(client, &object_resource()).await?.len();
        let cm = Api::<ConfigMap>::namespaced(client.clone(), NS)
            .get_opt(&format!("{XR}-config"))
            .await?;
        if left == 0 && cm.is_none() {
            break;
        }
        if Instant::now() > deadline {
            ensure!(force, "the composed resources were not deleted within {wait:?}");
            for ar in [nop_resource(), object_resource()] {
                for r in composed(client, &ar).await? {
                    if let Some(n) = r["metadata"]["name"].as_str() {
                        delete_and_wait(client, &ar, n, Duration::ZERO, true).await?;
                    }
                }
            }
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    note(&format!(
        "deleted XApp/{XR}: its NopResources, Object and ConfigMap are gone ({})",
        show(start.elapsed())
    ));
    delete_and_wait(
        client,
        &composition_resource(),
        "xapps.demo.crossplane-rs.io",
        wait,
        force,
    )
    .await?;
    delete_and_wait(
        client,
        &xrd_resource(),
        "xapps.demo.crossplane-rs.io",
        wait,
        force,
    )
    .await?;
    delete_and_wait(client, &provider_config_resource(), "demo", wait, force).await?;
    note(&format!(
        "deleted the Composition, the XRD (and its CRD) and the ProviderConfig ({})",
        show(start.elapsed())
    ));
    Ok(())
}

/// Deletes the cluster-scoped RBAC of the bases and the namespace (with everything in it).
pub(super) async fn delete_rbac_and_namespace(client: &Client) -> Result<()> {
    for b in demo_deployments() {
        for (_, obj) in generate::base(&b, &release::registry::Registry::default()) {
            let kind = obj["kind"].as_str().unwrap_or_default();
            if kind != "ClusterRole" && kind != "ClusterRoleBinding" {
                continue;
            }
            let name = obj["metadata"]["name"].as_str().unwrap_or_default();
            match api_for(client, &obj)
                .await?
                .delete(name, &DeleteParams::default())
                .await
            {
                Ok(_) => {}
                Err(kube::Error::Api(s)) if s.code == 404 => {}
                Err(e) => return Err(e.into()),
            }
        }
    }
    let namespaces: Api<Namespace> = Api::all(client.clone());
    match namespaces.delete(NS, &DeleteParams::default()).await {
        Ok(_) => {}
        Err(kube::Error::Api(s)) if s.code == 404 => return Ok(()),
        Err(e) => return Err(e.into()),
    }
    let deadline = Instant::now() + Duration::from_secs(60);
    while namespaces.get_opt(NS).await?.is_some() && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    Ok(())
}
