//! EnvironmentConfig, `apiextensions.crossplane.io/v1beta1` (crossplane `apis/apiextensions/v1beta1/
//! environment_config_types.go`): free-form, cluster-scoped data for Compositions.
//!
//! In Crossplane v2 the core does not select or load EnvironmentConfigs itself: a pipeline step
//! (function-environment-configs) requires them as required resources, merges their `data` and hands
//! the result on in the pipeline context key `apiextensions.crossplane.io/environment`, where
//! function-patch-and-transform's environment patches read it. The type has no `spec`: its `data` sits
//! at the top level, so its CRD is written here rather than derived.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use serde::{Deserialize, Serialize};

/// The API version.
pub const API_VERSION: &str = "apiextensions.crossplane.io/v1beta1";
/// The kind.
pub const KIND: &str = "EnvironmentConfig";
/// The plural.
pub const PLURAL: &str = "environmentconfigs";

/// An EnvironmentConfig as the core reads it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct EnvironmentConfig {
    /// Its metadata.
    #[serde(default)]
    pub metadata: k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
    /// The data: any JSON object.
    #[serde(default, skip_serializing_if = "serde_json::Map::is_empty")]
    pub data: serde_json::Map<String, serde_json::Value>,
}

/// The EnvironmentConfig CRD, as upstream serves it: cluster-scoped, category `crossplane`, short name
/// `envcfg`, version `v1beta1` only (v1alpha1 was dropped upstream).
pub fn crd() -> CustomResourceDefinition {
    let crd = serde_json::json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": format!("{PLURAL}.{}", super::GROUP)},
        "spec": {
            "group": super::GROUP,
            "names": {"kind": KIND, "listKind": "EnvironmentConfigList", "plural": PLURAL,
                      "singular": "environmentconfig", "shortNames": ["envcfg"], "categories": ["crossplane"]},
            "scope": "Cluster",
            "versions": [{
                "name": "v1beta1", "served": true, "storage": true,
                "additionalPrinterColumns": [{"name": "AGE", "type": "date", "jsonPath": ".metadata.creationTimestamp"}],
                "schema": {"openAPIV3Schema": {
                    "description": "An EnvironmentConfig contains user-defined unstructured values for use in a Composition.",
                    "type": "object",
                    "properties": {
                        "apiVersion": {"type": "string"},
                        "kind": {"type": "string"},
                        "metadata": {"type": "object"},
                        "data": {
                            "description": "The data of this EnvironmentConfig: any structure that serializes to JSON.",
                            "type": "object",
                            "additionalProperties": {"x-kubernetes-preserve-unknown-fields": true},
                        },
                    },
                }},
            }],
        },
    });
    // A fixed, well-formed document: deserializing it cannot fail.
    serde_json::from_value(crd).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_crd_is_cluster_scoped_v1beta1_with_free_form_data() {
        let crd = crd();
        assert_eq!(
            crd.metadata.name.as_deref(),
            Some("environmentconfigs.apiextensions.crossplane.io")
        );
        assert_eq!(crd.spec.scope, "Cluster");
        assert_eq!(crd.spec.versions.len(), 1);
        assert_eq!(crd.spec.versions[0].name, "v1beta1");
        let schema = serde_json::to_value(&crd.spec.versions[0].schema).expect("schema as JSON");
        assert_eq!(
            schema.pointer(
                "/openAPIV3Schema/properties/data/additionalProperties/x-kubernetes-preserve-unknown-fields"
            ),
            Some(&serde_json::json!(true))
        );
    }

    #[test]
    fn data_reads_as_an_object() {
        let e: EnvironmentConfig = serde_json::from_value(serde_json::json!({
            "apiVersion": API_VERSION, "kind": KIND, "metadata": {"name": "e"}, "data": {"a": {"b": 1}}}))
        .expect("parses");
        assert_eq!(e.data["a"]["b"], 1);
    }
}
