//! `kubernetes.crossplane.io`: the cluster-scoped (legacy) Object and its ProviderConfig.

use apis::{ProviderConfigStatus, ResourceSpec};
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{ObjectFields, ObjectStatus, ProviderConfigSpec};

/// The API group.
pub const GROUP: &str = "kubernetes.crossplane.io";

/// The desired state of a cluster-scoped Object.
#[derive(CustomResource, Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "kubernetes.crossplane.io",
    version = "v1alpha2",
    kind = "Object",
    plural = "objects",
    status = "ObjectStatus",
    category = "crossplane",
    category = "managed",
    category = "kubernetes",
    printcolumn = r#"{"name":"KIND","type":"string","jsonPath":".spec.forProvider.manifest.kind"}"#,
    printcolumn = r#"{"name":"PROVIDERCONFIG","type":"string","jsonPath":".spec.providerConfigRef.name"}"#,
    printcolumn = r#"{"name":"SYNCED","type":"string","jsonPath":".status.conditions[?(@.type=='Synced')].status"}"#,
    printcolumn = r#"{"name":"READY","type":"string","jsonPath":".status.conditions[?(@.type=='Ready')].status"}"#,
    printcolumn = r#"{"name":"AGE","type":"date","jsonPath":".metadata.creationTimestamp"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct ObjectSpec {
    /// `providerConfigRef`, `managementPolicies`, `deletionPolicy`, `writeConnectionSecretToRef`.
    #[serde(flatten)]
    pub resource_spec: ResourceSpec,
    /// The Object fields.
    #[serde(flatten)]
    pub object: ObjectFields,
}

managed::impl_managed!(cluster Object);

/// A cluster-scoped ProviderConfig.
#[derive(CustomResource, Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "kubernetes.crossplane.io",
    version = "v1alpha1",
    kind = "ProviderConfig",
    plural = "providerconfigs",
    status = "ProviderConfigStatus",
    category = "crossplane",
    category = "provider",
    category = "kubernetes"
)]
pub struct ProviderConfigSpecCluster {
    /// The config.
    #[serde(flatten)]
    pub config: ProviderConfigSpec,
}
