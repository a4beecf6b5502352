//! Conformance with upstream Crossplane's end-to-end suite (crossplane/crossplane `test/e2e`): one test
//! per upstream scenario, named after it, with upstream's steps, conditions and time limits, and
//! manifests of our own ([`conformance::manifests`]). The core runs as upstream installs it: under its
//! own ServiceAccount with the generated ClusterRole, beside the RBAC manager, with a function-dummy
//! compatible function ([`conformance::harness`]).
//!
//! With `CONFORMANCE_OUT=<dir>` each scenario writes `<UpstreamTestName>.json` (pass or fail, seconds,
//! detail), and [`cannot_run_yet_is_recorded`] writes the scenarios of issue 22 this suite cannot run yet
//! and why ([`conformance::outcome::CANNOT_RUN`]).
//!
//! What differs from upstream's run, and why: Functions are local processes found through the
//! development annotations, so the waits for a Function's `Healthy` and `Active` are left out (no
//! package manager yet); upstream's `crossplane-system` and `default` namespaces are one fresh namespace
//! each per scenario, so that scenarios run in parallel.
//!
//! The scenarios wait on controllers far more than they compute (a whole run used about a quarter of
//! 2 cores, with libtest's default of one test per core), so this target has its own `main`
//! ([`libtest_mimic`]): [`SCENARIOS_AT_ONCE`] at a time unless `--test-threads` or `RUST_TEST_THREADS`
//! says otherwise. Filters, `--exact`, `--skip`, `--list` and `--nocapture` work as with libtest.

mod support;

mod conformance {
    pub mod circuit;
    pub mod environment;
    pub mod harness;
    pub mod legacy;
    pub mod manifests;
    pub mod ops;
    pub mod outcome;
    pub mod required;
    pub mod usage;
    pub mod xrd;
}

use std::time::Duration;

use conformance::harness::World;
use conformance::manifests::*;
use conformance::outcome::{self, COMPOSITIONS, record};
use libtest_mimic::{Arguments, Trial};
use serde_json::{Value, json};

const SEC: Duration = Duration::from_secs(1);
const MIN: Duration = Duration::from_secs(60);

/// The composed resources of `xr` (through `resourceRefs`) of `kind`, once the XR is Ready and Synced
/// (upstream's `ComposedResourcesHaveFieldValueWithin` waits for that first).
async fn composed(w: &World, xr: &Value, kind: &str) -> anyhow::Result<Vec<Value>> {
    w.has_condition(MIN, xr, "Ready", "True", "Available").await?;
    w.has_condition(MIN, xr, "Synced", "True", "ReconcileSuccess")
        .await?;
    let x = w.get(xr).await?;
    let refs = x
        .pointer("/spec/crossplane/resourceRefs")
        .or_else(|| x.pointer("/spec/resourceRefs"))
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let mut out = Vec::new();
    for r in refs.iter().filter(|r| r["kind"] == kind) {
        let mut obj =
            json!({"apiVersion": r["apiVersion"], "kind": r["kind"], "metadata": {"name": r["name"]}});
        if let Some(ns) = r.get("namespace").filter(|n| n.is_string()) {
            obj["metadata"]["namespace"] = ns.clone();
        }
        out.push(w.get(&obj).await?);
    }
    Ok(out)
}

/// The XR a claim is bound to (upstream's `CompositeResourceHasFieldValueWithin` follows the claim's
/// `spec.resourceRef`).
async fn xr_of_claim(w: &World, claim: &Value) -> anyhow::Result<Value> {
    let c = support::wait_for("the claim's resourceRef", MIN, || async {
        let c = w.get(claim).await?;
        Ok(c.pointer("/spec/resourceRef/name").is_some().then_some(c))
    })
    .await?;
    Ok(
        json!({"apiVersion": c["spec"]["resourceRef"]["apiVersion"], "kind": c["spec"]["resourceRef"]["kind"],
              "metadata": {"name": c["spec"]["resourceRef"]["name"]}}),
    )
}

