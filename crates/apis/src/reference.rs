//! References to ProviderConfigs and Secrets.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// How a reference is resolved (cluster-scoped legacy MRs only).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ReferencePolicy {
    /// `Required` (default) or `Optional`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resolution: Option<String>,
    /// `Always` or `IfNotPresent` (default).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resolve: Option<String>,
}

/// `providerConfigRef` of a cluster-scoped (legacy) managed resource: a name.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ProviderConfigReference {
    /// Name of the ProviderConfig.
    pub name: String,
    /// Resolution policy.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub policy: Option<ReferencePolicy>,
}

/// `providerConfigRef` of a namespaced (v2) managed resource: a kind and a name.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TypedProviderConfigReference {
    /// `ProviderConfig` (in the resource's namespace) or `ClusterProviderConfig`.
    pub kind: String,
    /// Name of the config.
    pub name: String,
}

/// A reference to a Secret in any namespace.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SecretReference {
    /// Name of the Secret.
    pub name: String,
    /// Namespace of the Secret.
    pub namespace: String,
}

/// A reference to a Secret in the referrer's namespace.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct LocalSecretReference {
    /// Name of the Secret.
    pub name: String,
}

/// A key of a Secret.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SecretKeySelector {
    /// Name of the Secret.
    pub name: String,
    /// Namespace of the Secret.
    pub namespace: String,
    /// The key.
    pub key: String,
}

/// A resolved view of either kind of `providerConfigRef`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProviderConfigRef {
    /// The kind, `None` for cluster-scoped legacy references (always a cluster-scoped `ProviderConfig`).
    pub kind: Option<String>,
    /// The name.
    pub name: String,
}
