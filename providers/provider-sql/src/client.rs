//! [`SqlClient`]: the external client of every kind, dispatching to the kind's module ([`crate::role`],
//! [`crate::database`], [`crate::grant`]) through [`SqlResource`].

use std::future::Future;

use managed::{
    ExternalClient, ExternalCreation, ExternalDelete, ExternalError, ExternalObservation, ExternalUpdate,
};

use crate::connector::Db;
use crate::kinds::SqlKind;
use crate::types::{cluster, namespaced};

/// A kind whose external resource lives in PostgreSQL.
pub trait SqlResource: SqlKind {
    /// Reads the server's state; late-initializes unset fields; sets `Ready`.
    fn observe(
        db: &Db,
        mr: &mut Self,
    ) -> impl Future<Output = Result<ExternalObservation, ExternalError>> + Send;
    /// Creates the object.
    fn create(db: &Db, mr: &mut Self)
    -> impl Future<Output = Result<ExternalCreation, ExternalError>> + Send;
    /// Brings the object to the spec.
    fn update(db: &Db, mr: &mut Self) -> impl Future<Output = Result<ExternalUpdate, ExternalError>> + Send;
    /// Drops the object.
    fn delete(db: &Db, mr: &mut Self) -> impl Future<Output = Result<ExternalDelete, ExternalError>> + Send;
}

/// One reconcile's connection.
pub struct SqlClient {
    db: Db,
}

impl SqlClient {
    pub(crate) fn new(db: Db) -> Self {
        Self { db }
    }
}

impl<K: SqlResource> ExternalClient<K> for SqlClient {
    async fn observe(&mut self, mr: &mut K) -> Result<ExternalObservation, ExternalError> {
        K::observe(&self.db, mr).await
    }
    async fn create(&mut self, mr: &mut K) -> Result<ExternalCreation, ExternalError> {
        K::create(&self.db, mr).await
    }
    async fn update(&mut self, mr: &mut K) -> Result<ExternalUpdate, ExternalError> {
        K::update(&self.db, mr).await
    }
    async fn delete(&mut self, mr: &mut K) -> Result<ExternalDelete, ExternalError> {
        K::delete(&self.db, mr).await
    }
}

macro_rules! sql_resource {
    ($ty:ty, $module:ident) => {
        impl SqlResource for $ty {
            fn observe(
                db: &Db,
                mr: &mut Self,
            ) -> impl Future<Output = Result<ExternalObservation, ExternalError>> + Send {
                crate::$module::observe(db, mr)
            }
            fn create(
                db: &Db,
                mr: &mut Self,
            ) -> impl Future<Output = Result<ExternalCreation, ExternalError>> + Send {
                crate::$module::create(db, mr)
            }
            fn update(
                db: &Db,
                mr: &mut Self,
            ) -> impl Future<Output = Result<ExternalUpdate, ExternalError>> + Send {
                crate::$module::update(db, mr)
            }
            fn delete(
                db: &Db,
                mr: &mut Self,
            ) -> impl Future<Output = Result<ExternalDelete, ExternalError>> + Send {
                crate::$module::delete(db, mr)
            }
        }
    };
}

sql_resource!(cluster::Role, role);
sql_resource!(namespaced::Role, role);
sql_resource!(cluster::Database, database);
sql_resource!(namespaced::Database, database);
sql_resource!(cluster::Grant, grant);
sql_resource!(namespaced::Grant, grant);
