//! The legacy composition scenarios of upstream's `apiextensions_compositions_legacy_test.go`:
//! - `TestLegacyBindToExistingXR` (`test/e2e/manifests/apiextensions/composition/
//!   legacy-bind-existing-xr`): a claim that names an existing XR binds to it and takes it over;
//! - `TestLegacyPropagateFieldsRemovalToXR` (`legacy-propagate-field-removals`): what a claim's field
//!   manager removes from the claim is removed from its XR. Its Composition composes nothing, so it
//!   needs no provider either;
//! - `TestLegacyPropagateFieldsRemovalToXRAfterUpgrade` (the same manifests): the same after the core
//!   is upgraded from client-side to server-side claim sync;
//! - `TestLegacyComposition` (`legacy`), with provider-nop of this workspace as a process (below).
//!
//! What differs from upstream's run, and why: the Function is the suite's function-dummy of ours, a
//! `pkg.crossplane.io/v1` Function (upstream applies a v1beta1 one to check that version still works;
//! that is the package manager's concern, not this scenario's), and the group carries the scenario's
//! id. Beyond upstream, the XR must keep its UID (the claim bound to it, no new XR replaced it).

use serde_json::{Value, json};

use super::harness::{TEST_LABEL, World};
use super::manifests::{composition, nop_role, super_secret, xrd_v1_with_claim};
use super::outcome::{LEGACY, record};
use crate::{MIN, SEC};

pub async fn test_legacy_bind_to_existing_xr() -> anyhow::Result<()> {
    record("TestLegacyBindToExistingXR", LEGACY, async {
        let w = World::start("legacy-bind").await?;
        let group = format!("{}.nop.example.org", w.id);
        let api_version = format!("{group}/v1alpha1");
        let setup = vec![
            xrd_v1_with_claim(&w, &group, &["coolField"]),
            composition(
                &w,
                &format!("xnopresources.{group}"),
                &api_version,
                "XNopResource",
                json!({}),
                None,
            ),
        ];
        // PrerequisitesAreCreated.
        w.apply_all(&setup).await?;
        w.has_condition(MIN, &setup[0], "Established", "True", "WatchingCompositeResource")
            .await?;

        // CreateXR, XRFieldHasOriginalValues.
        let xr = json!({"apiVersion": api_version, "kind": "XNopResource",
                        "metadata": {"name": "bind-existing-xr", "labels": w.labels()},
                        "spec": {"coolField": "Set by XR"}});
        w.apply_all(std::slice::from_ref(&xr)).await?;
        w.has_condition(MIN, &xr, "Ready", "True", "Available").await?;
        w.has_field(MIN, &xr, "/spec/coolField", &json!("Set by XR"))
            .await?;
        let uid = w.get(&xr).await?["metadata"]["uid"].clone();

        // CreateClaim: it names the XR.
        let claim = json!({"apiVersion": api_version, "kind": "NopResource",
                           "metadata": {"namespace": w.ns, "name": "bind-existing-xr"},
                           "spec": {"resourceRef": {"apiVersion": api_version, "kind": "XNopResource",
                                                    "name": "bind-existing-xr"},
                                    "coolField": "Set by claim", "compositeDeletePolicy": "Foreground"}});
        w.apply_all(std::slice::from_ref(&claim)).await?;
        w.has_condition(MIN, &claim, "Ready", "True", "Available").await?;

        // XRIsBoundToClaim, XRFieldChangesToClaimValue.
        w.has_field(MIN, &xr, "/spec/claimRef/name", &json!("bind-existing-xr"))
            .await?;
        w.has_field(MIN, &xr, "/spec/coolField", &json!("Set by claim"))
            .await?;
        let bound = w.get(&xr).await?;
        anyhow::ensure!(
            bound["metadata"]["uid"] == uid,
            "the claim's XR is not the existing one: UID {} became {}",
            uid,
            bound["metadata"]["uid"]
        );

        // DeleteClaim: the XR goes with it.
        w.delete_all(2 * MIN, std::slice::from_ref(&claim)).await?;
        let xrs = w.api_of(&xr).await?;
        crate::support::wait_for("the bound XR deleted with its claim", 2 * MIN, || async {
            Ok(xrs.get_opt("bind-existing-xr").await?.is_none().then_some(()))
        })
        .await?;

        // DeletePrerequisites.
        w.delete_all(3 * MIN, &setup).await?;
        Ok(format!(
            "the claim bound the existing XR (UID {uid}), set its coolField, and took it along when deleted"
        ))
    })
    .await
}

