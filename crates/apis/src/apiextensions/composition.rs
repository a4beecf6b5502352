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
    /// Credentials handed to the Function (kept, unused by the built-in engine); names are unique.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["name"]))]
    pub credentials: Vec<FunctionCredentials>,
    /// Resources and schemas given to the step before its first call (and, for resources, watched:
    /// a change reconciles the XR).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requirements: Option<crate::ops::FunctionRequirements>,
}

/// A Secret of a namespace.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct SecretNamespacedReference {
    /// The namespace.
    pub namespace: String,
    /// The name.
    pub name: String,
}

/// Credentials a pipeline step hands to its Function. The apiserver refuses source `Secret` without a
/// `secretRef` (as upstream's CRD does).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [{
    "rule": "self.source != 'Secret' || has(self.secretRef)",
    "message": "credentials of source Secret need a secretRef (the namespace and name of the Secret to hand to the function)",
}]))]
pub struct FunctionCredentials {
    /// The credentials' name.
    pub name: String,
    /// `None` or `Secret`.
    #[schemars(extend("enum" = ["None", "Secret"]))]
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
#[schemars(extend("x-kubernetes-validations" = [{
    "rule": "!has(self.mode) || self.mode != 'Pipeline' || has(self.pipeline)",
    "message": "mode Pipeline needs spec.pipeline: a list of one or more steps, each with a step name and a functionRef",
}]))]
pub struct CompositionSpec {
    /// The XR type this Composition composes.
    pub composite_type_ref: TypeReference,
    /// The mode; only `Pipeline`.
    #[serde(default)]
    pub mode: CompositionMode,
    /// The pipeline: 1 to 99 steps with unique names (the apiserver refuses anything else, as
    /// upstream's CRD does).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(min = 1, max = 99))]
    // Unique step names: a list map keyed by `step`, so the apiserver refuses a duplicate ("Duplicate
    // value") as upstream's CRD does; a CEL rule comparing steps exceeds the apiserver's cost budget.
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["step"]))]
    pub pipeline: Vec<PipelineStep>,
    /// Where legacy XRs write connection secrets.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub write_connection_secrets_to_namespace: Option<String>,
}

/// The observed state of a Composition (empty upstream).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct CompositionStatus {}

#[cfg(test)]
mod tests {
    use super::*;
    use kube::CustomResourceExt;

    #[test]
    fn the_crd_refuses_what_upstreams_refuses() {
        let crd = serde_json::to_value(Composition::crd()).expect("CRD as JSON");
        let spec = crd
            .pointer("/spec/versions/0/schema/openAPIV3Schema/properties/spec")
            .expect("spec schema");
        let rules = |s: &serde_json::Value| s["x-kubernetes-validations"].to_string();
        assert!(rules(spec).contains("has(self.pipeline)"), "{spec}");
        let pipeline = &spec["properties"]["pipeline"];
        assert_eq!(pipeline["minItems"], 1, "{pipeline}");
        assert_eq!(pipeline["maxItems"], 99, "{pipeline}");
        assert_eq!(pipeline["x-kubernetes-list-type"], "map", "{pipeline}");
        assert_eq!(pipeline["x-kubernetes-list-map-keys"][0], "step", "{pipeline}");
        let credentials = &pipeline["items"]["properties"]["credentials"];
        assert_eq!(
            credentials["x-kubernetes-list-map-keys"][0], "name",
            "{credentials}"
        );
        assert!(
            rules(&credentials["items"]).contains("has(self.secretRef)"),
            "{credentials}"
        );
    }
}
