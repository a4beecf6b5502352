//! [`ObjectKind`]: what the Object client needs from either Object kind.

use kube::ResourceExt;
use managed::Managed;

use crate::types::{ObjectFields, cluster, namespaced};

/// Which config an Object uses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ConfigRef {
    /// A cluster-scoped `kubernetes.crossplane.io` ProviderConfig.
    Legacy(String),
    /// A `kubernetes.m.crossplane.io` ProviderConfig in the given namespace.
    Namespaced(String, String),
    /// A `kubernetes.m.crossplane.io` ClusterProviderConfig.
    Cluster(String),
}

impl std::fmt::Display for ConfigRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Legacy(n) => write!(f, "ProviderConfig {n:?}"),
            Self::Namespaced(ns, n) => write!(f, "ProviderConfig {ns}/{n}"),
            Self::Cluster(n) => write!(f, "ClusterProviderConfig {n:?}"),
        }
    }
}

/// Either Object kind.
pub trait ObjectKind: Managed {
    /// The shared fields.
    fn fields(&self) -> &ObjectFields;
    /// Records the object as observed.
    fn set_observed(&mut self, manifest: Option<serde_json::Value>);
    /// The namespace a manifest without one lands in.
    fn default_manifest_namespace(&self) -> Option<String>;
    /// The default `apiVersion` of `dependsOn` references (this group's Object).
    fn default_reference_api_version() -> &'static str;
    /// The config to use, or a message saying why there is none.
    fn config_ref(&self) -> Result<ConfigRef, String>;
}

impl ObjectKind for cluster::Object {
    fn fields(&self) -> &ObjectFields {
        &self.spec.object
    }
    fn set_observed(&mut self, manifest: Option<serde_json::Value>) {
        self.status
            .get_or_insert_with(Default::default)
            .at_provider
            .manifest = manifest;
    }
    fn default_manifest_namespace(&self) -> Option<String> {
        None
    }
    fn default_reference_api_version() -> &'static str {
        "kubernetes.crossplane.io/v1alpha2"
    }
    fn config_ref(&self) -> Result<ConfigRef, String> {
        self.spec
            .resource_spec
            .provider_config_ref
            .as_ref()
            .map(|r| ConfigRef::Legacy(r.name.clone()))
            .ok_or_else(|| "no providerConfigRef set".to_owned())
    }
}

impl ObjectKind for namespaced::Object {
    fn fields(&self) -> &ObjectFields {
        &self.spec.object
    }
    fn set_observed(&mut self, manifest: Option<serde_json::Value>) {
        self.status
            .get_or_insert_with(Default::default)
            .at_provider
            .manifest = manifest;
    }
    fn default_manifest_namespace(&self) -> Option<String> {
        self.namespace()
    }
    fn default_reference_api_version() -> &'static str {
        "kubernetes.m.crossplane.io/v1alpha1"
    }
    fn config_ref(&self) -> Result<ConfigRef, String> {
        let r = self
            .spec
            .resource_spec
            .provider_config_ref
            .as_ref()
            .ok_or_else(|| "no providerConfigRef set".to_owned())?;
        match r.kind.as_str() {
            "ProviderConfig" => Ok(ConfigRef::Namespaced(
                self.namespace().unwrap_or_default(),
                r.name.clone(),
            )),
            "ClusterProviderConfig" => Ok(ConfigRef::Cluster(r.name.clone())),
            other => Err(format!(
                "providerConfigRef.kind {other:?} is not ProviderConfig or ClusterProviderConfig"
            )),
        }
    }
}
