//! Must-show 5: bad input gives a clear condition, no crash and no hot loop.
//!
//! - an XRD whose schema is invalid (refused by the renderer, and one refused by the apiserver);
//! - an XR whose Composition is for another (unknown) kind;
//! - an XR that selects no Composition;
//! - an XR whose Composition uses a Function that is not installed;
//! - Usages naming an unknown kind, a user that does not exist, or a selector that selects nothing.

mod support;

use std::path::Path;
use std::time::Duration;

use anyhow::Context;
use kube::api::{DynamicObject, Patch, PatchParams};
use serde_json::{Value, json};
use support::*;

fn xrd(name_group: &str, id: &str, schema: Value) -> Value {
    json!({
        "apiVersion": "apiextensions.crossplane.io/v2", "kind": "CompositeResourceDefinition",
        "metadata": {"name": format!("xbads.{name_group}"), "labels": {"crossplane-rs.io/test": id}},
        "spec": {"group": name_group, "scope": "Cluster", "names": {"kind": "XBad", "plural": "xbads"},
                 "versions": [{"name": "v1", "referenceable": true, "served": true,
                               "schema": {"openAPIV3Schema": schema}}]}
    })
}

/// Waits for Synced=False with a message containing `expected`. Transient errors on the way (for example
/// "no matching revision yet" while the revision controller catches up) are not the answer.
async fn synced_false(api: &kube::Api<DynamicObject>, name: &str, expected: &str) -> anyhow::Result<Value> {
    wait_for(
        &format!("{name} Synced=False with {expected:?}"),
        Duration::from_secs(30),
        || async {
            let x = json(&api.get(name).await?);
            Ok(condition(&x, "Synced").filter(|c| {
                c["status"] == "False" && c["message"].as_str().is_some_and(|m| m.contains(expected))
            }))
        },
    )
    .await
}

/// How many times the core's log says a reconcile of `name` failed: the manager's line for XRDs
/// (`reconcile failed … object=<name>`), the composite reconciler's for cluster-scoped XRs
/// (`cannot reconcile composite resource xr=/<name>`).
fn failed_reconciles(log: &Path, name: &str) -> usize {
    let xrd = format!("object={name} ");
    let xr = format!("cannot reconcile composite resource xr=/{name} ");
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .filter(|l| (l.contains("reconcile failed") && l.contains(&xrd)) || l.contains(&xr))
        .count()
}

