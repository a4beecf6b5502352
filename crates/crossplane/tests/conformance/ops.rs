//! The Operations scenarios: upstream's `ops_operations_test.go` (suite `ops`, which installs Crossplane
//! with `--enable-operations`) and its manifests under `test/e2e/manifests/ops`.
//!
//! The core runs with `--enable-operations` ([`World::start_with`]). Every step calls the world's
//! function-dummy compatible function (`tests/functions/dummy.py`), whose input is a RunFunctionResponse
//! laid over the one it returns: a result of severity `SEVERITY_FATAL` fails the step, `output` is the
//! step's output. What differs from upstream's manifests, and why:
//! - Operations, CronOperations and WatchOperations are cluster-scoped, so their names carry the
//!   scenario's id, and they carry the scenario's label (the core reconciles only labelled objects);
//!   so do the Operations a CronOperation or WatchOperation creates, through the template's
//!   `metadata.labels`.
//! - Upstream's `default` and `crossplane-system` are the scenario's own namespaces ([`World::ns`],
//!   [`World::system`]).

use anyhow::Context;
use jiff::Timestamp;
use kube::api::PropagationPolicy;
use serde_json::{Value, json};

use super::harness::World;
use super::outcome::record;
use crate::{MIN, SEC};

/// Upstream's test file of these scenarios.
pub const FILE: &str = "ops_operations_test.go";

/// The core flag of upstream's ops suite.
const ENABLE_OPERATIONS: &str = "--enable-operations";

async fn start(scenario: &str) -> anyhow::Result<World> {
    World::start_with(scenario, &[ENABLE_OPERATIONS]).await
}

/// An Operation named `name` running `pipeline`, with `retryLimit` if given.
fn operation(w: &World, name: &str, retry_limit: Option<i64>, pipeline: Value) -> Value {
    let mut op = json!({"apiVersion": "ops.crossplane.io/v1alpha1", "kind": "Operation",
                        "metadata": {"name": name, "labels": w.labels()},
                        "spec": {"mode": "Pipeline", "pipeline": pipeline}});
    if let Some(n) = retry_limit {
        op["spec"]["retryLimit"] = json!(n);
    }
    op
}

/// A pipeline step calling the world's dummy function with `response` as its input.
fn step(w: &World, name: &str, response: Value) -> Value {
    json!({"step": name, "functionRef": {"name": w.function},
           "input": {"apiVersion": "dummy.fn.crossplane.io/v1beta1", "kind": "Response", "response": response}})
}

/// A ConfigMap reference (to read it).
fn config_map(namespace: &str, name: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"namespace": namespace, "name": name}})
}

/// Waits until the RFC 3339 time at `pointer` of `obj` satisfies `ok`, and returns it (upstream's
/// `ResourcesHaveFieldValueWithin` with a `FieldValueChecker` parsing the time).
async fn time_field(
    w: &World,
    limit: std::time::Duration,
    obj: &Value,
    pointer: &str,
    ok: impl Fn(Timestamp) -> bool,
) -> anyhow::Result<Timestamp> {
    let what = format!(
        "{} to have a time at {pointer} as wanted",
        super::harness::describe(obj)
    );
    crate::support::wait_for(&what, limit, || async {
        let o = w.get(obj).await?;
        let t = o
            .pointer(pointer)
            .and_then(Value::as_str)
            .and_then(|s| s.parse::<Timestamp>().ok());
        Ok(t.filter(|t| ok(*t)))
    })
    .await
}

/// Waits until the clock is in a later second than `t`. Operations' creation times, and so a
/// WatchOperation's `lastScheduleTime`, count whole seconds: a change made in the second the previous
/// Operation was created in would make an Operation no later than it, and upstream's check that
/// `lastScheduleTime` advances could not see it (upstream's slower cluster hides this).
async fn past(t: Timestamp) -> anyhow::Result<()> {
    crate::support::wait_for(&format!("the clock to pass {t}"), 5 * SEC, || async {
        Ok((Timestamp::now().as_second() > t.as_second()).then_some(()))
    })
    .await
}

