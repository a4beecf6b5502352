//! provider-kubernetes on the real control plane, as a process: issue 5's "must show" 2 (Object
//! lifecycle), 3 (an unknown create outcome), 5 (upstream example) and 6 (bad input).

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use anyhow::{Context, Result, ensure};
use apis::condition::{TYPE_READY, TYPE_SYNCED};
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Secret};
use testenv::log_dir;
use testenv::support::{Process, cluster, eventually, install_crds, replica_args};

use futures::StreamExt;
use kube::api::{
    ApiResource, DeleteParams, DynamicObject, ObjectMeta, Patch, PatchParams, PostParams, WatchEvent,
    WatchParams,
};
use kube::{Api, Client, ResourceExt};
use provider_kubernetes::types::{cluster as legacy, namespaced};
use serde_json::{Value, json};

const BIN: &str = env!("CARGO_BIN_EXE_provider-kubernetes");
const LEASE: &str = "crossplane-leader-election-provider-kubernetes";

fn start(test: &str, ns: &str) -> Result<Process> {
    let c = cluster();
    let identity = format!("{ns}-a");
    let mut args = replica_args(&c, ns, LEASE, &identity);
    args.extend(["--poll", "2s", "--max-reconcile-rate", "20"].map(String::from));
    Ok(Process::start(BIN, &log_dir!(test), &identity, &args)?)
}

fn cond(obj: &Value, t: &str) -> Option<(String, String, String)> {
    obj.get("status")?
        .get("conditions")?
        .as_array()?
        .iter()
        .find(|c| c.get("type").and_then(Value::as_str) == Some(t))
        .map(|c| {
            let s = |k: &str| c.get(k).and_then(Value::as_str).unwrap_or_default().to_owned();
            (s("status"), s("reason"), s("message"))
        })
}

async fn get_json<K>(api: &Api<K>, name: &str) -> Result<Option<Value>>
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + serde::Serialize + std::fmt::Debug,
{
    Ok(api
        .get_opt(name)
        .await?
        .map(|o| serde_json::to_value(o).unwrap_or(Value::Null)))
}

