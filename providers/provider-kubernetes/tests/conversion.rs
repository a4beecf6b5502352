//! The cluster-scoped Object's v1alpha1 on the real apiserver, converted by the provider's webhook: an
//! upstream v1alpha1 manifest applies unchanged, reads back as v1alpha2 and v1alpha1 and becomes Ready;
//! a CRD whose `storedVersions` include v1alpha1 (as an upstream install's may) takes ours over it; and
//! with the webhook down the apiserver says which webhook failed. A standby replica (another holds the
//! Lease) serves conversion too, from the Secret the leader makes, and writes nothing.
//!
//! The apiserver of the test bed runs on this host, so the CRD's conversion points at the provider
//! process with `url: https://127.0.0.1:<port>/convert` instead of deploy/'s Service. The provider
//! self-signs its certificate (for 127.0.0.1 as well) and sets the CRD's `caBundle` itself.
//!
//! The tests change the one shared Object CRD, so they run one at a time, and leave it as
//! `provider_kubernetes::crds()` has it.

use std::time::Duration;
use testenv::free_port;

use anyhow::{Context, Result, ensure};
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    CustomResourceDefinition, WebhookClientConfig,
};
use kube::api::{ApiResource, DeleteParams, DynamicObject, Patch, PatchParams, PostParams};
use kube::{Api, Client};
use provider_kubernetes::webhook::{CRD, SECRET};
use serde_json::{Value, json};
use testenv::log_dir;
use testenv::support::{Process, cluster, eventually, install_crds, replica_args};
use tokio::sync::Mutex;

const BIN: &str = env!("CARGO_BIN_EXE_provider-kubernetes");
const LEASE: &str = "crossplane-leader-election-provider-kubernetes";
const GROUP: &str = "kubernetes.crossplane.io";

/// The tests share the Object CRD.
static CRD_LOCK: Mutex<()> = Mutex::const_new(());

fn resource(version: &str, kind: &str, plural: &str) -> ApiResource {
    ApiResource {
        group: GROUP.into(),
        version: version.into(),
        api_version: format!("{GROUP}/{version}"),
        kind: kind.into(),
        plural: plural.into(),
    }
}

fn objects(client: &Client, version: &str) -> Api<DynamicObject> {
    Api::all_with(client.clone(), &resource(version, "Object", "objects"))
}

fn start(test: &str, ns: &str, port: u16) -> Result<Process> {
    let c = cluster();
    let identity = format!("{ns}-a");
    let mut args = replica_args(&c, ns, LEASE, &identity);
    args.extend(["--poll", "2s", "--webhook-port", &port.to_string()].map(String::from));
    Ok(Process::start(BIN, &log_dir!(test), &identity, &args)?)
}

/// `crd` converting through `https://127.0.0.1:<port>/convert`, with `ca` as its `caBundle` if given.
fn at_local_webhook(
    mut crd: CustomResourceDefinition,
    port: u16,
    ca: Option<&[u8]>,
) -> Result<CustomResourceDefinition> {
    let webhook = crd
        .spec
        .conversion
        .as_mut()
        .and_then(|c| c.webhook.as_mut())
        .context("the CRD has no conversion webhook")?;
    webhook.client_config = Some(WebhookClientConfig {
        url: Some(format!("https://127.0.0.1:{port}/convert")),
        ca_bundle: ca.map(|c| ByteString(c.to_vec())),
        service: None,
    });
    Ok(crd)
}

fn ours() -> Result<CustomResourceDefinition> {
    provider_kubernetes::crds()
        .into_iter()
        .find(|c| c.metadata.name.as_deref() == Some(CRD))
        .context("no Object CRD")
}

/// Every CRD of the provider but the Object's.
fn others() -> Result<Vec<CustomResourceDefinition>> {
    Ok(provider_kubernetes::crds()
        .into_iter()
        .filter(|c| c.metadata.name.as_deref() != Some(CRD))
        .collect())
}

