//! CompositionRevision, `apiextensions.crossplane.io/v1`: an immutable snapshot of a Composition's spec,
//! numbered by `spec.revision`.

use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::composition::{CompositionMode, PipelineStep, TypeReference};
use crate::condition::Condition;

/// The desired state of a CompositionRevision: the Composition's spec plus the revision number.
#[derive(CustomResource, Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "apiextensions.crossplane.io",
    version = "v1",
    kind = "CompositionRevision",
    plural = "compositionrevisions",
    shortname = "comprev",
    category = "crossplane",
    status = "CompositionRevisionStatus",
    printcolumn = r#"{"name":"REVISION","type":"string","jsonPath":".spec.revision"}"#,
    printcolumn = r#"{"name":"XR-KIND","type":"string","jsonPath":".spec.compositeTypeRef.kind"}"#,
    printcolumn = r#"{"name":"XR-APIVERSION","type":"string","jsonPath":".spec.compositeTypeRef.apiVersion"}"#,
    printcolumn = r#"{"name":"AGE","type":"date","jsonPath":".metadata.creationTimestamp"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct CompositionRevisionSpec {
    /// The XR type.
    pub composite_type_ref: TypeReference,
    /// The mode; only `Pipeline`.
    #[serde(default)]
    pub mode: CompositionMode,
    /// The pipeline; step names are unique.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["step"]))]
    pub pipeline: Vec<PipelineStep>,
    /// Where legacy XRs write connection secrets.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub write_connection_secrets_to_namespace: Option<String>,
    /// The revision number, increasing per Composition.
    pub revision: i64,
}

/// The observed state of a CompositionRevision.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct CompositionRevisionStatus {
    /// Conditions (`ValidPipeline`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["type"]))]
    pub conditions: Vec<Condition>,
}
