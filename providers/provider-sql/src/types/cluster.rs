//! `postgresql.sql.crossplane.io`: the cluster-scoped (legacy) kinds and their ProviderConfig.

use apis::ProviderConfigStatus;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{
    DatabaseParameters, DatabaseStatus, GrantParameters, GrantStatus, ProviderConfigSpec, RoleParameters,
    RoleStatus,
};

/// The API group.
pub const GROUP: &str = "postgresql.sql.crossplane.io";

managed::managed_kind!(cluster Role: "postgresql.sql.crossplane.io", "v1alpha1", "Role", "roles", "sql", "A PostgreSQL Role.", RoleSpec(RoleParameters), "RoleStatus");

managed::managed_kind!(cluster Database: "postgresql.sql.crossplane.io", "v1alpha1", "Database", "databases", "sql", "A PostgreSQL Database.", DatabaseSpec(DatabaseParameters), "DatabaseStatus");

managed::managed_kind!(cluster Grant: "postgresql.sql.crossplane.io", "v1alpha1", "Grant", "grants", "sql", "A PostgreSQL Grant.", GrantSpec(GrantParameters), "GrantStatus");

/// A cluster-scoped ProviderConfig.
#[derive(CustomResource, Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "postgresql.sql.crossplane.io",
    version = "v1alpha1",
    kind = "ProviderConfig",
    plural = "providerconfigs",
    status = "ProviderConfigStatus",
    category = "crossplane",
    category = "provider",
    category = "sql"
)]
pub struct ProviderConfigSpecCluster {
    /// The config.
    #[serde(flatten)]
    pub config: ProviderConfigSpec,
}
