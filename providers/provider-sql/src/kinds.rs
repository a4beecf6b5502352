//! What the SQL clients need from the kinds of either group: [`SqlKind`] (the group and the scope) and, per kind, access to the parameters and the observation.

use kube::ResourceExt;
use managed::Managed;

use crate::types::{
    DatabaseParameters, GrantParameters, RoleObservation, RoleParameters, SecretKeyRef, cluster, namespaced,
};

/// Any kind of this provider.
pub trait SqlKind: Managed {
    /// The API group.
    const GROUP: &'static str;
    /// The namespace references and secrets resolve in (`None` for cluster-scoped kinds).
    fn local_namespace(&self) -> Option<String>;
}

/// Either Role kind.
pub trait RoleKind: SqlKind {
    /// The parameters.
    fn params(&self) -> &RoleParameters;
    /// The parameters, for late initialization.
    fn params_mut(&mut self) -> &mut RoleParameters;
    /// Records what was observed.
    fn set_observation(&mut self, o: RoleObservation);
}

/// Either Database kind.
pub trait DatabaseKind: SqlKind {
    /// The parameters.
    fn params(&self) -> &DatabaseParameters;
    /// The parameters, for late initialization and reference resolution.
    fn params_mut(&mut self) -> &mut DatabaseParameters;
}

/// Either Grant kind.
pub trait GrantKind: SqlKind {
    /// The parameters.
    fn params(&self) -> &GrantParameters;
    /// The parameters, for reference resolution.
    fn params_mut(&mut self) -> &mut GrantParameters;
}

/// Where a secret key reference of `mr` points: (namespace, name, key).
pub fn secret_key_location<K: SqlKind>(mr: &K, r: &SecretKeyRef) -> Result<(String, String, String), String> {
    let ns = match mr.local_namespace() {
        Some(ns) => ns,
        None => r
            .namespace
            .clone()
            .ok_or_else(|| format!("passwordSecretRef {:?} needs a namespace", r.name))?,
    };
    Ok((ns, r.name.clone(), r.key.clone()))
}

macro_rules! cluster_kind {
    ($ty:ty) => {
        impl SqlKind for $ty {
            const GROUP: &'static str = cluster::GROUP;
            fn local_namespace(&self) -> Option<String> {
                None
            }
        }
    };
}

macro_rules! namespaced_kind {
    ($ty:ty) => {
        impl SqlKind for $ty {
            const GROUP: &'static str = namespaced::GROUP;
            fn local_namespace(&self) -> Option<String> {
                self.namespace()
            }
        }
    };
}

macro_rules! params {
    ($trait:ident, $ty:ty, $params:ty) => {
        impl $trait for $ty {
            fn params(&self) -> &$params {
                &self.spec.for_provider
            }
            fn params_mut(&mut self) -> &mut $params {
                &mut self.spec.for_provider
            }
        }
    };
}

macro_rules! role_kind {
    ($ty:ty) => {
        impl RoleKind for $ty {
            fn params(&self) -> &RoleParameters {
                &self.spec.for_provider
            }
            fn params_mut(&mut self) -> &mut RoleParameters {
                &mut self.spec.for_provider
            }
            fn set_observation(&mut self, o: RoleObservation) {
                self.status.get_or_insert_with(Default::default).at_provider = o;
            }
        }
    };
}

cluster_kind!(cluster::Role);
cluster_kind!(cluster::Database);
cluster_kind!(cluster::Grant);
namespaced_kind!(namespaced::Role);
namespaced_kind!(namespaced::Database);
namespaced_kind!(namespaced::Grant);
role_kind!(cluster::Role);
role_kind!(namespaced::Role);
params!(DatabaseKind, cluster::Database, DatabaseParameters);
params!(DatabaseKind, namespaced::Database, DatabaseParameters);
params!(GrantKind, cluster::Grant, GrantParameters);
params!(GrantKind, namespaced::Grant, GrantParameters);

/// The name of the object in PostgreSQL: the `crossplane.io/external-name` annotation, else the
/// resource's name.
pub fn external_name<K: Managed>(mr: &K) -> String {
    mr.annotations()
        .get(apis::meta::ANNOTATION_EXTERNAL_NAME)
        .cloned()
        .unwrap_or_else(|| mr.name_any())
}
