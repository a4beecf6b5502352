//! Which ProviderConfig a managed resource uses, and fetching it. A cluster-scoped (legacy) resource
//! names a cluster-scoped `ProviderConfig`; a namespaced (v2) one names a `ProviderConfig` in its own
//! namespace or a `ClusterProviderConfig`.

use std::fmt::{self, Debug, Display};

use kube::{Api, Client, Resource, ResourceExt};
use serde::de::DeserializeOwned;

use crate::external::ExternalError;
use crate::resource::Managed;

/// A reference to one ProviderConfig of a provider.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum ConfigRef {
    /// A `ProviderConfig` of the cluster-scoped group.
    Legacy(String),
    /// A `ProviderConfig` of the namespaced group, in the given namespace (namespace, name).
    Namespaced(String, String),
    /// A `ClusterProviderConfig` of the namespaced group.
    Cluster(String),
}

impl Display for ConfigRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Legacy(n) => write!(f, "ProviderConfig {n:?}"),
            Self::Namespaced(ns, n) => write!(f, "ProviderConfig {ns}/{n}"),
            Self::Cluster(n) => write!(f, "ClusterProviderConfig {n:?}"),
        }
    }
}

/// A ProviderConfig kind whose spec carries the provider's config.
pub trait ProviderConfigResource:
    Resource<DynamicType = ()> + Clone + Debug + DeserializeOwned + Send + Sync + 'static
{
    /// The provider's config.
    type Config;
    /// Takes the config out of the object.
    fn into_config(self) -> Self::Config;
}

/// Implements [`ProviderConfigResource`] for ProviderConfig kinds whose spec flattens the config into
/// a field `config`: `impl_provider_config!(ProviderConfigSpec: ProviderConfig, ClusterProviderConfig)`.
#[macro_export]
macro_rules! impl_provider_config {
    ($config:ty: $($ty:ty),+ $(,)?) => {
        $(
            impl $crate::ProviderConfigResource for $ty {
                type Config = $config;
                fn into_config(self) -> $config {
                    self.spec.config
                }
            }
        )+
    };
}

impl ConfigRef {
    /// The config `mr` names, or a message saying why it names none.
    pub fn of<K: Managed>(mr: &K) -> Result<Self, String> {
        let r = mr
            .managed_spec()
            .provider_config_ref()
            .ok_or_else(|| "no providerConfigRef set".to_owned())?;
        match r.kind.as_deref() {
            None => Ok(Self::Legacy(r.name)),
            Some("ProviderConfig") => Ok(Self::Namespaced(mr.namespace().unwrap_or_default(), r.name)),
            Some("ClusterProviderConfig") => Ok(Self::Cluster(r.name)),
            Some(other) => Err(format!(
                "providerConfigRef.kind {other:?} is not ProviderConfig or ClusterProviderConfig"
            )),
        }
    }

    /// Reads the config: `Legacy`, `Pc` and `Cpc` are the provider's legacy `ProviderConfig`,
    /// namespaced `ProviderConfig` and `ClusterProviderConfig`. Returns the config and, for a namespaced
    /// `ProviderConfig`, its namespace (where the Secrets it names live).
    pub async fn fetch<Legacy, Pc, Cpc>(
        &self,
        client: Client,
    ) -> Result<(Legacy::Config, Option<String>), ExternalError>
    where
        Legacy: ProviderConfigResource,
        Pc: ProviderConfigResource<Config = Legacy::Config, Scope = kube::core::NamespaceResourceScope>,
        Cpc: ProviderConfigResource<Config = Legacy::Config>,
    {
        let missing = || {
            ExternalError::new(format!(
                "cannot get {self}: not found; create it, or point spec.providerConfigRef at one that exists"
            ))
        };
        let wrap = |e: kube::Error| ExternalError::wrap(format!("cannot get {self}"), e);
        match self {
            Self::Legacy(name) => {
                let pc = Api::<Legacy>::all(client).get_opt(name).await.map_err(wrap)?;
                Ok((pc.ok_or_else(missing)?.into_config(), None))
            }
            Self::Namespaced(ns, name) => {
                let pc = Api::<Pc>::namespaced(client, ns)
                    .get_opt(name)
                    .await
                    .map_err(wrap)?;
                Ok((pc.ok_or_else(missing)?.into_config(), Some(ns.clone())))
            }
            Self::Cluster(name) => {
                let pc = Api::<Cpc>::all(client).get_opt(name).await.map_err(wrap)?;
                Ok((pc.ok_or_else(missing)?.into_config(), None))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn display_names_kind_and_place() {
        assert_eq!(ConfigRef::Legacy("a".into()).to_string(), r#"ProviderConfig "a""#);
        assert_eq!(
            ConfigRef::Namespaced("ns".into(), "a".into()).to_string(),
            "ProviderConfig ns/a"
        );
        assert_eq!(
            ConfigRef::Cluster("a".into()).to_string(),
            r#"ClusterProviderConfig "a""#
        );
    }
}
