//! `kubernetes.crossplane.io/v1alpha1`: the cluster-scoped Object's deprecated first version, served
//! next to [`v1alpha2`](super::cluster) (the storage version) and converted by the provider's conversion
//! webhook ([`crate::conversion`]), as upstream (`apis/cluster/object/v1alpha1/types.go`).
//!
//! It differs from v1alpha2 in its spec: one `managementPolicy` enum instead of `managementPolicies`, a
//! deprecated `providerRef`, no `forProvider.deletionPropagationPolicy` and no `readiness.celQuery`.
//! The nested types (references, connection details, status) are v1alpha2's, whose fields are the same.
//! As for v1alpha2, `forProvider.manifest` accepts any JSON value (see [`super`]).

use apis::{DeletionPolicy, ProviderConfigReference, SecretReference};
use kube::CustomResource;
use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};
use serde::{Deserialize, Serialize};

use super::{ConnectionDetail, ObjectStatus, ReadinessPolicy, Reference, any_value};

/// The version.
pub const VERSION: &str = "v1alpha1";

/// What the provider may do to the object (v1alpha1's single policy; v1alpha2 has
/// `managementPolicies`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum ManagementPolicy {
    /// Observe, create, update and delete (the default).
    #[default]
    Default,
    /// Observe, create and update, never delete.
    ObserveCreateUpdate,
    /// Observe and delete, never create or update.
    ObserveDelete,
    /// Only observe.
    Observe,
}

fn default_provider_config_ref() -> Option<ProviderConfigReference> {
    Some(ProviderConfigReference {
        name: "default".to_owned(),
        policy: None,
    })
}

fn default_management_policy() -> Option<ManagementPolicy> {
    Some(ManagementPolicy::Default)
}

/// v1alpha1's readiness policies: v1alpha2's without `DeriveFromCelQuery`.
fn readiness_policy(_: &mut SchemaGenerator) -> Schema {
    json_schema!({
        "description": "How the Object's Ready condition is computed.",
        "type": "string",
        "enum": ["SuccessfulCreate", "DeriveFromObject", "AllTrue"],
        "default": "SuccessfulCreate",
    })
}

/// The object to manage.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ObjectParameters {
    /// The Kubernetes object to create, update and delete.
    #[schemars(schema_with = "any_value")]
    pub manifest: serde_json::Value,
}

/// Readiness settings.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Readiness {
    /// The policy.
    #[serde(default)]
    #[schemars(schema_with = "readiness_policy")]
    pub policy: ReadinessPolicy,
}

/// The desired state of a v1alpha1 Object.
#[derive(CustomResource, Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "kubernetes.crossplane.io",
    version = "v1alpha1",
    kind = "Object",
    plural = "objects",
    status = "ObjectStatus",
    category = "crossplane",
    category = "managed",
    category = "kubernetes",
    printcolumn = r#"{"name":"KIND","type":"string","jsonPath":".spec.forProvider.manifest.kind"}"#,
    printcolumn = r#"{"name":"APIVERSION","type":"string","jsonPath":".spec.forProvider.manifest.apiVersion","priority":1}"#,
    printcolumn = r#"{"name":"METANAME","type":"string","jsonPath":".spec.forProvider.manifest.metadata.name","priority":1}"#,
    printcolumn = r#"{"name":"METANAMESPACE","type":"string","jsonPath":".spec.forProvider.manifest.metadata.namespace","priority":1}"#,
    printcolumn = r#"{"name":"PROVIDERCONFIG","type":"string","jsonPath":".spec.providerConfigRef.name"}"#,
    printcolumn = r#"{"name":"SYNCED","type":"string","jsonPath":".status.conditions[?(@.type=='Synced')].status"}"#,
    printcolumn = r#"{"name":"READY","type":"string","jsonPath":".status.conditions[?(@.type=='Ready')].status"}"#,
    printcolumn = r#"{"name":"AGE","type":"date","jsonPath":".metadata.creationTimestamp"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct ObjectSpec {
    /// The Secret the connection details are written to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub write_connection_secret_to_ref: Option<SecretReference>,
    /// The ProviderConfig to use.
    #[serde(
        default = "default_provider_config_ref",
        skip_serializing_if = "Option::is_none"
    )]
    pub provider_config_ref: Option<ProviderConfigReference>,
    /// Deprecated: use `providerConfigRef`. Not carried to v1alpha2 (as upstream).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider_ref: Option<ProviderConfigReference>,
    /// What happens to the object when this Object is deleted.
    #[serde(default)]
    pub deletion_policy: DeletionPolicy,
    /// Connection details to publish.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub connection_details: Vec<ConnectionDetail>,
    /// The object.
    pub for_provider: ObjectParameters,
    /// What the provider may do to the object.
    #[serde(
        default = "default_management_policy",
        skip_serializing_if = "Option::is_none"
    )]
    pub management_policy: Option<ManagementPolicy>,
    /// Objects this one depends on or patches from.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub references: Vec<Reference>,
    /// How readiness is computed.
    #[serde(default)]
    pub readiness: Readiness,
    /// Watch the object (accepted; not carried to v1alpha2, as upstream).
    #[serde(default)]
    pub watch: bool,
}
