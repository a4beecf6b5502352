//! Must-show 1: an XRD, a Composition composing NopResources with patches and transforms, and an XR,
//! run by the real `crossplane core start` process against the test bed.
//!
//! provider-nop, built from this workspace by the test itself (`testenv::cargo::binary`), makes the
//! NopResources Ready; a build that fails fails the test (no stand-in).

mod support;

use std::time::Duration;

use anyhow::Context;
use kube::api::{DeleteParams, ListParams, Patch, PatchParams};
use serde_json::json;
use support::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn xrd_composition_xr_compose_nop_resources_end_to_end() -> anyhow::Result<()> {
    let cluster = testenv::Cluster::shared()?;
    let client = cluster.client().await?;
    install_crds(&client).await?;
    let id = unique();
    let group = format!("{id}.e2e.example.org");
    let xrd_name = format!("xnops.{group}");
    let selector = format!("crossplane-rs.io/test={id}");
    let mut core = Process::start(
        cluster.kubeconfig(),
        &["core", "start", "--watch-label-selector", &selector],
        &format!("e2e-{id}"),
    )?;

    let xrds = xrd_api(&client);
    let comps = dynamic(
        &client,
        "apiextensions.crossplane.io",
        "v1",
        "Composition",
        "compositions",
    );
    let revs = dynamic(
        &client,
        "apiextensions.crossplane.io",
        "v1",
        "CompositionRevision",
        "compositionrevisions",
    );
    let nops = dynamic(
        &client,
        "nop.crossplane.io",
        "v1alpha1",
        "NopResource",
        "nopresources",
    );
    let xrs = dynamic(&client, &group, "v1", "XNop", "xnops");

    apply(&xrds, json!({
        "apiVersion": "apiextensions.crossplane.io/v2", "kind": "CompositeResourceDefinition",
        "metadata": {"name": xrd_name, "labels": {"crossplane-rs.io/test": id}},
        "spec": {"group": group, "scope": "Cluster", "names": {"kind": "XNop", "plural": "xnops"},
                 "versions": [{"name": "v1", "referenceable": true, "served": true, "schema": {"openAPIV3Schema": {
                     "type": "object", "properties": {
                         "spec": {"type": "object", "properties": {"size": {"type": "string"}, "count": {"type": "integer"}}},
                         "status": {"type": "object", "properties": {"nopName": {"type": "string"}}}}}}}]}
    })).await?;

    let nop_template = |name: &str| {
        json!({
            "name": name,
            "base": {"apiVersion": "nop.crossplane.io/v1alpha1", "kind": "NopResource",
                     "spec": {"forProvider": {"fields": {"kind": name},
                          "conditionAfter": [{"time": "0s", "conditionType": "Ready", "conditionStatus": "True"}]}}},
            "patches": [
                {"type": "FromCompositeFieldPath", "fromFieldPath": "spec.size", "toFieldPath": "spec.forProvider.fields.size",
                 "transforms": [{"type": "map", "map": {"small": "S", "large": "L"}}]},
                {"type": "FromCompositeFieldPath", "fromFieldPath": "spec.count", "toFieldPath": "spec.forProvider.fields.count",
                 "transforms": [{"type": "math", "math": {"type": "Multiply", "multiply": 10}}]},
                {"type": "FromCompositeFieldPath", "fromFieldPath": "spec.size", "toFieldPath": "spec.forProvider.fields.label",
                 "transforms": [{"type": "string", "string": {"type": "Format", "fmt": "size-%s"}}]}
            ]
        })
    };
    let mut a = nop_template("nop-a");
    a["patches"].as_array_mut().context("patches")?.push(json!(
        {"type": "ToCompositeFieldPath", "fromFieldPath": "metadata.name", "toFieldPath": "status.nopName"}));
    apply(&comps, json!({
        "apiVersion": "apiextensions.crossplane.io/v1", "kind": "Composition",
        "metadata": {"name": format!("comp-{id}"), "labels": {"crossplane-rs.io/test": id}},
        "spec": {"compositeTypeRef": {"apiVersion": format!("{group}/v1"), "kind": "XNop"}, "mode": "Pipeline",
                 "pipeline": [{"step": "pt", "functionRef": {"name": "function-patch-and-transform"},
                               "input": {"apiVersion": "pt.fn.crossplane.io/v1beta1", "kind": "Resources",
                                         "resources": [a, nop_template("nop-b")]}}]}
    })).await?;

    // The XRD is established and its CRD exists with Crossplane's columns.
    let xrd = wait_for("XRD Established", Duration::from_secs(30), || async {
        let x = json(&xrds.get(&xrd_name).await?);
        Ok(condition(&x, "Established")
            .filter(|c| c["status"] == "True")
            .map(|_| x))
    })
    .await?;
    assert_eq!(
        condition(&xrd, "Established").context("est")?["reason"],
        "WatchingCompositeResource"
    );
    assert!(
        xrd["metadata"]["finalizers"]
            .as_array()
            .context("finalizers")?
            .contains(&json!("defined.apiextensions.crossplane.io"))
    );
    let crds: kube::Api<
        k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition,
    > = kube::Api::all(client.clone());
    let crd = crds.get(&xrd_name).await?;
    assert!(crd_established(&crd));
    assert_eq!(
        crd.spec.names.categories.clone().unwrap_or_default(),
        ["composite"]
    );

    // Changing the XRD restarts its composite controller: Established follows the new generation, and
    // the CRD gets the new printer column.
    let column = json!([{"name": "SIZE", "type": "string", "jsonPath": ".spec.size"}]);
    let mut changed = json(&xrds.get(&xrd_name).await?);
    changed["spec"]["versions"][0]["additionalPrinterColumns"] = column;
    let changed = json!({"apiVersion": changed["apiVersion"], "kind": changed["kind"],
                         "metadata": {"name": xrd_name, "labels": {"crossplane-rs.io/test": id}}, "spec": changed["spec"]});
    apply(&xrds, changed).await?;
    wait_for("Established at generation 2", Duration::from_secs(30), || async {
        let x = json(&xrds.get(&xrd_name).await?);
        Ok(condition(&x, "Established").filter(|c| c["observedGeneration"] == 2 && c["status"] == "True"))
    })
    .await?;
    let crd = crds.get(&xrd_name).await?;
    let cols: Vec<String> = crd.spec.versions[0]
        .additional_printer_columns
        .iter()
        .flatten()
        .map(|c| c.name.clone())
        .collect();
    assert_eq!(
        cols,
        [
            "SYNCED",
            "READY",
            "COMPOSITION",
            "COMPOSITIONREVISION",
            "AGE",
            "SIZE"
        ]
    );

    // A revision is created, named with the hash and numbered 1.
    let rev = wait_for("CompositionRevision", Duration::from_secs(30), || async {
        let l = revs
            .list(&ListParams::default().labels(&format!("crossplane.io/composition-name=comp-{id}")))
            .await?;
        Ok(l.items.into_iter().next())
    })
    .await?;
    let rev = json(&rev);
    assert_eq!(rev["spec"]["revision"], 1);
    let hash = rev["metadata"]["labels"]["crossplane.io/composition-hash"]
        .as_str()
        .context("hash")?
        .to_owned();
    assert_eq!(rev["metadata"]["name"], format!("comp-{id}-{}", &hash[..7]));

    // The XR composes two NopResources with the patched values.
    let xr_name = format!("xr-{id}");
    apply(
        &xrs,
        json!({"apiVersion": format!("{group}/v1"), "kind": "XNop", "metadata": {"name": xr_name},
                       "spec": {"size": "small", "count": 2}}),
    )
    .await?;
    let by_xr = ListParams::default().labels(&format!("crossplane.io/composite={xr_name}"));
    let composed = wait_for("two NopResources", Duration::from_secs(30), || async {
        let l = nops.list(&by_xr).await?;
        Ok((l.items.len() == 2).then_some(l.items))
    })
    .await?;
    for n in &composed {
        let v = json(n);
        assert_eq!(v["spec"]["forProvider"]["fields"]["size"], "S", "{v}");
        assert_eq!(v["spec"]["forProvider"]["fields"]["count"], 20, "{v}");
        assert_eq!(v["spec"]["forProvider"]["fields"]["label"], "size-small", "{v}");
        assert_eq!(v["metadata"]["generateName"], format!("{xr_name}-"));
        assert_eq!(v["metadata"]["ownerReferences"][0]["kind"], "XNop");
        assert_eq!(v["metadata"]["ownerReferences"][0]["controller"], true);
        let t = v["metadata"]["annotations"]["crossplane.io/composition-resource-name"]
            .as_str()
            .context("anno")?;
        assert!(t == "nop-a" || t == "nop-b");
    }
    let xr = wait_for("XR Synced, not Ready", Duration::from_secs(30), || async {
        let x = json(&xrs.get(&xr_name).await?);
        let ok = condition(&x, "Synced").is_some_and(|c| c["status"] == "True")
            && condition(&x, "Ready").is_some_and(|c| c["reason"] == "Creating");
        Ok(ok.then_some(x))
    })
    .await?;
    assert_eq!(
        condition(&xr, "Ready").context("ready")?["message"],
        "Unready resources: nop-a, nop-b"
    );
    assert_eq!(
        xr["spec"]["crossplane"]["compositionRef"]["name"],
        format!("comp-{id}")
    );
    assert_eq!(
        xr["spec"]["crossplane"]["compositionRevisionRef"]["name"],
        rev["metadata"]["name"]
    );
    assert_eq!(
        xr["spec"]["crossplane"]["resourceRefs"]
            .as_array()
            .context("refs")?
            .len(),
        2
    );
    // ToCompositeFieldPath reads the observed NopResource, so it lands once that exists.
    wait_for("status.nopName", Duration::from_secs(30), || async {
        let x = json(&xrs.get(&xr_name).await?);
        Ok(x["status"]["nopName"]
            .as_str()
            .filter(|n| n.starts_with(&format!("{xr_name}-")))
            .map(str::to_owned))
    })
    .await?;

    // provider-nop (built from this workspace now) makes the NopResources Ready; then the XR is Ready.
    let nop_bin = testenv::cargo::binary("provider-nop", "provider-nop")?;
    let log = std::env::temp_dir().join(format!("provider-nop-{id}.log"));
    let out = std::fs::File::create(&log)?;
    let _provider = tokio::process::Command::new(&nop_bin)
        .arg("--kubeconfig")
        .arg(cluster.kubeconfig())
        .args([
            "--poll",
            "1s",
            "--max-reconcile-rate",
            "100",
            "--metrics-bind-address",
            "0",
            "--health-probe-bind-address",
            "0",
        ])
        .env_remove("LEADER_ELECTION")
        .stdout(out.try_clone()?)
        .stderr(out)
        .kill_on_drop(true)
        .spawn()?;
    wait_for("XR Ready", Duration::from_secs(30), || async {
        let x = json(&xrs.get(&xr_name).await?);
        Ok(condition(&x, "Ready").filter(|c| c["status"] == "True" && c["reason"] == "Available"))
    })
    .await?;

    // A change of an XR field flows through. How long it takes calibrates the paused check below.
    let change_sent = std::time::Instant::now();
    xrs.patch(
        &xr_name,
        &PatchParams::default(),
        &Patch::Merge(&json!({"spec": {"size": "large"}})),
    )
    .await?;
    wait_for("size L", Duration::from_secs(30), || async {
        let l = nops.list(&by_xr).await?;
        Ok(l.items
            .iter()
            .all(|n| json(n)["spec"]["forProvider"]["fields"]["size"] == "L")
            .then_some(()))
    })
    .await?;
    let flow = change_sent.elapsed();
    assert_eq!(
        nops.list(&by_xr).await?.items.len(),
        2,
        "no duplicates after the update"
    );

    // A new Composition spec makes revision 2; the XR follows it (Automatic policy) and the resource the
    // new revision no longer wants is garbage-collected.
    let mut a2 = a.clone();
    a2["patches"][0]["transforms"][0]["map"]["large"] = json!("XL");
    apply(&comps, json!({
        "apiVersion": "apiextensions.crossplane.io/v1", "kind": "Composition",
        "metadata": {"name": format!("comp-{id}"), "labels": {"crossplane-rs.io/test": id}},
        "spec": {"compositeTypeRef": {"apiVersion": format!("{group}/v1"), "kind": "XNop"}, "mode": "Pipeline",
                 "pipeline": [{"step": "pt", "functionRef": {"name": "function-patch-and-transform"},
                               "input": {"apiVersion": "pt.fn.crossplane.io/v1beta1", "kind": "Resources",
                                         "resources": [a2]}}]}
    })).await?;
    wait_for("one NopResource of size XL", Duration::from_secs(30), || async {
        let l = nops.list(&by_xr).await?;
        Ok(
            (l.items.len() == 1 && json(&l.items[0])["spec"]["forProvider"]["fields"]["size"] == "XL")
                .then_some(()),
        )
    })
    .await?;
    let l = revs
        .list(&ListParams::default().labels(&format!("crossplane.io/composition-name=comp-{id}")))
        .await?;
    let mut numbers: Vec<i64> = l
        .items
        .iter()
        .filter_map(|r| json(r)["spec"]["revision"].as_i64())
        .collect();
    numbers.sort_unstable();
    assert_eq!(numbers, [1, 2]);

    // crossplane.io/paused stops reconciling: Synced=False/ReconcilePaused, and changes do not flow.
    let pause = |v: Option<&str>| json!({"metadata": {"annotations": {"crossplane.io/paused": v}}});
    xrs.patch(
        &xr_name,
        &PatchParams::default(),
        &Patch::Merge(&pause(Some("true"))),
    )
    .await?;
    wait_for("XR paused", Duration::from_secs(30), || async {
        let x = json(&xrs.get(&xr_name).await?);
        Ok(condition(&x, "Synced").filter(|c| c["reason"] == "ReconcilePaused"))
    })
    .await?;
    xrs.patch(
        &xr_name,
        &PatchParams::default(),
        &Patch::Merge(&json!({"spec": {"size": "small"}})),
    )
    .await?;
    // Positive control: wait three times as long as the same kind of change took to flow through
    // when the XR was not paused (at least 3 s), so that "not composed" is not "not yet".
    let window = (flow * 3).max(Duration::from_secs(3));
    println!("a change flowed in {flow:?}; watching the paused XR for {window:?}");
    tokio::time::sleep(window).await;
    let l = nops.list(&by_xr).await?;
    assert_eq!(
        json(&l.items[0])["spec"]["forProvider"]["fields"]["size"],
        "XL",
        "paused XRs are not composed"
    );
    xrs.patch(&xr_name, &PatchParams::default(), &Patch::Merge(&pause(None)))
        .await?;
    wait_for("size S after unpausing", Duration::from_secs(30), || async {
        let l = nops.list(&by_xr).await?;
        Ok(l.items
            .iter()
            .all(|n| json(n)["spec"]["forProvider"]["fields"]["size"] == "S")
            .then_some(()))
    })
    .await?;

    // Deleting the XR deletes what it composed.
    xrs.delete(&xr_name, &DeleteParams::default()).await?;
    wait_for("XR and NopResources gone", Duration::from_secs(30), || async {
        let gone = xrs.get_opt(&xr_name).await?.is_none() && nops.list(&by_xr).await?.items.is_empty();
        Ok(gone.then_some(()))
    })
    .await?;

    // Deleting the XRD removes its CRD, then the XRD.
    xrds.delete(&xrd_name, &DeleteParams::default()).await?;
    wait_for("XRD and CRD gone", Duration::from_secs(30), || async {
        let gone = xrds.get_opt(&xrd_name).await?.is_none() && crds.get_opt(&xrd_name).await?.is_none();
        Ok(gone.then_some(()))
    })
    .await?;
    comps
        .delete(&format!("comp-{id}"), &DeleteParams::default())
        .await?;
    assert!(core.is_running(), "the core crashed; see {}", core.log.display());
    Ok(())
}