/// What both field-removal scenarios set up first.
struct Removals {
    setup: Vec<Value>,
    api_version: String,
    claim: Value,
    xr: Value,
}

/// Upstream's `PrerequisitesAreCreated` and `CreateClaim` of both field-removal scenarios: the XRD and
/// Composition Established, the claim Available, and its XR carrying label `bar`.
async fn create_removals(w: &World) -> anyhow::Result<Removals> {
    let (setup, api_version) = removals_setup(w);
    w.apply_all(&setup).await?;
    w.has_condition(MIN, &setup[0], "Established", "True", "WatchingCompositeResource")
        .await?;
    let claim = removals_claim(w, &api_version, false);
    w.apply_all(std::slice::from_ref(&claim)).await?;
    w.has_condition(MIN, &claim, "Ready", "True", "Available").await?;
    let xr = crate::xr_of_claim(w, &claim).await?;
    w.has_field(MIN, &xr, "/metadata/labels/bar", &json!("2")).await?;
    Ok(Removals {
        setup,
        api_version,
        claim,
        xr,
    })
}

/// The prerequisites of the `legacy-propagate-field-removals` scenarios: an XRD offering claims with
/// `coolField`, `numbers` and `parameters.tags`, and a Composition that composes nothing. Returns them
/// and the API version of the XR and claim.
fn removals_setup(w: &World) -> (Vec<Value>, String) {
    let group = format!("{}.nop.example.org", w.id);
    let api_version = format!("{group}/v1alpha1");
    let mut definition = xrd_v1_with_claim(w, &group, &["coolField"]);
    definition["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]["parameters"] = json!({"type": "object", "properties": {"tags": {"type": "object",
            "properties": {"tag": {"type": "string"}, "newtag": {"type": "string"}}}}});
    let setup = vec![
        definition,
        composition(
            w,
            &format!("xnopresources.{group}"),
            &api_version,
            "XNopResource",
            json!({}),
            None,
        ),
    ];
    (setup, api_version)
}

/// The scenarios' claim (`claim.yaml`, or with `updated` `claim-update.yaml`: without label bar,
/// annotation test/bar, number three and tag newtag, with label foo2, annotation test/foo2 and number
/// five).
fn removals_claim(w: &World, api_version: &str, updated: bool) -> Value {
    let (labels, annotations, numbers, tags) = if updated {
        (
            json!({"foo": "1", "foo2": "3"}),
            json!({"test/foo": "1", "test/foo2": "4"}),
            json!(["one", "five"]),
            json!({"tag": "v1"}),
        )
    } else {
        (
            json!({"foo": "1", "bar": "2"}),
            json!({"test/foo": "1", "test/bar": "2"}),
            json!(["one", "three"]),
            json!({"tag": "v1", "newtag": "v2"}),
        )
    };
    let mut l = w.labels();
    if let (Some(all), Some(more)) = (l.as_object_mut(), labels.as_object()) {
        all.extend(more.clone());
    }
    json!({"apiVersion": api_version, "kind": "NopResource",
           "metadata": {"namespace": w.ns, "name": "propagate-fields-removals",
                        "labels": l, "annotations": annotations},
           "spec": {"coolField": "I'm cool!", "numbers": numbers, "parameters": {"tags": tags},
                    "compositeDeletePolicy": "Foreground"}})
}