async fn test_basic_composition_cluster() -> anyhow::Result<()> {
    record("TestBasicCompositionCluster", COMPOSITIONS, async {
        let w = World::start("basic-cluster").await?;
        let group = format!("{}.example.org", w.id);
        let (secret, credentials) = super_secret(&w);
        let crd_group = format!("{}.test.example.org", w.id);
        let resources = json!({
            "configmap": {"resource": {"apiVersion": "v1", "kind": "ConfigMap",
                                       "metadata": {"namespace": w.ns}, "data": {"coolData": "I'm cool!"}},
                          "ready": "READY_TRUE"},
            "crd": {"resource": {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
                                 "metadata": {"name": format!("controllers.{crd_group}")},
                                 "spec": {"group": crd_group, "names": {"kind": "Controller", "plural": "controllers"},
                                          "scope": "Cluster",
                                          "versions": [{"name": "v1alpha1", "served": true, "storage": true,
                                                        "schema": {"openAPIV3Schema": {"type": "object"}}}]}},
                    "ready": "READY_TRUE"},
        });
        let setup = vec![
            xrd_v2(&w, &group, "ClusterTest", "clustertests", "Cluster"),
            composition(&w, &format!("basic-composition-cluster-{}", w.id), &format!("{group}/v1alpha1"),
                        "ClusterTest", basic_response(resources), Some(credentials)),
            secret,
        ];
        w.apply_all(&setup).await?;
        w.has_condition(MIN, &setup[0], "Established", "True", "WatchingCompositeResource").await?;

        let xr = json!({"apiVersion": format!("{group}/v1alpha1"), "kind": "ClusterTest",
                        "metadata": {"name": "basic-xr-cluster"},
                        "spec": {"coolField": "I'm cool!",
                                 "crossplane": {"compositionRef": {"name": format!("basic-composition-cluster-{}", w.id)}}}});
        w.apply_all(std::slice::from_ref(&xr)).await?;
        w.has_condition(MIN, &xr, "Ready", "True", "Available").await?;
        w.has_condition(MIN, &xr, "Synced", "True", "ReconcileSuccess").await?;
        let cms = composed(&w, &xr, "ConfigMap").await?;
        anyhow::ensure!(cms.len() == 1, "expected one composed ConfigMap, found {}", cms.len());
        anyhow::ensure!(
            cms[0].pointer("/metadata/generateName") == Some(&json!("basic-xr-cluster-")),
            "the composed ConfigMap's generateName is {:?}", cms[0].pointer("/metadata/generateName")
        );
        anyhow::ensure!(
            cms[0].pointer("/metadata/namespace") == Some(&json!(w.ns)),
            "the composed ConfigMap is not in the namespace its template gives: {:?}", cms[0]["metadata"]
        );
        w.has_field(MIN, &xr, "/status/coolerField", &json!("I'M COOLER!")).await?;

        w.delete_all(MIN, &[xr]).await?;
        w.delete_all(3 * MIN, &setup).await?;
        Ok(format!("composed ConfigMap {}/{} and CRD controllers.{crd_group}",
                   w.ns, cms[0]["metadata"]["name"].as_str().unwrap_or_default()))
    })
    .await
}

async fn test_basic_composition_namespaced() -> anyhow::Result<()> {
    record("TestBasicCompositionNamespaced", COMPOSITIONS, async {
        let w = World::start("basic-ns").await?;
        let group = format!("{}.example.org", w.id);
        let (secret, credentials) = super_secret(&w);
        let resources = json!({"configmap": {"resource": {"apiVersion": "v1", "kind": "ConfigMap",
                                                          "data": {"coolData": "I'm cool!"}},
                                             "ready": "READY_TRUE"}});
        let name = format!("basic-composition-namespaced-{}", w.id);
        let setup = vec![
            xrd_v2(&w, &group, "Test", "tests", "Namespaced"),
            composition(&w, &name, &format!("{group}/v1alpha1"), "Test", basic_response(resources), Some(credentials)),
            secret,
        ];
        w.apply_all(&setup).await?;
        w.has_condition(MIN, &setup[0], "Established", "True", "WatchingCompositeResource").await?;

        let xr = json!({"apiVersion": format!("{group}/v1alpha1"), "kind": "Test",
                        "metadata": {"namespace": w.ns, "name": "basic-xr-namespaced"},
                        "spec": {"coolField": "I'm cool!", "crossplane": {"compositionRef": {"name": name}}}});
        w.apply_all(std::slice::from_ref(&xr)).await?;
        w.has_condition(MIN, &xr, "Ready", "True", "Available").await?;
        w.has_condition(MIN, &xr, "Synced", "True", "ReconcileSuccess").await?;
        w.has_field(MIN, &xr, "/status/coolerField", &json!("I'M COOLER!")).await?;
        let cms = composed(&w, &xr, "ConfigMap").await?;
        anyhow::ensure!(
            cms.len() == 1 && cms[0].pointer("/metadata/namespace") == Some(&json!(w.ns)),
            "expected one composed ConfigMap in the XR's namespace, found {cms:?}"
        );

        w.delete_all(MIN, &[xr]).await?;
        w.delete_all(3 * MIN, &setup).await?;
        Ok("XR Ready and Synced, status patched, composed ConfigMap in its namespace".into())
    })
    .await
}

