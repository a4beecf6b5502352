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
