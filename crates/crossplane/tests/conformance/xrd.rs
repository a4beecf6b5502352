//! The XRD scenarios of upstream's `apiextensions_xrds_test.go` (`test/e2e/manifests/apiextensions/
//! xrd/{subresources,validation,referenceable-version-change}`): an XRD's scale subresource reaches the
//! XR's CRD, the apiserver refuses invalid XRDs and changes to immutable fields (the CEL rules of our XRD
//! CRD), and a change of the referenceable version restarts the composite controller so that new XRs
//! select the new version's Composition.
//!
//! What differs from upstream's run, and why: the groups carry the scenario's id (`<id>.nop.example.org`)
//! so that scenarios sharing one apiserver do not meet; each refusal must also name the problem (upstream
//! accepts any error), the refused changes must leave the stored XRD as it was, the valid update must
//! reach the XR's CRD, and the scale subresource must serve an XR's replicas.

use serde_json::{Value, json};

use super::harness::World;
use super::manifests::composition;
use super::outcome::{XRDS, record};
use crate::{MIN, SEC};

/// Upstream's validation XRD (`xrd-valid.yaml` and its variants): a v1 XRD `XNopResource` with the
/// claim `claim_plural`, in `group`, named `<plural>.<group>`; `cooler` adds `spec.coolerField`.
fn validation_xrd(
    w: &World,
    group: &str,
    kind: &str,
    plural: &str,
    claim: (&str, &str),
    cooler: bool,
) -> Value {
    let mut props = json!({"coolField": {"type": "string"}});
    if cooler {
        props["coolerField"] = json!({"type": "string"});
    }
    json!({
        "apiVersion": "apiextensions.crossplane.io/v1", "kind": "CompositeResourceDefinition",
        "metadata": {"name": format!("{plural}.{group}"), "labels": w.labels()},
        "spec": {"group": group, "names": {"kind": kind, "plural": plural},
                 "claimNames": {"kind": claim.0, "plural": claim.1},
                 "connectionSecretKeys": ["test"],
                 "versions": [{"name": "v1alpha1", "served": true, "referenceable": true,
                     "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                         "spec": {"type": "object", "properties": props, "required": ["coolField"]}}}}}]}
    })
}

/// Server-side applies `obj`, which the apiserver must refuse (upstream's `ResourcesFailToApply`), and
/// returns the apiserver's words; an error when it is accepted or fails for another reason.
async fn refused(w: &World, case: &str, obj: &Value) -> anyhow::Result<String> {
    match w.apply(obj).await {
        Ok(_) => anyhow::bail!("{case}: the apiserver accepted an XRD it must refuse"),
        Err(e) => match e.downcast_ref::<kube::Error>() {
            Some(kube::Error::Api(s)) => Ok(s.message.clone()),
            _ => Err(e.context(format!("{case}: applying"))),
        },
    }
}

pub async fn test_xrd_validation() -> anyhow::Result<()> {
    record("TestXRDValidation", XRDS, async {
        let w = World::start("xrd-validation").await?;
        let group = format!("{}.nop.example.org", w.id);
        let claim = ("NopResource", "nopresources");
        let mut details = Vec::new();

        // ValidNewXRDIsAccepted.
        let valid = validation_xrd(&w, &group, "XNopResource", "xnopresources", claim, false);
        w.apply_all(std::slice::from_ref(&valid)).await?;
        w.has_condition(MIN, &valid, "Established", "True", "WatchingCompositeResource")
            .await?;

        // ValidUpdatedXRDIsAccepted: the new field reaches the XR's CRD (beyond upstream).
        let updated = validation_xrd(&w, &group, "XNopResource", "xnopresources", claim, true);
        w.apply_all(std::slice::from_ref(&updated)).await?;
        w.has_condition(MIN, &updated, "Established", "True", "WatchingCompositeResource")
            .await?;
        let crd = json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
                         "metadata": {"name": format!("xnopresources.{group}")}});
        w.has_field(
            MIN,
            &crd,
            "/spec/versions/0/schema/openAPIV3Schema/properties/spec/properties/coolerField/type",
            &json!("string"),
        )
        .await?;

        // InvalidXRDUpdateIsRejected: an uppercase claim plural.
        let bad_update = validation_xrd(
            &w,
            &group,
            "XNopResource",
            "xnopresources",
            ("NopResource", "Nopresources"),
            true,
        );
        let m = refused(&w, "InvalidXRDUpdateIsRejected", &bad_update).await?;
        anyhow::ensure!(
            m.contains("spec.claimNames.plural must be lowercase"),
            "InvalidXRDUpdateIsRejected: the refusal does not say the claim plural must be lowercase: {m}"
        );
        details.push(format!("InvalidXRDUpdateIsRejected: {m}"));

        // ImmutableXRDFieldUpdateIsRejected: another group.
        let mut moved = updated.clone();
        moved["spec"]["group"] = json!(format!("{}.nope.example.org", w.id));
        let m = refused(&w, "ImmutableXRDFieldUpdateIsRejected", &moved).await?;
        anyhow::ensure!(
            m.contains("spec.group is immutable"),
            "ImmutableXRDFieldUpdateIsRejected: the refusal does not say spec.group is immutable: {m}"
        );
        details.push(format!("ImmutableXRDFieldUpdateIsRejected: {m}"));

        // The refused changes left the XRD as the valid update made it.
        let stored = w.get(&valid).await?;
        anyhow::ensure!(
            stored.pointer("/spec/group") == Some(&json!(group))
                && stored.pointer("/spec/claimNames/plural") == Some(&json!("nopresources")),
            "a refused change reached the stored XRD: {}",
            stored["spec"]
        );

        // InvalidXRDIsRejected: a new XRD with an uppercase claim plural.
        let invalid = validation_xrd(
            &w,
            &group,
            "XNopResourcestwo",
            "xnopresourcestwo",
            ("NopResourcetwo", "Nopresourcestwo"),
            true,
        );
        let m = refused(&w, "InvalidXRDIsRejected", &invalid).await?;
        anyhow::ensure!(
            m.contains("spec.claimNames.plural must be lowercase"),
            "InvalidXRDIsRejected: the refusal does not say the claim plural must be lowercase: {m}"
        );
        let xrds = w.api_of(&invalid).await?;
        anyhow::ensure!(
            xrds.get_opt(&format!("xnopresourcestwo.{group}"))
                .await?
                .is_none(),
            "InvalidXRDIsRejected: the refused XRD exists"
        );
        details.push(format!("InvalidXRDIsRejected: {m}"));

        // Teardown: DeleteValidComposition (the valid XRD), gone within 30 s.
        w.delete_all(30 * SEC, &[valid]).await?;
        Ok(details.join("; "))
    })
    .await
}

pub async fn test_xrd_subresources() -> anyhow::Result<()> {
    record("TestXRDSubresources", XRDS, async {
        let w = World::start("xrd-subresources").await?;
        let group = format!("{}.nop.example.org", w.id);
        let scale = json!({"specReplicasPath": ".spec.replicas", "statusReplicasPath": ".status.replicas",
                           "labelSelectorPath": ".status.labelSelector"});
        let xrd = json!({
            "apiVersion": "apiextensions.crossplane.io/v2", "kind": "CompositeResourceDefinition",
            "metadata": {"name": format!("xnopresources.{group}"), "labels": w.labels()},
            "spec": {"group": group, "names": {"kind": "XNopResource", "plural": "xnopresources"},
                     "scope": "Namespaced",
                     "versions": [{"name": "v1alpha1", "served": true, "referenceable": true,
                         "subresources": {"scale": scale},
                         "schema": {"openAPIV3Schema": {"type": "object", "required": ["spec"], "properties": {
                             "spec": {"type": "object", "properties": {"replicas": {"type": "integer"}}},
                             "status": {"type": "object", "properties": {
                                 "replicas": {"type": "integer"}, "labelSelector": {"type": "string"}}}}}}}]}
        });
        // CreateXRDWithSubresourcesScale.
        w.apply_all(std::slice::from_ref(&xrd)).await?;
        w.has_condition(MIN, &xrd, "Established", "True", "WatchingCompositeResource").await?;

        // CreateCRDWithSubresourcesScale.
        let crd = json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
                         "metadata": {"name": format!("xnopresources.{group}")}});
        crate::support::wait_for("the XR's CRD", 30 * SEC, || async {
            let api = w.api_of(&crd).await?;
            Ok(api.get_opt(&format!("xnopresources.{group}")).await?)
        })
        .await?;
        for (field, want) in [
            ("labelSelectorPath", ".status.labelSelector"),
            ("specReplicasPath", ".spec.replicas"),
            ("statusReplicasPath", ".status.replicas"),
        ] {
            let pointer = format!("/spec/versions/0/subresources/scale/{field}");
            w.has_field(MIN, &crd, &pointer, &json!(want)).await?;
        }

        // Beyond upstream: the XR's CRD serves /scale, with the XR's replicas.
        let xr = json!({"apiVersion": format!("{group}/v1alpha1"), "kind": "XNopResource",
                        "metadata": {"namespace": w.ns, "name": "scaled", "labels": w.labels()},
                        "spec": {"replicas": 2}});
        w.apply_all(std::slice::from_ref(&xr)).await?;
        let s = w.api_of(&xr).await?.get_scale("scaled").await?;
        let replicas = s.spec.and_then(|s| s.replicas);
        anyhow::ensure!(
            replicas == Some(2),
            "the XR's /scale shows spec.replicas {replicas:?}, not the XR's 2"
        );

        // DeleteXRDWithSubresources (the XR first, as upstream's suite leaves none behind).
        w.delete_all(MIN, &[xr]).await?;
        w.delete_all(30 * SEC, &[xrd]).await?;
        Ok(format!(
            "the XR's CRD serves scale {scale}; GET /scale of an XR with spec.replicas 2 gave 2"
        ))
    })
    .await
}

