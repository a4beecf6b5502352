//! The legacy composition scenarios of upstream's `apiextensions_compositions_legacy_test.go` that run
//! without a provider: `TestLegacyBindToExistingXR` (`test/e2e/manifests/apiextensions/composition/
//! legacy-bind-existing-xr`), a claim that names an existing XR binds to it and takes it over.
//!
//! What differs from upstream's run, and why: the Function is the suite's function-dummy of ours, a
//! `pkg.crossplane.io/v1` Function (upstream applies a v1beta1 one to check that version still works;
//! that is the package manager's concern, not this scenario's), and the group carries the scenario's
//! id. Beyond upstream, the XR must keep its UID (the claim bound to it, no new XR replaced it).

use serde_json::json;

use super::harness::World;
use super::manifests::{composition, xrd_v1_with_claim};
use super::outcome::{LEGACY, record};
use crate::MIN;

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