/// Waits until at least `at_least` Operations carry `label=value` (upstream's
/// `ListedResourcesValidatedWithin`), and returns their names.
async fn operations_labelled(
    w: &World,
    limit: std::time::Duration,
    label: &str,
    value: &str,
    at_least: usize,
) -> anyhow::Result<Vec<String>> {
    let api = w.api("ops.crossplane.io/v1alpha1", "Operation", None).await?;
    let lp = kube::api::ListParams::default().labels(&format!("{label}={value}"));
    let what = format!("at least {at_least} Operations labelled {label}={value}");
    crate::support::wait_for(&what, limit, || async {
        let names: Vec<String> = api
            .list(&lp)
            .await?
            .items
            .into_iter()
            .filter_map(|o| o.metadata.name)
            .collect();
        Ok((names.len() >= at_least).then_some(names))
    })
    .await
}

pub async fn test_operation() -> anyhow::Result<()> {
    record("TestOperation", FILE, async {
        let w = start("ops-basic").await?;
        // The step's credentials are only loaded, not used.
        let secret = json!({"apiVersion": "v1", "kind": "Secret",
                            "metadata": {"namespace": w.system, "name": "super-secret", "labels": w.labels()},
                            "data": {}});
        let setup = vec![secret];
        w.apply_all(&setup).await?;

        let mut s = step(
            &w,
            "create-a-configmap",
            json!({
            "desired": {"resources": {"configmap": {"resource": {
                "apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"namespace": w.ns, "name": "cool-map"},
                "data": {"coolData": "I'm cool!"}}}}},
            "results": [{"severity": "SEVERITY_NORMAL", "message": "I am doing an operate!"}]}),
        );
        s["credentials"] = json!([{"name": "important-secret", "source": "Secret",
                                   "secretRef": {"namespace": w.system, "name": "super-secret"}}]);
        let op = operation(&w, &format!("basic-{}", w.id), None, json!([s]));
        w.apply_all(std::slice::from_ref(&op)).await?;

        w.has_condition(60 * SEC, &op, "Succeeded", "True", "PipelineSuccess")
            .await?;
        w.has_field(
            30 * SEC,
            &op,
            "/status/appliedResourceRefs/0/name",
            &json!("cool-map"),
        )
        .await?;
        let cm = config_map(&w.ns, "cool-map");
        w.has_field(30 * SEC, &cm, "/data/coolData", &json!("I'm cool!"))
            .await?;
        let got = w.get(&op).await?;
        let refs = got
            .pointer("/status/appliedResourceRefs")
            .cloned()
            .unwrap_or(Value::Null);
        anyhow::ensure!(
            refs == json!([{"apiVersion": "v1", "kind": "ConfigMap", "namespace": w.ns, "name": "cool-map"}]),
            "the Operation's appliedResourceRefs are not just the ConfigMap it applied: {refs}"
        );

        w.delete_all(2 * MIN, std::slice::from_ref(&op)).await?;
        w.delete_all(3 * MIN, &setup).await?;
        Ok(format!(
            "Operation Succeeded=True PipelineSuccess, applied ConfigMap {}/cool-map",
            w.ns
        ))
    })
    .await
}