async fn test_lack_of_rights_namespaced() -> anyhow::Result<()> {
    record("TestLackOfRightsNamespaced", COMPOSITIONS, async {
        let w = World::start("lack-of-rights").await?;
        let group = format!("{}.example.org", w.id);
        let lacking = format!("{}.lack.of.rights", w.id);
        let crd = json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": format!("examples.{lacking}"), "labels": w.labels()},
            "spec": {"group": lacking, "scope": "Namespaced",
                     "names": {"kind": "Example", "singular": "example", "plural": "examples"},
                     "versions": [{"name": "v1", "served": true, "storage": true, "schema": {"openAPIV3Schema": {
                         "type": "object", "properties": {"spec": {"type": "object",
                             "x-kubernetes-preserve-unknown-fields": true}}}}}]}});
        // The core may read Examples, but not write them.
        let role_name = format!("crossplane-rbac-issues-namespaced-{}", w.id);
        let role = json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
            "metadata": {"name": role_name, "labels": w.labels()},
            "rules": [{"apiGroups": [lacking], "resources": ["examples"], "verbs": ["get", "list"]}]});
        let binding = json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
            "metadata": {"name": role_name, "labels": w.labels()},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role_name},
            "subjects": [{"kind": "ServiceAccount", "name": "crossplane", "namespace": w.system}]});
        let name = format!("lack-of-rights-namespaced-{}", w.id);
        let response = json!({
            "desired": {"composite": {"resource": {"status": {"coolerField": "I'M COOLER!"}}},
                        "resources": {"configmap": {"resource": {"apiVersion": format!("{lacking}/v1"),
                                                                 "kind": "Example", "spec": {}},
                                                    "ready": "READY_TRUE"}}},
            "results": [{"severity": "SEVERITY_NORMAL", "message": "I am doing a compose!"}]});
        let setup = vec![
            crd,
            role,
            binding,
            xrd_v2(&w, &group, "Test", "tests", "Namespaced"),
            composition(&w, &name, &format!("{group}/v1alpha1"), "Test", response, None),
        ];
        w.apply_all(&setup).await?;
        w.has_condition(MIN, &setup[3], "Established", "True", "WatchingCompositeResource").await?;

        let xr = json!({"apiVersion": format!("{group}/v1alpha1"), "kind": "Test",
                        "metadata": {"namespace": w.ns, "name": "lack-of-rights-namespaced"},
                        "spec": {"coolField": "I'm cool!", "crossplane": {"compositionRef": {"name": name}}}});
        w.apply_all(std::slice::from_ref(&xr)).await?;
        let synced = w.has_condition(5 * MIN, &xr, "Synced", "False", "ReconcileError").await?;
        // Beyond upstream (which accepts a blank message): the apiserver's own words and what to do,
        // never a Debug dump.
        let message = synced["message"].as_str().unwrap_or_default().to_owned();
        anyhow::ensure!(
            message.contains("forbidden") && message.contains("aggregate-to-crossplane") && !message.contains("Status {"),
            "the ReconcileError message is not the apiserver's words plus what to do: {message:?}"
        );

        w.delete_all(2 * MIN, &[xr]).await?;
        w.delete_all(3 * MIN, &setup).await?;
        Ok(format!("Synced=False ReconcileError: {message}"))
    })
    .await
}

