//! The API types of provider-sql for PostgreSQL: [`cluster`] (`postgresql.sql.crossplane.io`,
//! cluster-scoped, legacy) and [`namespaced`] (`postgresql.sql.m.crossplane.io`, Crossplane v2). The kinds
//! of both groups share the parameter and status structs of this module.

pub mod cluster;
pub mod namespaced;

use apis::ResourceStatus;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// The version of every kind.
pub const VERSION: &str = "v1alpha1";

/// Role attributes. Unset ones are late-initialized from the server.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RolePrivilege {
    /// SUPERUSER.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub super_user: Option<bool>,
    /// CREATEDB.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub create_db: Option<bool>,
    /// CREATEROLE.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub create_role: Option<bool>,
    /// LOGIN.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub login: Option<bool>,
    /// INHERIT.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub inherit: Option<bool>,
    /// REPLICATION.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replication: Option<bool>,
    /// BYPASSRLS.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bypass_rls: Option<bool>,
}

/// A run-time parameter set on the role (`ALTER ROLE … SET name TO value`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RoleConfigurationParameter {
    /// The parameter's name.
    pub name: String,
    /// Its value.
    pub value: String,
}

/// A key of a Secret. For namespaced kinds the namespace is the resource's own and is ignored.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SecretKeyRef {
    /// The Secret's name.
    pub name: String,
    /// Its namespace (cluster-scoped kinds only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    /// The key.
    pub key: String,
}

/// The desired state of a Role.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RoleParameters {
    /// CONNECTION LIMIT (-1: none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub connection_limit: Option<i32>,
    /// Role attributes.
    #[serde(default)]
    pub privileges: RolePrivilege,
    /// The password; a random one is generated when unset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub password_secret_ref: Option<SecretKeyRef>,
    /// Per-role run-time parameters.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub configuration_parameters: Option<Vec<RoleConfigurationParameter>>,
}

/// What was observed of a Role.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RoleObservation {
    /// The attributes as SQL clauses, e.g. `LOGIN`, `NOSUPERUSER`, `CONNECTION LIMIT 5`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub privileges_as_clauses: Vec<String>,
    /// The run-time parameters.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub configuration_parameters: Vec<RoleConfigurationParameter>,
}

/// The status of a Role.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RoleStatus {
    /// Conditions and observed generation.
    #[serde(flatten)]
    pub resource_status: ResourceStatus,
    /// What was observed.
    #[serde(default)]
    pub at_provider: RoleObservation,
}

/// A reference to another managed resource by name.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Reference {
    /// Its name.
    pub name: String,
}

/// Selects another managed resource by labels.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Selector {
    /// The labels it must have.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub match_labels: BTreeMap<String, String>,
}

/// The desired state of a Database.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DatabaseParameters {
    /// The owner role.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owner: Option<String>,
    /// The owner, as a Role of this group.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owner_ref: Option<Reference>,
    /// The owner, as a Role of this group selected by labels.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owner_selector: Option<Selector>,
    /// The template database (create only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub template: Option<String>,
    /// The encoding (create only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub encoding: Option<String>,
    /// LC_COLLATE (create only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lc_collate: Option<String>,
    /// LC_CTYPE (create only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lc_c_type: Option<String>,
    /// The tablespace (create only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tablespace: Option<String>,
    /// ALLOW_CONNECTIONS.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allow_connections: Option<bool>,
    /// CONNECTION LIMIT (-1: none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub connection_limit: Option<i32>,
    /// IS_TEMPLATE.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub is_template: Option<bool>,
}

/// The status of a Database.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DatabaseStatus {
    /// Conditions and observed generation.
    #[serde(flatten)]
    pub resource_status: ResourceStatus,
}

/// `WITH GRANT OPTION` or `WITH ADMIN OPTION`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum GrantOption {
    /// WITH ADMIN OPTION (role membership).
    #[serde(rename = "ADMIN")]
    Admin,
    /// WITH GRANT OPTION (privileges).
    #[serde(rename = "GRANT")]
    Grant,
}

/// The desired state of a Grant: privileges of a role on a database, or a role's membership in another.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct GrantParameters {
    /// Privileges on the database, e.g. `CONNECT`, `CREATE`, `TEMPORARY`, `ALL`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub privileges: Vec<String>,
    /// Grant with the grant (or admin) option.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub with_option: Option<GrantOption>,
    /// The grantee role.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub role: Option<String>,
    /// The grantee, as a Role of this group.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub role_ref: Option<Reference>,
    /// The grantee, selected by labels.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub role_selector: Option<Selector>,
    /// The database.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub database: Option<String>,
    /// The database, as a Database of this group.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub database_ref: Option<Reference>,
    /// The database, selected by labels.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub database_selector: Option<Selector>,
    /// The role the grantee becomes a member of.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub member_of: Option<String>,
    /// That role, as a Role of this group.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub member_of_ref: Option<Reference>,
    /// That role, selected by labels.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub member_of_selector: Option<Selector>,
    /// Revoke PUBLIC's privileges on the database when granting.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub revoke_public_on_db: Option<bool>,
}

/// The status of a Grant.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct GrantStatus {
    /// Conditions and observed generation.
    #[serde(flatten)]
    pub resource_status: ResourceStatus,
}

/// Where a ProviderConfig's connection Secret is.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ConnectionSecretRef {
    /// The Secret's name.
    pub name: String,
    /// Its namespace (default: a namespaced ProviderConfig's own).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
}

/// Which keys of the connection Secret hold what (defaults `endpoint`, `port`, `username`, `password`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SecretKeyMapping {
    /// Key of the host name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub endpoint: Option<String>,
    /// Key of the port.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub port: Option<String>,
    /// Key of the user name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub username: Option<String>,
    /// Key of the password.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub password: Option<String>,
}

/// The credentials of a ProviderConfig.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ProviderCredentials {
    /// `PostgreSQLConnectionSecret`.
    pub source: String,
    /// The Secret with endpoint, port, username and password.
    pub connection_secret_ref: ConnectionSecretRef,
    /// Key names, if not the conventional ones.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret_key_mapping: Option<SecretKeyMapping>,
}

/// TLS mode of the connection.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum SslMode {
    /// No TLS.
    #[serde(rename = "disable")]
    Disable,
    /// TLS, server certificate not verified.
    #[serde(rename = "require")]
    Require,
    /// TLS, certificate chain verified, host name not.
    #[serde(rename = "verify-ca")]
    VerifyCa,
    /// TLS, certificate chain and host name verified.
    #[default]
    #[serde(rename = "verify-full")]
    VerifyFull,
}

impl SslMode {
    /// The libpq spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Disable => "disable",
            Self::Require => "require",
            Self::VerifyCa => "verify-ca",
            Self::VerifyFull => "verify-full",
        }
    }
}

/// The spec of every ProviderConfig kind.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ProviderConfigSpec {
    /// The credentials.
    pub credentials: ProviderCredentials,
    /// The database connected to for administration (default `postgres`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default_database: Option<String>,
    /// TLS mode (default `verify-full`).
    #[serde(default)]
    pub ssl_mode: SslMode,
}

managed::impl_provider_config!(ProviderConfigSpec: cluster::ProviderConfig, namespaced::ProviderConfig, namespaced::ClusterProviderConfig);