pub async fn test_operation_retry_logic() -> anyhow::Result<()> {
    record("TestOperationRetryLogic", FILE, async {
        let w = start("ops-retry").await?;
        let s = step(
            &w,
            "always-fail",
            json!({
            "results": [{"severity": "SEVERITY_FATAL", "message": "Simulated failure for retry testing"}]}),
        );
        let op = operation(&w, &format!("retry-test-{}", w.id), Some(3), json!([s]));
        w.apply_all(std::slice::from_ref(&op)).await?;

        w.has_condition(30 * SEC, &op, "Synced", "True", "ReconcileSuccess")
            .await?;
        w.has_field(3 * MIN, &op, "/status/failures", &json!(3)).await?;
        let failed = w
            .has_condition(30 * SEC, &op, "Succeeded", "False", "PipelineError")
            .await?;
        // Beyond upstream (which accepts any message): the condition says why it gave up.
        let message = failed["message"].as_str().unwrap_or_default().to_owned();
        anyhow::ensure!(
            message.contains("failure limit of 3 reached"),
            "the Failed condition does not say the failure limit was reached: {message:?}"
        );
        // Given up: it runs no more.
        let failures = w.get(&op).await?.pointer("/status/failures").cloned();
        anyhow::ensure!(
            failures == Some(json!(3)),
            "the Operation ran again after giving up: failures {failures:?}"
        );

        w.delete_all(2 * MIN, std::slice::from_ref(&op)).await?;
        Ok(format!(
            "3 failed runs, then Succeeded=False PipelineError: {message}"
        ))
    })
    .await
}

pub async fn test_operation_multi_step_pipeline() -> anyhow::Result<()> {
    record("TestOperationMultiStepPipeline", FILE, async {
        let w = start("ops-pipeline").await?;
        let cm = |name: &str, step: &str, content: &str| {
            json!({"resource": {"apiVersion": "v1", "kind": "ConfigMap",
                                "metadata": {"namespace": w.ns, "name": name},
                                "data": {"step": step, "content": content}}})
        };
        let a = step(&w, "create-configmap-a", json!({
            "desired": {"resources": {"configmap-a": cm("multi-step-configmap-a", "1", "Created by step 1")}},
            "output": {"stepName": "create-configmap-a", "resourcesCreated": 1,
                       "configMapName": "multi-step-configmap-a"},
            "results": [{"severity": "SEVERITY_NORMAL", "message": "Step 1: Created ConfigMap A"}]}));
        let b = step(&w, "create-configmap-b", json!({
            "desired": {"resources": {"configmap-b": cm("multi-step-configmap-b", "2", "Created by step 2")}},
            "output": {"stepName": "create-configmap-b", "resourcesCreated": 1,
                       "configMapName": "multi-step-configmap-b", "totalPipelineResources": 2},
            "results": [{"severity": "SEVERITY_NORMAL", "message": "Step 2: Created ConfigMap B, pipeline complete"}]}));
        let op = operation(&w, &format!("multi-step-test-{}", w.id), Some(5), json!([a, b]));
        w.apply_all(std::slice::from_ref(&op)).await?;

        // OperationExecutesPipelineSuccessfully.
        w.has_condition(60 * SEC, &op, "Succeeded", "True", "PipelineSuccess").await?;
        let (cm_a, cm_b) = (
            config_map(&w.ns, "multi-step-configmap-a"),
            config_map(&w.ns, "multi-step-configmap-b"),
        );
        w.has_field(30 * SEC, &cm_a, "/data/step", &json!("1")).await?;
        w.has_field(30 * SEC, &cm_a, "/data/content", &json!("Created by step 1")).await?;
        w.has_field(30 * SEC, &cm_b, "/data/step", &json!("2")).await?;
        w.has_field(30 * SEC, &cm_b, "/data/content", &json!("Created by step 2")).await?;
        w.has_field(30 * SEC, &op, "/status/appliedResourceRefs/0/name", &json!("multi-step-configmap-a")).await?;
        w.has_field(30 * SEC, &op, "/status/appliedResourceRefs/1/name", &json!("multi-step-configmap-b")).await?;

        // OperationCapturesFunctionOutputs.
        for (pointer, want) in [
            ("/status/pipeline/0/step", json!("create-configmap-a")),
            ("/status/pipeline/0/output/stepName", json!("create-configmap-a")),
            ("/status/pipeline/0/output/resourcesCreated", json!(1)),
            ("/status/pipeline/1/step", json!("create-configmap-b")),
            ("/status/pipeline/1/output/stepName", json!("create-configmap-b")),
            ("/status/pipeline/1/output/totalPipelineResources", json!(2)),
        ] {
            w.has_field(30 * SEC, &op, pointer, &want).await?;
        }

        w.delete_all(2 * MIN, std::slice::from_ref(&op)).await?;
        Ok("two steps applied ConfigMaps a and b; both steps' outputs in status.pipeline".into())
    })
    .await
}

