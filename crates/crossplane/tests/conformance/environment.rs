//! The environment scenarios: upstream's `test/e2e/manifests/apiextensions/environment/*` and the tests
//! that used them (`environmentconfig_test.go`, removed upstream when v2 moved EnvironmentConfig
//! selection out of the core; the manifests stayed).
//!
//! In v2 the same Composition is a pipeline: a function-environment-configs step (ours,
//! `tests/functions/environment_configs.py`, which asks the core for the EnvironmentConfigs as
//! required resources) puts the merged environment in the pipeline context, and the built-in
//! function-patch-and-transform's `FromEnvironmentFieldPath` patch writes `complex.c.f` into the
//! composed resource's annotation `valueFromEnv`. Upstream composes a provider-nop NopResource; we
//! compose a ConfigMap (readiness check `None`), since no provider runs here. Each scenario's
//! EnvironmentConfigs and `stage` label value carry its id, so scenarios run in parallel.

use serde_json::{Value, json};

use super::harness::World;
use super::outcome::record;
use crate::{MIN, SEC, composed, xr_of_claim};

/// Upstream's (removed) test file of these scenarios.
pub const FILE: &str =
    "environmentconfig_test.go (removed in v2; manifests/apiextensions/environment remain)";

/// One scenario's world with its environment function.
struct Env {
    w: World,
    function: String,
}

impl Env {
    async fn start(scenario: &str) -> anyhow::Result<Env> {
        let mut w = World::start(scenario).await?;
        let function = w
            .serve_function("environment_configs.py", "function-environment-configs")
            .await?;
        Ok(Env { w, function })
    }

    fn group(&self) -> String {
        format!("{}.example.org", self.w.id)
    }

    fn stage(&self) -> String {
        format!("prod-{}", self.w.id)
    }

    fn composition_name(&self) -> String {
        format!("nop.sqlinstances.{}", self.group())
    }

