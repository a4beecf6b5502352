//! `postgresql.sql.m.crossplane.io`: the namespaced (Crossplane v2) kinds, ProviderConfig and
//! ClusterProviderConfig.

use apis::{ManagedResourceSpec, ProviderConfigStatus};
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{
    DatabaseParameters, DatabaseStatus, GrantParameters, GrantStatus, ProviderConfigSpec, RoleParameters,
    RoleStatus,
};

/// The API group.
pub const GROUP: &str = "postgresql.sql.m.crossplane.io";

/// A PostgreSQL Role.
#[derive(CustomResource, Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "postgresql.sql.m.crossplane.io",
    version = "v1alpha1",
    kind = "Role",
    plural = "roles",
    namespaced,
    status = "RoleStatus",
    category = "crossplane",
    category = "managed",
    category = "sql",
    printcolumn = r#"{"name":"READY","type":"string","jsonPath":".status.conditions[?(@.type=='Ready')].status"}"#,
    printcolumn = r#"{"name":"SYNCED","type":"string","jsonPath":".status.conditions[?(@.type=='Synced')].status"}"#,
    printcolumn = r#"{"name":"EXTERNAL-NAME","type":"string","jsonPath":".metadata.annotations.crossplane\\.io/external-name"}"#,
    printcolumn = r#"{"name":"AGE","type":"date","jsonPath":".metadata.creationTimestamp"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct RoleSpec {
    /// The shared managed-resource fields.
    #[serde(flatten)]
    pub resource_spec: ManagedResourceSpec,
    /// The desired state.
    #[serde(default)]
    pub for_provider: RoleParameters,
}

managed::impl_managed!(namespaced Role);

/// A PostgreSQL Database.
#[derive(CustomResource, Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "postgresql.sql.m.crossplane.io",
    version = "v1alpha1",
    kind = "Database",
    plural = "databases",
    namespaced,
    status = "DatabaseStatus",
    category = "crossplane",
    category = "managed",
    category = "sql",
    printcolumn = r#"{"name":"READY","type":"string","jsonPath":".status.conditions[?(@.type=='Ready')].status"}"#,
    printcolumn = r#"{"name":"SYNCED","type":"string","jsonPath":".status.conditions[?(@.type=='Synced')].status"}"#,
    printcolumn = r#"{"name":"EXTERNAL-NAME","type":"string","jsonPath":".metadata.annotations.crossplane\\.io/external-name"}"#,
    printcolumn = r#"{"name":"AGE","type":"date","jsonPath":".metadata.creationTimestamp"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct DatabaseSpec {
    /// The shared managed-resource fields.
    #[serde(flatten)]
    pub resource_spec: ManagedResourceSpec,
    /// The desired state.
    #[serde(default)]
    pub for_provider: DatabaseParameters,
}

managed::impl_managed!(namespaced Database);

/// A PostgreSQL Grant.
#[derive(CustomResource, Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "postgresql.sql.m.crossplane.io",
    version = "v1alpha1",
    kind = "Grant",
    plural = "grants",
    namespaced,
    status = "GrantStatus",
    category = "crossplane",
    category = "managed",
    category = "sql",
    printcolumn = r#"{"name":"READY","type":"string","jsonPath":".status.conditions[?(@.type=='Ready')].status"}"#,
    printcolumn = r#"{"name":"SYNCED","type":"string","jsonPath":".status.conditions[?(@.type=='Synced')].status"}"#,
    printcolumn = r#"{"name":"EXTERNAL-NAME","type":"string","jsonPath":".metadata.annotations.crossplane\\.io/external-name"}"#,
    printcolumn = r#"{"name":"AGE","type":"date","jsonPath":".metadata.creationTimestamp"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct GrantSpec {
    /// The shared managed-resource fields.
    #[serde(flatten)]
    pub resource_spec: ManagedResourceSpec,
    /// The desired state.
    #[serde(default)]
    pub for_provider: GrantParameters,
}

managed::impl_managed!(namespaced Grant);

/// A namespaced ProviderConfig, usable by resources in its namespace.
#[derive(CustomResource, Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "postgresql.sql.m.crossplane.io",
    version = "v1alpha1",
    kind = "ProviderConfig",
    plural = "providerconfigs",
    namespaced,
    status = "ProviderConfigStatus",
    category = "crossplane",
    category = "provider",
    category = "sql"
)]
pub struct ProviderConfigSpecNamespaced {
    /// The config.
    #[serde(flatten)]
    pub config: ProviderConfigSpec,
}

/// A cluster-scoped config, usable by resources in any namespace.
#[derive(CustomResource, Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "postgresql.sql.m.crossplane.io",
    version = "v1alpha1",
    kind = "ClusterProviderConfig",
    plural = "clusterproviderconfigs",
    status = "ProviderConfigStatus",
    category = "crossplane",
    category = "provider",
    category = "sql"
)]
pub struct ClusterProviderConfigSpec {
    /// The config.
    #[serde(flatten)]
    pub config: ProviderConfigSpec,
}
