//! The API types of provider-kubernetes: [`cluster`] (`kubernetes.crossplane.io`, cluster-scoped,
//! legacy) and [`namespaced`] (`kubernetes.m.crossplane.io`, Crossplane v2). Both Object kinds share
//! [`ObjectFields`] and [`ObjectStatus`]; both ProviderConfig kinds share [`ProviderConfigSpec`].
//!
//! One deliberate difference from upstream: `forProvider.manifest` accepts any JSON value (schema
//! `x-kubernetes-preserve-unknown-fields`), not only an embedded object, so a malformed manifest reaches
//! the controller and is reported as `Synced=False` with a clear message instead of being refused at
//! admission without a trace on the resource.

pub mod cluster;
pub mod namespaced;
pub mod v1alpha1;

use apis::{CredentialsSource, ResourceStatus};
use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};
use serde::{Deserialize, Serialize};

/// Any JSON value, kept as is.
pub fn any_value(_: &mut SchemaGenerator) -> Schema {
    json_schema!({ "x-kubernetes-preserve-unknown-fields": true })
}

/// A dependency on another object.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DependsOn {
    /// API version of the referenced object (default: this provider's Object).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_version: Option<String>,
    /// Kind of the referenced object (default `Object`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    /// Name of the referenced object.
    pub name: String,
    /// Namespace of the referenced object.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
}

/// A dependency whose field is patched into the manifest.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PatchesFrom {
    /// The referenced object.
    #[serde(flatten)]
    pub depends_on: DependsOn,
    /// The field of the referenced object to copy.
    pub field_path: String,
}

/// A reference to another object.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Reference {
    /// Wait for the object to exist.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub depends_on: Option<DependsOn>,
    /// Wait for it and copy a field from it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub patches_from: Option<PatchesFrom>,
    /// Where in the manifest the field goes (default: the same path).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub to_field_path: Option<String>,
}

/// How the Object's `Ready` condition is computed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum ReadinessPolicy {
    /// Ready once the object exists and is up to date.
    #[default]
    SuccessfulCreate,
    /// Ready when the object's own `Ready` condition is `True`.
    DeriveFromObject,
    /// Ready when the object has conditions and all are `True`.
    AllTrue,
    /// A CEL query (not supported by this implementation; reported as an error).
    DeriveFromCelQuery,
}

/// Readiness settings.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Readiness {
    /// The policy.
    #[serde(default)]
    pub policy: ReadinessPolicy,
    /// The CEL query for `DeriveFromCelQuery`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cel_query: Option<String>,
}

/// A connection detail read from an object's field.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ConnectionDetail {
    /// API version of the object.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_version: Option<String>,
    /// Kind of the object.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    /// Name of the object.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Namespace of the object.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    /// The field to read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub field_path: Option<String>,
    /// The key it is published under.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub to_connection_secret_key: Option<String>,
}

/// How deleting the object propagates to its dependents.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum DeletionPropagation {
    /// Orphan dependents.
    Orphan,
    /// Delete dependents in the background (the default).
    #[default]
    Background,
    /// Delete dependents first.
    Foreground,
}

impl DeletionPropagation {
    /// The `propagationPolicy` value.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Orphan => "Orphan",
            Self::Background => "Background",
            Self::Foreground => "Foreground",
        }
    }
}

/// The object to manage.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ObjectParameters {
    /// The Kubernetes object to create, update and delete.
    #[schemars(schema_with = "any_value")]
    pub manifest: serde_json::Value,
    /// How its deletion propagates (default `Background`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deletion_propagation_policy: Option<DeletionPropagation>,
}

/// The Object fields both variants share.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ObjectFields {
    /// Connection details to publish.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub connection_details: Vec<ConnectionDetail>,
    /// The object.
    pub for_provider: ObjectParameters,
    /// Objects this one depends on or patches from.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub references: Vec<Reference>,
    /// How readiness is computed.
    #[serde(default)]
    pub readiness: Readiness,
    /// Watch the object (accepted; this implementation polls).
    #[serde(default)]
    pub watch: bool,
}

/// What was observed.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ObjectObservation {
    /// The object as last read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "apis::preserve_unknown_fields")]
    pub manifest: Option<serde_json::Value>,
}

/// The status of either Object kind.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ObjectStatus {
    /// Conditions and observed generation.
    #[serde(flatten)]
    pub resource_status: ResourceStatus,
    /// What was observed.
    #[serde(default)]
    pub at_provider: ObjectObservation,
}

/// A key of a Secret holding a kubeconfig.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct KubeconfigSecretRef {
    /// The Secret's name.
    pub name: String,
    /// Its namespace (for namespaced ProviderConfigs, default: the config's namespace).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    /// The key (upstream's examples use `kubeconfig`).
    pub key: String,
}

/// Where the credentials for the target cluster come from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ProviderCredentials {
    /// `InjectedIdentity` (the provider's own identity, i.e. this cluster) or `Secret` (a kubeconfig).
    pub source: CredentialsSource,
    /// The kubeconfig, for source `Secret`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret_ref: Option<KubeconfigSecretRef>,
}

/// The spec of every ProviderConfig kind.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ProviderConfigSpec {
    /// The credentials.
    pub credentials: ProviderCredentials,
}

managed::impl_provider_config!(ProviderConfigSpec: cluster::ProviderConfig, namespaced::ProviderConfig, namespaced::ClusterProviderConfig);
