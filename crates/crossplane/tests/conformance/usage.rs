//! The usage scenarios: upstream's `protection_usage_test.go` (`test/e2e/manifests/protection/usage/*`)
//! and `protection_usage_legacy_test.go` (`manifests/apiextensions/usage/*`).
//!
//! What differs from upstream's run, and why:
//! - every object carries the scenario's label, and every `resourceSelector` selects it too, so that
//!   scenarios sharing one apiserver select only their own objects (the core's webhook configuration
//!   matches only objects with that label, [`crossplane::usage::webhook`]);
//! - cluster-scoped objects (CRDs, NopResources, legacy Usages) carry the scenario's id in their names;
//! - the legacy scenarios use provider-nop's NopResource CRD without provider-nop running (upstream
//!   installs it as a package and waits for it to be Healthy): what they judge is the core's, and no
//!   provider finalizer stands in the way of a deletion;
//! - the legacy composition marks each composed resource ready in function-dummy's response instead of
//!   a function-auto-ready step (no provider sets the NopResources' Ready condition), and the core is
//!   granted NopResources by a ClusterRole aggregated to it, as the RBAC manager does for a provider's
//!   kinds.

use std::time::Duration;

use anyhow::Context;
use kube::api::{DeleteParams, ListParams};
use serde_json::{Value, json};

use super::harness::{TEST_LABEL, World, describe};
use super::manifests::{composition, nop_role, xrd_v1_with_claim};
use super::outcome::record;
use crate::{MIN, SEC, composed, xr_of_claim};

/// Upstream's test file of the protection.crossplane.io scenarios.
pub const FILE: &str = "protection_usage_test.go";
/// Upstream's test file of the legacy scenarios.
pub const LEGACY_FILE: &str = "protection_usage_legacy_test.go";
/// What the apiserver says when the usage webhook refuses (upstream's `DeletionBlockedByUsageWebhook`).
const DENIED: &str = "admission webhook \"nousages.protection.crossplane.io\" denied the request";

/// Waits until the core's webhook configuration exists and its webhook answers, as upstream's suite has
/// Crossplane installed before its scenarios run.
async fn webhook_ready(w: &World) -> anyhow::Result<()> {
    let selector = format!("{TEST_LABEL}={}", w.id);
    let name = crossplane::usage::webhook::configuration_name(Some(&selector));
    let vwcs = w
        .api(
            "admissionregistration.k8s.io/v1",
            "ValidatingWebhookConfiguration",
            None,
        )
        .await?;
    crate::support::wait_for(
        &format!("the usage webhook configuration {name}"),
        MIN,
        || async { Ok(vwcs.get_opt(&name).await?) },
    )
    .await?;
    let port = w.webhook_port;
    crate::support::wait_for("the usage webhook to listen", MIN, || async move {
        Ok(tokio::net::TcpStream::connect(("127.0.0.1", port))
            .await
            .ok()
            .map(|_| ()))
    })
    .await
}

/// Removes the core's webhook configuration (the core is gone with the scenario).
async fn webhook_teardown(w: &World) -> anyhow::Result<()> {
    let selector = format!("{TEST_LABEL}={}", w.id);
    let name = crossplane::usage::webhook::configuration_name(Some(&selector));
    let vwcs = w
        .api(
            "admissionregistration.k8s.io/v1",
            "ValidatingWebhookConfiguration",
            None,
        )
        .await?;
    match vwcs.delete(&name, &DeleteParams::default()).await {
        Ok(_) | Err(kube::Error::Api(_)) => Ok(()),
        Err(e) => Err(e.into()),
    }
}

/// Upstream's `DeletionBlockedByUsageWebhook`: deleting `obj` fails with the webhook's refusal, which
/// is returned.
async fn deletion_blocked(w: &World, obj: &Value) -> anyhow::Result<String> {
    let name = obj
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .context("name")?;
    match w.api_of(obj).await?.delete(name, &DeleteParams::default()).await {
        Ok(_) => anyhow::bail!(
            "expected the usage webhook to deny deleting {} but the deletion succeeded",
            describe(obj)
        ),
        Err(kube::Error::Api(s)) if s.message.contains(DENIED) => Ok(s.message.clone()),
        Err(e) => Err(anyhow::anyhow!(
            "expected the usage webhook to deny deleting {}, but it failed with: {e}",
            describe(obj)
        )),
    }
}