    /// Upstream's `setup/definition.yaml`: XSQLInstance with the claim SQLInstance, defaulting to the
    /// scenario's Composition.
    fn definition(&self) -> Value {
        let group = self.group();
        json!({
            "apiVersion": "apiextensions.crossplane.io/v1", "kind": "CompositeResourceDefinition",
            "metadata": {"name": format!("xsqlinstances.{group}"), "labels": self.w.labels()},
            "spec": {"group": group,
                     "names": {"kind": "XSQLInstance", "plural": "xsqlinstances"},
                     "claimNames": {"kind": "SQLInstance", "plural": "sqlinstances"},
                     "defaultCompositionRef": {"name": self.composition_name()},
                     "defaultCompositeDeletePolicy": "Background",
                     "defaultCompositionUpdatePolicy": "Automatic",
                     "versions": [{"name": "v1alpha1", "served": true, "referenceable": true,
                         "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                             "spec": {"type": "object", "required": ["parameters"], "properties": {
                                 "parameters": {"type": "object", "required": ["storageGB"],
                                                "properties": {"storageGB": {"type": "integer"}}}}},
                             "status": {"type": "object", "properties": {
                                 "address": {"description": "Address of this MySQL server.", "type": "string"}}}}}}}]}
        })
    }

    /// The v2 form of a scenario's `setup/composition.yaml`: `environment` becomes the input of the
    /// function-environment-configs step, the `resources` the input of function-patch-and-transform.
    fn composition(&self, environment: Value) -> Value {
        let pt = json!({
            "apiVersion": "pt.fn.crossplane.io/v1beta1", "kind": "Resources",
            "resources": [{"name": "nop",
                "base": {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"namespace": self.w.ns},
                         "data": {"storage": "10"}},
                "patches": [{"type": "FromEnvironmentFieldPath", "fromFieldPath": "complex.c.f",
                             "toFieldPath": "metadata.annotations[valueFromEnv]"}],
                "readinessChecks": [{"type": "None"}]}],
        });
        json!({
            "apiVersion": "apiextensions.crossplane.io/v1", "kind": "Composition",
            "metadata": {"name": self.composition_name(), "labels": self.w.labels()},
            "spec": {"compositeTypeRef": {"apiVersion": format!("{}/v1alpha1", self.group()), "kind": "XSQLInstance"},
                     "mode": "Pipeline",
                     "pipeline": [
                         {"step": "environment-configs", "functionRef": {"name": self.function},
                          "input": {"apiVersion": "environmentconfigs.fn.crossplane.io/v1beta1", "kind": "Input",
                                    "spec": environment}},
                         {"step": "patch-and-transform", "functionRef": {"name": "function-patch-and-transform"},
                          "input": pt},
                     ]}
        })
    }

    /// EnvironmentConfig `example-environment-<n>` with `data`, labelled with the stage if `staged`.
    fn config(&self, n: u32, staged: bool, data: Value) -> Value {
        let mut labels = self.w.labels();
        if staged {
            labels["stage"] = json!(self.stage());
        }
        json!({"apiVersion": "apiextensions.crossplane.io/v1beta1", "kind": "EnvironmentConfig",
               "metadata": {"name": self.config_name(n), "labels": labels}, "data": data})
    }

    fn config_name(&self, n: u32) -> String {
        format!("example-environment-{n}-{}", self.w.id)
    }

    /// `example-environment-1`, by reference in every scenario.
    fn config_1(&self) -> Value {
        self.config(
            1,
            false,
            json!({"complex": {"a": "b", "c": {"d": "e", "f": "1"}}}),
        )
    }

    /// The selector of upstream's Compositions: label `stage` from the XR's label `stage`.
    fn stage_selector(&self, extra: Value) -> Value {
        let mut s = json!({"matchLabels": [{"type": "FromCompositeFieldPath", "key": "stage",
                                            "valueFromFieldPath": "metadata.labels[stage]"}]});
        if let (Some(s), Some(extra)) = (s.as_object_mut(), extra.as_object()) {
            s.extend(extra.clone());
        }
        s
    }

    /// Upstream's `00-claim.yaml`, labelled with the stage, plus `annotations`.
    fn claim(&self, annotations: Value) -> Value {
        let mut labels = self.w.labels();
        labels["stage"] = json!(self.stage());
        json!({"apiVersion": format!("{}/v1alpha1", self.group()), "kind": "SQLInstance",
               "metadata": {"namespace": self.w.ns, "name": "example", "labels": labels, "annotations": annotations},
               "spec": {"parameters": {"storageGB": 10}, "compositeDeletePolicy": "Foreground"}})
    }

    /// Setup, the claim, and the composed resource's `valueFromEnv` (upstream: Available within 3
    /// minutes, the annotation within 2).
    async fn claim_composes(&self, setup: &[Value], want: &str) -> anyhow::Result<Value> {
        self.w.apply_all(setup).await?;
        self.w
            .has_condition(MIN, &setup[0], "Established", "True", "WatchingCompositeResource")
            .await?;
        let claim = self.claim(json!({}));
        self.w.apply_all(std::slice::from_ref(&claim)).await?;
        self.w
            .has_condition(3 * MIN, &claim, "Ready", "True", "Available")
            .await?;
        self.annotation_is(2 * MIN, &claim, want).await?;
        Ok(claim)
    }

    /// Waits until the claim's composed ConfigMap has annotation `valueFromEnv` = `want`
    /// (upstream's `ComposedResourcesHaveFieldValueWithin`).
    async fn annotation_is(
        &self,
        limit: std::time::Duration,
        claim: &Value,
        want: &str,
    ) -> anyhow::Result<()> {
        let xr = xr_of_claim(&self.w, claim).await?;
        let last = std::sync::Mutex::new(Value::Null);
        let r = crate::support::wait_for(
            &format!("the composed ConfigMap's valueFromEnv to be {want:?}"),
            limit,
            || async {
                let cms = composed(&self.w, &xr, "ConfigMap").await?;
                let got = cms
                    .first()
                    .and_then(|c| c.pointer("/metadata/annotations/valueFromEnv"))
                    .cloned();
                if let Ok(mut l) = last.lock() {
                    *l = got.clone().unwrap_or(Value::Null);
                }
                Ok((cms.len() == 1 && got == Some(json!(want))).then_some(()))
            },
        )
        .await;
        r.map_err(|e| {
            let seen = last.lock().map(|l| l.to_string()).unwrap_or_default();
            e.context(format!("last valueFromEnv seen: {seen}"))
        })
    }

    /// Upstream's teardown: the claim, then the setup.
    async fn teardown(&self, claim: Value, setup: &[Value]) -> anyhow::Result<()> {
        self.w.delete_all(3 * MIN, &[claim]).await?;
        self.w.delete_all(3 * MIN, setup).await
    }
}

pub async fn test_environment_config_default() -> anyhow::Result<()> {
    record("TestEnvironmentConfigDefault", FILE, async {
        let e = Env::start("env-default").await?;
        let environment = json!({"environmentConfigs": [
            {"ref": {"name": e.config_name(1)}},
            {"type": "Selector", "selector": e.stage_selector(json!({}))}]});
        let setup = vec![
            e.definition(),
            e.composition(environment),
            e.config_1(),
            e.config(2, true, json!({"complex": {"c": {"f": "2"}}})),
        ];
        let claim = e.claim_composes(&setup, "2").await?;
        e.teardown(claim, &setup).await?;
        Ok("the referenced config, then the one selected by the XR's stage label: valueFromEnv 2".into())
    })
    .await
}

