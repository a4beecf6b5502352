//! `postgresql.sql.m.crossplane.io`: the namespaced (Crossplane v2) kinds, ProviderConfig and
//! ClusterProviderConfig.

use apis::ProviderConfigStatus;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{
    DatabaseParameters, DatabaseStatus, GrantParameters, GrantStatus, ProviderConfigSpec, RoleParameters,
    RoleStatus,
};

/// The API group.
pub const GROUP: &str = "postgresql.sql.m.crossplane.io";

managed::managed_kind!(namespaced Role: "postgresql.sql.m.crossplane.io", "v1alpha1", "Role", "roles", "sql", "A PostgreSQL Role.", RoleSpec(RoleParameters), "RoleStatus");

managed::managed_kind!(namespaced Database: "postgresql.sql.m.crossplane.io", "v1alpha1", "Database", "databases", "sql", "A PostgreSQL Database.", DatabaseSpec(DatabaseParameters), "DatabaseStatus");

managed::managed_kind!(namespaced Grant: "postgresql.sql.m.crossplane.io", "v1alpha1", "Grant", "grants", "sql", "A PostgreSQL Grant.", GrantSpec(GrantParameters), "GrantStatus");

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