pub async fn test_cron_operation_scheduling() -> anyhow::Result<()> {
    record("TestCronOperationScheduling", FILE, async {
        let w = start("ops-cron").await?;
        let name = format!("basic-cronop-{}", w.id);
        let s = step(
            &w,
            "nop",
            json!({
            "results": [{"severity": "SEVERITY_NORMAL", "message": "CronOperation ran me!"}]}),
        );
        let co = json!({"apiVersion": "ops.crossplane.io/v1alpha1", "kind": "CronOperation",
            "metadata": {"name": name, "labels": w.labels()},
            "spec": {"schedule": "* * * * *", "startingDeadlineSeconds": 30, "concurrencyPolicy": "Allow",
                     "successfulHistoryLimit": 2, "failedHistoryLimit": 1,
                     "operationTemplate": {"metadata": {"labels": w.labels()},
                                           "spec": {"mode": "Pipeline", "pipeline": [s]}}}});
        w.apply_all(std::slice::from_ref(&co)).await?;

        // CronOperationCreatesFirstOperation.
        let first_schedule = time_field(&w, 90 * SEC, &co, "/status/lastScheduleTime", |_| true).await?;
        w.has_condition(30 * SEC, &co, "Synced", "True", "ReconcileSuccess")
            .await?;
        w.has_condition(30 * SEC, &co, "Scheduling", "True", "ScheduleActive")
            .await?;
        // FirstOperationSucceeds.
        let first_success = time_field(&w, 60 * SEC, &co, "/status/lastSuccessfulTime", |_| true).await?;
        // CronOperationCreatesSecondOperation.
        let second_schedule = time_field(&w, 2 * MIN, &co, "/status/lastScheduleTime", |t| {
            t > first_schedule
        })
        .await?;
        // SecondOperationSucceeds.
        let second_success = time_field(&w, 90 * SEC, &co, "/status/lastSuccessfulTime", |t| {
            t > first_success
        })
        .await?;
        // ValidateMultipleOperations.
        let ops = operations_labelled(&w, 30 * SEC, "ops.crossplane.io/cronoperation", &name, 2).await?;

        w.delete_all(2 * MIN, std::slice::from_ref(&co)).await?;
        Ok(format!(
            "scheduled at {first_schedule} and {second_schedule}, succeeded at {first_success} and \
             {second_success}; Operations {ops:?}"
        ))
    })
    .await
}

