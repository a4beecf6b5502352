//! Connecting a resource to its PostgreSQL server: read the ProviderConfig and its connection Secret,
//! and hand out a small pool (at most [`POOL_SIZE`] connections) per ProviderConfig. A pool is rebuilt
//! when the config or the Secret changes. Every connection carries the replica's identity as
//! `application_name`, so the server's log shows which replica issued which statement.
//!
//! An unreachable server or refused credentials is an error of `connect`'s first query, not of
//! `connect` itself: the pool connects lazily, and the reconciler turns the error into `Synced=False`
//! with the server's own message, then backs off.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use deadpool_postgres::{Manager, ManagerConfig, Object, Pool, PoolError, RecyclingMethod, Runtime};
use k8s_openapi::api::core::v1::Secret;
use kube::{Api, ResourceExt};
use managed::{ConfigRef, ExternalConnector, ExternalError};
use manager::Fence;

use crate::client::{SqlClient, SqlResource};
use crate::tls;
use crate::types::{SslMode, cluster, namespaced};

/// Connections per ProviderConfig.
pub const POOL_SIZE: usize = 4;

/// How long connecting (TCP, TLS, authentication) may take.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// The only credentials source upstream defines.
pub const SOURCE: &str = "PostgreSQLConnectionSecret";

/// A PostgreSQL error as the server said it: `<severity> <SQLSTATE>: <message>`, or the transport error.
pub fn pg_error(e: &tokio_postgres::Error) -> String {
    match e.as_db_error() {
        Some(db) => format!("{} {}: {}", db.severity(), db.code().code(), db.message()),
        None => e.to_string(),
    }
}

/// One reconcile's handle on the server: a pool, the published endpoint, and the term's client.
#[derive(Clone)]
pub struct Db {
    pool: Pool,
    /// The server's host, as in the ProviderConfig's Secret.
    pub endpoint: String,
    /// The server's port, as in the ProviderConfig's Secret.
    pub port: String,
    /// The term's Kubernetes client (its writes pass the term's fence layer).
    pub kube: kube::Client,
    /// The term's fence, checked before SQL that changes the server.
    pub term: Fence,
}

impl Db {
    /// A connection from the pool.
    pub async fn conn(&self) -> Result<Object, ExternalError> {
        self.pool.get().await.map_err(|e| {
            let why = match &e {
                PoolError::Backend(pg) => pg_error(pg),
                PoolError::Timeout(_) => "timed out".to_owned(),
                other => other.to_string(),
            };
            ExternalError::new(format!(
                "cannot connect to PostgreSQL at {}:{}: {why}",
                self.endpoint, self.port
            ))
        })
    }

    /// Refuses to go on when this replica's term has ended: SQL that changes the server is fenced like
    /// every Kubernetes write.
    pub fn fence(&self) -> Result<(), ExternalError> {
        self.term
            .check()
            .map_err(|e| ExternalError::refused("refusing to change PostgreSQL", e))
    }

    /// Runs statements that change the server, in one transaction, after checking the fence.
    pub async fn execute(&self, what: &str, statements: &[String]) -> Result<(), ExternalError> {
        if statements.is_empty() {
            return Ok(());
        }
        let mut conn = self.conn().await?;
        self.fence()?;
        let err = |e: tokio_postgres::Error| ExternalError::new(format!("cannot {what}: {}", pg_error(&e)));
        if statements.len() == 1 {
            return conn.batch_execute(&statements[0]).await.map_err(err);
        }
        let tx = conn.transaction().await.map_err(err)?;
        for s in statements {
            tx.batch_execute(s).await.map_err(err)?;
        }
        tx.commit().await.map_err(err)
    }

    /// Runs one statement outside a transaction (`CREATE DATABASE` and `DROP DATABASE` refuse to run
    /// inside one), after checking the fence.
    pub async fn execute_alone(&self, what: &str, statement: &str) -> Result<(), ExternalError> {
        let conn = self.conn().await?;
        self.fence()?;
        conn.batch_execute(statement)
            .await
            .map_err(|e| ExternalError::new(format!("cannot {what}: {}", pg_error(&e))))
    }
}

struct Cached {
    fingerprint: String,
    pool: Pool,
}

/// Connects resources of every kind. Clones share the pools.
#[derive(Clone)]
pub struct SqlConnector {
    identity: String,
    pools: Arc<Mutex<HashMap<ConfigRef, Cached>>>,
}

/// What a ProviderConfig and its Secret resolve to.
struct Target {
    endpoint: String,
    port: String,
    username: String,
    password: String,
    database: String,
    ssl: SslMode,
    fingerprint: String,
}

impl SqlConnector {
    /// A connector whose connections name themselves `identity`.
    pub fn new(identity: impl Into<String>) -> Self {
        Self {
            identity: identity.into(),
            pools: Arc::default(),
        }
    }