/// Upstream's referenceable-version-change XRD: a namespaced v2 XRD `TestResource` in `group` with the
/// versions v1 and v2 (the same schema: a required `spec.field`), `referenceable` naming which one is.
fn versioned_xrd(w: &World, group: &str, referenceable: &str) -> Value {
    let schema = json!({"openAPIV3Schema": {"type": "object", "properties": {
        "spec": {"type": "object", "properties": {"field": {"type": "string"}}, "required": ["field"]}}}});
    let versions: Vec<Value> = ["v1", "v2"]
        .iter()
        .map(|v| json!({"name": v, "served": true, "referenceable": *v == referenceable, "schema": schema}))
        .collect();
    json!({
        "apiVersion": "apiextensions.crossplane.io/v2", "kind": "CompositeResourceDefinition",
        "metadata": {"name": format!("testresources.{group}"), "labels": w.labels()},
        "spec": {"scope": "Namespaced", "group": group,
                 "names": {"kind": "TestResource", "plural": "testresources"}, "versions": versions}
    })
}

/// The ConfigMaps `xr` composed (through its `resourceRefs`), once it has some.
async fn composed_configmaps(w: &World, xr: &Value) -> anyhow::Result<Vec<Value>> {
    let refs = crate::support::wait_for("the XR's resourceRefs", MIN, || async {
        let x = w.get(xr).await?;
        Ok(x.pointer("/spec/crossplane/resourceRefs")
            .and_then(Value::as_array)
            .filter(|r| !r.is_empty())
            .cloned())
    })
    .await?;
    let mut out = Vec::new();
    for r in refs.iter().filter(|r| r["kind"] == "ConfigMap") {
        let ns = r
            .get("namespace")
            .cloned()
            .unwrap_or_else(|| xr["metadata"]["namespace"].clone());
        let cm = json!({"apiVersion": "v1", "kind": "ConfigMap",
                        "metadata": {"name": r["name"], "namespace": ns}});
        out.push(w.get(&cm).await?);
    }
    Ok(out)
}

