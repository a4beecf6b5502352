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

sql_kind!(cluster "postgresql.sql.crossplane.io", "Role", "roles", "A PostgreSQL Role.", RoleSpec(RoleParameters), "RoleStatus");

managed::impl_managed!(cluster Role);

sql_kind!(cluster "postgresql.sql.crossplane.io", "Database", "databases", "A PostgreSQL Database.", DatabaseSpec(DatabaseParameters), "DatabaseStatus");

managed::impl_managed!(cluster Database);

sql_kind!(cluster "postgresql.sql.crossplane.io", "Grant", "grants", "A PostgreSQL Grant.", GrantSpec(GrantParameters), "GrantStatus");

managed::impl_managed!(cluster Grant);

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