async fn test_namespaced_xr_cluster_composition() -> anyhow::Result<()> {
    record("TestNamespacedXRClusterComposition", COMPOSITIONS, async {
        let w = World::start("ns-xr-cluster").await?;
        let group = format!("{}.validation.example.org", w.id);
        let xrd = json!({
            "apiVersion": "apiextensions.crossplane.io/v2", "kind": "CompositeResourceDefinition",
            "metadata": {"name": format!("namespacedtests.{group}"), "labels": w.labels()},
            "spec": {"scope": "Namespaced", "group": group,
                     "names": {"kind": "NamespacedTest", "plural": "namespacedtests"},
                     "versions": [{"name": "v1alpha1", "served": true, "referenceable": true,
                         "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                             "spec": {"type": "object", "properties": {"testField": {"type": "string"}},
                                      "required": ["testField"]}}}}}]}});
        let name = format!("invalid-namespaced-xr-cluster-composition-{}", w.id);
        let response = json!({"desired": {"resources": {"cluster-role-test": {
            "resource": {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
                         "metadata": {"name": format!("cluster-role-{}", w.id)},
                         "rules": [{"apiGroups": ["example.org"], "resources": ["clustertests"], "verbs": ["*"]}]},
            "ready": "READY_TRUE"}}}});
        let setup = vec![
            xrd,
            composition(&w, &name, &format!("{group}/v1alpha1"), "NamespacedTest", response, None),
        ];
        w.apply_all(&setup).await?;
        w.has_condition(MIN, &setup[0], "Established", "True", "WatchingCompositeResource").await?;

        let xr = json!({"apiVersion": format!("{group}/v1alpha1"), "kind": "NamespacedTest",
                        "metadata": {"name": "test-namespaced-xr", "namespace": w.system},
                        "spec": {"testField": "test-value", "crossplane": {"compositionRef": {"name": name}}}});
        w.apply_all(std::slice::from_ref(&xr)).await?;
        let synced = w.has_condition(MIN, &xr, "Synced", "False", "ReconcileError").await?;
        let message = synced["message"].as_str().unwrap_or_default().to_owned();
        anyhow::ensure!(
            message.contains("cluster-scoped"),
            "the ReconcileError does not say the ClusterRole is cluster-scoped: {message:?}"
        );

        w.delete_all(2 * MIN, &[xr]).await?;
        w.delete_all(3 * MIN, &setup).await?;
        Ok(format!("Synced=False ReconcileError: {message}"))
    })
    .await
}

async fn test_composition_validation() -> anyhow::Result<()> {
    record("TestCompositionValidation", COMPOSITIONS, async {
        // Validation is the apiserver's (CEL and schema rules in the Composition CRD): no core needed.
        let cluster = testenv::Cluster::shared()?;
        let client = cluster.client().await?;
        support::install_crds(&client).await?;
        let id = support::unique();
        let comps = support::dynamic(&client, "apiextensions.crossplane.io", "v1", "Composition", "compositions");
        let comp = |name: &str, pipeline: Option<Value>| {
            let mut c = json!({"apiVersion": "apiextensions.crossplane.io/v1", "kind": "Composition",
                "metadata": {"name": format!("{name}-{id}")},
                "spec": {"compositeTypeRef": {"apiVersion": "nop.example.org/v1alpha1", "kind": "XNopResource"},
                         "mode": "Pipeline"}});
            if let Some(p) = pipeline {
                c["spec"]["pipeline"] = p;
            }
            c
        };
        let step = |name: &str, function: &str| json!({"step": name, "functionRef": {"name": function}});

        // ValidComposition.
        let mut one = step("one", "function-something");
        one["credentials"] = json!([{"name": "some-secret", "source": "Secret",
                                     "secretRef": {"namespace": "default", "name": "some-secret"}}]);
        let valid = comp("valid", Some(json!([one])));
        support::apply(&comps, valid.clone()).await?;
        let name = valid["metadata"]["name"].as_str().unwrap_or_default().to_owned();
        support::wait_for("the valid Composition", 30 * SEC, || async { Ok(comps.get_opt(&name).await?) }).await?;

        // Each invalid one is refused, with a message naming the problem.
        let mut missing_ref = step("one", "function-something");
        missing_ref["credentials"] = json!([{"name": "some-secret", "source": "Secret"}]);
        let cases = [
            ("InvalidMissingPipeline", comp("invalid-missing-pipeline", None), "spec.pipeline"),
            ("InvalidEmptyPipeline", comp("invalid-empty-pipeline", Some(json!([]))), "spec.pipeline"),
            (
                "InvalidDuplicatePipelinesteps",
                comp("invalid-duplicate-pipeline-steps",
                     Some(json!([step("one", "function-something"), step("one", "function-something-else")]))),
                "duplicate",
            ),
            ("InvalidFunctionMissingSecretRef", comp("invalid-missing-secretref", Some(json!([missing_ref]))), "secretRef"),
        ];
        let mut details = Vec::new();
        for (case, c, names) in cases {
            // Upstream's ResourcesFailToApply: a server-side apply the apiserver refuses (a duplicate
            // list-map key fails to build the typed patch before validation, as it does upstream).
            let refused = match support::apply(&comps, c).await {
                Ok(_) => anyhow::bail!("{case}: the apiserver accepted a Composition it must refuse"),
                Err(e) => match e.downcast_ref::<kube::Error>() {
                    Some(kube::Error::Api(s)) => s.message.clone(),
                    _ => return Err(e.context(format!("{case}: applying"))),
                },
            };
            anyhow::ensure!(
                refused.to_lowercase().contains(&names.to_lowercase()),
                "{case}: the refusal does not name {names:?}: {refused}"
            );
            details.push(format!("{case}: {refused}"));
        }

        comps.delete(&name, &Default::default()).await?;
        support::wait_for("the valid Composition deleted", 30 * SEC, || async {
            Ok(comps.get_opt(&name).await?.is_none().then_some(()))
        })
        .await?;
        Ok(details.join("; "))
    })
    .await
}