pub async fn test_xrd_referenceable_version_change() -> anyhow::Result<()> {
    record("TestXRDReferenceableVersionChange", XRDS, async {
        let w = World::start("xrd-referenceable").await?;
        let group = format!("{}.test.example.org", w.id);
        let comp = |version: &str| {
            let response = json!({"desired": {"resources": {format!("dummy-resource-{version}"): {
                "resource": {"apiVersion": "v1", "kind": "ConfigMap", "data": {"version": version}},
                "ready": "READY_TRUE"}}}});
            let mut c = composition(
                &w,
                &format!("test-composition-{version}-{}", w.id),
                &format!("{group}/{version}"),
                "TestResource",
                response,
                None,
            );
            c["metadata"]["labels"]["test.example.org/version"] = json!(version);
            c
        };
        // CreateXRDWithV1Referenceable.
        let setup = vec![versioned_xrd(&w, &group, "v1"), comp("v1"), comp("v2")];
        w.apply_all(&setup).await?;
        w.has_condition(MIN, &setup[0], "Established", "True", "WatchingCompositeResource")
            .await?;

        // CreateXRBeforeChange: written as v2, selected as v1, the referenceable version.
        let xr = |name: &str| {
            json!({"apiVersion": format!("{group}/v2"), "kind": "TestResource",
                   "metadata": {"name": name, "namespace": w.ns}, "spec": {"field": "test-value"}})
        };
        let before = xr("test-xr-before-change");
        w.apply_all(std::slice::from_ref(&before)).await?;
        let v1 = json!(format!("test-composition-v1-{}", w.id));
        w.has_field(MIN, &before, "/spec/crossplane/compositionRef/name", &v1)
            .await?;

        // UpdateXRDToV2Referenceable: Established again, observed at the new generation (the composite
        // controller restarted for v2).
        let updated = versioned_xrd(&w, &group, "v2");
        w.apply_all(std::slice::from_ref(&updated)).await?;
        let established = w
            .has_condition(MIN, &updated, "Established", "True", "WatchingCompositeResource")
            .await?;
        anyhow::ensure!(
            established["observedGeneration"].as_i64().is_some_and(|g| g >= 2),
            "the Established condition does not name the updated XRD's generation: {established}"
        );

        // CreateXRAfterChange: selected as v2.
        let after = xr("test-xr-after-change");
        w.apply_all(std::slice::from_ref(&after)).await?;
        let v2 = json!(format!("test-composition-v2-{}", w.id));
        w.has_field(MIN, &after, "/spec/crossplane/compositionRef/name", &v2)
            .await?;

        // Beyond upstream: each XR composes what its Composition gives, and the XR from before the
        // change keeps composing with the v1 Composition it selected (upstream does not refuse it).
        for (x, version) in [(&before, "v1"), (&after, "v2")] {
            w.has_condition(MIN, x, "Synced", "True", "ReconcileSuccess")
                .await?;
            w.has_condition(MIN, x, "Ready", "True", "Available").await?;
            let cms = composed_configmaps(&w, x).await?;
            anyhow::ensure!(
                cms.len() == 1 && cms[0].pointer("/data/version") == Some(&json!(version)),
                "{} did not compose one ConfigMap of version {version}: {cms:?}",
                x["metadata"]["name"]
            );
        }
        // The v2 controller composed it too: the ConfigMap's controller reference names the XR as v2.
        let cm = composed_configmaps(&w, &before).await?.remove(0);
        let owner_v2 = json!(format!("{group}/v2"));
        w.has_field(MIN, &cm, "/metadata/ownerReferences/0/apiVersion", &owner_v2)
            .await?;
        w.has_condition(MIN, &before, "Synced", "True", "ReconcileSuccess")
            .await?;
        w.has_field(MIN, &before, "/spec/crossplane/compositionRef/name", &v1)
            .await?;

        // DeleteResources: the XRs first, then the XRD and the Compositions, each within 30 s.
        w.delete_all_with(
            30 * SEC,
            &[before, after],
            kube::api::PropagationPolicy::Background,
        )
        .await?;
        w.delete_all_with(30 * SEC, &setup, kube::api::PropagationPolicy::Background)
            .await?;
        Ok(format!(
            "before the change the XR selected {v1}; after it (Established at generation {}) {v2}",
            established["observedGeneration"]
        ))
    })
    .await
}
