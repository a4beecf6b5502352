//! The `ops.crossplane.io` API, `v1alpha1` (crossplane `apis/ops/v1alpha1`): day-two operations.
//!
//! - An [`Operation`] runs a pipeline of functions once, applies the resources the pipeline desires and
//!   records the outcome (`Succeeded`), retrying a failed run up to `spec.retryLimit` times.
//! - A [`CronOperation`] creates Operations from its template on a cron schedule.
//! - A [`WatchOperation`] creates an Operation from its template each time a resource of the kind it
//!   watches changes, handing that resource to every step as the required resource
//!   [`REQUIREMENT_WATCHED_RESOURCE`].
//!
//! All three are cluster-scoped, in category `crossplane`, with upstream's printer columns, short names
//! and condition types ([`TYPE_SUCCEEDED`], [`TYPE_VALID_PIPELINE`], [`TYPE_SCHEDULING`],
//! [`TYPE_WATCHING`], beside `Synced`).

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::Condition;
use crate::apiextensions::{FunctionCredentials, FunctionReference};

/// The API group.
pub const GROUP: &str = "ops.crossplane.io";
/// The API version.
pub const VERSION: &str = "v1alpha1";
/// `group/version`.
pub const API_VERSION: &str = "ops.crossplane.io/v1alpha1";

/// Condition type `Succeeded`: whether an Operation's run has finished well (True), badly (False) or
/// is still going (Unknown).
pub const TYPE_SUCCEEDED: &str = "Succeeded";
/// Condition type `ValidPipeline`: whether every Function of the pipeline may run in an operation.
pub const TYPE_VALID_PIPELINE: &str = "ValidPipeline";
/// Condition type `Watching`: whether a WatchOperation watches its kind.
pub const TYPE_WATCHING: &str = "Watching";
/// Condition type `Scheduling`: whether a CronOperation schedules Operations.
pub const TYPE_SCHEDULING: &str = "Scheduling";

/// Reason `PipelineRunning` (Succeeded=Unknown).
pub const REASON_PIPELINE_RUNNING: &str = "PipelineRunning";
/// Reason `PipelineSuccess` (Succeeded=True).
pub const REASON_PIPELINE_SUCCESS: &str = "PipelineSuccess";
/// Reason `PipelineError` (Succeeded=False).
pub const REASON_PIPELINE_ERROR: &str = "PipelineError";
/// Reason `ValidPipeline` (ValidPipeline=True).
pub const REASON_VALID_PIPELINE: &str = "ValidPipeline";
/// Reason `MissingCapabilities` (ValidPipeline=False).
pub const REASON_MISSING_CAPABILITIES: &str = "MissingCapabilities";
/// Reason `WatchActive` (Watching=True).
pub const REASON_WATCH_ACTIVE: &str = "WatchActive";
/// Reason `WatchFailed` (Watching=False).
pub const REASON_WATCH_FAILED: &str = "WatchFailed";
/// Reason `WatchPaused` (Watching=False).
pub const REASON_WATCH_PAUSED: &str = "WatchPaused";
/// Reason `ScheduleActive` (Scheduling=True).
pub const REASON_SCHEDULE_ACTIVE: &str = "ScheduleActive";
/// Reason `ScheduleInvalid` (Scheduling=False).
pub const REASON_SCHEDULE_INVALID: &str = "ScheduleInvalid";
/// Reason `SchedulePaused` (Scheduling=False).
pub const REASON_SCHEDULE_PAUSED: &str = "SchedulePaused";

/// The label on an Operation naming the CronOperation that created it.
pub const LABEL_CRON_OPERATION: &str = "ops.crossplane.io/cronoperation";
/// The label on an Operation naming the WatchOperation that created it.
pub const LABEL_WATCH_OPERATION: &str = "ops.crossplane.io/watchoperation";
/// The annotation on a WatchOperation's Operation: the watched resource's apiVersion.
pub const ANNOTATION_WATCHED_API_VERSION: &str = "ops.crossplane.io/watched-resource-apiversion";
/// The annotation on a WatchOperation's Operation: the watched resource's kind.
pub const ANNOTATION_WATCHED_KIND: &str = "ops.crossplane.io/watched-resource-kind";
/// The annotation on a WatchOperation's Operation: the watched resource's name.
pub const ANNOTATION_WATCHED_NAME: &str = "ops.crossplane.io/watched-resource-name";
/// The annotation on a WatchOperation's Operation: the watched resource's namespace.
pub const ANNOTATION_WATCHED_NAMESPACE: &str = "ops.crossplane.io/watched-resource-namespace";
/// The annotation on a WatchOperation's Operation: the watched resource's resourceVersion.
pub const ANNOTATION_WATCHED_RESOURCE_VERSION: &str = "ops.crossplane.io/watched-resource-resourceversion";
/// The resourceVersion recorded for a watched resource that was deleted.
pub const RESOURCE_VERSION_DELETED: &str = "ops.crossplane.io/synthetic-deleted";
/// The required resource under which a WatchOperation hands the watched resource to each step.
pub const REQUIREMENT_WATCHED_RESOURCE: &str = "ops.crossplane.io/watched-resource";
/// The finalizer a WatchOperation keeps while its watch runs.
pub const FINALIZER_WATCH_OPERATION: &str = "ops.crossplane.io/watch-operation";