pub async fn test_environment_config_multiple_max_match_1() -> anyhow::Result<()> {
    record("TestEnvironmentConfigMultipleMaxMatch1", FILE, async {
        let e = Env::start("env-max1").await?;
        let environment = json!({"environmentConfigs": [
            {"ref": {"name": e.config_name(1)}},
            {"type": "Selector", "selector": e.stage_selector(json!({
                "mode": "Multiple", "maxMatch": 1, "sortByFieldPath": "data.priority"}))}]});
        let setup = vec![
            e.definition(),
            e.composition(environment),
            e.config_1(),
            e.config(2, true, json!({"priority": 1, "complex": {"c": {"f": "2"}}})),
            e.config(3, true, json!({"priority": 2, "complex": {"c": {"f": "3"}}})),
        ];
        let claim = e.claim_composes(&setup, "2").await?;
        e.teardown(claim, &setup).await?;
        Ok(
            "mode Multiple, maxMatch 1, sorted by data.priority: only priority 1 merged, valueFromEnv 2"
                .into(),
        )
    })
    .await
}

pub async fn test_environment_config_multiple_max_match_nil() -> anyhow::Result<()> {
    record("TestEnvironmentConfigMultipleMaxMatchNil", FILE, async {
        let e = Env::start("env-maxnil").await?;
        let environment = json!({"environmentConfigs": [
            {"ref": {"name": e.config_name(1)}},
            {"type": "Selector", "selector": e.stage_selector(json!({
                "mode": "Multiple", "sortByFieldPath": "data.priority"}))}]});
        let setup = vec![
            e.definition(),
            e.composition(environment),
            e.config_1(),
            e.config(2, true, json!({"priority": 1, "complex": {"c": {"f": "2"}}})),
            e.config(3, true, json!({"priority": 2, "complex": {"c": {"f": "3"}}})),
        ];
        let claim = e.claim_composes(&setup, "3").await?;
        e.teardown(claim, &setup).await?;
        Ok(
            "mode Multiple without maxMatch, sorted by data.priority: the last merged wins, valueFromEnv 3"
                .into(),
        )
    })
    .await
}

pub async fn test_environment_resolution_optional() -> anyhow::Result<()> {
    record("TestEnvironmentResolutionOptional", FILE, async {
        let e = Env::start("env-optional").await?;
        // example-environment-2 is referenced but never created.
        let environment = json!({"policy": {"resolution": "Optional"}, "environmentConfigs": [
            {"ref": {"name": e.config_name(1)}},
            {"ref": {"name": e.config_name(2)}}]});
        let setup = vec![e.definition(), e.composition(environment), e.config_1()];
        let claim = e.claim_composes(&setup, "1").await?;
        e.teardown(claim, &setup).await?;
        Ok("resolution Optional: the missing referenced config is skipped, valueFromEnv 1".into())
    })
    .await
}

pub async fn test_environment_resolve_always() -> anyhow::Result<()> {
    record("TestEnvironmentResolveAlways", FILE, async {
        let e = Env::start("env-always").await?;
        let environment = json!({"environmentConfigs": [
            {"type": "Reference", "ref": {"name": e.config_name(1)}},
            {"type": "Selector", "selector": e.stage_selector(json!({"mode": "Multiple"}))}]});
        let setup = vec![
            e.definition(),
            e.composition(environment),
            e.config_1(),
            e.config(2, true, json!({"complex": {"c": {"f": "2"}}})),
        ];
        let claim = e.claim_composes(&setup, "2").await?;
        // An EnvironmentConfig that the selector matches too, sorted after the first by name.
        let added = e.config(3, true, json!({"complex": {"c": {"f": "3"}}}));
        e.w.apply_all(std::slice::from_ref(&added)).await?;
        // Upstream's SetAnnotationOnClaimToForceReconcile.
        e.w.apply(&e.claim(json!({"e2e-reconcile-plz": format!("{:?}", std::time::SystemTime::now())})))
            .await?;
        e.annotation_is(5 * MIN, &claim, "3").await?;
        e.w.delete_all(30 * SEC, &[added]).await?;
        e.teardown(claim, &setup).await?;
        Ok(
            "resolved on every reconcile: the added config merged after a reconcile, valueFromEnv 2 then 3"
                .into(),
        )
    })
    .await
}