/// No write loop, judged against a positive control rather than a fixed wait: poke the object (an
/// annotation, so a watch event), wait until the core's log shows a reconcile of it failing again after
/// the poke (the core did look at it, after our write), then its resourceVersion must still be the
/// poke's own: that reconcile wrote nothing, so nothing feeds a loop. A reconcile may write once for a
/// reason of its own (the XR that selected no Composition finds one once step 4 created it), so a
/// write is allowed in the first rounds but not in all of them: a loop writes every time.
async fn settles(api: &kube::Api<DynamicObject>, name: &str, log: &Path) -> anyhow::Result<()> {
    const ROUNDS: usize = 3;
    let mut writes = Vec::new();
    for _ in 0..ROUNDS {
        let before = failed_reconciles(log, name);
        let patch = json!({"metadata": {"annotations": {"crossplane-rs.io/poke": unique()}}});
        let poked = api
            .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
            .await?;
        wait_for(
            &format!("a failed reconcile of {name} after the poke in {}", log.display()),
            Duration::from_secs(30),
            || async { Ok((failed_reconciles(log, name) > before).then_some(())) },
        )
        .await?;
        let after = api.get(name).await?;
        if after.metadata.resource_version == poked.metadata.resource_version {
            // Shown, not excused silently: the writes the earlier rounds allowed.
            println!("{name}: settled; writing reconciles before that: {writes:?}");
            return Ok(());
        }
        writes.push(format!(
            "{:?} → {:?} (Synced: {})",
            poked.metadata.resource_version,
            after.metadata.resource_version,
            condition(&json(&after), "Synced").unwrap_or_default()
        ));
    }
    anyhow::bail!("{name} was written by each of {ROUNDS} reconciles after a poke: {writes:?}")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_input_gives_clear_conditions_without_hot_loops() -> anyhow::Result<()> {
    let cluster = testenv::Cluster::shared()?;
    let client = cluster.client().await?;
    install_crds(&client).await?;
    let id = unique();
    let selector = format!("crossplane-rs.io/test={id}");
    let mut core = Process::start(
        cluster.kubeconfig(),
        &["core", "start", "--watch-label-selector", &selector],
        &format!("bad-{id}"),
    )?;
    let xrds = xrd_api(&client);
    let comps = dynamic(
        &client,
        "apiextensions.crossplane.io",
        "v1",
        "Composition",
        "compositions",
    );

    // 1. Invalid schemas.
    let g1 = format!("{id}.bad1.example.org");
    apply(&xrds, xrd(&g1, &id, json!({"type": "string"}))).await?;
    let c = synced_false(&xrds, &format!("xbads.{g1}"), "openAPIV3Schema").await?;
    let msg = c["message"].as_str().context("message")?;
    assert!(msg.contains("openAPIV3Schema must have type object"), "{msg}");
    let g2 = format!("{id}.bad2.example.org");
    apply(
        &xrds,
        xrd(
            &g2,
            &id,
            json!({"type": "object", "properties": {"spec": {"type": "object",
        "properties": {"x": {"type": "notatype"}}}}}),
        ),
    )
    .await?;
    let c = synced_false(&xrds, &format!("xbads.{g2}"), "CustomResourceDefinition").await?;
    let msg = c["message"].as_str().context("message")?;
    assert!(
        msg.contains("cannot apply rendered composite resource CustomResourceDefinition"),
        "{msg}"
    );
    assert!(msg.contains("notatype"), "{msg}");

    // A valid XRD for the XR cases.
    let g = format!("{id}.bad.example.org");
    apply(
        &xrds,
        xrd(
            &g,
            &id,
            json!({"type": "object", "properties": {"spec": {"type": "object",
        "properties": {"x": {"type": "string"}}}}}),
        ),
    )
    .await?;
    wait_for("XRD Established", Duration::from_secs(30), || async {
        let x = json(&xrds.get(&format!("xbads.{g}")).await?);
        Ok(condition(&x, "Established").filter(|c| c["status"] == "True"))
    })
    .await?;
    let xrs = dynamic(&client, &g, "v1", "XBad", "xbads");

    // 2. An XR that selects no Composition.
    apply(
        &xrs,
        json!({"apiVersion": format!("{g}/v1"), "kind": "XBad", "metadata": {"name": "none"}, "spec": {}}),
    )
    .await?;
    let c = synced_false(&xrs, "none", "no compatible Compositions found").await?;
    let msg = c["message"].as_str().context("message")?;
    assert!(msg.contains("no compatible Compositions found"), "{msg}");

    // 3. A Composition for an unknown kind, referenced by an XR.
    let pt_input = json!({"apiVersion": "pt.fn.crossplane.io/v1beta1", "kind": "Resources", "resources": []});
    apply(&comps, json!({"apiVersion": "apiextensions.crossplane.io/v1", "kind": "Composition",
        "metadata": {"name": format!("unknown-{id}"), "labels": {"crossplane-rs.io/test": id}},
        "spec": {"compositeTypeRef": {"apiVersion": "nowhere.example.org/v1", "kind": "Nope"},
                 "pipeline": [{"step": "pt", "functionRef": {"name": "function-patch-and-transform"}, "input": pt_input}]}})).await?;
    apply(
        &xrs,
        json!({"apiVersion": format!("{g}/v1"), "kind": "XBad", "metadata": {"name": "wrongkind"},
        "spec": {"crossplane": {"compositionRef": {"name": format!("unknown-{id}")}}}}),
    )
    .await?;
    let c = synced_false(&xrs, "wrongkind", "Kind=Nope").await?;
    let msg = c["message"].as_str().context("message")?;
    assert!(msg.contains("Kind=Nope") && msg.contains("Kind=XBad"), "{msg}");

    // 4. A Function that is not installed.
    apply(&comps, json!({"apiVersion": "apiextensions.crossplane.io/v1", "kind": "Composition",
        "metadata": {"name": format!("external-{id}"), "labels": {"crossplane-rs.io/test": id}},
        "spec": {"compositeTypeRef": {"apiVersion": format!("{g}/v1"), "kind": "XBad"},
                 "pipeline": [{"step": "go", "functionRef": {"name": "function-go-templating"}, "input": pt_input}]}})).await?;
    apply(
        &xrs,
        json!({"apiVersion": format!("{g}/v1"), "kind": "XBad", "metadata": {"name": "external"},
        "spec": {"crossplane": {"compositionRef": {"name": format!("external-{id}")}}}}),
    )
    .await?;
    let c = wait_for("external Synced=False", Duration::from_secs(30), || async {
        let x = json(&xrs.get("external").await?);
        Ok(condition(&x, "Synced").filter(|c| {
            // Not just "external": the transient "no matching revision yet" message names the
            // Composition `external-…` too.
            c["status"] == "False"
                && c["message"]
                    .as_str()
                    .is_some_and(|m| m.contains("function-go-templating"))
        }))
    })
    .await?;
    assert!(
        c["message"]
            .as_str()
            .is_some_and(|m| m.contains("Function \"function-go-templating\" not found: install it")),
        "{c}"
    );

    // No hot loops, no crash.
    for name in [format!("xbads.{g1}"), format!("xbads.{g2}")] {
        settles(&xrds, &name, &core.log).await?;
    }
    for name in ["none", "wrongkind", "external"] {
        settles(&xrs, name, &core.log).await?;
    }
    assert!(core.is_running(), "the core crashed; see {}", core.log.display());

    // Clean up: the XRDs go once their XRs are gone.
    for name in [format!("xbads.{g1}"), format!("xbads.{g2}"), format!("xbads.{g}")] {
        xrds.delete(&name, &Default::default()).await?;
    }
    for name in [format!("unknown-{id}"), format!("external-{id}")] {
        comps.delete(&name, &Default::default()).await?;
    }
    wait_for("XRDs gone", Duration::from_secs(30), || async {
        let l = xrds
            .list(&kube::api::ListParams::default().labels(&selector))
            .await?;
        Ok(l.items.is_empty().then_some(()))
    })
    .await?;
    Ok(())
}

/// Usages naming a kind this cluster does not serve, a user that does not exist, and a selector that
/// selects nothing: each gets Synced=False (ReconcileError) saying so in words, never a Debug dump.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_usages_give_clear_conditions() -> anyhow::Result<()> {
    let cluster = testenv::Cluster::shared()?;
    let client = cluster.client().await?;
    install_crds(&client).await?;
    let id = unique();
    let ns = cluster.namespace("bad-usages").await?;
    let selector = format!("crossplane-rs.io/test={id}");
    let port = testenv::free_port()?.to_string();
    let mut core = Process::start(
        cluster.kubeconfig(),
        &[
            "core",
            "start",
            "--watch-label-selector",
            &selector,
            "--namespace",
            &ns,
            "--webhook-port",
            &port,
            "--webhook-url",
            &format!("https://127.0.0.1:{port}"),
        ],
        &format!("bad-usages-{id}"),
    )?;
    let labels = json!({"crossplane-rs.io/test": id});
    let usages = kube::Api::<DynamicObject>::namespaced_with(
        client.clone(),
        &ns,
        &kube::core::ApiResource::from_gvk_with_plural(
            &kube::core::GroupVersionKind::gvk("protection.crossplane.io", "v1beta1", "Usage"),
            "usages",
        ),
    );
    let cms = kube::Api::<k8s_openapi::api::core::v1::ConfigMap>::namespaced(client.clone(), &ns);
    let cm: k8s_openapi::api::core::v1::ConfigMap = serde_json::from_value(json!({
        "metadata": {"name": "used", "namespace": ns, "labels": labels}}))?;
    cms.create(&Default::default(), &cm).await?;
    let usage = |name: &str, spec: Value| {
        json!({"apiVersion": "protection.crossplane.io/v1beta1", "kind": "Usage",
               "metadata": {"name": name, "namespace": ns, "labels": labels}, "spec": spec})
    };
    let cases = [
        (
            "unknown-kind",
            json!({"of": {"apiVersion": "nothing.example.org/v1", "kind": "Nothing",
                          "resourceRef": {"name": "x"}}, "reason": "kept"}),
            "names kind Nothing of apiVersion nothing.example.org/v1, which this cluster does not serve",
        ),
        (
            "missing-user",
            json!({"of": {"apiVersion": "v1", "kind": "ConfigMap", "resourceRef": {"name": "used"}},
                   "by": {"apiVersion": "v1", "kind": "ConfigMap", "resourceRef": {"name": "ghost"}}}),
            "the using resource ConfigMap",
        ),
        (
            "selects-nothing",
            json!({"of": {"apiVersion": "v1", "kind": "ConfigMap",
                          "resourceSelector": {"matchLabels": {"tier": "none"}}}, "reason": "kept"}),
            "no ConfigMap found matching labels {tier: none}",
        ),
    ];
    for (name, spec, expected) in &cases {
        apply(&usages, usage(name, spec.clone())).await?;
        let c = synced_false(&usages, name, expected).await?;
        let msg = c["message"].as_str().context("message")?;
        assert_eq!(c["reason"], "ReconcileError", "{name}: {c}");
        assert!(
            !msg.contains("Status {") && !msg.contains("ApiError") && !msg.contains("Error {"),
            "{name}: a Debug dump: {msg}"
        );
    }
    for (name, _, _) in &cases {
        usages.delete(name, &Default::default()).await?;
    }
    for (name, _, _) in &cases {
        wait_for(
            &format!("Usage {name} deleted"),
            Duration::from_secs(30),
            || async { Ok(usages.get_opt(name).await?.is_none().then_some(())) },
        )
        .await?;
    }
    // The missing user's Usage had labelled the used ConfigMap; its deletion removed the label.
    let used = cms.get("used").await?;
    assert!(
        !used
            .metadata
            .labels
            .unwrap_or_default()
            .contains_key("crossplane.io/in-use"),
        "the in-use label outlived the Usage"
    );
    assert!(core.is_running(), "the core exited");
    core.kill();
    let vwcs =
        kube::Api::<k8s_openapi::api::admissionregistration::v1::ValidatingWebhookConfiguration>::all(client);
    let _ = vwcs
        .delete(
            &crossplane::usage::webhook::configuration_name(Some(&selector)),
            &Default::default(),
        )
        .await;
    Ok(())
}