/// Upstream's `DeleteResources`: deletes `obj` (background propagation, the default).
async fn delete(w: &World, obj: &Value) -> anyhow::Result<()> {
    let name = obj
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .context("name")?;
    match w.api_of(obj).await?.delete(name, &DeleteParams::default()).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(s)) if s.code == 404 => Ok(()),
        Err(e) => Err(anyhow::anyhow!("deleting {}: {e}", describe(obj))),
    }
}

/// Upstream's `ResourcesDeletedWithin`: waits until `obj` is gone.
async fn gone(w: &World, limit: Duration, obj: &Value) -> anyhow::Result<()> {
    let name = obj
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .context("name")?;
    let api = w.api_of(obj).await?;
    crate::support::wait_for(&format!("{} deleted", describe(obj)), limit, || async {
        Ok(api.get_opt(name).await?.is_none().then_some(()))
    })
    .await
}

/// Upstream's `ResourcesFailToApply`: the apiserver refuses `obj`; its words are returned.
async fn fails_to_apply(w: &World, obj: &Value) -> anyhow::Result<String> {
    match w.apply(obj).await {
        Ok(_) => anyhow::bail!("the apiserver accepted {}, which it must refuse", describe(obj)),
        Err(e) => match e.downcast_ref::<kube::Error>() {
            Some(kube::Error::Api(s)) => Ok(s.message.clone()),
            _ => Err(e.context(format!("applying {}", describe(obj)))),
        },
    }
}

/// `labels` plus the scenario's label.
fn with_test_label(w: &World, labels: Value) -> Value {
    let mut l = labels;
    l[TEST_LABEL] = json!(w.id);
    l
}

/// A ConfigMap `namespace/name` with `labels` (and the scenario's), upstream's `super: interesting`.
fn config_map(w: &World, namespace: &str, name: &str, labels: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap",
           "metadata": {"namespace": namespace, "name": name, "labels": with_test_label(w, labels)},
           "data": {"super": "interesting"}})
}

/// One "blocked by the using resource" case: apply, Available, deletion blocked, delete the user, the
/// Usage goes with it, the used resource's deletion is replayed.
async fn blocked_by_user(w: &World, used: &Value, using: &Value, usage: &Value) -> anyhow::Result<String> {
    w.apply_all(&[usage.clone(), used.clone(), using.clone()]).await?;
    w.has_condition(MIN, usage, "Ready", "True", "Available").await?;
    let refused = deletion_blocked(w, used).await?;
    delete(w, using).await?;
    gone(w, 30 * SEC, using).await?;
    gone(w, 30 * SEC, usage).await?;
    // replayDeletion: the refused deletion is issued again once the Usage is gone.
    gone(w, MIN, used).await?;
    Ok(refused)
}

/// One "blocked with a reason" case: apply, Available, deletion blocked, delete the Usage, then the
/// protected resource may go.
async fn blocked_with_reason(w: &World, used: &Value, usage: &Value) -> anyhow::Result<String> {
    w.apply_all(&[usage.clone(), used.clone()]).await?;
    w.has_condition(MIN, usage, "Ready", "True", "Available").await?;
    let refused = deletion_blocked(w, used).await?;
    anyhow::ensure!(
        refused.contains("with reason: \"This resource is protected!\""),
        "the refusal does not give the Usage's reason: {refused}"
    );
    delete(w, usage).await?;
    gone(w, 30 * SEC, usage).await?;
    delete(w, used).await?;
    gone(w, 30 * SEC, used).await?;
    Ok(refused)
}