/// How many failed runs an Operation may have when `spec.retryLimit` is not set.
pub const DEFAULT_RETRY_LIMIT: i64 = 5;
/// Successful Operations kept when `successfulHistoryLimit` is not set.
pub const DEFAULT_SUCCESSFUL_HISTORY_LIMIT: i32 = 3;
/// Failed Operations kept when `failedHistoryLimit` is not set.
pub const DEFAULT_FAILED_HISTORY_LIMIT: i32 = 1;

/// Upstream's condition constructors of this group.
pub mod conditions {
    use super::*;
    use crate::ConditionStatus;

    /// `Succeeded=Unknown`, reason `PipelineRunning`.
    pub fn running() -> Condition {
        Condition::new(TYPE_SUCCEEDED, ConditionStatus::Unknown, REASON_PIPELINE_RUNNING)
    }
    /// `Succeeded=True`, reason `PipelineSuccess`.
    pub fn complete() -> Condition {
        Condition::new(TYPE_SUCCEEDED, ConditionStatus::True, REASON_PIPELINE_SUCCESS)
    }
    /// `Succeeded=False`, reason `PipelineError`, with why.
    pub fn failed(message: impl Into<String>) -> Condition {
        Condition::new(TYPE_SUCCEEDED, ConditionStatus::False, REASON_PIPELINE_ERROR).with_message(message)
    }
    /// `ValidPipeline=True`, reason `ValidPipeline`.
    pub fn valid_pipeline() -> Condition {
        Condition::new(TYPE_VALID_PIPELINE, ConditionStatus::True, REASON_VALID_PIPELINE)
    }
    /// `ValidPipeline=False`, reason `MissingCapabilities`, with why.
    pub fn missing_capabilities(message: impl Into<String>) -> Condition {
        Condition::new(
            TYPE_VALID_PIPELINE,
            ConditionStatus::False,
            REASON_MISSING_CAPABILITIES,
        )
        .with_message(message)
    }
    /// `Watching=True`, reason `WatchActive`.
    pub fn watch_active() -> Condition {
        Condition::new(TYPE_WATCHING, ConditionStatus::True, REASON_WATCH_ACTIVE)
    }
    /// `Watching=False`, reason `WatchFailed`, with why.
    pub fn watch_failed(message: impl Into<String>) -> Condition {
        Condition::new(TYPE_WATCHING, ConditionStatus::False, REASON_WATCH_FAILED).with_message(message)
    }
    /// `Watching=False`, reason `WatchPaused`.
    pub fn watch_paused() -> Condition {
        Condition::new(TYPE_WATCHING, ConditionStatus::False, REASON_WATCH_PAUSED)
    }
    /// `Scheduling=True`, reason `ScheduleActive`.
    pub fn schedule_active() -> Condition {
        Condition::new(TYPE_SCHEDULING, ConditionStatus::True, REASON_SCHEDULE_ACTIVE)
    }
    /// `Scheduling=False`, reason `ScheduleInvalid`, with why.
    pub fn schedule_invalid(message: impl Into<String>) -> Condition {
        Condition::new(TYPE_SCHEDULING, ConditionStatus::False, REASON_SCHEDULE_INVALID).with_message(message)
    }
    /// `Scheduling=False`, reason `SchedulePaused`.
    pub fn schedule_paused() -> Condition {
        Condition::new(TYPE_SCHEDULING, ConditionStatus::False, REASON_SCHEDULE_PAUSED)
    }
}

/// The only operation mode: a pipeline of functions.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum OperationMode {
    /// A pipeline of functions, each responsible for part of the operation.
    #[default]
    Pipeline,
}