async fn test_composition_selection() -> anyhow::Result<()> {
    record("TestCompositionSelection", COMPOSITIONS, async {
        let w = World::start("selection").await?;
        let group = format!("{}.nop.example.org", w.id);
        let comp_name = format!("testing-au-{}", w.id);
        let mut comp = composition(
            &w,
            &comp_name,
            &format!("{group}/v1alpha1"),
            "XNopResource",
            json!({}),
            None,
        );
        comp["metadata"]["labels"]["environment"] = json!("testing");
        comp["metadata"]["labels"]["region"] = json!("AU");
        let setup = vec![xrd_v1_with_claim(&w, &group, &["coolField"]), comp];
        w.apply_all(&setup).await?;
        w.has_condition(MIN, &setup[0], "Established", "True", "WatchingCompositeResource")
            .await?;

        let claim = |labels: Value| {
            json!({"apiVersion": format!("{group}/v1alpha1"), "kind": "NopResource",
                   "metadata": {"namespace": w.ns, "name": "composition-selection"},
                   "spec": {"compositionSelector": {"matchLabels": labels}, "coolField": "I'm cool!",
                            "compositeDeletePolicy": "Foreground"}})
        };
        let c = claim(json!({"environment": "testing", "region": "AU"}));
        w.apply_all(std::slice::from_ref(&c)).await?;
        w.has_condition(MIN, &c, "Ready", "True", "Available").await?;
        let xr = xr_of_claim(&w, &c).await?;
        w.has_field(
            MIN,
            &xr,
            "/spec/compositionSelector/matchLabels/environment",
            &json!("testing"),
        )
        .await?;
        w.has_field(
            MIN,
            &xr,
            "/spec/compositionSelector/matchLabels/region",
            &json!("AU"),
        )
        .await?;
        w.has_field(MIN, &xr, "/spec/compositionRef/name", &json!(comp_name))
            .await?;
        w.has_field(MIN, &c, "/spec/compositionRef/name", &json!(comp_name))
            .await?;

        // Remove the region label from the selector.
        w.apply(&claim(json!({"environment": "testing"}))).await?;
        w.has_field(
            MIN,
            &xr,
            "/spec/compositionSelector/matchLabels/environment",
            &json!("testing"),
        )
        .await?;
        w.has_field(
            MIN,
            &xr,
            "/spec/compositionSelector/matchLabels/region",
            &Value::Null,
        )
        .await?;
        w.has_field(MIN, &xr, "/spec/compositionRef/name", &json!(comp_name))
            .await?;
        w.has_field(MIN, &c, "/spec/compositionRef/name", &json!(comp_name))
            .await?;
        w.has_field(
            MIN,
            &c,
            "/spec/compositionSelector/matchLabels/environment",
            &json!("testing"),
        )
        .await?;
        w.has_field(
            MIN,
            &c,
            "/spec/compositionSelector/matchLabels/region",
            &Value::Null,
        )
        .await?;

        w.delete_all(2 * MIN, &[c]).await?;
        w.delete_all(3 * MIN, &setup).await?;
        Ok(format!(
            "selected {comp_name} by labels; kept it after the selector changed"
        ))
    })
    .await
}

