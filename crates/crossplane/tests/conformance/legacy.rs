//! The legacy composition scenarios of upstream's `apiextensions_compositions_legacy_test.go` that run
//! without a provider:
//! - `TestLegacyBindToExistingXR` (`test/e2e/manifests/apiextensions/composition/
//!   legacy-bind-existing-xr`): a claim that names an existing XR binds to it and takes it over;
//! - `TestLegacyPropagateFieldsRemovalToXR` (`legacy-propagate-field-removals`): what a claim's field
//!   manager removes from the claim is removed from its XR. Its Composition composes nothing, so it
//!   needs no provider either.
//!
//! What differs from upstream's run, and why: the Function is the suite's function-dummy of ours, a
//! `pkg.crossplane.io/v1` Function (upstream applies a v1beta1 one to check that version still works;
//! that is the package manager's concern, not this scenario's), and the group carries the scenario's
//! id. Beyond upstream, the XR must keep its UID (the claim bound to it, no new XR replaced it).

use serde_json::{Value, json};

use super::harness::World;
use super::manifests::{composition, xrd_v1_with_claim};
use super::outcome::{LEGACY, record};
use crate::{MIN, SEC};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn test_legacy_bind_to_existing_xr() -> anyhow::Result<()> {
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

/// `TestLegacyPropagateFieldsRemovalToXR` (`manifests/apiextensions/composition/
/// legacy-propagate-field-removals`): labels, annotations, array items and map keys removed from a claim
/// by its field manager are removed from its XR too, and then neither changes for 30 s.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn test_legacy_propagate_fields_removal_to_xr() -> anyhow::Result<()> {
    record("TestLegacyPropagateFieldsRemovalToXR", LEGACY, async {
        let w = World::start("legacy-removals").await?;
        let group = format!("{}.nop.example.org", w.id);
        let api_version = format!("{group}/v1alpha1");
        let mut definition = xrd_v1_with_claim(&w, &group, &["coolField"]);
        definition["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]
            ["parameters"] = json!({"type": "object", "properties": {"tags": {"type": "object",
                "properties": {"tag": {"type": "string"}, "newtag": {"type": "string"}}}}});
        let setup = vec![
            definition,
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

        // CreateClaim.
        let claim_of = |labels: Value, annotations: Value, numbers: Value, tags: Value| {
            let mut l = w.labels();
            if let (Some(all), Some(more)) = (l.as_object_mut(), labels.as_object()) {
                all.extend(more.clone());
            }
            json!({"apiVersion": api_version, "kind": "NopResource",
                   "metadata": {"namespace": w.ns, "name": "propagate-fields-removals",
                                "labels": l, "annotations": annotations},
                   "spec": {"coolField": "I'm cool!", "numbers": numbers, "parameters": {"tags": tags},
                            "compositeDeletePolicy": "Foreground"}})
        };
        let claim = claim_of(
            json!({"foo": "1", "bar": "2"}),
            json!({"test/foo": "1", "test/bar": "2"}),
            json!(["one", "three"]),
            json!({"tag": "v1", "newtag": "v2"}),
        );
        w.apply_all(std::slice::from_ref(&claim)).await?;
        w.has_condition(MIN, &claim, "Ready", "True", "Available").await?;
        let xr = crate::xr_of_claim(&w, &claim).await?;
        w.has_field(MIN, &xr, "/metadata/labels/bar", &json!("2")).await?;

        // UpdateClaim: the same field manager applies the claim without bar, test/bar, three and newtag.
        let updated = claim_of(
            json!({"foo": "1", "foo2": "3"}),
            json!({"test/foo": "1", "test/foo2": "4"}),
            json!(["one", "five"]),
            json!({"tag": "v1"}),
        );
        w.apply(&updated).await?;

        // FieldsRemovalPropagatedToXR.
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
            w.has_field(MIN, &xr, pointer, &want).await?;
        }
        let claim_versions = w
            .must_not_change(30 * SEC, &claim, |a, b| {
                a["metadata"]["generation"] != b["metadata"]["generation"]
            })
            .await?;
        let xr_versions = w
            .must_not_change(30 * SEC, &xr, |a, b| {
                a["metadata"]["resourceVersion"] != b["metadata"]["resourceVersion"]
            })
            .await?;

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
