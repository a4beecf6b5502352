//! Composition functions over gRPC on the real apiserver.
//!
//! - function-pythonic (PyPI `crossplane-function-pythonic`) then the built-in patch-and-transform:
//!   the XR composes both steps' resources and becomes Ready.
//! - A function of our own written with the official Python SDK (`tests/functions/misbehave.py`): an
//!   unreachable endpoint, a call slower than the deadline, a garbage response, a Fatal result,
//!   requirements that never settle, and a composed resource of a kind nobody serves. Each XR first
//!   composes a ConfigMap through a well-behaved step, then switches to a misbehaving Composition: it
//!   gets one clear Synced=False condition, its status stops changing (retries back off), and the
//!   ConfigMap is still there (a failed pipeline deletes nothing).
//!
//! Functions run as local processes from `target/function-venv`, which `cargo xtask test` installs;
//! the Function objects point at them with the development annotations.

mod support;

use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::Api;
use kube::api::{DynamicObject, ListParams, Patch, PatchParams};
use serde_json::{Value, json};
use support::function_process::*;
use support::*;

fn function(name: &str, id: &str, target: &str) -> Value {
    json!({"apiVersion": "pkg.crossplane.io/v1", "kind": "Function",
        "metadata": {"name": name, "labels": {"crossplane-rs.io/test": id},
                     "annotations": {"render.crossplane.io/runtime": "Development",
                                     "render.crossplane.io/runtime-development-target": target}},
        "spec": {"package": "xpkg.crossplane.io/crossplane-contrib/unused:v0.0.0"}})
}

struct Fixture {
    client: kube::Client,
    id: String,
    ns: String,
    group: String,
    comps: Api<DynamicObject>,
    xrs: Api<DynamicObject>,
    functions: Api<DynamicObject>,
    _core: Process,
}

impl Fixture {
    async fn new(prefix: &str, deadline: &str) -> anyhow::Result<Self> {
        Self::with_scope(prefix, deadline, "Namespaced").await
    }

    async fn with_scope(prefix: &str, deadline: &str, scope: &str) -> anyhow::Result<Self> {
        let cluster = testenv::Cluster::shared()?;
        let client = cluster.client().await?;
        install_crds(&client).await?;
        let id = unique();
        let ns = cluster.namespace(prefix).await?;
        let selector = format!("crossplane-rs.io/test={id}");
        let core = Process::start(
            cluster.kubeconfig(),
            &[
                "core",
                "start",
                "--watch-label-selector",
                &selector,
                "--function-deadline",
                deadline,
                "--namespace",
                &ns,
                // These tests run their functions themselves, and one writes a revision's endpoint.
                "--package-runtime",
                "External",
            ],
            &format!("{prefix}-{id}"),
        )?;
        let group = format!("{id}.{prefix}.example.org");
        let xrds = xrd_api(&client);
        let xrd_name = format!("xapps.{group}");
        apply(&xrds, json!({
            "apiVersion": "apiextensions.crossplane.io/v2", "kind": "CompositeResourceDefinition",
            "metadata": {"name": xrd_name, "labels": {"crossplane-rs.io/test": id}},
            "spec": {"group": group, "scope": scope, "names": {"kind": "XApp", "plural": "xapps"},
                     "versions": [{"name": "v1", "referenceable": true, "served": true, "schema": {"openAPIV3Schema": {
                         "type": "object", "properties": {"spec": {"type": "object",
                             "properties": {"value": {"type": "string"}}}}}}}]}
        })).await?;
        wait_for("XRD Established", Duration::from_secs(60), || async {
            let x = json(&xrds.get(&xrd_name).await?);
            Ok(condition(&x, "Established").filter(|c| c["status"] == "True"))
        })
        .await?;
        let ar = kube::core::ApiResource {
            group: group.clone(),
            version: "v1".into(),
            api_version: format!("{group}/v1"),
            kind: "XApp".into(),
            plural: "xapps".into(),
        };
        let xrs = if scope == "Namespaced" {
            Api::namespaced_with(client.clone(), &ns, &ar)
        } else {
            Api::all_with(client.clone(), &ar)
        };
        Ok(Self {
            xrs,
            comps: dynamic(
                &client,
                "apiextensions.crossplane.io",
                "v1",
                "Composition",
                "compositions",
            ),
            functions: dynamic(&client, "pkg.crossplane.io", "v1", "Function", "functions"),
            client,
            id,
            ns,
            group,
            _core: core,
        })
    }