/// The resources a step is given before its first call.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [{
    "rule": "!(has(self.name) && has(self.matchLabels))",
    "message": "name and matchLabels are mutually exclusive",
}]))]
pub struct RequiredResourceSelector {
    /// The key of these resources in the request's `requiredResources`.
    pub requirement_name: String,
    /// The apiVersion of the resources.
    pub api_version: String,
    /// The kind of the resources.
    pub kind: String,
    /// One resource by name (not with `matchLabels`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Resources by labels (not with `name`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub match_labels: Option<BTreeMap<String, String>>,
    /// The namespace to look in, for a namespaced kind.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
}

/// The OpenAPI schema of a kind, given to a step before its first call.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RequiredSchemaSelector {
    /// The key of this schema in the request's `requiredSchemas`.
    pub requirement_name: String,
    /// The kind's apiVersion, e.g. `example.org/v1`.
    pub api_version: String,
    /// The kind.
    pub kind: String,
}

/// What a step needs before its first call.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct FunctionRequirements {
    /// Resources fetched before the first call; requirement names are unique.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["requirementName"]))]
    pub required_resources: Vec<RequiredResourceSelector>,
    /// Schemas fetched before the first call; requirement names are unique.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["requirementName"]))]
    pub required_schemas: Vec<RequiredSchemaSelector>,
}

/// One step of an operation's pipeline.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PipelineStep {
    /// The step's name, unique within the pipeline.
    pub step: String,
    /// The Function to run.
    pub function_ref: FunctionReference,
    /// The Function's input, a Kubernetes-style object.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "crate::embedded_resource")]
    pub input: Option<serde_json::Value>,
    /// Credentials handed to the Function; names are unique.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["name"]))]
    pub credentials: Vec<FunctionCredentials>,
    /// Resources and schemas given to the step before its first call.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requirements: Option<FunctionRequirements>,
}

/// What an Operation does: a pipeline of functions that together make one day-two operation, run once.
#[derive(CustomResource, Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "ops.crossplane.io",
    version = "v1alpha1",
    kind = "Operation",
    plural = "operations",
    shortname = "ops",
    category = "crossplane",
    status = "OperationStatus",
    printcolumn = r#"{"name":"SYNCED","type":"string","jsonPath":".status.conditions[?(@.type=='Synced')].status"}"#,
    printcolumn = r#"{"name":"SUCCEEDED","type":"string","jsonPath":".status.conditions[?(@.type=='Succeeded')].status"}"#,
    printcolumn = r#"{"name":"AGE","type":"date","jsonPath":".metadata.creationTimestamp"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct OperationSpec {
    /// The mode; only `Pipeline`.
    #[serde(default)]
    #[schemars(extend("default" = "Pipeline"))]
    pub mode: OperationMode,
    /// The pipeline: 1 to 99 steps with unique names.
    #[schemars(length(min = 1, max = 99))]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["step"]))]
    pub pipeline: Vec<PipelineStep>,
    /// How many failed runs the Operation may have before it is marked failed for good (default 5).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry_limit: Option<i64>,
}

impl OperationSpec {
    /// `retryLimit`, or [`DEFAULT_RETRY_LIMIT`].
    pub fn retry_limit(&self) -> i64 {
        self.retry_limit.unwrap_or(DEFAULT_RETRY_LIMIT)
    }
}

/// What one step returned as its output.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct PipelineStepStatus {
    /// The step's name.
    pub step: String,
    /// The step's output, free-form.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "crate::preserve_unknown_fields")]
    pub output: Option<serde_json::Value>,
}

/// A resource an Operation applied.
#[derive(Debug, Clone, Default, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AppliedResourceRef {
    /// Its apiVersion.
    pub api_version: String,
    /// Its kind.
    pub kind: String,
    /// Its namespace, for a namespaced resource.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    /// Its name.
    pub name: String,
}

/// What an Operation observed.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct OperationStatus {
    /// Conditions (`Synced`, `Succeeded`, `ValidPipeline`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["type"]))]
    pub conditions: Vec<Condition>,
    /// How many runs failed.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub failures: i64,
    /// The outputs of the steps that returned one.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pipeline: Vec<PipelineStepStatus>,
    /// The resources the Operation applied, sorted.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub applied_resource_refs: Vec<AppliedResourceRef>,
}

fn is_zero(n: &i64) -> bool {
    *n == 0
}