pub async fn test_usage_standalone_namespaced() -> anyhow::Result<()> {
    record("TestUsageStandaloneNamespaced", FILE, async {
        let w = World::start("usage-ns").await?;
        webhook_ready(&w).await?;
        let usage = |spec: Value| {
            json!({"apiVersion": "protection.crossplane.io/v1beta1", "kind": "Usage",
                   "metadata": {"namespace": w.ns, "name": "using-uses-used", "labels": w.labels()},
                   "spec": spec})
        };
        let foo_bar = with_test_label(&w, json!({"foo": "bar"}));
        let by = json!({"apiVersion": "v1", "kind": "ConfigMap", "resourceRef": {"name": "using-resource"}});

        // UsageBlockedByUsingResource.
        let used = config_map(&w, &w.ns, "used-resource", json!({"foo": "bar"}));
        let using = config_map(&w, &w.ns, "using-resource", json!({}));
        let u = usage(json!({"replayDeletion": true,
            "of": {"apiVersion": "v1", "kind": "ConfigMap", "resourceSelector": {"matchLabels": foo_bar}},
            "by": by}));
        let same_ns = blocked_by_user(&w, &used, &using, &u).await.context("UsageBlockedByUsingResource")?;
        anyhow::ensure!(
            same_ns.contains(&format!("(in namespace {:?}) by resource ConfigMap/using-resource", w.ns)),
            "the refusal does not name the Usage and its user: {same_ns}"
        );

        // CrossNamespaceUsageBlockedByUsingResource.
        let used = config_map(&w, &w.system, "used-resource", json!({"foo": "bar"}));
        let u = usage(json!({"replayDeletion": true,
            "of": {"apiVersion": "v1", "kind": "ConfigMap",
                   "resourceSelector": {"matchLabels": foo_bar, "namespace": w.system}},
            "by": by}));
        blocked_by_user(&w, &used, &using, &u)
            .await
            .context("CrossNamespaceUsageBlockedByUsingResource")?;

        // UsageBlockedWithReason.
        let protected = config_map(&w, &w.ns, "protected-resource", json!({"tier": "critical"}));
        let reason = json!({"apiVersion": "protection.crossplane.io/v1beta1", "kind": "Usage",
            "metadata": {"namespace": w.ns, "name": "protect-a-resource", "labels": w.labels()},
            "spec": {"of": {"apiVersion": "v1", "kind": "ConfigMap",
                            "resourceSelector": {"matchLabels": with_test_label(&w, json!({"tier": "critical"}))}},
                     "reason": "This resource is protected!"}});
        blocked_with_reason(&w, &protected, &reason).await.context("UsageBlockedWithReason")?;

        // CrossNamespaceUsageBlockedWithoutByResourceRef and ...WithoutByResourceSelector.
        let mut invalid = Vec::new();
        for (case, of) in [
            ("CrossNamespaceUsageBlockedWithoutByResourceRef",
             json!({"apiVersion": "v1", "kind": "ConfigMap",
                    "resourceRef": {"name": "using-resource", "namespace": w.system}})),
            ("CrossNamespaceUsageBlockedWithoutByResourceSelector",
             json!({"apiVersion": "v1", "kind": "ConfigMap",
                    "resourceSelector": {"matchLabels": foo_bar, "namespace": w.system}})),
        ] {
            let mut u = usage(json!({"replayDeletion": true, "of": of,
                                     "reason": "This resource is protected across namespaces!"}));
            u["metadata"]["name"] = json!("using-uses-used-across-namespaces-invalid");
            let refused = fails_to_apply(&w, &u).await.context(case)?;
            anyhow::ensure!(
                refused.contains("cross-namespace \"spec.of\" is not allowed without \"spec.by\" resource."),
                "{case}: the refusal does not say why: {refused}"
            );
            invalid.push(refused);
        }
        webhook_teardown(&w).await?;
        Ok(format!("refused: {same_ns}; invalid Usages refused: {}", invalid.join("; ")))
    })
    .await
}