async fn wait_condition<K>(
    api: &Api<K>,
    name: &str,
    t: &str,
    status: &str,
    p: &Process,
) -> Result<(String, String, String)>
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + serde::Serialize + std::fmt::Debug,
{
    let mut last = None;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        if let Some(v) = get_json(api, name).await? {
            last = cond(&v, t);
            if let Some(c) = &last
                && c.0 == status
            {
                return Ok(c.clone());
            }
        }
        ensure!(
            tokio::time::Instant::now() < deadline,
            "{name}: {t} never became {status} (last {last:?}); provider log:\n{}",
            p.log_text()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

async fn gone<K>(api: &Api<K>, name: &str, what: &str) -> Result<()>
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    let api = api.clone();
    let name = name.to_owned();
    eventually(what, Duration::from_secs(30), move || {
        let api = api.clone();
        let name = name.clone();
        async move { Ok(api.get_opt(&name).await?.is_none()) }
    })
    .await?;
    Ok(())
}

async fn create<K>(api: &Api<K>, v: Value) -> Result<K>
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + serde::Serialize + std::fmt::Debug,
{
    Ok(api
        .create(&PostParams::default(), &serde_json::from_value(v)?)
        .await?)
}

fn object(ns: &str, name: &str, manifest: Value, extra_spec: Value) -> Value {
    let mut spec = json!({
        "forProvider": { "manifest": manifest },
        "providerConfigRef": { "kind": "ProviderConfig", "name": "local" },
    });
    if let (Some(s), Some(e)) = (spec.as_object_mut(), extra_spec.as_object()) {
        for (k, v) in e {
            s.insert(k.clone(), v.clone());
        }
    }
    json!({
        "apiVersion": "kubernetes.m.crossplane.io/v1alpha1",
        "kind": "Object",
        "metadata": { "name": name, "namespace": ns, "labels": { "test": ns } },
        "spec": spec,
    })
}

fn config_map(data: Value) -> Value {
    json!({ "apiVersion": "v1", "kind": "ConfigMap", "data": data })
}

async fn local_provider_config(client: &Client, ns: &str) -> Result<()> {
    let pcs: Api<namespaced::ProviderConfig> = Api::namespaced(client.clone(), ns);
    create(
        &pcs,
        json!({
            "apiVersion": "kubernetes.m.crossplane.io/v1alpha1",
            "kind": "ProviderConfig",
            "metadata": { "name": "local", "namespace": ns },
            "spec": { "credentials": { "source": "InjectedIdentity" } },
        }),
    )
    .await?;
    Ok(())
}

async fn cm_data(cms: &Api<ConfigMap>, name: &str) -> Result<Option<BTreeMap<String, String>>> {
    Ok(cms.get_opt(name).await?.map(|c| c.data.unwrap_or_default()))
}

#[tokio::test]
async fn object_lifecycle() -> Result<()> {
    let c = cluster();
    let client = c.client().await?;
    install_crds(&client, &provider_kubernetes::crds()).await?;
    let ns = c.namespace("k8s-life").await?;
    local_provider_config(&client, &ns).await?;
    let p = start("k8s-lifecycle", &ns)?;
    let objects: Api<namespaced::Object> = Api::namespaced(client.clone(), &ns);
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), &ns);

    // Create: the ConfigMap appears, the Object is Ready (SuccessfulCreate) and Synced.
    create(
        &objects,
        object(&ns, "cm-a", config_map(json!({"a": "1"})), json!({})),
    )
    .await?;
    wait_condition(&objects, "cm-a", TYPE_READY, "True", &p).await?;
    wait_condition(&objects, "cm-a", TYPE_SYNCED, "True", &p).await?;
    ensure!(
        cm_data(&cms, "cm-a")
            .await?
            .is_some_and(|d| d.get("a").map(String::as_str) == Some("1"))
    );
    let cm = cms.get("cm-a").await?;
    ensure!(
        cm.managed_fields()
            .iter()
            .any(|m| m.manager.as_deref() == Some("provider-kubernetes/cm-a")),
        "not applied as provider-kubernetes/cm-a"
    );

    // A ProviderConfigUsage exists, the config counts it and holds its finalizer.
    let usage_ar = ApiResource {
        group: namespaced::GROUP.into(),
        version: "v1alpha1".into(),
        api_version: format!("{}/v1alpha1", namespaced::GROUP),
        kind: "ProviderConfigUsage".into(),
        plural: "providerconfigusages".into(),
    };
    let usages: Api<DynamicObject> = Api::namespaced_with(client.clone(), &ns, &usage_ar);
    let uid = objects.get("cm-a").await?.uid().context("uid")?;
    let usage = usages
        .get(&uid)
        .await
        .context("usage named after the Object's uid")?;
    ensure!(
        usage
            .labels()
            .get("crossplane.io/provider-config")
            .map(String::as_str)
            == Some("local")
    );
    ensure!(
        usage
            .labels()
            .get("crossplane.io/provider-config-kind")
            .map(String::as_str)
            == Some("ProviderConfig")
    );
    let pcs: Api<namespaced::ProviderConfig> = Api::namespaced(client.clone(), &ns);
    eventually("ProviderConfig counts its user", Duration::from_secs(20), || {
        let pcs = pcs.clone();
        async move {
            let pc = pcs.get("local").await?;
            Ok(pc.status.as_ref().and_then(|s| s.users) == Some(1)
                && pc.finalizers().iter().any(|f| f == "in-use.crossplane.io"))
        }
    })
    .await?;

    // The ProviderConfig cannot be deleted while in use.
    pcs.delete("local", &DeleteParams::default()).await?;
    // Wait for the controller to have handled the deletion (it says Terminating) rather than for a
    // fixed time: then that it is still there means the controller kept it.
    eventually("the ProviderConfig Terminating", Duration::from_secs(20), || {
        let pcs = pcs.clone();
        async move {
            let pc = serde_json::to_value(pcs.get("local").await?)?;
            Ok(cond(&pc, "Terminating").is_some_and(|c| c.0 == "True"))
        }
    })
    .await?;
    let pc = pcs
        .get("local")
        .await
        .context("ProviderConfig vanished while in use")?;
    ensure!(pc.metadata.deletion_timestamp.is_some());
    let pc_json = serde_json::to_value(&pc)?;
    ensure!(
        cond(&pc_json, "Terminating").is_some_and(|c| c.0 == "True"),
        "{pc_json}"
    );

    // Changing the manifest updates the ConfigMap, and the Object's Ready does not flap: every status
    // written from the change on says Ready=True (SuccessfulCreate: the forced apply made the object
    // match), none says False until a later observe.
    let from = objects.get("cm-a").await?.resource_version().unwrap_or_default();
    let mut watch = objects
        .watch(&WatchParams::default().fields("metadata.name=cm-a"), &from)
        .await?
        .boxed();
    objects
        .patch(
            "cm-a",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"forProvider": {"manifest": {"data": {"a": "2"}}}}})),
        )
        .await?;
    eventually("ConfigMap updated", Duration::from_secs(20), || {
        let cms = cms.clone();
        async move {
            Ok(cm_data(&cms, "cm-a")
                .await?
                .is_some_and(|d| d.get("a").map(String::as_str) == Some("2")))
        }
    })
    .await?;
    let mut seen = Vec::new();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(15);
    loop {
        let event = tokio::time::timeout_at(deadline, watch.next())
            .await
            .with_context(|| format!("no current Ready status within 15 s; saw {seen:?}"))?
            .context("watch ended")??;
        let WatchEvent::Modified(o) = event else { continue };
        let v = serde_json::to_value(&o)?;
        let ready = cond(&v, TYPE_READY).map(|c| c.0).unwrap_or_default();
        let current = v["metadata"]["generation"] == v["status"]["observedGeneration"];
        seen.push((ready.clone(), current));
        ensure!(ready != "False", "Ready flapped to False on update: {seen:?}");
        if current && ready == "True" {
            break;
        }
    }

    // Readiness policies: DeriveFromObject and AllTrue follow the managed object's own conditions. The
    // managed object here is another Object (which gets Ready=True itself).
    let inner = |name: &str| {
        json!({
            "apiVersion": "kubernetes.m.crossplane.io/v1alpha1",
            "kind": "Object",
            "metadata": { "name": name, "labels": { "test": ns } },
            "spec": {
                "forProvider": { "manifest": config_map(json!({"x": "y"})) },
                "providerConfigRef": { "kind": "ProviderConfig", "name": "local" },
            },
        })
    };
    create(
        &objects,
        object(
            &ns,
            "derive",
            inner("derived"),
            json!({"readiness": {"policy": "DeriveFromObject"}}),
        ),
    )
    .await?;
    create(
        &objects,
        object(
            &ns,
            "alltrue",
            inner("alltrued"),
            json!({"readiness": {"policy": "AllTrue"}}),
        ),
    )
    .await?;
    create(
        &objects,
        object(
            &ns,
            "plain-cm",
            config_map(json!({})),
            json!({"readiness": {"policy": "DeriveFromObject"}}),
        ),
    )
    .await?;
    wait_condition(&objects, "derive", TYPE_READY, "True", &p).await?;
    wait_condition(&objects, "alltrue", TYPE_READY, "True", &p).await?;
    // A ConfigMap has no conditions: synced, but never ready under DeriveFromObject.
    wait_condition(&objects, "plain-cm", TYPE_SYNCED, "True", &p).await?;
    let (status, reason, _) = wait_condition(&objects, "plain-cm", TYPE_READY, "False", &p).await?;
    ensure!(status == "False" && reason == "Unavailable");

    // Deleting the Object deletes the ConfigMap.
    objects.delete("cm-a", &DeleteParams::default()).await?;
    gone(&cms, "cm-a", "ConfigMap deleted with its Object").await?;
    gone(&objects, "cm-a", "Object deleted").await?;

    // managementPolicies without Delete: the ConfigMap stays.
    create(
        &objects,
        object(
            &ns,
            "keep",
            config_map(json!({"k": "v"})),
            json!({"managementPolicies": ["Observe", "Create", "Update", "LateInitialize"]}),
        ),
    )
    .await?;
    wait_condition(&objects, "keep", TYPE_READY, "True", &p).await?;
    objects.delete("keep", &DeleteParams::default()).await?;
    gone(&objects, "keep", "Object without Delete policy removed").await?;
    ensure!(
        cms.get_opt("keep").await?.is_some(),
        "ConfigMap deleted despite managementPolicies without Delete"
    );

    // Cluster-scoped Object with deletionPolicy Orphan: the ConfigMap stays.
    let legacy_pcs: Api<legacy::ProviderConfig> = Api::all(client.clone());
    let legacy_pc = format!("{ns}-local");
    create(
        &legacy_pcs,
        json!({
            "apiVersion": "kubernetes.crossplane.io/v1alpha1", "kind": "ProviderConfig",
            "metadata": { "name": legacy_pc },
            "spec": { "credentials": { "source": "InjectedIdentity" } },
        }),
    )
    .await?;
    let legacy_objects: Api<legacy::Object> = Api::all(client.clone());
    let orphan = format!("{ns}-orphan");
    create(
        &legacy_objects,
        json!({
            "apiVersion": "kubernetes.crossplane.io/v1alpha2", "kind": "Object",
            "metadata": { "name": orphan, "labels": { "test": ns } },
            "spec": {
                "deletionPolicy": "Orphan",
                "forProvider": { "manifest": { "apiVersion": "v1", "kind": "ConfigMap", "metadata": { "name": "orphaned", "namespace": ns }, "data": {"o": "1"} } },
                "providerConfigRef": { "name": legacy_pc },
            },
        }),
    )
    .await?;
    wait_condition(&legacy_objects, &orphan, TYPE_READY, "True", &p).await?;
    legacy_objects.delete(&orphan, &DeleteParams::default()).await?;
    gone(&legacy_objects, &orphan, "orphaning Object removed").await?;
    ensure!(
        cms.get_opt("orphaned").await?.is_some(),
        "ConfigMap deleted despite deletionPolicy Orphan"
    );

    // Once no Object uses it, the ProviderConfig goes away.
    for name in ["derive", "alltrue", "plain-cm"] {
        objects.delete(name, &DeleteParams::default()).await?;
    }
    for name in ["derive", "alltrue", "plain-cm", "derived", "alltrued"] {
        gone(&objects, name, "Objects deleted").await?;
    }
    gone(&pcs, "local", "ProviderConfig deleted once unused")
        .await
        .with_context(|| p.log_text())?;
    legacy_pcs.delete(&legacy_pc, &DeleteParams::default()).await?;
    gone(
        &legacy_pcs,
        &legacy_pc,
        "legacy ProviderConfig deleted once unused",
    )
    .await?;
    Ok(())
}

