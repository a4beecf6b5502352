//! `NopResource` (`nop.crossplane.io/v1alpha1`), with the fields of upstream provider-nop.

use apis::{ResourceSpec, ResourceStatus};
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// A condition to set once the resource is `time` old.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ResourceConditionAfter {
    /// How long after creation to set it (a Go duration, e.g. `30s`).
    pub time: String,
    /// The condition type, e.g. `Ready`.
    pub condition_type: String,
    /// `True`, `False` or `Unknown`.
    pub condition_status: String,
    /// The reason to give.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub condition_reason: Option<String>,
}

/// A connection detail to emit.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ResourceConnectionDetail {
    /// The key.
    pub name: String,
    /// The value.
    pub value: String,
}

/// What the NopResource is told to do.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NopResourceParameters {
    /// Conditions to set after given times. Without any, the resource never gets a `Ready` condition.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub condition_after: Vec<ResourceConditionAfter>,
    /// Connection details to emit on every reconcile.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub connection_details: Vec<ResourceConnectionDetail>,
    /// An arbitrary object to patch to and from; copied to `status.atProvider.fields`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "apis::preserve_unknown_fields")]
    pub fields: Option<serde_json::Value>,
}

/// The desired state of a NopResource.
#[derive(CustomResource, Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "nop.crossplane.io",
    version = "v1alpha1",
    kind = "NopResource",
    plural = "nopresources",
    status = "NopResourceStatus",
    category = "crossplane",
    category = "managed",
    category = "nop",
    printcolumn = r#"{"name":"READY","type":"string","jsonPath":".status.conditions[?(@.type=='Ready')].status"}"#,
    printcolumn = r#"{"name":"SYNCED","type":"string","jsonPath":".status.conditions[?(@.type=='Synced')].status"}"#,
    printcolumn = r#"{"name":"AGE","type":"date","jsonPath":".metadata.creationTimestamp"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct NopResourceSpec {
    /// The managed-resource fields (`providerConfigRef`, `managementPolicies`, `deletionPolicy`,
    /// `writeConnectionSecretToRef`). The ProviderConfig reference is accepted and ignored.
    #[serde(flatten)]
    pub resource_spec: ResourceSpec,
    /// What the resource is told to do.
    pub for_provider: NopResourceParameters,
}

/// What the NopResource reports.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct NopResourceObservation {
    /// A copy of `spec.forProvider.fields`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "apis::preserve_unknown_fields")]
    pub fields: Option<serde_json::Value>,
}

/// The observed state of a NopResource.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NopResourceStatus {
    /// Conditions and observed generation.
    #[serde(flatten)]
    pub resource_status: ResourceStatus,
    /// What was observed.
    #[serde(default)]
    pub at_provider: NopResourceObservation,
}

managed::impl_managed!(cluster NopResource);