pub async fn test_watch_operation_resource_changes() -> anyhow::Result<()> {
    record("TestWatchOperationResourceChanges", FILE, async {
        let w = start("ops-watch").await?;
        let name = format!("basic-watchop-{}", w.id);
        let s = step(&w, "nop", json!({
            "results": [{"severity": "SEVERITY_NORMAL", "message": "WatchOperation ran me!"}]}));
        let wo = json!({"apiVersion": "ops.crossplane.io/v1alpha1", "kind": "WatchOperation",
            "metadata": {"name": name, "labels": w.labels()},
            "spec": {"watch": {"apiVersion": "v1", "kind": "ConfigMap", "namespace": w.ns,
                               "matchLabels": {"test": "basic-watchop"}},
                     "concurrencyPolicy": "Allow", "successfulHistoryLimit": 10, "failedHistoryLimit": 5,
                     "operationTemplate": {"metadata": {"labels": w.labels()},
                                           "spec": {"mode": "Pipeline", "pipeline": [s]}}}});
        let watched = |name: &str, data: Value| {
            json!({"apiVersion": "v1", "kind": "ConfigMap",
                   "metadata": {"namespace": w.ns, "name": name, "labels": {"test": "basic-watchop"}},
                   "data": data})
        };
        let first = watched("test-configmap", json!({"testData": "I trigger WatchOperations!"}));
        let updated = watched(
            "test-configmap",
            json!({"testData": "I trigger WatchOperations again!", "updateNumber": "1"}),
        );
        let second = watched(
            "test-configmap-second",
            json!({"testData": "I'm the second ConfigMap that triggers WatchOperations!", "resourceNumber": "2"}),
        );

        w.apply_all(std::slice::from_ref(&wo)).await?;
        // WatchOperationEstablishesWatching.
        w.has_condition(60 * SEC, &wo, "Synced", "True", "ReconcileSuccess").await?;
        w.has_condition(60 * SEC, &wo, "Watching", "True", "WatchActive").await?;

        // CreateWatchedResource, WatchOperationCreatesFirstOperation, FirstOperationSucceeds.
        w.apply_all(std::slice::from_ref(&first)).await?;
        let t1 = time_field(&w, 60 * SEC, &wo, "/status/lastScheduleTime", |_| true).await?;
        w.has_field(30 * SEC, &wo, "/status/watchingResources", &json!(1)).await?;
        time_field(&w, 90 * SEC, &wo, "/status/lastSuccessfulTime", |_| true).await?;

        // UpdateWatchedResource, WatchOperationDetectsUpdate.
        past(t1).await?;
        w.apply(&updated).await?;
        w.has_field(30 * SEC, &updated, "/data/testData", &json!("I trigger WatchOperations again!")).await?;
        let t2 = time_field(&w, 60 * SEC, &wo, "/status/lastScheduleTime", |t| t > t1).await?;

        // CreateSecondWatchedResource, WatchOperationDetectsSecondResource.
        past(t2).await?;
        w.apply_all(std::slice::from_ref(&second)).await?;
        let t3 = time_field(&w, 60 * SEC, &wo, "/status/lastScheduleTime", |t| t > t2).await?;
        w.has_field(30 * SEC, &wo, "/status/watchingResources", &json!(2)).await?;

        // DeleteFirstWatchedResource, WatchOperationDetectsDeletion.
        past(t3).await?;
        // In the background, as upstream: a foreground deletion first writes a new version (its
        // finalizer), which is one more change.
        w.delete_all_with(30 * SEC, std::slice::from_ref(&first), PropagationPolicy::Background).await?;
        let t4 = time_field(&w, 60 * SEC, &wo, "/status/lastScheduleTime", |t| t > t3).await?;
        let ops = operations_labelled(&w, 30 * SEC, "ops.crossplane.io/watchoperation", &name, 4).await?;
        // Beyond upstream: the four Operations are for the four changes, each made once: two
        // versions of test-configmap, one of test-configmap-second, and test-configmap's deletion.
        let api = w.api("ops.crossplane.io/v1alpha1", "Operation", None).await?;
        let mut changes = Vec::new();
        for op in &ops {
            let o = api.get(op).await.with_context(|| format!("reading Operation {op}"))?;
            let a = o.metadata.annotations.unwrap_or_default();
            let get = |k: &str| a.get(k).cloned().unwrap_or_default();
            let deleted =
                get("ops.crossplane.io/watched-resource-resourceversion") == "ops.crossplane.io/synthetic-deleted";
            changes.push((get("ops.crossplane.io/watched-resource-name"), deleted));
        }
        changes.sort();
        let want = [
            ("test-configmap".to_owned(), false),
            ("test-configmap".to_owned(), false),
            ("test-configmap".to_owned(), true),
            ("test-configmap-second".to_owned(), false),
        ];
        anyhow::ensure!(
            changes == want,
            "the WatchOperation's Operations are not one per change (name, deleted): {changes:?}"
        );

        w.delete_all(30 * SEC, std::slice::from_ref(&second)).await?;
        w.delete_all(2 * MIN, std::slice::from_ref(&wo)).await?;
        Ok(format!(
            "Operations created at {t1} (create), {t2} (update), {t3} (second resource), {t4} (deletion): {ops:?}"
        ))
    })
    .await
}