impl Operation {
    /// Whether the run has finished, well or badly (`Succeeded` is True or False: both are final).
    pub fn is_complete(&self) -> bool {
        self.status
            .as_ref()
            .and_then(|s| crate::condition::get(&s.conditions, TYPE_SUCCEEDED))
            .is_some_and(|c| c.status != crate::ConditionStatus::Unknown)
    }
}

/// How to treat a new run while earlier ones still run.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum ConcurrencyPolicy {
    /// Run them side by side.
    #[default]
    Allow,
    /// Skip the new run.
    Forbid,
    /// Delete the running ones, then start the new one.
    Replace,
}

/// The metadata an Operation created from a template gets.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct TemplateMetadata {
    /// Labels.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
    /// Annotations.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub annotations: BTreeMap<String, String>,
}

/// The Operation a CronOperation or WatchOperation creates.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct OperationTemplate {
    /// Its labels and annotations.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<TemplateMetadata>,
    /// Its spec.
    pub spec: OperationSpec,
}

/// A running Operation.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct RunningOperationRef {
    /// Its name.
    pub name: String,
}

/// When a CronOperation creates Operations, and how many it keeps.
#[derive(CustomResource, Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "ops.crossplane.io",
    version = "v1alpha1",
    kind = "CronOperation",
    plural = "cronoperations",
    shortname = "cronops",
    category = "crossplane",
    status = "CronOperationStatus",
    printcolumn = r#"{"name":"SCHEDULE","type":"string","jsonPath":".spec.schedule"}"#,
    printcolumn = r#"{"name":"SYNCED","type":"string","jsonPath":".status.conditions[?(@.type=='Synced')].status"}"#,
    printcolumn = r#"{"name":"SCHEDULING","type":"string","jsonPath":".status.conditions[?(@.type=='Scheduling')].status"}"#,
    printcolumn = r#"{"name":"LAST SCHEDULE","type":"date","jsonPath":".status.lastScheduleTime"}"#,
    printcolumn = r#"{"name":"LAST SUCCESS","type":"date","jsonPath":".status.lastSuccessfulTime"}"#,
    printcolumn = r#"{"name":"AGE","type":"date","jsonPath":".metadata.creationTimestamp"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct CronOperationSpec {
    /// The cron schedule (five fields, or a nickname such as `@hourly`), in UTC.
    pub schedule: String,
    /// How late, in seconds, a missed run may still start.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub starting_deadline_seconds: Option<i64>,
    /// How to treat a run while earlier ones still run (default `Allow`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = "Allow"))]
    pub concurrency_policy: Option<ConcurrencyPolicy>,
    /// How many successful Operations to keep (default 3).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = 3))]
    pub successful_history_limit: Option<i32>,
    /// How many failed Operations to keep (default 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = 1))]
    pub failed_history_limit: Option<i32>,
    /// The Operation to create.
    pub operation_template: OperationTemplate,
}

/// What a CronOperation observed.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CronOperationStatus {
    /// Conditions (`Synced`, `Scheduling`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["type"]))]
    pub conditions: Vec<Condition>,
    /// The Operations still running.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub running_operation_refs: Vec<RunningOperationRef>,
    /// When the latest Operation was created.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_schedule_time: Option<Time>,
    /// When the latest Operation succeeded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_successful_time: Option<Time>,
}

/// The resources a WatchOperation watches.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct WatchSpec {
    /// Their apiVersion (immutable).
    #[schemars(extend("x-kubernetes-validations" = [{"rule": "self == oldSelf", "message": "apiVersion is immutable"}]))]
    pub api_version: String,
    /// Their kind (immutable).
    #[schemars(extend("x-kubernetes-validations" = [{"rule": "self == oldSelf", "message": "kind is immutable"}]))]
    pub kind: String,
    /// Only resources with these labels; all when empty.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub match_labels: BTreeMap<String, String>,
    /// Only resources of this namespace; all namespaces when empty.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub namespace: String,
}