    async fn target(&self, kube: &kube::Client, r: &ConfigRef) -> Result<Target, ExternalError> {
        let (spec, config_ns) = r
            .fetch::<cluster::ProviderConfig, namespaced::ProviderConfig, namespaced::ClusterProviderConfig>(
                kube.clone(),
            )
            .await?;
        if spec.credentials.source != SOURCE {
            return Err(ExternalError::new(format!(
                "{r}: credentials source {:?} is not supported (use {SOURCE})",
                spec.credentials.source
            )));
        }
        let sref = &spec.credentials.connection_secret_ref;
        let ns = sref
            .namespace
            .as_deref()
            .or(config_ns.as_deref())
            .ok_or_else(|| {
                ExternalError::new(format!(
                    "{r}: credentials.connectionSecretRef.namespace is required"
                ))
            })?;
        let shown = format!("{ns}/{}", sref.name);
        let secret = Api::<Secret>::namespaced(kube.clone(), ns)
            .get_opt(&sref.name)
            .await
            .map_err(|e| ExternalError::wrap(format!("cannot get connection Secret {shown}"), e))?
            .ok_or_else(|| ExternalError::new(format!("cannot get connection Secret {shown}: not found")))?;
        let mapping = spec.credentials.secret_key_mapping.clone().unwrap_or_default();
        let data = secret.data.clone().unwrap_or_default();
        let get = |key: Option<String>, default: &str, required: bool| -> Result<String, ExternalError> {
            let key = key.unwrap_or_else(|| default.to_owned());
            match data.get(&key) {
                Some(v) => String::from_utf8(v.0.clone()).map_err(|_| {
                    ExternalError::new(format!("connection Secret {shown}: key {key:?} is not UTF-8"))
                }),
                None if required => Err(ExternalError::new(format!(
                    "connection Secret {shown} has no key {key:?}"
                ))),
                None => Ok(String::new()),
            }
        };
        let endpoint = get(mapping.endpoint, "endpoint", true)?;
        let port = get(mapping.port, "port", false)?;
        let port = if port.is_empty() { "5432".to_owned() } else { port };
        let username = get(mapping.username, "username", true)?;
        let password = get(mapping.password, "password", false)?;
        let database = spec
            .default_database
            .clone()
            .unwrap_or_else(|| "postgres".to_owned());
        let fingerprint = format!(
            "{}|{}|{}",
            secret.resource_version().unwrap_or_default(),
            serde_json::to_string(&spec).unwrap_or_default(),
            self.identity
        );
        Ok(Target {
            endpoint,
            port,
            username,
            password,
            database,
            ssl: spec.ssl_mode,
            fingerprint,
        })
    }

    fn pool(&self, r: &ConfigRef, t: &Target) -> Result<Pool, ExternalError> {
        let mut pools = self
            .pools
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(c) = pools.get(r)
            && c.fingerprint == t.fingerprint
        {
            return Ok(c.pool.clone());
        }
        let port: u16 = t
            .port
            .trim()
            .parse()
            .map_err(|_| ExternalError::new(format!("{r}: port {:?} is not a number", t.port)))?;
        let mut cfg = tokio_postgres::Config::new();
        cfg.host(&t.endpoint)
            .port(port)
            .user(&t.username)
            .password(&t.password)
            .dbname(&t.database)
            .application_name(&self.identity)
            .connect_timeout(CONNECT_TIMEOUT);
        let manager_config = ManagerConfig {
            recycling_method: RecyclingMethod::Verified,
        };
        let manager = match t.ssl {
            SslMode::Disable => {
                cfg.ssl_mode(tokio_postgres::config::SslMode::Disable);
                Manager::from_config(cfg, tokio_postgres::NoTls, manager_config)
            }
            mode => {
                cfg.ssl_mode(tokio_postgres::config::SslMode::Require);
                let tls = tls::connector(mode).map_err(|e| ExternalError::new(format!("{r}: {e}")))?;
                Manager::from_config(cfg, tls, manager_config)
            }
        };
        let pool = Pool::builder(manager)
            .max_size(POOL_SIZE)
            .runtime(Runtime::Tokio1)
            .wait_timeout(Some(Duration::from_secs(20)))
            .create_timeout(Some(CONNECT_TIMEOUT * 2))
            .recycle_timeout(Some(CONNECT_TIMEOUT))
            .build()
            .map_err(|e| ExternalError::wrap(format!("{r}: cannot build a connection pool"), e))?;
        pools.insert(
            r.clone(),
            Cached {
                fingerprint: t.fingerprint.clone(),
                pool: pool.clone(),
            },
        );
        Ok(pool)
    }
}

impl<K: SqlResource> ExternalConnector<K> for SqlConnector {
    type Client = SqlClient;

    async fn connect(
        &self,
        client: &kube::Client,
        fence: &Fence,
        mr: &K,
    ) -> Result<SqlClient, ExternalError> {
        let r = ConfigRef::of(mr).map_err(ExternalError::new)?;
        let target = self.target(client, &r).await?;
        let pool = self.pool(&r, &target)?;
        Ok(SqlClient::new(Db {
            pool,
            endpoint: target.endpoint,
            port: target.port,
            kube: client.clone(),
            term: fence.clone(),
        }))
    }
}
