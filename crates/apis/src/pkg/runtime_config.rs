//! DeploymentRuntimeConfig, `pkg.crossplane.io/v1beta1` (upstream
//! `apis/pkg/v1beta1/deployment_runtime_config_types.go`): how a Provider's or Function's runtime is
//! run: a template for its Deployment (a full Deployment spec), Service and ServiceAccount.

use k8s_openapi::api::apps::v1::DeploymentSpec;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::package::StringMap;

/// The name of the DeploymentRuntimeConfig that `core init` creates and packages use by default.
pub const DEFAULT_RUNTIME_CONFIG: &str = "default";

/// The metadata a template may set on the object it makes.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ObjectMeta {
    /// The object's name (default: the revision's or the package's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Labels, merged with the package manager's own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub labels: Option<StringMap>,
    /// Annotations.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub annotations: Option<StringMap>,
}

/// The template of the runtime's Deployment.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct DeploymentTemplate {
    /// Metadata of the Deployment.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<ObjectMeta>,
    /// A Deployment spec merged over the one the package manager builds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "deployment_spec")]
    pub spec: Option<DeploymentSpec>,
}

/// The schema of a Deployment spec without the field descriptions: with them, the CRD (650 kB, as
/// upstream's 690 kB) exceeds the 256 kB that `kubectl apply` (client-side, as `kubectl apply -k
/// deploy/` is) may store in its last-applied annotation. The validation is the same.
fn deployment_spec(generator: &mut schemars::SchemaGenerator) -> schemars::Schema {
    fn strip(v: &mut serde_json::Value) {
        match v {
            serde_json::Value::Object(map) => {
                if map.get("description").is_some_and(serde_json::Value::is_string) {
                    map.remove("description");
                }
                map.values_mut().for_each(strip);
            }
            serde_json::Value::Array(items) => items.iter_mut().for_each(strip),
            _ => {}
        }
    }
    let mut value = serde_json::Value::from(generator.subschema_for::<DeploymentSpec>());
    strip(&mut value);
    if let Some(map) = value.as_object_mut() {
        map.insert(
            "description".into(),
            "A Deployment spec merged over the one the package manager builds.".into(),
        );
    }
    schemars::Schema::try_from(value).unwrap_or_else(|_| schemars::json_schema!({"type": "object"}))
}

/// The template of an object of which only metadata can be set (Service, ServiceAccount).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct MetadataTemplate {
    /// Metadata of the object.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<ObjectMeta>,
}

/// The desired state of a DeploymentRuntimeConfig.
#[derive(CustomResource, Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "pkg.crossplane.io",
    version = "v1beta1",
    kind = "DeploymentRuntimeConfig",
    plural = "deploymentruntimeconfigs",
    category = "crossplane",
    printcolumn = r#"{"name":"AGE","type":"date","jsonPath":".metadata.creationTimestamp"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct DeploymentRuntimeConfigSpec {
    /// The template of the runtime's Deployment.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deployment_template: Option<DeploymentTemplate>,
    /// The template of the runtime's Service.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service_template: Option<MetadataTemplate>,
    /// The template of the runtime's ServiceAccount.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service_account_template: Option<MetadataTemplate>,
}