/// As upstream (`WithDeterministicExternalName`), an Object whose create outcome is unknown (a leader died
/// between marking the create pending and recording its outcome) is applied again under the same name:
/// it ends Ready with exactly one target object. provider-nop shows the safe-create stop itself.
#[tokio::test]
async fn unknown_create_outcome_is_retried_under_the_same_name() -> Result<()> {
    let c = cluster();
    let client = c.client().await?;
    install_crds(&client, &provider_kubernetes::crds()).await?;
    let ns = c.namespace("k8s-safe").await?;
    local_provider_config(&client, &ns).await?;
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), &ns);
    // The "external" object the dead leader may or may not have made.
    create(
        &cms,
        json!({ "apiVersion": "v1", "kind": "ConfigMap", "metadata": { "name": "pending" }, "data": { "a": "0" } }),
    )
    .await?;
    let p = start("k8s-safe-create", &ns)?;
    let objects: Api<namespaced::Object> = Api::namespaced(client.clone(), &ns);
    let mut obj = object(&ns, "pending", config_map(json!({"a": "1"})), json!({}));
    obj["metadata"]["annotations"] = json!({ "crossplane.io/external-create-pending": jiff::Timestamp::now().strftime("%Y-%m-%dT%H:%M:%SZ").to_string() });
    create(&objects, obj).await?;
    wait_condition(&objects, "pending", TYPE_READY, "True", &p).await?;
    wait_condition(&objects, "pending", TYPE_SYNCED, "True", &p).await?;
    let all = cms.list(&Default::default()).await?.items;
    let named: Vec<_> = all
        .iter()
        .filter(|c| c.name_any().starts_with("pending"))
        .collect();
    ensure!(named.len() == 1, "{} ConfigMaps named pending*", named.len());
    ensure!(
        cm_data(&cms, "pending")
            .await?
            .and_then(|d| d.get("a").cloned())
            .as_deref()
            == Some("1"),
        "the existing ConfigMap was not brought to the manifest"
    );
    Ok(())
}