    async fn composition(&self, name: &str, pipeline: Value) -> anyhow::Result<()> {
        apply(
            &self.comps,
            json!({
                "apiVersion": "apiextensions.crossplane.io/v1", "kind": "Composition",
                "metadata": {"name": name, "labels": {"crossplane-rs.io/test": self.id}},
                "spec": {"compositeTypeRef": {"apiVersion": format!("{}/v1", self.group), "kind": "XApp"},
                         "mode": "Pipeline", "pipeline": pipeline}
            }),
        )
        .await?;
        Ok(())
    }

    async fn xr(&self, name: &str, composition: &str, value: &str) -> anyhow::Result<()> {
        apply(
            &self.xrs,
            json!({"apiVersion": format!("{}/v1", self.group), "kind": "XApp",
            "metadata": {"name": name, "namespace": self.ns},
            "spec": {"value": value, "crossplane": {"compositionRef": {"name": composition}}}}),
        )
        .await?;
        Ok(())
    }

    async fn ready(&self, name: &str) -> anyhow::Result<Value> {
        wait_for(&format!("XR {name} Ready"), Duration::from_secs(90), || async {
            let x = json(&self.xrs.get(name).await?);
            Ok(condition(&x, "Ready")
                .filter(|c| c["status"] == "True")
                .map(|_| x))
        })
        .await
    }