async fn test_composition_revision_selection() -> anyhow::Result<()> {
    record("TestCompositionRevisionSelection", COMPOSITIONS, async {
        let w = World::start("revision-selection").await?;
        let group = format!("{}.nop.example.org", w.id);
        let comp_name = format!("xnopresources.{group}");
        let comp = |value: &str| {
            composition(
                &w,
                &comp_name,
                &format!("{group}/v1alpha1"),
                "XNopResource",
                json!({"desired": {"composite": {"resource": {"status": {"coolerField": value}}}}}),
                None,
            )
        };
        let setup = vec![
            xrd_v1_with_claim(&w, &group, &[]),
            comp("from-original-composition"),
        ];
        w.apply_all(&setup).await?;
        w.has_condition(MIN, &setup[0], "Established", "True", "WatchingCompositeResource")
            .await?;

        let claim = json!({"apiVersion": format!("{group}/v1alpha1"), "kind": "NopResource",
                           "metadata": {"namespace": w.ns, "name": "ext-realtime-revision-selection"},
                           "spec": {"compositeDeletePolicy": "Foreground"}});
        w.apply_all(std::slice::from_ref(&claim)).await?;
        w.has_condition(30 * SEC, &claim, "Ready", "True", "Available")
            .await?;
        w.has_field(
            10 * SEC,
            &claim,
            "/status/coolerField",
            &json!("from-original-composition"),
        )
        .await?;
        w.apply(&comp("from-updated-composition")).await?;
        w.has_field(
            10 * SEC,
            &claim,
            "/status/coolerField",
            &json!("from-updated-composition"),
        )
        .await?;

        w.delete_all(MIN, &[claim]).await?;
        w.delete_all(3 * MIN, &setup).await?;
        Ok("the claim showed the updated Composition's field within 10 s".into())
    })
    .await
}

/// The upstream scenarios this suite cannot run yet, recorded as `cannot-run` with the reason.
fn cannot_run_yet_is_recorded() -> anyhow::Result<()> {
    let names: std::collections::BTreeSet<&str> = outcome::CANNOT_RUN.iter().map(|(n, _, _)| *n).collect();
    anyhow::ensure!(
        names.len() == outcome::CANNOT_RUN.len(),
        "a scenario is listed twice"
    );
    for runnable in [
        "TestBasicCompositionCluster",
        "TestBasicCompositionNamespaced",
        "TestLackOfRightsNamespaced",
        "TestNamespacedXRClusterComposition",
        "TestCompositionValidation",
        "TestCompositionSelection",
        "TestCompositionRevisionSelection",
        "TestEnvironmentConfigDefault",
        "TestEnvironmentConfigMultipleMaxMatch1",
        "TestEnvironmentConfigMultipleMaxMatchNil",
        "TestEnvironmentResolutionOptional",
        "TestEnvironmentResolveAlways",
        "TestUsageStandaloneCluster",
        "TestUsageStandaloneNamespaced",
        "TestLegacyUsageStandalone",
        "TestLegacyUsageComposition",
        "TestOperation",
        "TestOperationRetryLogic",
        "TestOperationMultiStepPipeline",
        "TestCronOperationScheduling",
        "TestWatchOperationResourceChanges",
        "TestXRDSubresources",
        "TestXRDValidation",
        "TestXRDReferenceableVersionChange",
        "TestRequiredResources",
        "TestRequiredSchemas",
        "TestLegacyBindToExistingXR",
        "TestLegacyPropagateFieldsRemovalToXR",
        "TestLegacyPropagateFieldsRemovalToXRAfterUpgrade",
        "TestLegacyComposition",
        "TestCircuitBreaker",
    ] {
        anyhow::ensure!(
            !names.contains(runnable),
            "{runnable} runs here but is listed as cannot-run"
        );
    }
    for (name, file, reason) in outcome::CANNOT_RUN {
        anyhow::ensure!(!reason.is_empty(), "{name}: no reason");
        outcome::write(name, file, "cannot-run", 0.0, reason)?;
    }
    Ok(())
}

