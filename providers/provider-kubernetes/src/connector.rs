//! Connecting an Object to its target cluster: read the ProviderConfig, then use the provider's own
//! identity (`InjectedIdentity`: this cluster, through the term's fenced client) or a kubeconfig from a
//! Secret (`Secret`: a new client, fenced by the same term). Kubeconfig clients are cached per Secret
//! version; API discovery results are cached per target and kind. Kubeconfig clients send the
//! replica's user agent (`<binary>/<version> (<identity>)`), as its own clients do, so that the target
//! cluster's audit log tells which replica wrote.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use apis::CredentialsSource;
use k8s_openapi::api::core::v1::Secret;
use kube::api::ApiResource;
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Api, ResourceExt};
use managed::{ConfigRef, ExternalConnector, ExternalError};
use manager::Fence;

use crate::client::ObjectClient;
use crate::object::ObjectKind;
use crate::types::{ProviderConfigSpec, cluster, namespaced};

/// (target, apiVersion, kind).
type DiscoveryKey = (String, String, String);

/// Discovery results: (target, apiVersion, kind) → (resource, namespaced).
#[derive(Debug, Default)]
pub struct DiscoveryCache {
    entries: Mutex<HashMap<DiscoveryKey, (ApiResource, bool)>>,
}

impl DiscoveryCache {
    /// A cached entry.
    pub fn get(&self, target: &str, api_version: &str, kind: &str) -> Option<(ApiResource, bool)> {
        let map = self
            .entries
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        map.get(&(target.to_owned(), api_version.to_owned(), kind.to_owned()))
            .cloned()
    }

    /// Caches an entry.
    pub fn put(&self, target: &str, api_version: &str, kind: &str, value: (ApiResource, bool)) {
        let mut map = self
            .entries
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        map.insert(
            (target.to_owned(), api_version.to_owned(), kind.to_owned()),
            value,
        );
    }
}

/// Connects Objects of either kind. Clones share their caches.
#[derive(Clone, Default)]
pub struct ObjectConnector {
    clients: Arc<Mutex<HashMap<String, kube::Client>>>,
    discovery: Arc<DiscoveryCache>,
    user_agent: Option<http::HeaderValue>,
    sanitize_secrets: bool,
}

impl ObjectConnector {
    /// A connector with empty caches.
    pub fn new() -> Self {
        Self::default()
    }

    /// Kubeconfig clients send `user_agent` (see `manager::config::client::user_agent`) instead of kube's.
    /// A user agent that is not a valid header value is an error that names it.
    pub fn with_user_agent(mut self, user_agent: &str) -> Result<Self, http::header::InvalidHeaderValue> {
        self.user_agent = Some(http::HeaderValue::from_str(user_agent)?);
        Ok(self)
    }

    /// With `on`, an observed Secret's values are redacted in `status.atProvider.manifest`
    /// (upstream's `--sanitize-secrets`).
    pub fn with_sanitized_secrets(mut self, on: bool) -> Self {
        self.sanitize_secrets = on;
        self
    }

    async fn kubeconfig_client(
        &self,
        local: &kube::Client,
        spec: &ProviderConfigSpec,
        config_ns: Option<&str>,
    ) -> Result<(String, kube::Client), ExternalError> {
        let sref = spec
            .credentials
            .secret_ref
            .as_ref()
            .ok_or_else(|| ExternalError::new("credentials source Secret needs credentials.secretRef"))?;
        let ns = sref
            .namespace
            .as_deref()
            .or(config_ns)
            .ok_or_else(|| ExternalError::new("credentials.secretRef.namespace is required"))?;
        let shown = format!("{ns}/{}", sref.name);
        let secret = Api::<Secret>::namespaced(local.clone(), ns)
            .get_opt(&sref.name)
            .await
            .map_err(|e| ExternalError::wrap(format!("cannot get credentials Secret {shown}"), e))?
            .ok_or_else(|| ExternalError::new(format!("cannot get credentials Secret {shown}: not found")))?;
        let key = format!(
            "{shown}/{}@{}",
            sref.key,
            secret.resource_version().unwrap_or_default()
        );
        if let Some(c) = self
            .clients
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .get(&key)
        {
            return Ok((key, c.clone()));
        }
        let bytes = secret
            .data
            .as_ref()
            .and_then(|d| d.get(&sref.key))
            .ok_or_else(|| {
                ExternalError::new(format!("credentials Secret {shown} has no key {:?}", sref.key))
            })?;
        let text = std::str::from_utf8(&bytes.0).map_err(|_| {
            ExternalError::new(format!(
                "credentials Secret {shown} key {:?} is not UTF-8",
                sref.key
            ))
        })?;
        let kc = Kubeconfig::from_yaml(text)
            .map_err(|e| ExternalError::wrap(format!("cannot parse the kubeconfig in Secret {shown}"), e))?;
        let mut config = kube::Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default())
            .await
            .map_err(|e| ExternalError::wrap(format!("cannot use the kubeconfig in Secret {shown}"), e))?;
        // Writes are fenced per attempt; kube's own retry would resend one past the fence.
        config.default_retry = false;
        if let Some(ua) = &self.user_agent {
            config
                .headers
                .retain(|(name, _)| name != http::header::USER_AGENT);
            config.headers.push((http::header::USER_AGENT, ua.clone()));
        }
        let client = kube::Client::try_from(config)
            .map_err(|e| ExternalError::wrap("cannot build a client for the target cluster", e))?;
        self.clients
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .insert(key.clone(), client.clone());
        Ok((key, client))
    }
}

impl<K: ObjectKind> ExternalConnector<K> for ObjectConnector {
    type Client = ObjectClient;

    async fn connect(
        &self,
        local: &kube::Client,
        fence: &Fence,
        mr: &K,
    ) -> Result<ObjectClient, ExternalError> {
        let r = ConfigRef::of(mr).map_err(ExternalError::new)?;
        let (spec, config_ns) = r
            .fetch::<cluster::ProviderConfig, namespaced::ProviderConfig, namespaced::ClusterProviderConfig>(
                local.clone(),
            )
            .await?;
        let (target_key, target) = match spec.credentials.source {
            CredentialsSource::InjectedIdentity => ("local".to_owned(), local.clone()),
            CredentialsSource::Secret => {
                let (key, client) = self.kubeconfig_client(local, &spec, config_ns.as_deref()).await?;
                // The target cluster's writes pass the term's fence too.
                (key, manager::fence_client(client, fence))
            }
            other => {
                return Err(ExternalError::new(format!(
                    "credentials source {other:?} is not supported (use InjectedIdentity or Secret)"
                )));
            }
        };
        Ok(
            ObjectClient::new(local.clone(), target, target_key, self.discovery.clone())
                .sanitizing_secrets(self.sanitize_secrets),
        )
    }
}