pub async fn test_usage_standalone_cluster() -> anyhow::Result<()> {
    record("TestUsageStandaloneCluster", FILE, async {
        let w = World::start("usage-cluster").await?;
        webhook_ready(&w).await?;
        let group = format!("{}.example.org", w.id);
        let crd = |kind: &str, plural: &str, labels: Value| {
            json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
                   "metadata": {"name": format!("{plural}.{group}"), "labels": with_test_label(&w, labels)},
                   "spec": {"scope": "Namespaced", "group": group, "names": {"kind": kind, "plural": plural},
                            "versions": [{"name": "v1alpha1", "served": true, "storage": true,
                                          "schema": {"openAPIV3Schema": {"type": "object"}}}]}})
        };
        let cluster_usage = |name: &str, spec: Value| {
            json!({"apiVersion": "protection.crossplane.io/v1beta1", "kind": "ClusterUsage",
                   "metadata": {"name": format!("{name}-{}", w.id), "labels": w.labels()}, "spec": spec})
        };

        // UsageBlockedByUsingResource.
        let used = crd("Used", "useds", json!({"foo": "bar"}));
        let using = crd("Using", "usings", json!({}));
        let u = cluster_usage(
            "using-uses-used",
            json!({"replayDeletion": true,
            "of": {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
                   "resourceSelector": {"matchLabels": with_test_label(&w, json!({"foo": "bar"}))}},
            "by": {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
                   "resourceRef": {"name": format!("usings.{group}")}}}),
        );
        let by_user = blocked_by_user(&w, &used, &using, &u)
            .await
            .context("UsageBlockedByUsingResource")?;
        anyhow::ensure!(
            by_user.contains("*v1beta1.ClusterUsage")
                && by_user.contains(&format!("by resource CustomResourceDefinition/usings.{group}")),
            "the refusal does not name the ClusterUsage and its user: {by_user}"
        );

        // UsageBlockedWithReason.
        let protected = crd("Used", "useds", json!({"tier": "critical"}));
        let reason = cluster_usage(
            "protect-a-resource",
            json!({
            "of": {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
                   "resourceSelector": {"matchLabels": with_test_label(&w, json!({"tier": "critical"}))}},
            "reason": "This resource is protected!"}),
        );
        let with_reason = blocked_with_reason(&w, &protected, &reason)
            .await
            .context("UsageBlockedWithReason")?;
        webhook_teardown(&w).await?;
        Ok(format!("{by_user}; {with_reason}"))
    })
    .await
}

/// A legacy (cluster-scoped) NopResource, upstream's: Ready after 10 s (had a provider run it).
fn nop(w: &World, name: &str, labels: Value) -> Value {
    json!({"apiVersion": "nop.crossplane.io/v1alpha1", "kind": "NopResource",
           "metadata": {"name": format!("{name}-{}", w.id), "labels": with_test_label(w, labels)},
           "spec": {"forProvider": {"conditionAfter": [
               {"conditionType": "Ready", "conditionStatus": "True", "time": "10s"}]}}})
}

pub async fn test_legacy_usage_standalone() -> anyhow::Result<()> {
    record("TestLegacyUsageStandalone", LEGACY_FILE, async {
        let w = World::start("legacy-usage").await?;
        let role = nop_role(&w);
        w.apply_all(std::slice::from_ref(&role)).await?;
        webhook_ready(&w).await?;
        let usage = |name: &str, spec: Value| {
            json!({"apiVersion": "apiextensions.crossplane.io/v1beta1", "kind": "Usage",
                   "metadata": {"name": format!("{name}-{}", w.id), "labels": w.labels()}, "spec": spec})
        };

        // UsageBlockedByUsingResource.
        let used = nop(&w, "used-resource", json!({"foo": "bar"}));
        let using = nop(&w, "using-resource", json!({}));
        let u = usage(
            "using-uses-used",
            json!({"replayDeletion": true,
            "of": {"apiVersion": "nop.crossplane.io/v1alpha1", "kind": "NopResource",
                   "resourceSelector": {"matchLabels": with_test_label(&w, json!({"foo": "bar"}))}},
            "by": {"apiVersion": "nop.crossplane.io/v1alpha1", "kind": "NopResource",
                   "resourceRef": {"name": using["metadata"]["name"]}}}),
        );
        let by_user = blocked_by_user(&w, &used, &using, &u)
            .await
            .context("UsageBlockedByUsingResource")?;

        // UsageBlockedWithReason.
        let protected = nop(&w, "protected-resource", json!({"tier": "critical"}));
        let reason = usage(
            "protect-a-resource",
            json!({
            "of": {"apiVersion": "nop.crossplane.io/v1alpha1", "kind": "NopResource",
                   "resourceSelector": {"matchLabels": with_test_label(&w, json!({"tier": "critical"}))}},
            "reason": "This resource is protected!"}),
        );
        let with_reason = blocked_with_reason(&w, &protected, &reason)
            .await
            .context("UsageBlockedWithReason")?;
        webhook_teardown(&w).await?;
        w.delete_all(3 * MIN, &[role]).await?;
        Ok(format!("{by_user}; {with_reason}"))
    })
    .await
}