/// What a WatchOperation watches, and the Operations it creates and keeps.
#[derive(CustomResource, Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "ops.crossplane.io",
    version = "v1alpha1",
    kind = "WatchOperation",
    plural = "watchoperations",
    shortname = "watchops",
    category = "crossplane",
    status = "WatchOperationStatus",
    printcolumn = r#"{"name":"KIND","type":"string","jsonPath":".spec.watch.kind"}"#,
    printcolumn = r#"{"name":"COUNT","type":"integer","jsonPath":".status.watchingResources"}"#,
    printcolumn = r#"{"name":"SYNCED","type":"string","jsonPath":".status.conditions[?(@.type=='Synced')].status"}"#,
    printcolumn = r#"{"name":"WATCHING","type":"string","jsonPath":".status.conditions[?(@.type=='Watching')].status"}"#,
    printcolumn = r#"{"name":"LAST SCHEDULE","type":"date","jsonPath":".status.lastScheduleTime"}"#,
    printcolumn = r#"{"name":"LAST SUCCESS","type":"date","jsonPath":".status.lastSuccessfulTime"}"#,
    printcolumn = r#"{"name":"AGE","type":"date","jsonPath":".metadata.creationTimestamp"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct WatchOperationSpec {
    /// The resources to watch.
    pub watch: WatchSpec,
    /// How to treat a run while earlier ones still run (default `Allow`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = "Allow"))]
    pub concurrency_policy: Option<ConcurrencyPolicy>,
    /// How many successful Operations to keep (default 3).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = 3))]
    pub successful_history_limit: Option<i32>,
    /// How many failed Operations to keep (default 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = 1))]
    pub failed_history_limit: Option<i32>,
    /// The Operation to create.
    pub operation_template: OperationTemplate,
}

/// What a WatchOperation observed.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct WatchOperationStatus {
    /// Conditions (`Synced`, `Watching`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["type"]))]
    pub conditions: Vec<Condition>,
    /// The Operations still running.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub running_operation_refs: Vec<RunningOperationRef>,
    /// How many resources match the watch.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub watching_resources: i64,
    /// When the latest Operation was created.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_schedule_time: Option<Time>,
    /// When the latest Operation succeeded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_successful_time: Option<Time>,
}

/// The CRDs of this group: Operation, CronOperation and WatchOperation.
pub fn crds()
-> Vec<k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition> {
    use kube::CustomResourceExt;
    vec![Operation::crd(), CronOperation::crd(), WatchOperation::crd()]
}

#[cfg(test)]
mod tests {
    use kube::CustomResourceExt;

    use super::*;

    #[test]
    fn the_crds_are_upstreams_shape() {
        for crd in crds() {
            assert_eq!(crd.spec.group, GROUP);
            assert_eq!(crd.spec.scope, "Cluster");
            assert_eq!(crd.spec.versions[0].name, VERSION);
            assert_eq!(
                crd.spec.names.categories.as_deref(),
                Some(&["crossplane".to_owned()][..])
            );
        }
        let op = serde_json::to_value(Operation::crd()).expect("json");
        let spec = op
            .pointer("/spec/versions/0/schema/openAPIV3Schema/properties/spec")
            .expect("spec");
        assert_eq!(spec["properties"]["pipeline"]["minItems"], 1, "{spec}");
        assert_eq!(spec["properties"]["pipeline"]["maxItems"], 99, "{spec}");
        assert_eq!(
            spec["properties"]["pipeline"]["x-kubernetes-list-map-keys"][0],
            "step"
        );
        assert_eq!(op["spec"]["names"]["shortNames"][0], "ops");
        let columns = op
            .pointer("/spec/versions/0/additionalPrinterColumns")
            .expect("columns");
        assert_eq!(columns[1]["name"], "SUCCEEDED");
        let watch = serde_json::to_value(WatchOperation::crd()).expect("json");
        let kind = watch
            .pointer(
                "/spec/versions/0/schema/openAPIV3Schema/properties/spec/properties/watch/properties/kind",
            )
            .expect("kind");
        assert!(
            kind["x-kubernetes-validations"].to_string().contains("oldSelf"),
            "{kind}"
        );
    }

    #[test]
    fn a_status_round_trips_in_upstreams_field_names() {
        let s: OperationStatus = serde_json::from_value(serde_json::json!({
            "failures": 2,
            "pipeline": [{"step": "a", "output": {"n": 1}}],
            "appliedResourceRefs": [{"apiVersion": "v1", "kind": "ConfigMap", "namespace": "d", "name": "x"}],
        }))
        .expect("parses");
        assert_eq!(s.failures, 2);
        let back = serde_json::to_value(&s).expect("json");
        assert_eq!(back["appliedResourceRefs"][0]["apiVersion"], "v1");
        assert_eq!(back["pipeline"][0]["output"]["n"], 1);
    }
}
