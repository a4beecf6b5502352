//! ImageConfig, `pkg.crossplane.io/v1beta1` (upstream `apis/pkg/v1beta1/image_config_types.go`):
//! settings for the packages whose image matches a prefix: a pull secret, signature verification, a
//! prefix rewrite, a runtime config. The longest matching prefix wins.

use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::package::{LocalObjectReference, RuntimeConfigReference};

/// How an image is matched.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ImageMatch {
    /// Only `Prefix`.
    #[serde(default, rename = "type", skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = "Prefix", "enum" = ["Prefix"]))]
    pub match_type: Option<String>,
    /// The prefix images must start with.
    pub prefix: String,
}

/// Credentials for the matched registry.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RegistryAuthentication {
    /// A `kubernetes.io/dockerconfigjson` Secret in the Crossplane namespace.
    pub pull_secret_ref: LocalObjectReference,
}

/// Registry settings.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct RegistryConfig {
    /// How to authenticate.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub authentication: Option<RegistryAuthentication>,
}

/// Cosign verification settings.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct CosignVerificationConfig {
    /// The authorities (keys, keyless identities) a signature must come from.
    #[schemars(schema_with = "authorities")]
    pub authorities: Vec<serde_json::Value>,
}

fn authorities(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({
        "type": "array",
        "items": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
    })
}

/// Signature verification.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ImageVerification {
    /// Only `Cosign`.
    #[schemars(extend("enum" = ["Cosign"]))]
    pub provider: String,
    /// Cosign's settings.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cosign: Option<CosignVerificationConfig>,
}

/// A prefix rewrite.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ImageRewrite {
    /// What the matched prefix is replaced with.
    pub prefix: String,
}

/// The runtime the matched packages run with.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ImageRuntime {
    /// Replaces the package's own `runtimeConfigRef`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config_ref: Option<RuntimeConfigReference>,
}

/// The desired state of an ImageConfig.
#[derive(CustomResource, Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "pkg.crossplane.io",
    version = "v1beta1",
    kind = "ImageConfig",
    plural = "imageconfigs",
    category = "crossplane",
    printcolumn = r#"{"name":"AGE","type":"date","jsonPath":".metadata.creationTimestamp"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct ImageConfigSpec {
    /// The images this config applies to (at least one).
    #[schemars(extend("x-kubernetes-validations" = [{"rule": "size(self) > 0", "message": "matchImages should have at least one element."}]))]
    pub match_images: Vec<ImageMatch>,
    /// Registry settings.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub registry: Option<RegistryConfig>,
    /// Signature verification.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verification: Option<ImageVerification>,
    /// A prefix rewrite.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rewrite_image: Option<ImageRewrite>,
    /// The runtime config of the matched packages.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub runtime: Option<ImageRuntime>,
}