/// Upstream's `FieldsRemovalPropagatedToXR`: the XR has the updated claim's fields and none it dropped
/// (each within 1 min), then for 30 s the claim keeps its generation and the XR its resourceVersion.
/// Returns how many versions of each the windows saw.
async fn fields_removal_propagated(w: &World, claim: &Value, xr: &Value) -> anyhow::Result<(usize, usize)> {
    for (pointer, want) in [
        ("/metadata/labels/foo", json!("1")),
        ("/metadata/labels/bar", Value::Null),
        ("/metadata/labels/foo2", json!("3")),
        ("/metadata/annotations/test~1foo", json!("1")),
        ("/metadata/annotations/test~1bar", Value::Null),
        ("/metadata/annotations/test~1foo2", json!("4")),
        ("/spec/numbers/0", json!("one")),
        ("/spec/numbers/1", json!("five")),
        ("/spec/numbers/2", Value::Null),
        ("/spec/parameters/tags/tag", json!("v1")),
        ("/spec/parameters/tags/newtag", Value::Null),
    ] {
        w.has_field(MIN, xr, pointer, &want).await?;
    }
    let claim_versions = w
        .must_not_change(30 * SEC, claim, |a, b| {
            a["metadata"]["generation"] != b["metadata"]["generation"]
        })
        .await?;
    let xr_versions = w
        .must_not_change(30 * SEC, xr, |a, b| {
            a["metadata"]["resourceVersion"] != b["metadata"]["resourceVersion"]
        })
        .await?;
    Ok((claim_versions, xr_versions))
}

/// `TestLegacyPropagateFieldsRemovalToXR` (`manifests/apiextensions/composition/
/// legacy-propagate-field-removals`): labels, annotations, array items and map keys removed from a claim
/// by its field manager are removed from its XR too, and then neither changes for 30 s.
pub async fn test_legacy_propagate_fields_removal_to_xr() -> anyhow::Result<()> {
    record("TestLegacyPropagateFieldsRemovalToXR", LEGACY, async {
        let w = World::start("legacy-removals").await?;
        let Removals { setup, api_version, claim, xr } = create_removals(&w).await?;

        // UpdateClaim: the same field manager applies the claim without bar, test/bar, three and newtag.
        let updated = removals_claim(&w, &api_version, true);
        w.apply(&updated).await?;

        // FieldsRemovalPropagatedToXR.
        let (claim_versions, xr_versions) = fields_removal_propagated(&w, &claim, &xr).await?;

        // Positive control of the window: a change of the claim's spec within it is caught.
        let mut changed = updated.clone();
        changed["spec"]["coolField"] = json!("I'm cooler!");
        let change = async {
            tokio::time::sleep(SEC).await;
            w.apply(&changed).await
        };
        let (caught, applied) = tokio::join!(
            w.must_not_change(30 * SEC, &claim, |a, b| a["metadata"]["generation"] != b["metadata"]["generation"]),
            change
        );
        applied?;
        let caught = match caught {
            Ok(n) => anyhow::bail!("the claim's spec changed within the window, but {n} versions seen passed"),
            Err(e) => e.to_string(),
        };

        // DeleteClaim, DeletePrerequisites.
        w.delete_all(2 * MIN, std::slice::from_ref(&claim)).await?;
        w.delete_all(3 * MIN, &setup).await?;
        Ok(format!(
            "the XR lost label bar, annotation test/bar, numbers[2] and tags.newtag with its claim; then for \
             30 s the claim kept its generation ({claim_versions} versions seen) and the XR its \
             resourceVersion ({xr_versions} seen); positive control, a spec change within the window: {caught}"
        ))
    })
    .await
}

