//! Composition, `apiextensions.crossplane.io/v1`, mode `Pipeline` (crossplane `apis/apiextensions/v1/
//! composition_types.go`, `composition_common.go`).

use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The XR type a Composition is for.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TypeReference {
    /// The XR's apiVersion, `<group>/<version>`.
    pub api_version: String,
    /// The XR's kind.
    pub kind: String,
}

/// The Function a pipeline step runs.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct FunctionReference {
    /// The Function's name, e.g. `function-patch-and-transform`.
    pub name: String,
}

/// One step of the pipeline.
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
    /// Credentials handed to the Function (kept, unused by the built-in engine).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub credentials: Vec<FunctionCredentials>,
}

/// A Secret of a namespace.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct SecretNamespacedReference {
    /// The namespace.
    pub namespace: String,
    /// The name.
    pub name: String,
}

/// Credentials a pipeline step hands to its Function.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct FunctionCredentials {
    /// The credentials' name.
    pub name: String,
    /// `None` or `Secret`.
    pub source: String,
    /// The Secret, for source `Secret`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret_ref: Option<SecretNamespacedReference>,
}

/// The composition mode; v2 allows only `Pipeline`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum CompositionMode {
    /// A pipeline of Functions.
    #[default]
    Pipeline,
}

/// The desired state of a Composition.
#[derive(CustomResource, Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "apiextensions.crossplane.io",
    version = "v1",
    kind = "Composition",
    plural = "compositions",
    shortname = "comp",
    category = "crossplane",
    status = "CompositionStatus",
    printcolumn = r#"{"name":"XR-KIND","type":"string","jsonPath":".spec.compositeTypeRef.kind"}"#,
    printcolumn = r#"{"name":"XR-APIVERSION","type":"string","jsonPath":".spec.compositeTypeRef.apiVersion"}"#,
    printcolumn = r#"{"name":"AGE","type":"date","jsonPath":".metadata.creationTimestamp"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct CompositionSpec {
    /// The XR type this Composition composes.
    pub composite_type_ref: TypeReference,
    /// The mode; only `Pipeline`.
    #[serde(default)]
    pub mode: CompositionMode,
    /// The pipeline.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pipeline: Vec<PipelineStep>,
    /// Where legacy XRs write connection secrets.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub write_connection_secrets_to_namespace: Option<String>,
}

/// The observed state of a Composition (empty upstream).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct CompositionStatus {}
