//! provider-nop on the real control plane, as a process: issue 5's "must show" 1 (lifecycle) and 5
//! (upstream's example manifest).

use std::time::Duration;

use anyhow::{Context, Result, ensure};
use apis::condition::{TYPE_READY, TYPE_SYNCED};
use apis::meta::{FINALIZER_MANAGED, SECRET_TYPE_CONNECTION};
use jiff::Timestamp;
use k8s_openapi::api::core::v1::Secret;
use kube::api::{DeleteParams, PostParams};
use kube::{Api, CustomResourceExt, ResourceExt};
use provider_nop::types::NopResource;
use testenv::log_dir;
use testenv::support::{Process, cluster, eventually, install_crds, replica_args};

const BIN: &str = env!("CARGO_BIN_EXE_provider-nop");

fn condition<'a>(r: &'a NopResource, t: &str) -> Option<&'a apis::Condition> {
    r.status
        .as_ref()
        .and_then(|s| s.resource_status.conditions.iter().find(|c| c.type_ == t))
}

fn status_is(r: &NopResource, t: &str, s: &str) -> bool {
    condition(r, t).is_some_and(|c| c.status.as_str() == s)
}

async fn start_provider(test: &str, ns: &str) -> Result<Process> {
    let c = cluster();
    let mut args = replica_args(
        &c,
        ns,
        "crossplane-leader-election-provider-nop",
        &format!("{test}-a"),
    );
    args.extend(["--poll", "5s", "--max-reconcile-rate", "10"].map(String::from));
    Ok(Process::start(BIN, &log_dir!(test), &format!("{ns}-a"), &args)?)
}

