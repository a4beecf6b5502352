//! `kubernetes.m.crossplane.io`: the namespaced (Crossplane v2) Object, ProviderConfig and
//! ClusterProviderConfig.

use apis::{ManagedResourceSpec, ProviderConfigStatus};
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{ObjectFields, ObjectStatus, ProviderConfigSpec};

/// The API group.
pub const GROUP: &str = "kubernetes.m.crossplane.io";

/// The desired state of a namespaced Object.
#[derive(CustomResource, Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "kubernetes.m.crossplane.io",
    version = "v1alpha1",
    kind = "Object",
    plural = "objects",
    namespaced,
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
    /// `providerConfigRef` (kind and name), `managementPolicies`, `writeConnectionSecretToRef`.
    #[serde(flatten)]
    pub resource_spec: ManagedResourceSpec,
    /// The Object fields.
    #[serde(flatten)]
    pub object: ObjectFields,
}

managed::impl_managed!(namespaced Object);

/// A namespaced ProviderConfig, usable by Objects in its namespace.
#[derive(CustomResource, Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "kubernetes.m.crossplane.io",
    version = "v1alpha1",
    kind = "ProviderConfig",
    plural = "providerconfigs",
    namespaced,
    status = "ProviderConfigStatus",
    category = "crossplane",
    category = "provider",
    category = "kubernetes"
)]
pub struct ProviderConfigSpecNamespaced {
    /// The config.
    #[serde(flatten)]
    pub config: ProviderConfigSpec,
}

/// A cluster-scoped config, usable by Objects in any namespace.
#[derive(CustomResource, Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "kubernetes.m.crossplane.io",
    version = "v1alpha1",
    kind = "ClusterProviderConfig",
    plural = "clusterproviderconfigs",
    status = "ProviderConfigStatus",
    category = "crossplane",
    category = "provider",
    category = "kubernetes"
)]
pub struct ClusterProviderConfigSpec {
    /// The config.
    #[serde(flatten)]
    pub config: ProviderConfigSpec,
}
