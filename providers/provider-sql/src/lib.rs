//! provider-sql for PostgreSQL: `Role`s, `Database`s and `Grant`s on a real server, in both Crossplane
//! v2's namespaced `postgresql.sql.m.crossplane.io` and the cluster-scoped `postgresql.sql.crossplane.io`
//! groups, with ProviderConfigs whose credentials Secret holds `endpoint`, `port`, `username` and
//! `password`.
//!
//! Modules: [`types`] (the API), [`kinds`] (what both groups' kinds share), [`sql`] (quoting and
//! privilege checks), [`tls`], [`connector`] (ProviderConfig → pool), [`client`] (dispatch), [`refs`]
//! (reference resolution), and one module per kind: [`role`], [`database`], [`grant`].
//!
//! Rules that hold everywhere:
//! - observe reads `pg_catalog` and compares with the spec, so drift made by hand is reverted at the
//!   next poll; unset fields are late-initialized from the server;
//! - values in queries are bound parameters; utility statements (which PostgreSQL cannot parameterize)
//!   take identifiers through [`sql::quote_ident`] and literals through [`sql::quote_literal`];
//! - every statement that changes the server checks the term's fence first, and every connection names
//!   the replica (`application_name` = identity), so the server log shows which replica wrote;
//! - an unreachable server or refused credentials is a `Synced=False` condition carrying the server's
//!   message, retried with backoff; nothing panics.
//!
//! Differences from upstream: `Schema`, `Extension`, `DefaultPrivileges`, grants on schemas, tables,
//! sequences, routines and foreign objects, `passwordRotationTrigger`, the `strategy` of Database and
//! `matchControllerRef` selectors are not implemented. The external name is deterministic
//! (`Options::deterministic_external_name`), so a replica that takes over after a leader
//! died mid-create observes and adopts the object instead of waiting for a human. Passwords are sent as SCRAM verifiers so that
//! the plain text never appears in the server's log.
#![forbid(unsafe_code)]

pub mod client;
pub mod connector;
pub mod database;
pub mod grant;
pub mod kinds;
pub mod refs;
pub mod role;
pub mod sql;
pub mod tls;
pub mod types;

use std::time::Duration;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::CustomResourceExt;
use managed::provider::{Kinds, Provider};
use managed::{
    Options, ProviderConfigController, ProviderConfigKind, ProviderDefaults, ProviderGroups, ProviderInfo,
};
use manager::{BinaryInfo, Defaults, Manager};

use crate::connector::SqlConnector;
use crate::types::{VERSION, cluster, namespaced};

/// The provider's name, Lease and flag defaults (`--poll 10m`, `--max-reconcile-rate 10`, Lease
/// 15 s/10 s/2 s as upstream).
pub const INFO: ProviderInfo = ProviderInfo {
    description: "Crossplane provider-sql (PostgreSQL), in Rust",
    binary: BinaryInfo {
        name: "provider-sql",
        version: env!("CARGO_PKG_VERSION"),
    },
    lease: Defaults::new("crossplane-leader-election-provider-sql").timings(
        Duration::from_secs(15),
        Duration::from_secs(10),
        Duration::from_secs(2),
    ),
    defaults: ProviderDefaults {
        poll: Duration::from_secs(600),
        max_reconcile_rate: 10,
    },
    upstream_flags: &[],
};

/// The provider's two API groups.
pub const GROUPS: ProviderGroups = ProviderGroups {
    cluster: cluster::GROUP,
    namespaced: namespaced::GROUP,
    usage_version: VERSION,
    category: "sql",
};

/// The provider: its binary and `cargo xtask generate` take everything from here.
pub const PROVIDER: Provider = Provider {
    info: INFO,
    setup,
    crds,
    rbac_needs,
};

/// The one list of the provider's managed kinds, both groups.
fn kinds() -> Kinds<SqlConnector> {
    Kinds::tracked()
        .kind::<cluster::Role>()
        .kind::<cluster::Database>()
        .kind::<cluster::Grant>()
        .kind::<namespaced::Role>()
        .kind::<namespaced::Database>()
        .kind::<namespaced::Grant>()
}

/// Every CRD of the provider: the managed kinds, the ProviderConfig kinds and the usage kinds.
pub fn crds() -> Vec<CustomResourceDefinition> {
    let [cluster_usage, namespaced_usage] = GROUPS.usage_crds();
    let mut crds = kinds().crds();
    crds.extend([
        cluster::ProviderConfig::crd(),
        cluster_usage,
        namespaced::ProviderConfig::crd(),
        namespaced::ClusterProviderConfig::crd(),
        namespaced_usage,
    ]);
    crds
}

/// Registers the Role, Database and Grant controllers of both groups and the ProviderConfig
/// controllers. Connections name themselves after the replica's identity.
pub fn setup(mgr: &mut Manager, options: &Options) {
    let connector = SqlConnector::new(mgr.identity());
    // Names in PostgreSQL are the external names, known before creation, and observe finds an object
    // a killed leader created: a create whose outcome is unknown is safe to retry.
    let mut options = options.clone();
    options.deterministic_external_name = true;
    let (legacy, modern) = GROUPS.options(&options);
    kinds().register(mgr, &connector, |group| {
        if group == cluster::GROUP {
            legacy.clone()
        } else {
            modern.clone()
        }
    });
    for kind in provider_config_kinds() {
        ProviderConfigController::new(kind).register(mgr);
    }
}

/// The ProviderConfig kinds: legacy `ProviderConfig`, v2 namespaced `ProviderConfig` and
/// `ClusterProviderConfig`, each with the usage kind that counts for it.
pub fn provider_config_kinds() -> Vec<ProviderConfigKind> {
    GROUPS.provider_config_kinds::<cluster::ProviderConfig, namespaced::ProviderConfig, namespaced::ClusterProviderConfig>()
}

/// The API access [`setup`]'s controllers need (rendered into the provider's ClusterRole by
/// `cargo xtask generate`): the managed kinds, the ProviderConfig kinds and their usages, the
/// credentials Secrets the connector reads, and the runtime's connection Secrets and Events.
pub fn rbac_needs() -> Vec<manager::controller::rbac::Rule> {
    managed::groups::provider_needs(kinds().needs(), &provider_config_kinds())
}