pub async fn test_legacy_usage_composition() -> anyhow::Result<()> {
    record("TestLegacyUsageComposition", LEGACY_FILE, async {
        let w = World::start("legacy-usage-comp").await?;
        let role = nop_role(&w);
        w.apply_all(std::slice::from_ref(&role)).await?;
        webhook_ready(&w).await?;
        let group = format!("{}.nop.example.org", w.id);
        let comp_name = format!("xnopresources.{group}");
        let labels = |l: Value| with_test_label(&w, l);
        let nop_template = |usage: &str, finalizer: bool| {
            let mut r = json!({"apiVersion": "nop.crossplane.io/v1alpha1", "kind": "NopResource",
                "metadata": {"labels": labels(json!({"usage": usage}))},
                "spec": {"forProvider": {"conditionAfter": [
                    {"conditionType": "Synced", "conditionStatus": "True", "time": "5s"},
                    {"conditionType": "Ready", "conditionStatus": "True", "time": "10s"}]}}});
            if finalizer {
                // Delays the using resource's deletion, as a Release delays its Cluster's.
                r["metadata"]["finalizers"] = json!(["delay-deletion-of-using-resource"]);
            }
            json!({"resource": r, "ready": "READY_TRUE"})
        };
        let usage_template = |version: &str, replay: bool| {
            let selector = |usage: &str| json!({"matchControllerRef": true, "matchLabels": labels(json!({"usage": usage}))});
            let mut spec = json!({
                "of": {"apiVersion": "nop.crossplane.io/v1alpha1", "kind": "NopResource", "resourceSelector": selector("used")},
                "by": {"apiVersion": "nop.crossplane.io/v1alpha1", "kind": "NopResource", "resourceSelector": selector("using")}});
            if replay {
                spec["replayDeletion"] = json!(true);
            }
            json!({"resource": {"apiVersion": "apiextensions.crossplane.io/v1beta1", "kind": "Usage",
                                "metadata": {"labels": labels(json!({"version": version}))}, "spec": spec},
                   "ready": "READY_TRUE"})
        };
        let response = |updated: bool| {
            let mut resources = json!({"used-resource": nop_template("used", false),
                                       "using-resource": nop_template("using", true)});
            if updated {
                resources["usage-resource-updated"] = usage_template("updated", true);
            } else {
                resources["usage-resource"] = usage_template("initial", false);
            }
            let mut r = json!({"desired": {"resources": resources}});
            if updated {
                r["desired"]["composite"] = json!({"resource": {"status": {"coolerField": "I'M COOLER!"}}});
            }
            r
        };
        let definition = xrd_v1_with_claim(&w, &group, &["coolField"]);
        let setup = vec![
            definition,
            composition(&w, &comp_name, &format!("{group}/v1alpha1"), "XNopResource", response(false), None),
        ];
        w.apply_all(&setup).await?;
        w.has_condition(MIN, &setup[0], "Established", "True", "WatchingCompositeResource").await?;

        // ClaimCreatedAndReady (background deletion of its XR: the using resource's finalizer would hold
        // a foreground one).
        let claim = json!({"apiVersion": format!("{group}/v1alpha1"), "kind": "NopResource",
                           "metadata": {"namespace": w.ns, "name": "test", "labels": w.labels()},
                           "spec": {"coolField": "I'm cool!"}});
        w.apply_all(std::slice::from_ref(&claim)).await?;
        w.has_condition(MIN, &claim, "Ready", "True", "Available").await?;
        let xr = xr_of_claim(&w, &claim).await?;

        // UsedResourceHasInUseLabel.
        let in_use = crate::support::wait_for("the used resource to be labelled in use", MIN, || async {
            let nops = composed(&w, &xr, "NopResource").await?;
            Ok(nops
                .into_iter()
                .find(|n| n.pointer("/metadata/labels/usage") == Some(&json!("used")))
                .filter(|n| n.pointer("/metadata/labels/crossplane.io~1in-use") == Some(&json!("true"))))
        })
        .await?;

        // UsageResourceIsInInitialVersion.
        let usage_named = |name: &'static str, version: &'static str| {
            let (w, xr) = (&w, &xr);
            async move {
                crate::support::wait_for(&format!("the composed Usage {name}"), MIN, || async {
                    let usages = composed(w, xr, "Usage").await?;
                    Ok(usages.into_iter().find(|u| {
                        u.pointer("/metadata/labels/version") == Some(&json!(version))
                            && u.pointer("/metadata/annotations/crossplane.io~1composition-resource-name")
                                == Some(&json!(name))
                    }))
                })
                .await
            }
        };
        usage_named("usage-resource", "initial").await?;

        // UpdateCompositionWithNewUsage, OldUsageIsGoneNewOneIsComposed.
        w.apply(&composition(&w, &comp_name, &format!("{group}/v1alpha1"), "XNopResource", response(true), None))
            .await?;
        let legacy = w.api("apiextensions.crossplane.io/v1beta1", "Usage", None).await?;
        let selector = format!("version=initial,{TEST_LABEL}={}", w.id);
        crate::support::wait_for("the initial Usage deleted", 2 * MIN, || async {
            Ok(legacy.list(&ListParams::default().labels(&selector)).await?.items.is_empty().then_some(()))
        })
        .await?;
        usage_named("usage-resource-updated", "updated").await?;
        // The usage controller makes the using resource an owner of the new Usage. Until it has, the
        // garbage collector would delete the Usage with its XR (upstream's reconciler works the same
        // way), so the claim is deleted only once the Usage is owned by its user. Upstream's suite does
        // not wait here; on a loaded machine the claim could be deleted first.
        let updated = format!("version=updated,{TEST_LABEL}={}", w.id);
        crate::support::wait_for("the updated Usage to be owned by its using resource", MIN, || async {
            let usages = legacy.list(&ListParams::default().labels(&updated)).await?.items;
            Ok(usages
                .iter()
                .any(|u| u.metadata.owner_references.iter().flatten().any(|o| o.kind == "NopResource"))
                .then_some(()))
        })
        .await?;

        // ClaimDeleted.
        delete(&w, &claim).await?;
        gone(&w, MIN, &claim).await?;

        // OthersDeletedExceptUsed.
        let nops = w.api("nop.crossplane.io/v1alpha1", "NopResource", None).await?;
        let by_usage = |usage: &str| format!("usage={usage},{TEST_LABEL}={}", w.id);
        let listed = |selector: String| {
            let nops = nops.clone();
            async move { Ok::<_, anyhow::Error>(nops.list(&ListParams::default().labels(&selector)).await?.items) }
        };
        crate::support::wait_for("the using resource to be deleting", MIN, || async {
            let using = listed(by_usage("using")).await?;
            Ok((using.len() == 1 && using[0].metadata.deletion_timestamp.is_some()).then_some(()))
        })
        .await?;
        let all_usages = format!("{TEST_LABEL}={}", w.id);
        crate::support::wait_for("the Usage to stay while its user is deleting", MIN, || async {
            let usages = legacy.list(&ListParams::default().labels(&all_usages)).await?.items;
            Ok((usages.len() == 1 && usages[0].metadata.deletion_timestamp.is_none()).then_some(()))
        })
        .await?;
        crate::support::wait_for("the used resource to stay", MIN, || async {
            let used = listed(by_usage("used")).await?;
            Ok((used.len() == 1 && used[0].metadata.deletion_timestamp.is_none()).then_some(()))
        })
        .await?;

        // UsingDeletedAllGone: the finalizer goes, then every composed resource and the Usage.
        let using = listed(by_usage("using")).await?;
        for u in &using {
            let name = u.metadata.name.clone().context("name")?;
            let patch = json!({"metadata": {"finalizers": null}});
            nops.patch(&name, &kube::api::PatchParams::default(), &kube::api::Patch::Merge(&patch))
                .await?;
        }
        crate::support::wait_for("every NopResource deleted", 2 * MIN, || async {
            Ok(listed(all_usages.clone()).await?.is_empty().then_some(()))
        })
        .await?;
        crate::support::wait_for("every Usage deleted", 2 * MIN, || async {
            Ok(legacy.list(&ListParams::default().labels(&all_usages)).await?.items.is_empty().then_some(()))
        })
        .await?;

        webhook_teardown(&w).await?;
        w.delete_all(3 * MIN, &setup).await?;
        w.delete_all(3 * MIN, &[role]).await?;
        Ok(format!(
            "used resource {} labelled in use; the Usage followed the Composition's update; the used \
             resource stayed until its user was gone",
            in_use["metadata"]["name"].as_str().unwrap_or_default()
        ))
    })
    .await
}