#[tokio::test]
async fn upstream_example_object_reconciles() -> Result<()> {
    let c = cluster();
    let client = c.client().await?;
    install_crds(&client, &provider_kubernetes::crds()).await?;
    let ns = c.namespace("k8s-example").await?;
    let p = start("k8s-example", &ns)?;
    let mut pc: Value = serde_saphyr::from_str(include_str!("fixtures/config-in-cluster.yaml"))?;
    let pc_name = format!("{ns}-kubernetes-provider");
    pc["metadata"]["name"] = json!(pc_name);
    create(&Api::<namespaced::ClusterProviderConfig>::all(client.clone()), pc).await?;
    let mut example: Value = serde_saphyr::from_str(include_str!("fixtures/object.yaml"))?;
    example["metadata"]["namespace"] = json!(ns);
    example["metadata"]["labels"] = json!({ "test": ns });
    example["spec"]["forProvider"]["manifest"]["metadata"]["name"] = json!(format!("{ns}-sample"));
    example["spec"]["providerConfigRef"]["name"] = json!(pc_name);
    let objects: Api<namespaced::Object> = Api::namespaced(client.clone(), &ns);
    create(&objects, example).await?;
    wait_condition(&objects, "sample-namespace", TYPE_READY, "True", &p).await?;
    let namespaces: Api<Namespace> = Api::all(client.clone());
    let created = namespaces.get(&format!("{ns}-sample")).await?;
    ensure!(created.labels().get("example").map(String::as_str) == Some("true"));
    objects
        .delete("sample-namespace", &DeleteParams::default())
        .await?;
    gone(&objects, "sample-namespace", "example Object deleted").await?;
    Ok(())
}