/// The CA the provider keeps in its Secret in `ns`, once it has made it (as the leader) and its webhook
/// serves on `port` (every replica reads the Secret, then binds).
async fn provider_ca(client: &Client, ns: &str, port: u16, p: &Process) -> Result<Vec<u8>> {
    let secrets: Api<Secret> = Api::namespaced(client.clone(), ns);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    loop {
        if let Some(ca) = secrets
            .get_opt(SECRET)
            .await?
            .and_then(|s| s.data)
            .and_then(|d| d.get("ca.crt").cloned())
        {
            wait_serving(port, p).await?;
            return Ok(ca.0);
        }
        ensure!(
            tokio::time::Instant::now() < deadline,
            "the provider made no Secret {ns}/{SECRET}; its log:\n{}",
            p.log_text()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Waits until the provider's webhook accepts connections on `port`.
async fn wait_serving(port: u16, p: &Process) -> Result<()> {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    while tokio::net::TcpStream::connect(("127.0.0.1", port)).await.is_err() {
        ensure!(
            tokio::time::Instant::now() < deadline,
            "the provider's webhook never served on port {port}; its log:\n{}",
            p.log_text()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    Ok(())
}

/// A cluster-scoped ProviderConfig for this cluster, named after the namespace.
async fn provider_config(client: &Client, ns: &str) -> Result<String> {
    let name = format!("{ns}-kubernetes-provider");
    let pcs: Api<DynamicObject> = Api::all_with(
        client.clone(),
        &resource("v1alpha1", "ProviderConfig", "providerconfigs"),
    );
    let mut pc: Value = serde_saphyr::from_str(include_str!("fixtures/v1alpha1-provider-config.yaml"))?;
    pc["metadata"] = json!({"name": name, "labels": {"test": ns}});
    pcs.create(&PostParams::default(), &serde_json::from_value(pc)?)
        .await?;
    Ok(name)
}

/// Upstream's v1alpha1 example, renamed, labelled for this test's provider, pointed at `ns` and `config`.
fn upstream_object(ns: &str, config: &str) -> Result<(String, Value)> {
    let mut o: Value = serde_saphyr::from_str(include_str!("fixtures/v1alpha1-object.yaml"))?;
    let name = format!("{ns}-foo");
    o["metadata"]["name"] = json!(name);
    o["metadata"]["labels"] = json!({ "test": ns });
    o["spec"]["forProvider"]["manifest"]["metadata"]["namespace"] = json!(ns);
    o["spec"]["providerConfigRef"]["name"] = json!(config);
    Ok((name, o))
}

fn condition(o: &Value, t: &str) -> Option<String> {
    o.pointer("/status/conditions")?
        .as_array()?
        .iter()
        .find(|c| c["type"] == t)
        .and_then(|c| c["status"].as_str())
        .map(str::to_owned)
}

async fn wait_ready(api: &Api<DynamicObject>, name: &str, p: &Process) -> Result<Value> {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    loop {
        let o = serde_json::to_value(api.get(name).await?)?;
        if condition(&o, "Ready").as_deref() == Some("True") {
            return Ok(o);
        }
        ensure!(
            tokio::time::Instant::now() < deadline,
            "{name} never became Ready: {o}\nprovider log:\n{}",
            p.log_text()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Deletes Object `name` (the provider must be running to release it) and waits until it is gone.
async fn delete_object(client: &Client, name: &str) -> Result<()> {
    let api = objects(client, "v1alpha2");
    api.delete(name, &DeleteParams::default()).await?;
    let name = name.to_owned();
    eventually(
        &format!("Object {name} deleted"),
        Duration::from_secs(60),
        move || {
            let api = api.clone();
            let name = name.clone();
            async move { Ok(api.get_opt(&name).await?.is_none()) }
        },
    )
    .await?;
    Ok(())
}

#[tokio::test]
async fn upstream_v1alpha1_object_converts_and_reconciles() -> Result<()> {
    let _lock = CRD_LOCK.lock().await;
    let c = cluster();
    let client = c.client().await?;
    let ns = c.namespace("k8s-conv").await?;
    let port = free_port()?;
    // The CRD first, without a caBundle: the provider sets it.
    install_crds(&client, &[at_local_webhook(ours()?, port, None)?]).await?;
    install_crds(&client, &others()?).await?;
    let config = provider_config(&client, &ns).await?;
    let p = start("k8s-conversion", &ns, port)?;
    let ca = provider_ca(&client, &ns, port, &p).await?;
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    eventually(
        "the provider sets the CRD's caBundle",
        Duration::from_secs(60),
        || {
            let (crds, ca) = (crds.clone(), ca.clone());
            async move {
                let crd = crds.get(CRD).await?;
                let bundle = crd
                    .spec
                    .conversion
                    .and_then(|c| c.webhook)
                    .and_then(|w| w.client_config)
                    .and_then(|c| c.ca_bundle);
                Ok(bundle.is_some_and(|b| b.0 == ca))
            }
        },
    )
    .await?;

    // The upstream manifest, as v1alpha1: creating it converts it to v1alpha2 for storage.
    let (name, manifest) = upstream_object(&ns, &config)?;
    let v1 = objects(&client, "v1alpha1");
    let obj: DynamicObject = serde_json::from_value(manifest)?;
    let mut last;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    loop {
        match v1.create(&PostParams::default(), &obj).await {
            Ok(_) => break,
            // The apiserver may still hold the CRD without the caBundle for a moment.
            Err(kube::Error::Api(e)) if e.message.contains("conversion webhook") => last = e.message,
            Err(e) => return Err(e.into()),
        }
        ensure!(
            tokio::time::Instant::now() < deadline,
            "creating the v1alpha1 Object kept failing: {last}\nprovider log:\n{}",
            p.log_text()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }

    // Read back as v1alpha2: managementPolicy ObserveCreateUpdate became managementPolicies.
    let v2 = objects(&client, "v1alpha2");
    let as_v2 = serde_json::to_value(v2.get(&name).await?)?;
    ensure!(
        as_v2["apiVersion"] == "kubernetes.crossplane.io/v1alpha2",
        "{as_v2}"
    );
    ensure!(
        as_v2["spec"]["managementPolicies"] == json!(["Observe", "Create", "Update"]),
        "{as_v2}"
    );
    ensure!(as_v2["spec"].get("managementPolicy").is_none(), "{as_v2}");
    ensure!(
        as_v2["spec"]["providerConfigRef"]["name"] == config.as_str(),
        "{as_v2}"
    );
    ensure!(
        as_v2["spec"]["forProvider"]["manifest"]["data"]["sample-key"] == "sample-value",
        "{as_v2}"
    );

    // The provider reconciles it to Ready; read as v1alpha1 it still says ObserveCreateUpdate.
    wait_ready(&v2, &name, &p).await?;
    let as_v1 = wait_ready(&v1, &name, &p).await?;
    ensure!(
        as_v1["apiVersion"] == "kubernetes.crossplane.io/v1alpha1",
        "{as_v1}"
    );
    ensure!(
        as_v1["spec"]["managementPolicy"] == "ObserveCreateUpdate",
        "{as_v1}"
    );
    ensure!(as_v1["spec"].get("managementPolicies").is_none(), "{as_v1}");
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), &ns);
    let cm = cms.get(&name).await.context("the Object's ConfigMap")?;
    ensure!(cm.data.unwrap_or_default().get("sample-key").map(String::as_str) == Some("sample-value"));

    // The webhook down: reading as v1alpha1 fails with the apiserver naming the webhook; v1alpha2 (the
    // storage version) needs no conversion and still reads.
    drop(p);
    let e = match v1.get(&name).await {
        Err(kube::Error::Api(e)) => e,
        other => anyhow::bail!("reading v1alpha1 with the webhook down: {other:?}"),
    };
    eprintln!(
        "with the webhook down, reading v1alpha1 gives: HTTP {}: {}",
        e.code, e.message
    );
    ensure!(e.code == 500, "{e:?}");
    ensure!(
        e.message
            .contains("conversion webhook for kubernetes.crossplane.io/v1alpha2, Kind=Object failed"),
        "{e:?}"
    );
    v2.get(&name)
        .await
        .context("v1alpha2 reads without the webhook")?;

    // Clean up with the provider back (it releases the Object); leave the CRD as deploy/ has it.
    let p = start("k8s-conversion-2", &ns, port)?;
    delete_object(&client, &name)
        .await
        .with_context(|| p.log_text())?;
    install_crds(&client, &[ours()?]).await?;
    Ok(())
}

#[tokio::test]
async fn our_crd_applies_over_stored_v1alpha1() -> Result<()> {
    let _lock = CRD_LOCK.lock().await;
    let c = cluster();
    let client = c.client().await?;
    let ns = c.namespace("k8s-upgrade").await?;
    let port = free_port()?;
    install_crds(&client, &others()?).await?;
    let config = provider_config(&client, &ns).await?;
    let p = start("k8s-upgrade", &ns, port)?;
    let ca = provider_ca(&client, &ns, port, &p).await?;

    // An older install: upstream's CRD with v1alpha1 as the storage version (as before v1alpha2 was
    // added), and an Object stored as v1alpha1.
    let mut old: Value = serde_saphyr::from_str(include_str!("fixtures/upstream-objects-crd.yaml"))?;
    for v in old["spec"]["versions"].as_array_mut().context("versions")? {
        let v1 = v["name"] == "v1alpha1";
        v["storage"] = json!(v1);
    }
    let old: CustomResourceDefinition = serde_json::from_value(old)?;
    install_crds(&client, &[at_local_webhook(old, port, Some(&ca))?]).await?;
    let (name, manifest) = upstream_object(&ns, &config)?;
    let v1 = objects(&client, "v1alpha1");
    // The CRD was Established before this apply too, so the apiserver may still serve the previous
    // version's conversion webhook (the Service of deploy/) for a moment: retried until it serves the
    // new one, and the retries are counted.
    let object = serde_json::from_value(manifest)?;
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    let mut stale = 0u32;
    loop {
        match v1.create(&PostParams::default(), &object).await {
            Ok(_) => break,
            Err(kube::Error::Api(e))
                if e.message.contains("conversion webhook")
                    && e.message.contains("not found")
                    && std::time::Instant::now() < deadline =>
            {
                stale += 1;
                tokio::time::sleep(std::time::Duration::from_millis(100)).await;
            }
            Err(e) => return Err(e).with_context(|| p.log_text()),
        }
    }
    if stale > 0 {
        eprintln!(
            "the create was retried {stale} times while the apiserver still served the previous CRD's \
             conversion webhook"
        );
    }
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let stored = crds
        .get(CRD)
        .await?
        .status
        .and_then(|s| s.stored_versions)
        .unwrap_or_default();
    ensure!(
        stored.contains(&"v1alpha1".to_owned()),
        "storedVersions {stored:?}"
    );

    // Serving only v1alpha2 (crossplane-rs before this change) is refused over it...
    let mut v2_only = at_local_webhook(ours()?, port, Some(&ca))?;
    v2_only.spec.versions.retain(|v| v.name == "v1alpha2");
    let dry = PatchParams::apply("crossplane-rs-tests").force().dry_run();
    let refused = crds.patch(CRD, &dry, &Patch::Apply(&v2_only)).await;
    match refused {
        Err(kube::Error::Api(e)) => ensure!(e.message.contains("storedVersions"), "{e:?}"),
        other => anyhow::bail!("a v1alpha2-only CRD over stored v1alpha1 was not refused: {other:?}"),
    }

    // ...and ours applies, stores v1alpha2 from now on, and the Object stored as v1alpha1 reads as v1alpha2
    // (converted by the webhook) and becomes Ready.
    install_crds(&client, &[at_local_webhook(ours()?, port, Some(&ca))?]).await?;
    let now = crds.get(CRD).await?;
    let storage: Vec<&str> = now
        .spec
        .versions
        .iter()
        .filter(|v| v.storage)
        .map(|v| v.name.as_str())
        .collect();
    ensure!(storage == ["v1alpha2"], "storage {storage:?}");
    let v2 = objects(&client, "v1alpha2");
    let as_v2 = wait_ready(&v2, &name, &p).await?;
    ensure!(
        as_v2["spec"]["managementPolicies"] == json!(["Observe", "Create", "Update"]),
        "{as_v2}"
    );

    delete_object(&client, &name)
        .await
        .with_context(|| p.log_text())?;
    install_crds(&client, &[ours()?]).await?;
    Ok(())
}

#[tokio::test]
async fn a_standby_replica_serves_conversion() -> Result<()> {
    use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;

    let _lock = CRD_LOCK.lock().await;
    let c = cluster();
    let client = c.client().await?;
    let ns = c.namespace("k8s-standby").await?;
    let port = free_port()?;
    install_crds(&client, &others()?).await?;
    // The leader makes the certificate's Secret and keeps the caBundle; here the test does, as the Lease's
    // holder would. The standby only reads the Secret.
    let loopback = ["localhost".to_owned(), "127.0.0.1".to_owned()];
    let cert = webhook::ServingCert::in_secret(&client, &ns, SECRET, &loopback).await?;
    let ca = cert.ca_pem.context("the Secret has no CA")?.into_bytes();
    install_crds(&client, &[at_local_webhook(ours()?, port, Some(&ca))?]).await?;
    // Someone else holds the Lease for an hour: this replica stays a standby throughout.
    let now = MicroTime(jiff::Timestamp::now());
    let leases: Api<Lease> = Api::namespaced(client.clone(), &ns);
    leases
        .create(
            &PostParams::default(),
            &Lease {
                metadata: kube::api::ObjectMeta {
                    name: Some(LEASE.into()),
                    ..Default::default()
                },
                spec: Some(LeaseSpec {
                    holder_identity: Some("someone-else".into()),
                    lease_duration_seconds: Some(3600),
                    acquire_time: Some(now.clone()),
                    renew_time: Some(now),
                    ..Default::default()
                }),
            },
        )
        .await?;
    let config = provider_config(&client, &ns).await?;
    let p = start("k8s-standby", &ns, port)?;
    wait_serving(port, &p).await?;

    let (name, manifest) = upstream_object(&ns, &config)?;
    let v1 = objects(&client, "v1alpha1");
    let obj: DynamicObject = serde_json::from_value(manifest)?;
    let v1c = v1.clone();
    eventually(
        "the standby converts a v1alpha1 create",
        Duration::from_secs(60),
        move || {
            let (v1, obj) = (v1c.clone(), obj.clone());
            async move {
                match v1.create(&PostParams::default(), &obj).await {
                    Ok(_) => Ok(true),
                    Err(kube::Error::Api(e)) if e.message.contains("conversion webhook") => Ok(false),
                    Err(e) => Err(e.into()),
                }
            }
        },
    )
    .await
    .with_context(|| p.log_text())?;
    let as_v1 = serde_json::to_value(v1.get(&name).await?)?;
    ensure!(
        as_v1["spec"]["managementPolicy"] == "ObserveCreateUpdate",
        "{as_v1}"
    );
    let holder = testenv::support::lease_holder(&client, &ns, LEASE).await?;
    ensure!(
        holder.as_deref() == Some("someone-else"),
        "the replica took the Lease: {holder:?}"
    );
    ensure!(
        condition(&as_v1, "Ready").is_none(),
        "a standby reconciled the Object: {as_v1}"
    );
    // It wrote nothing of the webhook's either: neither a Secret of its own nor the caBundle.
    let crd = Api::<CustomResourceDefinition>::all(client.clone())
        .get(CRD)
        .await?;
    let bundle = crd
        .spec
        .conversion
        .and_then(|c| c.webhook)
        .and_then(|w| w.client_config)
        .and_then(|c| c.ca_bundle);
    ensure!(bundle.is_some_and(|b| b.0 == ca), "the caBundle changed");
    ensure!(
        !p.log_text().contains("caBundle set"),
        "the standby patched the caBundle:\n{}",
        p.log_text()
    );

    // Never reconciled, so no finalizer: it deletes without the leader.
    delete_object(&client, &name).await?;
    install_crds(&client, &[ours()?]).await?;
    Ok(())
}