#[tokio::test]
async fn nopresource_lifecycle() -> Result<()> {
    let c = cluster();
    let client = c.client().await?;
    install_crds(&client, &[NopResource::crd()]).await?;
    let ns = c.namespace("nop-life").await?;
    let provider = start_provider("nop-lifecycle", &ns).await?;

    let name = format!("{ns}-life");
    let manifest = serde_json::json!({
        "apiVersion": "nop.crossplane.io/v1alpha1",
        "kind": "NopResource",
        "metadata": { "name": name, "labels": { "test": ns } },
        "spec": {
            "forProvider": {
                "conditionAfter": [
                    { "time": "2s", "conditionType": "Ready", "conditionStatus": "False" },
                    { "time": "5s", "conditionType": "Ready", "conditionStatus": "True" },
                    { "time": "7s", "conditionType": "Green", "conditionStatus": "True", "conditionReason": "Painted" },
                ],
                "connectionDetails": [
                    { "name": "username", "value": "nop" },
                    { "name": "password", "value": "s3cret" },
                ],
                "fields": { "a": 1 },
            },
            "writeConnectionSecretToRef": { "name": "nop-conn", "namespace": ns },
        },
    });
    let api: Api<NopResource> = Api::all(client.clone());
    let created = api
        .create(&PostParams::default(), &serde_json::from_value(manifest)?)
        .await?;
    let born = created.creation_timestamp().context("creationTimestamp")?.0;

    // Watch the conditions flip, noting when each was first seen.
    let mut seen_false: Option<Timestamp> = None;
    let mut seen_true: Option<Timestamp> = None;
    let mut seen_green: Option<Timestamp> = None;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    while seen_green.is_none() || seen_true.is_none() {
        ensure!(
            tokio::time::Instant::now() < deadline,
            "conditions did not flip in time; provider log:\n{}",
            provider.log_text()
        );
        let r = api.get(&name).await?;
        let now = Timestamp::now();
        if seen_false.is_none() && status_is(&r, TYPE_READY, "False") {
            seen_false = Some(now);
        }
        if seen_true.is_none() && status_is(&r, TYPE_READY, "True") {
            seen_true = Some(now);
        }
        if seen_green.is_none() && status_is(&r, "Green", "True") {
            seen_green = Some(now);
            ensure!(condition(&r, "Green").is_some_and(|c| c.reason == "Painted"));
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let age = |t: Option<Timestamp>| t.map(|t| t.duration_since(born).as_secs_f64());
    let (f, t, g) = (age(seen_false), age(seen_true), age(seen_green));
    println!("Ready=False seen at {f:?}s, Ready=True at {t:?}s, Green=True at {g:?}s after creation");
    // creationTimestamp has second precision, so ages can read up to 1 s high.
    let within = |a: Option<f64>, want: f64| a.is_some_and(|a| a >= want - 0.05 && a <= want + 2.5);
    ensure!(f.is_none() || within(f, 2.0), "Ready=False at {f:?}");
    ensure!(within(t, 5.0), "Ready=True at {t:?}, asked for 5s");
    ensure!(within(g, 7.0), "Green=True at {g:?}, asked for 7s");

    let r = api.get(&name).await?;
    ensure!(
        status_is(&r, TYPE_SYNCED, "True"),
        "Synced: {:?}",
        condition(&r, TYPE_SYNCED)
    );
    ensure!(
        r.finalizers().iter().any(|f| f == FINALIZER_MANAGED),
        "finalizer missing"
    );
    ensure!(
        r.annotations().get("crossplane.io/external-name") == Some(&name),
        "external name not defaulted"
    );
    ensure!(
        r.status.as_ref().and_then(|s| s.at_provider.fields.clone()) == Some(serde_json::json!({"a": 1})),
        "atProvider.fields not copied"
    );

    // The connection secret: its type, its data, and its controller.
    let secrets: Api<Secret> = Api::namespaced(client.clone(), &ns);
    let secret = secrets.get("nop-conn").await.context("connection secret")?;
    ensure!(secret.type_.as_deref() == Some(SECRET_TYPE_CONNECTION));
    let data = secret.data.clone().unwrap_or_default();
    ensure!(data.get("username").map(|b| b.0.as_slice()) == Some(b"nop".as_slice()));
    ensure!(data.get("password").map(|b| b.0.as_slice()) == Some(b"s3cret".as_slice()));
    let owner = secret
        .owner_references()
        .iter()
        .find(|o| o.controller == Some(true))
        .context("secret has no controller")?;
    ensure!(owner.kind == "NopResource" && owner.uid == r.uid().unwrap_or_default());

    // Delete: the finalizer comes off and the resource is gone.
    api.delete(&name, &DeleteParams::default()).await?;
    eventually("NopResource deleted", Duration::from_secs(20), || {
        let api = api.clone();
        let name = name.clone();
        async move { Ok(api.get_opt(&name).await?.is_none()) }
    })
    .await
    .with_context(|| provider.log_text())?;
    Ok(())
}

#[tokio::test]
async fn upstream_example_nopresource_reconciles() -> Result<()> {
    let c = cluster();
    let client = c.client().await?;
    install_crds(&client, &[NopResource::crd()]).await?;
    let ns = c.namespace("nop-example").await?;
    let provider = start_provider("nop-example", &ns).await?;

    let text = include_str!("fixtures/nopresource.yaml");
    let mut example: serde_json::Value = serde_saphyr::from_str(text).context("parsing the fixture")?;
    let name = format!("{ns}-example");
    example["metadata"]["name"] = serde_json::json!(name);
    example["metadata"]["labels"] = serde_json::json!({ "test": ns });
    example["spec"]["writeConnectionSecretToRef"]["namespace"] = serde_json::json!(ns);
    let api: Api<NopResource> = Api::all(client.clone());
    api.create(&PostParams::default(), &serde_json::from_value(example)?)
        .await
        .context("creating the example")?;

    eventually("example Synced", Duration::from_secs(20), || {
        let api = api.clone();
        let name = name.clone();
        async move { Ok(status_is(&api.get(&name).await?, TYPE_SYNCED, "True")) }
    })
    .await
    .with_context(|| provider.log_text())?;
    let secrets: Api<Secret> = Api::namespaced(client.clone(), &ns);
    let secret = secrets.get("nop-example-resource").await?;
    let keys: Vec<String> = secret.data.unwrap_or_default().into_keys().collect();
    ensure!(keys == ["endpoint", "password", "username"], "{keys:?}");
    let r = api.get(&name).await?;
    ensure!(
        r.status
            .as_ref()
            .and_then(|s| s.at_provider.fields.as_ref())
            .and_then(|f| f.get("integerField"))
            == Some(&serde_json::json!(42))
    );
    // The example asks for Ready=True after 30 s.
    eventually("example Ready after 30s", Duration::from_secs(45), || {
        let api = api.clone();
        let name = name.clone();
        async move { Ok(status_is(&api.get(&name).await?, TYPE_READY, "True")) }
    })
    .await
    .with_context(|| provider.log_text())?;
    api.delete(&name, &DeleteParams::default()).await?;
    eventually("example deleted", Duration::from_secs(20), || {
        let api = api.clone();
        let name = name.clone();
        async move { Ok(api.get_opt(&name).await?.is_none()) }
    })
    .await?;
    Ok(())
}

/// Must show 3, crossplane-runtime's safe-create rule: a resource whose create was marked pending with no
/// outcome recorded (a leader died mid-create) is not created again. It reports Synced=False/ReconcileError
/// and Ready=False/Creating, creates nothing (no connection secret, no `external-create-succeeded`) and
/// does not retry in a loop.
#[tokio::test]
async fn pending_create_without_outcome_stops() -> Result<()> {
    let c = cluster();
    let client = c.client().await?;
    install_crds(&client, &[NopResource::crd()]).await?;
    let ns = c.namespace("nop-safe").await?;
    let provider = start_provider("nop-safe-create", &ns).await?;
    let name = format!("{ns}-pending");
    let pending = Timestamp::now().strftime("%Y-%m-%dT%H:%M:%SZ").to_string();
    let manifest = serde_json::json!({
        "apiVersion": "nop.crossplane.io/v1alpha1",
        "kind": "NopResource",
        "metadata": {
            "name": name,
            "labels": { "test": ns },
            "annotations": { "crossplane.io/external-create-pending": pending },
        },
        "spec": {
            "forProvider": { "connectionDetails": [{ "name": "k", "value": "v" }] },
            "writeConnectionSecretToRef": { "name": "pending-conn", "namespace": ns },
        },
    });
    let api: Api<NopResource> = Api::all(client.clone());
    api.create(&PostParams::default(), &serde_json::from_value(manifest)?)
        .await?;
    eventually("Synced=False/ReconcileError", Duration::from_secs(20), || {
        let api = api.clone();
        let name = name.clone();
        async move {
            let r = api.get(&name).await?;
            Ok(condition(&r, TYPE_SYNCED).is_some_and(|c| {
                c.status.as_str() == "False"
                    && c.reason == "ReconcileError"
                    && c.message
                        .as_deref()
                        .is_some_and(|m| m.contains("cannot determine creation result"))
            }))
        }
    })
    .await
    .with_context(|| provider.log_text())?;
    let r = api.get(&name).await?;
    let ready = condition(&r, TYPE_READY).context("no Ready condition")?;
    ensure!(
        ready.status.as_str() == "False" && ready.reason == "Creating",
        "{ready:?}"
    );

    // Give it time to misbehave; then nothing was created and the resource was left alone.
    tokio::time::sleep(Duration::from_secs(6)).await;
    let r = api.get(&name).await?;
    ensure!(
        !r.annotations()
            .contains_key("crossplane.io/external-create-succeeded"),
        "the create was retried: {:?}",
        r.annotations()
    );
    let secrets: Api<Secret> = Api::namespaced(client.clone(), &ns);
    ensure!(
        secrets.get_opt("pending-conn").await?.is_none(),
        "a connection secret was written"
    );
    let writes = c
        .audit()
        .read()?
        .events
        .into_iter()
        .filter(|e| e.resource == "nopresources" && e.name == name && e.is_write())
        .count();
    ensure!(writes <= 4, "{writes} writes to the stuck resource: a hot loop");
    Ok(())
}
