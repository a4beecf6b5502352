//! The managed-resource spec and status fields every managed resource shares.
//!
//! Two spec variants exist in Crossplane v2: [`ResourceSpec`] for cluster-scoped (legacy) kinds, with a
//! `deletionPolicy` and connection secrets in any namespace, and [`ManagedResourceSpec`] for namespaced
//! kinds (`*.m.crossplane.io`), without `deletionPolicy` and with connection secrets in the resource's own
//! namespace. Provider kinds flatten one of them into their spec; [`ManagedSpec`] reads either.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::condition::Condition;
use crate::policy::{DeletionPolicy, ManagementAction, ManagementPolicies, default_management_policies};
use crate::reference::{
    LocalSecretReference, ProviderConfigRef, ProviderConfigReference, SecretReference,
    TypedProviderConfigReference,
};

/// Where a connection secret goes, resolved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SecretRef {
    /// The Secret's name.
    pub name: String,
    /// The Secret's namespace.
    pub namespace: String,
}

/// Read access to the spec fields the managed reconciler needs, for either spec variant.
pub trait ManagedSpec {
    /// The referenced ProviderConfig, if any.
    fn provider_config_ref(&self) -> Option<ProviderConfigRef>;
    /// `managementPolicies`.
    fn management_policies(&self) -> &[ManagementAction];
    /// `deletionPolicy`, `None` for kinds without one.
    fn deletion_policy(&self) -> Option<DeletionPolicy>;
    /// The connection secret to write, given the resource's own namespace.
    fn connection_secret(&self, resource_namespace: Option<&str>) -> Option<SecretRef>;
    /// The policies as a decision helper.
    fn policies(&self) -> ManagementPolicies {
        ManagementPolicies::new(self.management_policies(), self.deletion_policy())
    }
}

fn default_cluster_provider_config_ref() -> Option<ProviderConfigReference> {
    Some(ProviderConfigReference {
        name: "default".to_owned(),
        policy: None,
    })
}

fn default_typed_provider_config_ref() -> Option<TypedProviderConfigReference> {
    Some(TypedProviderConfigReference {
        kind: "ClusterProviderConfig".to_owned(),
        name: "default".to_owned(),
    })
}

/// The spec fields of a cluster-scoped (legacy) managed resource.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ResourceSpec {
    /// The Secret the connection details are written to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub write_connection_secret_to_ref: Option<SecretReference>,
    /// The ProviderConfig to use.
    #[serde(
        default = "default_cluster_provider_config_ref",
        skip_serializing_if = "Option::is_none"
    )]
    pub provider_config_ref: Option<ProviderConfigReference>,
    /// What the provider may do to the external resource.
    #[serde(default = "default_management_policies")]
    pub management_policies: Vec<ManagementAction>,
    /// What happens to the external resource when this resource is deleted.
    #[serde(default)]
    pub deletion_policy: DeletionPolicy,
}

impl Default for ResourceSpec {
    fn default() -> Self {
        Self {
            write_connection_secret_to_ref: None,
            provider_config_ref: default_cluster_provider_config_ref(),
            management_policies: default_management_policies(),
            deletion_policy: DeletionPolicy::Delete,
        }
    }
}

impl ManagedSpec for ResourceSpec {
    fn provider_config_ref(&self) -> Option<ProviderConfigRef> {
        self.provider_config_ref.as_ref().map(|r| ProviderConfigRef {
            kind: None,
            name: r.name.clone(),
        })
    }
    fn management_policies(&self) -> &[ManagementAction] {
        &self.management_policies
    }
    fn deletion_policy(&self) -> Option<DeletionPolicy> {
        Some(self.deletion_policy)
    }
    fn connection_secret(&self, _: Option<&str>) -> Option<SecretRef> {
        self.write_connection_secret_to_ref.as_ref().map(|r| SecretRef {
            name: r.name.clone(),
            namespace: r.namespace.clone(),
        })
    }
}

/// The spec fields of a namespaced (v2) managed resource.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ManagedResourceSpec {
    /// The Secret, in this resource's namespace, the connection details are written to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub write_connection_secret_to_ref: Option<LocalSecretReference>,
    /// The ProviderConfig or ClusterProviderConfig to use.
    #[serde(
        default = "default_typed_provider_config_ref",
        skip_serializing_if = "Option::is_none"
    )]
    pub provider_config_ref: Option<TypedProviderConfigReference>,
    /// What the provider may do to the external resource.
    #[serde(default = "default_management_policies")]
    pub management_policies: Vec<ManagementAction>,
}

impl Default for ManagedResourceSpec {
    fn default() -> Self {
        Self {
            write_connection_secret_to_ref: None,
            provider_config_ref: default_typed_provider_config_ref(),
            management_policies: default_management_policies(),
        }
    }
}

impl ManagedSpec for ManagedResourceSpec {
    fn provider_config_ref(&self) -> Option<ProviderConfigRef> {
        self.provider_config_ref.as_ref().map(|r| ProviderConfigRef {
            kind: Some(r.kind.clone()),
            name: r.name.clone(),
        })
    }
    fn management_policies(&self) -> &[ManagementAction] {
        &self.management_policies
    }
    fn deletion_policy(&self) -> Option<DeletionPolicy> {
        None
    }
    fn connection_secret(&self, namespace: Option<&str>) -> Option<SecretRef> {
        let ns = namespace?;
        self.write_connection_secret_to_ref.as_ref().map(|r| SecretRef {
            name: r.name.clone(),
            namespace: ns.to_owned(),
        })
    }
}

/// The status fields every managed resource shares.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ResourceStatus {
    /// Conditions, keyed by type.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["type"]))]
    pub conditions: Vec<Condition>,
    /// The generation last reconciled.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_apply_when_fields_are_missing() {
        let s: ResourceSpec = serde_json::from_str("{}").expect("json");
        assert_eq!(s, ResourceSpec::default());
        assert_eq!(
            s.provider_config_ref().map(|r| r.name),
            Some("default".to_owned())
        );
        let m: ManagedResourceSpec =
            serde_json::from_str(r#"{"writeConnectionSecretToRef":{"name":"s"}}"#).expect("json");
        assert_eq!(
            m.provider_config_ref().and_then(|r| r.kind),
            Some("ClusterProviderConfig".to_owned())
        );
        assert_eq!(
            m.connection_secret(Some("ns")),
            Some(SecretRef {
                name: "s".into(),
                namespace: "ns".into()
            })
        );
        assert!(m.policies().should_delete());
    }
}