/// The managers (`manager/operation`, and ` (subresource)` for one) whose managed fields of `obj` include the field at `path`
/// (field names, e.g. `["metadata", "labels", "bar"]`).
fn owners(obj: &Value, path: &[&str]) -> Vec<String> {
    let entries = obj
        .pointer("/metadata/managedFields")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    entries
        .iter()
        .filter(|e| {
            let mut at = &e["fieldsV1"];
            path.iter().all(|p| {
                at = &at[format!("f:{p}")];
                !at.is_null()
            })
        })
        .map(|e| {
            let subresource = e["subresource"]
                .as_str()
                .map(|s| format!(" ({s})"))
                .unwrap_or_default();
            format!(
                "{}/{}{subresource}",
                e["manager"].as_str().unwrap_or_default(),
                e["operation"].as_str().unwrap_or_default()
            )
        })
        .collect()
}

/// `TestLegacyPropagateFieldsRemovalToXRAfterUpgrade` (`manifests/apiextensions/composition/
/// legacy-propagate-field-removals`): the core starts with `--enable-ssa-claims=false`, so the claim's
/// XR is created and synced client-side; the core is then upgraded to the default (server-side apply)
/// and the claim applied without label bar, annotation test/bar, number three and tag newtag: these
/// leave the XR, because the server-side sync upgraded the XR's managed fields before applying it,
/// and then neither claim nor XR changes for 30 s.
///
/// What differs from upstream's run, and why: the upgrade is a restart of our core process without
/// the flag (upstream upgrades its Helm release, which rolls the core's pod), under upstream's limits;
/// the chart's `args` checks become the arguments we start the core with. Beyond upstream, the XR's
/// managed fields are checked: before the upgrade the client-side manager `crossplane` (`Update`) owns
/// label bar and the claim controller's server-side manager has no entry (the positive control: that
/// ownership is what would keep bar on the XR without the upgrade); after it, only the server-side
/// manager owns the claim's fields.
pub async fn test_legacy_propagate_fields_removal_to_xr_after_upgrade() -> anyhow::Result<()> {
    record("TestLegacyPropagateFieldsRemovalToXRAfterUpgrade", LEGACY, async {
        // DisableSSAClaims.
        let mut w = World::start_with("legacy-removals-upgrade", &["--enable-ssa-claims=false"]).await?;
        let Removals { setup, api_version, claim, xr } = create_removals(&w).await?;

        // Beyond upstream: the XR was written client-side (positive control of the upgrade).
        let ssa_manager = "apiextensions.crossplane.io/claim";
        let before = w.get(&xr).await?;
        let bar_before = owners(&before, &["metadata", "labels", "bar"]);
        anyhow::ensure!(
            bar_before.iter().any(|o| o == "crossplane/Update"),
            "the client-side sync did not write label bar of the XR: its owners are {bar_before:?}"
        );
        let all_before = owners(&before, &[]);
        anyhow::ensure!(
            !all_before.iter().any(|o| o.starts_with(ssa_manager)),
            "the XR was applied server-side with --enable-ssa-claims=false: its managers are {all_before:?}"
        );

        // EnableSSAClaims: the core upgraded to the default flags.
        let upgrade = w.restart_core(&[]).await?;

        // UpdateClaim: the claim without bar, test/bar, three and newtag; it must not change for 1 min.
        let updated = removals_claim(&w, &api_version, true);
        w.apply(&updated).await?;
        let claim_update_versions = w
            .must_not_change(MIN, &claim, |a, b| {
                a["metadata"]["generation"] != b["metadata"]["generation"]
            })
            .await?;

        // FieldsRemovalPropagatedToXR.
        let (claim_versions, xr_versions) = fields_removal_propagated(&w, &claim, &xr).await?;

        // Beyond upstream: the server-side manager alone owns the claim's fields, once.
        let after = w.get(&xr).await?;
        let all_after = owners(&after, &[]);
        let foo_after = owners(&after, &["metadata", "labels", "foo"]);
        anyhow::ensure!(
            foo_after == [format!("{ssa_manager}/Apply")],
            "label foo of the upgraded XR is owned by {foo_after:?}, not by {ssa_manager} alone"
        );
        anyhow::ensure!(
            !all_after.iter().any(|o| o.starts_with("before-first-apply")),
            "the upgrade left before-first-apply on the XR: its managers are {all_after:?}"
        );

        // DeleteClaim, DeletePrerequisites.
        w.delete_all(2 * MIN, std::slice::from_ref(&claim)).await?;
        w.delete_all(3 * MIN, &setup).await?;
        Ok(format!(
            "with --enable-ssa-claims=false the XR was written client-side (label bar owned by {bar_before:?}, \
             managers {all_before:?}); the core was upgraded to server-side claims in {:.1} s; the updated \
             claim kept its generation for 1 min ({claim_update_versions} versions seen); the XR lost label \
             bar, annotation test/bar, numbers[2] and tags.newtag; then for 30 s the claim kept its \
             generation ({claim_versions} versions seen) and the XR its resourceVersion ({xr_versions} \
             seen); the XR's managers after the upgrade: {all_after:?}",
            upgrade.as_secs_f64()
        ))
    })
    .await
}