    async fn composed(&self, xr: &str) -> anyhow::Result<Vec<ConfigMap>> {
        let cms: Api<ConfigMap> = Api::namespaced(self.client.clone(), &self.ns);
        Ok(cms
            .list(&ListParams::default().labels(&format!("crossplane.io/composite={xr}")))
            .await?
            .items)
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pythonic_then_patch_and_transform_composes_and_the_xr_becomes_ready() -> anyhow::Result<()> {
    let pythonic = serve(venv_bin("function-pythonic")?, &["--insecure"], "pythonic").await?;
    let f = Fixture::new("fnpy", "20s").await?;
    let fname = format!("function-pythonic-{}", f.id);
    apply(&f.functions, function(&fname, &f.id, &pythonic.address)).await?;
    let comp = format!("pythonic-{}", f.id);
    f.composition(&comp, json!([
        {"step": "pythonic", "functionRef": {"name": fname},
         "input": {"apiVersion": "pythonic.fn.fortra.com/v1alpha1", "kind": "Composite", "composite":
            "class App(BaseComposite):\n  def compose(self):\n    cm = self.resources.fromPython('v1', 'ConfigMap')\n    cm.data.value = 'python:' + str(self.spec.value)\n    cm.ready = True\n"}},
        {"step": "pt", "functionRef": {"name": "function-patch-and-transform"},
         "input": {"apiVersion": "pt.fn.crossplane.io/v1beta1", "kind": "Resources", "resources": [{
             "name": "fromPT", "base": {"apiVersion": "v1", "kind": "ConfigMap", "data": {}},
             "patches": [{"type": "FromCompositeFieldPath", "fromFieldPath": "spec.value", "toFieldPath": "data.value"}],
             "readinessChecks": [{"type": "NonEmpty", "fieldPath": "data.value"}]}]}}
    ])).await?;
    f.xr("app", &comp, "hello").await?;
    let x = f
        .ready("app")
        .await
        .with_context(|| format!("function log: {}", pythonic.log.display()))?;
    assert_eq!(
        condition(&x, "Synced").map(|c| c["status"].clone()),
        Some(json!("True")),
        "{x}"
    );
    let mut values: Vec<(String, String)> = f
        .composed("app")
        .await?
        .into_iter()
        .map(|cm| {
            let t = cm
                .metadata
                .annotations
                .unwrap_or_default()
                .get("crossplane.io/composition-resource-name")
                .cloned()
                .unwrap_or_default();
            (
                t,
                cm.data
                    .unwrap_or_default()
                    .get("value")
                    .cloned()
                    .unwrap_or_default(),
            )
        })
        .collect();
    values.sort();
    assert_eq!(
        values,
        vec![
            ("fromPT".into(), "hello".into()),
            ("fromPython".into(), "python:hello".into())
        ]
    );

    // Realtime composition: a change to a composed resource is undone at once, not at the next poll
    // (the XR is Ready, so its next poll is a minute away).
    let cms: Api<ConfigMap> = Api::namespaced(f.client.clone(), &f.ns);
    let pt = f
        .composed("app")
        .await?
        .into_iter()
        .find(|cm| {
            cm.metadata.annotations.as_ref().is_some_and(|a| {
                a.get("crossplane.io/composition-resource-name")
                    .map(String::as_str)
                    == Some("fromPT")
            })
        })
        .context("the fromPT ConfigMap")?;
    let name = pt.metadata.name.clone().context("name")?;
    let changed = std::time::Instant::now();
    cms.patch(
        &name,
        &PatchParams::default(),
        &Patch::Merge(&json!({"data": {"value": "tampered"}})),
    )
    .await?;
    wait_for(
        "the composed ConfigMap restored",
        Duration::from_secs(20),
        || async {
            let cm = cms.get(&name).await?;
            Ok((cm.data.unwrap_or_default().get("value").map(String::as_str) == Some("hello")).then_some(()))
        },
    )
    .await?;
    let took = changed.elapsed();
    println!(
        "realtime: composed ConfigMap restored {:.0} ms after the change",
        took.as_secs_f64() * 1000.0
    );
    assert!(
        took < Duration::from_secs(5),
        "restored only after {took:?}: composed resources are not watched"
    );
    drop(pythonic);
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn function_connection_details_reach_the_xr_connection_secret() -> anyhow::Result<()> {
    let python = venv_bin("python")?;
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/functions/misbehave.py");
    let served = serve(python, &[script.to_str().context("utf-8 path")?], "connection").await?;
    let f = Fixture::with_scope("fncon", "20s", "LegacyCluster").await?;
    let fname = format!("function-connection-{}", f.id);
    apply(&f.functions, function(&fname, &f.id, &served.address)).await?;
    let comp = format!("connection-{}", f.id);
    f.composition(
        &comp,
        json!([{"step": "connection", "functionRef": {"name": fname},
        "input": {"apiVersion": "test.crossplane-rs.io/v1", "kind": "Input", "mode": "connection"}}]),
    )
    .await?;
    let secret = format!("conn-{}", f.id);
    apply(
        &f.xrs,
        json!({"apiVersion": format!("{}/v1", f.group), "kind": "XApp",
        "metadata": {"name": format!("legacy-{}", f.id)},
        "spec": {"value": "s3cr3t", "compositionRef": {"name": comp},
                 "writeConnectionSecretToRef": {"name": secret, "namespace": f.ns}}}),
    )
    .await?;
    let secrets: Api<k8s_openapi::api::core::v1::Secret> = Api::namespaced(f.client.clone(), &f.ns);
    let s = wait_for("the XR's connection Secret", Duration::from_secs(60), || async {
        Ok(secrets.get_opt(&secret).await?)
    })
    .await
    .with_context(|| format!("function log: {}", served.log.display()))?;
    assert_eq!(s.type_.as_deref(), Some("connection.crossplane.io/v1alpha1"));
    let data = s.data.unwrap_or_default();
    assert_eq!(
        data.get("value").map(|b| b.0.as_slice()),
        Some(b"s3cr3t".as_slice())
    );
    let owner = s.metadata.owner_references.unwrap_or_default();
    assert_eq!(owner.first().map(|o| o.kind.as_str()), Some("XApp"));
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn misbehaving_functions_give_one_clear_condition_and_delete_nothing() -> anyhow::Result<()> {
    let python = venv_bin("python")?;
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/functions/misbehave.py");
    let script = script.to_str().context("utf-8 path")?.to_owned();
    let good = serve(python.clone(), &[&script], "misbehave").await?;
    let garbage = serve(python, &[&script, "--garbage"], "garbage").await?;
    let f = Fixture::new("fnbad", "3s").await?;
    let id = f.id.clone();
    let misbehave = format!("function-misbehave-{id}");
    let garbled = format!("function-garbage-{id}");
    let gone = format!("function-gone-{id}");
    apply(&f.functions, function(&misbehave, &id, &good.address)).await?;
    apply(&f.functions, function(&garbled, &id, &garbage.address)).await?;
    apply(
        &f.functions,
        function(&gone, &id, &format!("127.0.0.1:{}", free_port()?)),
    )
    .await?;
    // The SDK function reads its input's top-level fields.
    let input = |mode: &str| json!({"apiVersion": "test.crossplane-rs.io/v1", "kind": "Input", "mode": mode, "seconds": 10});
    let good_comp = format!("good-{id}");
    f.composition(
        &good_comp,
        json!([{"step": "compose", "functionRef": {"name": misbehave}, "input": input("compose")}]),
    )
    .await?;
    // (case, Composition pipeline, what the Synced condition must say)
    let cases: Vec<(&str, Value, String)> = vec![
        (
            "unreachable",
            json!([{"step": "s", "functionRef": {"name": gone}, "input": input("compose")}]),
            "is unreachable".into(),
        ),
        (
            "slow",
            json!([{"step": "s", "functionRef": {"name": misbehave}, "input": input("slow")}]),
            "did not answer within its deadline of 3s".into(),
        ),
        (
            "garbage",
            json!([{"step": "s", "functionRef": {"name": garbled}, "input": input("compose")}]),
            "failed: Internal".into(),
        ),
        (
            "fatal",
            json!([{"step": "s", "functionRef": {"name": misbehave}, "input": input("fatal")}]),
            "returned a fatal result: this function always fails".into(),
        ),
        (
            "require-more",
            json!([{"step": "s", "functionRef": {"name": misbehave}, "input": input("require-more")}]),
            "requirements for extra resources still changed after 5 calls".into(),
        ),
        (
            "unknown-kind",
            json!([{"step": "s", "functionRef": {"name": misbehave}, "input": input("unknown-kind")}]),
            "Kind=Ghost".into(),
        ),
    ];
    for (case, pipeline, _) in &cases {
        f.composition(&format!("{case}-{id}"), pipeline.clone()).await?;
        f.xr(case, &good_comp, case).await?;
    }
    for (case, _, _) in &cases {
        f.ready(case)
            .await
            .with_context(|| format!("function log: {}", good.log.display()))?;
        let cms = f.composed(case).await?;
        anyhow::ensure!(
            cms.len() == 1,
            "{case}: one composed ConfigMap expected, got {}",
            cms.len()
        );
    }
    // The function's Normal result is an Event on the XR.
    let events: Api<k8s_openapi::api::core::v1::Event> = Api::namespaced(f.client.clone(), &f.ns);
    wait_for(
        "the function's result as an Event on the XR",
        Duration::from_secs(30),
        || async {
            let l = events
                .list(&ListParams::default().fields("involvedObject.name=fatal"))
                .await?;
            Ok(l.items.into_iter().find(|e| {
                e.type_.as_deref() == Some("Normal")
                    && e.message.as_deref() == Some("compose: composed config with value 'fatal'")
            }))
        },
    )
    .await?;
    for (case, _, _) in &cases {
        let patch = json!({"spec": {"crossplane": {"compositionRef": {"name": format!("{case}-{id}")}}}});
        f.xrs
            .patch(case, &PatchParams::default(), &Patch::Merge(&patch))
            .await?;
    }
    for (case, _, expected) in &cases {
        let c = wait_for(
            &format!("{case}: Synced=False saying {expected:?}"),
            Duration::from_secs(60),
            || async {
                let x = json(&f.xrs.get(case).await?);
                Ok(condition(&x, "Synced").filter(|c| {
                    c["status"] == "False"
                        && c["message"]
                            .as_str()
                            .is_some_and(|m| m.contains(expected.as_str()))
                }))
            },
        )
        .await?;
        assert_eq!(c["reason"], "ReconcileError", "{case}: {c}");
        let cms = f.composed(case).await?;
        assert_eq!(cms.len(), 1, "{case}: a failed pipeline deletes nothing");
    }
    // Retries back off and the condition is stable: the status stops changing.
    for (case, _, _) in &cases {
        tokio::time::sleep(Duration::from_secs(1)).await;
        let before = f.xrs.get(case).await?.metadata.resource_version;
        tokio::time::sleep(Duration::from_secs(5)).await;
        let after = f.xrs.get(case).await?.metadata.resource_version;
        assert_eq!(before, after, "{case}: the XR keeps being written");
    }
    drop((good, garbage));
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_function_revision_endpoint_is_dialled_with_mutual_tls() -> anyhow::Result<()> {
    let f = Fixture::new("fntls", "20s").await?;
    let fname = format!("function-tls-{}", f.id);
    let port = free_port()?;
    apply(
        &f.functions,
        json!({"apiVersion": "pkg.crossplane.io/v1", "kind": "Function",
        "metadata": {"name": fname, "labels": {"crossplane-rs.io/test": f.id}},
        "spec": {"package": "xpkg.crossplane.io/crossplane-rs/misbehave:v0.0.0"}}),
    )
    .await?;
    let revs = dynamic(
        &f.client,
        "pkg.crossplane.io",
        "v1",
        "FunctionRevision",
        "functionrevisions",
    );
    let rev = format!("{fname}-1");
    apply(&revs, json!({"apiVersion": "pkg.crossplane.io/v1", "kind": "FunctionRevision",
        "metadata": {"name": rev, "labels": {"pkg.crossplane.io/package": fname, "crossplane-rs.io/test": f.id}},
        "spec": {"image": "xpkg.crossplane.io/crossplane-rs/misbehave:v0.0.0", "desiredState": "Active", "revision": 1}})).await?;
    revs.patch_status(
        &rev,
        &PatchParams::default(),
        &Patch::Merge(&json!({"status": {"endpoint": format!("dns:///127.0.0.1:{port}")}})),
    )
    .await?;
    let comp = format!("tls-{}", f.id);
    f.composition(
        &comp,
        json!([{"step": "compose", "functionRef": {"name": fname},
        "input": {"apiVersion": "test.crossplane-rs.io/v1", "kind": "Input", "mode": "compose"}}]),
    )
    .await?;
    f.xr("app", &comp, "over-mtls").await?;

    // The core issues the function's server certificate when it first needs the function.
    let secrets: Api<k8s_openapi::api::core::v1::Secret> = Api::namespaced(f.client.clone(), &f.ns);
    let server = wait_for(
        "the function's server certificate Secret",
        Duration::from_secs(60),
        || async { Ok(secrets.get_opt(&format!("{fname}-tls-server")).await?) },
    )
    .await?;
    assert!(
        secrets.get_opt("crossplane-root-ca").await?.is_some(),
        "the CA Secret"
    );
    let dir = std::env::temp_dir().join(format!("function-tls-{}", f.id));
    std::fs::create_dir_all(&dir)?;
    let data = server.data.unwrap_or_default();
    for key in ["tls.crt", "tls.key", "ca.crt"] {
        std::fs::write(
            dir.join(key),
            &data.get(key).with_context(|| format!("{key} in the Secret"))?.0,
        )?;
    }
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/functions/misbehave.py");
    let served = serve_at(
        venv_bin("python")?,
        &[
            script.to_str().context("utf-8 path")?,
            "--tls-certs-dir",
            dir.to_str().context("utf-8 path")?,
        ],
        "tls",
        port,
    )
    .await?;
    f.ready("app")
        .await
        .with_context(|| format!("function log: {}", served.log.display()))?;
    let cms = f.composed("app").await?;
    assert_eq!(cms.len(), 1);
    assert_eq!(
        cms[0]
            .data
            .clone()
            .unwrap_or_default()
            .get("value")
            .map(String::as_str),
        Some("over-mtls")
    );
    std::fs::remove_dir_all(&dir)?;
    Ok(())
}