#[tokio::test]
async fn bad_input_reports_and_backs_off() -> Result<()> {
    let c = cluster();
    let client = c.client().await?;
    install_crds(&client, &provider_kubernetes::crds()).await?;
    let ns = c.namespace("k8s-bad").await?;
    local_provider_config(&client, &ns).await?;

    // A ProviderConfig whose kubeconfig belongs to a ServiceAccount that may only discover.
    let kubeconfig = c.service_account_kubeconfig(&ns, "limited").await?;
    let secrets: Api<Secret> = Api::namespaced(client.clone(), &ns);
    let text = std::fs::read_to_string(&kubeconfig)?;
    secrets
        .create(
            &PostParams::default(),
            &Secret {
                metadata: ObjectMeta {
                    name: Some("limited-kubeconfig".into()),
                    ..ObjectMeta::default()
                },
                string_data: Some([("kubeconfig".to_owned(), text)].into()),
                ..Secret::default()
            },
        )
        .await?;
    let pcs: Api<namespaced::ProviderConfig> = Api::namespaced(client.clone(), &ns);
    create(
        &pcs,
        json!({
            "apiVersion": "kubernetes.m.crossplane.io/v1alpha1", "kind": "ProviderConfig",
            "metadata": { "name": "limited", "namespace": ns },
            "spec": { "credentials": { "source": "Secret", "secretRef": { "name": "limited-kubeconfig", "key": "kubeconfig" } } },
        }),
    )
    .await?;

    let p = start("k8s-bad-input", &ns)?;
    let objects: Api<namespaced::Object> = Api::namespaced(client.clone(), &ns);
    create(&objects, object(&ns, "not-an-object", json!("hello"), json!({}))).await?;
    let mut missing = object(&ns, "missing-config", config_map(json!({})), json!({}));
    missing["spec"]["providerConfigRef"] = json!({ "kind": "ProviderConfig", "name": "nope" });
    create(&objects, missing).await?;
    let mut forbidden = object(&ns, "forbidden", config_map(json!({})), json!({}));
    forbidden["spec"]["providerConfigRef"] = json!({ "kind": "ProviderConfig", "name": "limited" });
    create(&objects, forbidden).await?;
    let started = jiff::Timestamp::now();

    for (name, needle) in [
        ("not-an-object", "is not a Kubernetes object"),
        ("missing-config", "cannot get ProviderConfig"),
        ("forbidden", "forbidden"),
    ] {
        let (_, reason, message) = wait_condition(&objects, name, TYPE_SYNCED, "False", &p).await?;
        println!("{name}: {reason}: {message}");
        ensure!(
            reason == "ReconcileError" && message.contains(needle),
            "{name}: {message}"
        );
    }

    // Let the backoff run for a while, then read the request rate off the audit log.
    tokio::time::sleep(Duration::from_secs(40)).await;
    let mut child = p;
    ensure!(child.is_running(), "the provider exited:\n{}", child.log_text());
    let events = c.audit().read()?.events;
    let ua = format!("provider-kubernetes/{} ({ns}-a)", env!("CARGO_PKG_VERSION"));
    let times = |f: &dyn Fn(&testenv::AuditEvent) -> bool| -> Vec<f64> {
        events
            .iter()
            .filter(|e| e.received >= started && f(e))
            .map(|e| e.received.duration_since(started).as_secs_f64())
            .collect()
    };
    let missing_gets = times(&|e| e.user_agent == ua && e.resource == "providerconfigs" && e.name == "nope");
    let forbidden_gets = times(&|e| {
        e.user == format!("system:serviceaccount:{ns}:limited")
            && e.resource == "configmaps"
            && e.verb == "get"
    });
    let status_writes = times(&|e| {
        e.user_agent == ua && e.resource == "objects" && e.subresource == "status" && e.is_write()
    });
    println!(
        "missing-config: {} GETs at {missing_gets:.1?}",
        missing_gets.len()
    );
    println!("forbidden: {} GETs at {forbidden_gets:.1?}", forbidden_gets.len());
    println!("status writes over all three: {}", status_writes.len());
    for (what, t) in [
        ("missing ProviderConfig", &missing_gets),
        ("forbidden target", &forbidden_gets),
    ] {
        // Backoff 1 s, 2 s, 4 s ... caps the attempts in ~45 s at about 7; a hot loop would make hundreds.
        ensure!(
            t.len() >= 3 && t.len() <= 10,
            "{what}: {} attempts: {t:?}",
            t.len()
        );
        let gaps: Vec<f64> = t.windows(2).map(|w| w[1] - w[0]).collect();
        ensure!(
            gaps.last().copied().unwrap_or(0.0) >= 4.0,
            "{what}: no backoff visible: {gaps:?}"
        );
    }
    // Status is written when it changes, not on every retry.
    ensure!(status_writes.len() <= 12, "{} status writes", status_writes.len());
    // The client built from the ProviderConfig's kubeconfig sends the replica's user agent, so that
    // the target's audit log tells which replica made each request.
    let limited_agents: BTreeSet<&str> = events
        .iter()
        .filter(|e| e.received >= started && e.user == format!("system:serviceaccount:{ns}:limited"))
        .map(|e| e.user_agent.as_str())
        .collect();
    ensure!(
        limited_agents == BTreeSet::from([ua.as_str()]),
        "the kubeconfig client's user agents: {limited_agents:?}, expected only {ua:?}"
    );
    child.kill();
    Ok(())
}