/// How many scenarios run at once by default: each is a core, an RBAC manager and a function, mostly
/// waiting, so more than the 2 cores' worth; the longest scenario (about 2 minutes) bounds the run.
const SCENARIOS_AT_ONCE: usize = 6;

/// One scenario as a trial, on a runtime of its own like `#[tokio::test(flavor = "multi_thread")]`.
fn scenario<F, Fut>(name: &str, f: F) -> Trial
where
    F: FnOnce() -> Fut + Send + 'static,
    Fut: std::future::Future<Output = anyhow::Result<()>>,
{
    Trial::test(name.replace(' ', ""), move || {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .map_err(|e| format!("building a tokio runtime: {e}"))?;
        rt.block_on(f()).map_err(|e| format!("{e:?}").into())
    })
}

/// Every scenario, by the name libtest gave it when these were `#[tokio::test]`s.
macro_rules! scenarios {
    ($($path:path),* $(,)?) => {
        vec![$(scenario(stringify!($path), $path)),*]
    };
}

fn main() -> std::process::ExitCode {
    let mut args = Arguments::from_args();
    if args.test_threads.is_none() {
        args.test_threads = Some(
            std::env::var("RUST_TEST_THREADS")
                .ok()
                .and_then(|v| v.parse().ok())
                .unwrap_or(SCENARIOS_AT_ONCE),
        );
    }
    let mut trials = scenarios![
        test_basic_composition_cluster,
        test_basic_composition_namespaced,
        test_lack_of_rights_namespaced,
        test_namespaced_xr_cluster_composition,
        test_composition_validation,
        test_composition_selection,
        test_composition_revision_selection,
        conformance::circuit::test_circuit_breaker,
        conformance::environment::test_environment_config_default,
        conformance::environment::test_environment_config_multiple_max_match_1,
        conformance::environment::test_environment_config_multiple_max_match_nil,
        conformance::environment::test_environment_resolution_optional,
        conformance::environment::test_environment_resolve_always,
        conformance::legacy::test_legacy_bind_to_existing_xr,
        conformance::legacy::test_legacy_propagate_fields_removal_to_xr,
        conformance::legacy::test_legacy_propagate_fields_removal_to_xr_after_upgrade,
        conformance::legacy::test_legacy_composition,
        conformance::ops::test_operation,
        conformance::ops::test_operation_retry_logic,
        conformance::ops::test_operation_multi_step_pipeline,
        conformance::ops::test_cron_operation_scheduling,
        conformance::ops::test_watch_operation_resource_changes,
        conformance::required::test_required_resources,
        conformance::required::test_required_schemas,
        conformance::usage::test_usage_standalone_namespaced,
        conformance::usage::test_usage_standalone_cluster,
        conformance::usage::test_legacy_usage_standalone,
        conformance::usage::test_legacy_usage_composition,
        conformance::xrd::test_xrd_validation,
        conformance::xrd::test_xrd_subresources,
        conformance::xrd::test_xrd_referenceable_version_change,
    ];
    // The longest scenarios first, so that they do not start last and stretch the run.
    trials.sort_by_key(|t| !LONGEST.contains(&t.name()));
    trials.push(Trial::test("cannot_run_yet_is_recorded", || {
        cannot_run_yet_is_recorded().map_err(|e| format!("{e:?}").into())
    }));
    libtest_mimic::run(&args, trials).exit_code()
}

/// The scenarios that wait longest (for minutes of a claim keeping its generation, a cron schedule, a
/// circuit breaker's cool-down), started first.
const LONGEST: [&str; 4] = [
    "conformance::legacy::test_legacy_propagate_fields_removal_to_xr_after_upgrade",
    "conformance::ops::test_cron_operation_scheduling",
    "conformance::legacy::test_legacy_propagate_fields_removal_to_xr",
    "conformance::circuit::test_circuit_breaker",
];