/// `TestLegacyComposition` (`manifests/apiextensions/composition/legacy`): a claim whose Composition
/// composes a nested XR (which composes a NopResource) through function-dummy and function-auto-ready
/// becomes Available, shows the XR's patched status field, and gets its connection secret.
///
/// What differs from upstream's run, and why: provider-nop is this workspace's, run as a process
/// reconciling only this scenario's NopResources (`--label-selector`), so the composed NopResource
/// carries the scenario's label; upstream installs provider-nop as a Provider package and waits for it
/// to be Healthy and Active, which needs a node (the packages suite proves that path). function-auto-ready
/// is ours on the official Python SDK (`tests/functions/auto_ready.py`).
pub async fn test_legacy_composition() -> anyhow::Result<()> {
    record("TestLegacyComposition", LEGACY, async {
        let mut w = World::start("legacy-composition").await?;
        let auto_ready = w.serve_function("auto_ready.py", "function-auto-ready").await?;
        let group = format!("{}.nop.example.org", w.id);
        let api_version = format!("{group}/v1alpha1");
        let (parent, child) = (format!("parent-{}", w.id), format!("child-{}", w.id));
        let with_auto_ready = |mut c: Value| {
            if let Some(steps) = c["spec"]["pipeline"].as_array_mut() {
                steps.push(json!({"step": "detect-readiness", "functionRef": {"name": auto_ready}}));
            }
            c
        };
        let (secret, credentials) = super_secret(&w);
        let mut parent_composition = with_auto_ready(composition(
            &w,
            &parent,
            &api_version,
            "XNopResource",
            json!({
                "desired": {
                    "composite": {"resource": {"status": {"coolerField": "I'M COOLER!"}},
                                  "connectionDetails": {"super": "c2VjcmV0Cg=="}},
                    "resources": {"nested-xr": {"resource": {
                        "apiVersion": api_version, "kind": "XNopResource",
                        "spec": {"compositionRef": {"name": child}, "coolField": "I'm cool!"}}}}},
                "results": [{"severity": "SEVERITY_NORMAL", "message": "I am doing a compose!"}],
            }),
            Some(credentials),
        ));
        parent_composition["spec"]["writeConnectionSecretsToNamespace"] = json!(w.system);
        let child_composition = with_auto_ready(composition(
            &w,
            &child,
            &api_version,
            "XNopResource",
            json!({
                "desired": {
                    "composite": {"resource": {"status": {"coolerField": "I'M COOLER!"}}},
                    "resources": {"nop-resource-1": {"resource": {
                        "apiVersion": "nop.crossplane.io/v1alpha1", "kind": "NopResource",
                        "metadata": {"labels": w.labels()},
                        "spec": {"forProvider": {"conditionAfter": [
                            {"conditionType": "Ready", "conditionStatus": "False", "time": "0s"},
                            {"conditionType": "Ready", "conditionStatus": "True", "time": "1s"}]}}}}}},
                "results": [{"severity": "SEVERITY_NORMAL", "message": "I am doing a compose!"}],
            }),
            None,
        ));
        let mut definition = xrd_v1_with_claim(&w, &group, &["coolField"]);
        definition["spec"]["connectionSecretKeys"] = json!(["super"]);
        let setup = vec![definition, parent_composition, child_composition, secret, nop_role(&w)];

        // CreatePrerequisites, with provider-nop for this scenario's NopResources.
        w.apply_all(&setup).await?;
        w.has_condition(MIN, &setup[0], "Established", "True", "WatchingCompositeResource")
            .await?;
        let _provider = provider_nop(&w)?;

        // CreateClaim.
        let claim = json!({"apiVersion": api_version, "kind": "NopResource",
                           "metadata": {"namespace": w.ns, "name": "ext-functions", "labels": w.labels()},
                           "spec": {"coolField": "I'm cool!", "compositionRef": {"name": parent},
                                    "compositeDeletePolicy": "Foreground",
                                    "writeConnectionSecretToRef": {"name": "basic-secret"}}});
        w.apply_all(std::slice::from_ref(&claim)).await?;

        // ClaimIsReady, ClaimHasPatchedField, ConnectionSecretCreated.
        w.has_condition(MIN, &claim, "Ready", "True", "Available").await?;
        w.has_field(MIN, &claim, "/status/coolerField", &json!("I'M COOLER!"))
            .await?;
        let secret = json!({"apiVersion": "v1", "kind": "Secret",
                            "metadata": {"namespace": w.ns, "name": "basic-secret"}});
        crate::support::wait_for("Secret basic-secret with data.super", 30 * SEC, || async {
            let s = w.api_of(&secret).await?.get_opt("basic-secret").await?;
            let s = s.map(serde_json::to_value).transpose()?;
            Ok(s.filter(|s| s.pointer("/data/super") == Some(&json!("c2VjcmV0Cg=="))))
        })
        .await?;
        let xr = crate::xr_of_claim(&w, &claim).await?;
        let nested = crate::composed(&w, &xr, "XNopResource").await?;
        anyhow::ensure!(nested.len() == 1, "the XR composed {} nested XRs, not 1", nested.len());

        // DeleteClaim, DeletePrerequisites.
        w.delete_all(2 * MIN, std::slice::from_ref(&claim)).await?;
        w.delete_all(3 * MIN, &setup).await?;
        Ok(format!(
            "the claim became Available through nested XR {} and its NopResource (provider-nop Ready after \
             1 s, function-auto-ready), showed status.coolerField and got Secret basic-secret with data.super",
            nested[0].pointer("/metadata/name").and_then(Value::as_str).unwrap_or_default()
        ))
    })
    .await
}

/// provider-nop, built from this workspace now, reconciling only the scenario's NopResources (no
/// leader election: one replica), killed when dropped.
fn provider_nop(w: &World) -> anyhow::Result<tokio::process::Child> {
    let cluster = testenv::Cluster::shared()?;
    let binary = testenv::cargo::binary("provider-nop", "provider-nop")?;
    let log = std::env::temp_dir().join(format!("conformance-provider-nop-{}.log", w.id));
    let out = std::fs::File::create(&log)?;
    Ok(tokio::process::Command::new(binary)
        .arg("--kubeconfig")
        .arg(cluster.kubeconfig())
        .args([
            "--poll",
            "1s",
            "--metrics-bind-address",
            "0",
            "--health-probe-bind-address",
            "0",
        ])
        .args(["--label-selector", &format!("{TEST_LABEL}={}", w.id)])
        .env_remove("LEADER_ELECTION")
        .stdout(out.try_clone()?)
        .stderr(out)
        .kill_on_drop(true)
        .spawn()?)
}
