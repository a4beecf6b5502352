//! [`Managed`]: what the reconciler needs from a provider's managed-resource kind.

use std::fmt::Debug;

use apis::{Condition, ManagedSpec};
use kube::{Api, Client, Resource};
use serde::Serialize;
use serde::de::DeserializeOwned;

/// A managed-resource kind. Implement it with [`impl_managed!`](crate::impl_managed) for a kube
/// `CustomResource` whose spec flattens a `resource_spec` ([`apis::ResourceSpec`] or
/// [`apis::ManagedResourceSpec`]) and whose status flattens a `resource_status` ([`apis::ResourceStatus`]).
pub trait Managed:
    Resource<DynamicType = ()> + Clone + Debug + Serialize + DeserializeOwned + Send + Sync + 'static
{
    /// The shared spec fields.
    fn managed_spec(&self) -> &dyn ManagedSpec;
    /// The status conditions.
    fn conditions(&self) -> &[Condition];
    /// The status conditions, creating the status if missing.
    fn conditions_mut(&mut self) -> &mut Vec<Condition>;
    /// Records the generation reconciled in `status.observedGeneration`.
    fn set_observed_generation(&mut self, generation: Option<i64>);
    /// An API for objects of this kind in `namespace` (ignored for cluster-scoped kinds).
    fn api(client: Client, namespace: Option<&str>) -> Api<Self>;
}

/// Implements [`Managed`] for a kube `CustomResource`: `impl_managed!(cluster NopResource)` or
/// `impl_managed!(namespaced Object)`. The spec must have a field `resource_spec` implementing
/// [`apis::ManagedSpec`] and the status a field `resource_status` of type [`apis::ResourceStatus`].
#[macro_export]
macro_rules! impl_managed {
    (@common) => {
        fn managed_spec(&self) -> &dyn $crate::apis::ManagedSpec {
            &self.spec.resource_spec
        }
        fn conditions(&self) -> &[$crate::apis::Condition] {
            self.status
                .as_ref()
                .map(|s| s.resource_status.conditions.as_slice())
                .unwrap_or(&[])
        }
        fn conditions_mut(&mut self) -> &mut Vec<$crate::apis::Condition> {
            &mut self.status.get_or_insert_with(Default::default).resource_status.conditions
        }
        fn set_observed_generation(&mut self, generation: Option<i64>) {
            self.status.get_or_insert_with(Default::default).resource_status.observed_generation = generation;
        }
    };
    (cluster $ty:ty) => {
        impl $crate::Managed for $ty {
            $crate::impl_managed!(@common);
            fn api(client: $crate::kube::Client, _namespace: Option<&str>) -> $crate::kube::Api<Self> {
                $crate::kube::Api::all(client)
            }
        }
    };
    (namespaced $ty:ty) => {
        impl $crate::Managed for $ty {
            $crate::impl_managed!(@common);
            fn api(client: $crate::kube::Client, namespace: Option<&str>) -> $crate::kube::Api<Self> {
                match namespace {
                    Some(ns) => $crate::kube::Api::namespaced(client, ns),
                    None => $crate::kube::Api::all(client),
                }
            }
        }
    };
}

/// Declares a managed kind: its `CustomResource` spec struct (the shared managed-resource fields, flattened,
/// and `forProvider`), with the categories and printer columns every Crossplane managed kind has, and its
/// [`Managed`] impl. The provider needs `kube`, `serde` and `schemars` as dependencies.
///
/// ```text
/// managed::managed_kind!(cluster Role: "postgresql.sql.crossplane.io", "v1alpha1", "Role", "roles", "sql",
///     "A PostgreSQL Role.", RoleSpec(RoleParameters), "RoleStatus");
/// ```
///
/// `cluster` kinds flatten [`apis::ResourceSpec`], `namespaced` ones [`apis::ManagedResourceSpec`]. The
/// status struct must flatten a `resource_status` ([`apis::ResourceStatus`]).
#[macro_export]
macro_rules! managed_kind {
    (cluster $ty:ident: $group:literal, $version:literal, $kind:literal, $plural:literal, $category:literal, $doc:literal, $spec:ident($params:ty), $status:literal) => {
        $crate::managed_kind!(@define [] cluster $ty, ResourceSpec, $group, $version, $kind, $plural, $category, $doc, $spec($params), $status);
    };
    (namespaced $ty:ident: $group:literal, $version:literal, $kind:literal, $plural:literal, $category:literal, $doc:literal, $spec:ident($params:ty), $status:literal) => {
        $crate::managed_kind!(@define [namespaced,] namespaced $ty, ManagedResourceSpec, $group, $version, $kind, $plural, $category, $doc, $spec($params), $status);
    };
    (@define [$($scope:tt)*] $impl_scope:ident $ty:ident, $resource_spec:ident, $group:literal, $version:literal, $kind:literal, $plural:literal, $category:literal, $doc:literal, $spec:ident($params:ty), $status:literal) => {
        #[doc = $doc]
        #[derive(
            ::kube::CustomResource,
            Debug,
            Clone,
            PartialEq,
            ::serde::Serialize,
            ::serde::Deserialize,
            ::schemars::JsonSchema
        )]
        #[kube(
            group = $group,
            version = $version,
            kind = $kind,
            plural = $plural,
            $($scope)*
            status = $status,
            category = "crossplane",
            category = "managed",
            category = $category,
            printcolumn = r#"{"name":"READY","type":"string","jsonPath":".status.conditions[?(@.type=='Ready')].status"}"#,
            printcolumn = r#"{"name":"SYNCED","type":"string","jsonPath":".status.conditions[?(@.type=='Synced')].status"}"#,
            printcolumn = r#"{"name":"EXTERNAL-NAME","type":"string","jsonPath":".metadata.annotations.crossplane\\.io/external-name"}"#,
            printcolumn = r#"{"name":"AGE","type":"date","jsonPath":".metadata.creationTimestamp"}"#
        )]
        #[serde(rename_all = "camelCase")]
        pub struct $spec {
            /// The shared managed-resource fields.
            #[serde(flatten)]
            pub resource_spec: $crate::apis::$resource_spec,
            /// The desired state.
            #[serde(default)]
            pub for_provider: $params,
        }

        $crate::impl_managed!($impl_scope $ty);
    };
}
