//! Kubernetes clients: one for controllers and one, with its own connection pool, for Lease traffic.
//!
//! Both carry the user agent `<binary>/<version> (<identity>)`, so the apiserver's audit log tells replicas
//! apart. The Lease client is built from its own [`kube::Config`] copy, so it has its own hyper connection
//! pool: a controller that saturates its connections cannot delay a renewal. Per-request timeouts for Lease
//! requests belong to the elector (it knows the renew deadline), so none is set here; a read timeout on the
//! whole client would also cut the standbys' Lease watch.

use std::path::Path;

use http::{HeaderValue, header::USER_AGENT};
use kube::config::{KubeConfigOptions, Kubeconfig};

use crate::fence::Fence;
use crate::fence::gate::FenceLayer;
use crate::metrics::rest::{RestClientMetrics, host_of};

/// A client could not be configured or built.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// The explicit `--kubeconfig` could not be read.
    #[error("cannot read kubeconfig {path}: {source}")]
    ReadKubeconfig {
        /// The file.
        path: String,
        /// Why.
        source: kube::config::KubeconfigError,
    },
    /// The kubeconfig was read but is not usable.
    #[error("cannot use kubeconfig {path}: {source}")]
    Kubeconfig {
        /// The file.
        path: String,
        /// Why.
        source: kube::config::KubeconfigError,
    },
    /// Neither KUBECONFIG, ~/.kube/config nor the in-cluster config worked.
    #[error("cannot find a Kubernetes config (tried KUBECONFIG, ~/.kube/config and in-cluster): {0}")]
    Infer(#[source] kube::config::InferConfigError),
    /// The user agent is not a valid header value.
    #[error("invalid user agent {0:?}")]
    UserAgent(String),
    /// The client could not be built from the config.
    #[error("cannot build the Kubernetes client: {0}")]
    Build(#[source] kube::Error),
}

/// Who this process is, for the user agent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BinaryInfo {
    /// The binary's name, e.g. `provider-nop`.
    pub name: &'static str,
    /// Its version, e.g. `0.1.0`.
    pub version: &'static str,
}

/// `<binary>/<version> (<identity>)`.
pub fn user_agent(binary: &BinaryInfo, identity: &str) -> String {
    format!("{}/{} ({identity})", binary.name, binary.version)
}

/// The two clients of a manager.
#[derive(Clone)]
pub struct Clients {
    /// For controllers and caches.
    pub main: kube::Client,
    /// For the elector only: its own connection pool.
    pub lease: kube::Client,
    /// The config both were built from (user agent included).
    pub config: kube::Config,
}

impl Clients {
    /// Loads the config from `kubeconfig` (or infers it) and the Lease config from `lease_kubeconfig`
    /// (or uses the same), sets the user agent on both, and builds the clients.
    pub async fn new(
        kubeconfig: Option<&Path>,
        lease_kubeconfig: Option<&Path>,
        user_agent: &str,
    ) -> Result<Self, ClientError> {
        let ua =
            HeaderValue::from_str(user_agent).map_err(|_| ClientError::UserAgent(user_agent.to_owned()))?;
        let with_ua = |mut config: kube::Config| {
            config.headers.retain(|(name, _)| name != USER_AGENT);
            config.headers.push((USER_AGENT, ua.clone()));
            config
        };
        let config = with_ua(load_config(kubeconfig).await?);
        let lease_config = match lease_kubeconfig {
            Some(path) => with_ua(load_config(Some(path)).await?),
            None => config.clone(),
        };
        Self::from_configs(config, lease_config)
    }

    /// Builds both clients from one config; each gets its own connection pool. Needs a tokio runtime.
    pub fn from_config(config: kube::Config) -> Result<Self, ClientError> {
        Self::from_configs(config.clone(), config)
    }

    /// Builds the main client from `config` and the Lease client from `lease_config`, each with its own
    /// connection pool. Needs a tokio runtime.
    ///
    /// kube's own retry of 429/503/504 responses is turned off on both: a retry inside the client would
    /// send a write again without passing the fence, possibly after the term ended (an etcd stall can
    /// answer 504 for seconds). Controllers retry through their own backoff, which checks the fence
    /// each time, and the elector retries on its own schedule, as client-go's does.
    pub fn from_configs(
        mut config: kube::Config,
        mut lease_config: kube::Config,
    ) -> Result<Self, ClientError> {
        config.default_retry = false;
        lease_config.default_retry = false;
        let main = kube::Client::try_from(config.clone()).map_err(ClientError::Build)?;
        let lease = kube::Client::try_from(lease_config).map_err(ClientError::Build)?;
        Ok(Self { main, lease, config })
    }
}

/// A client for one term's work: the main config, with a [`FenceLayer`] checking `fence` under kube's
/// request buffer, so a write that waited in the buffer past the end of the term is not sent. Its own
/// connection pool ends with the term.
/// A [`RestClientLayer`](crate::metrics::rest::RestClientLayer) under the fence counts the requests sent
/// in `rest_client_requests_total`.
pub(crate) fn term_client(
    config: &kube::Config,
    fence: &Fence,
    rest: &RestClientMetrics,
) -> Result<kube::Client, ClientError> {
    let mut config = config.clone();
    config.default_retry = false;
    let host = host_of(&config.cluster_url);
    Ok(kube::client::ClientBuilder::try_from(config)
        .map_err(ClientError::Build)?
        .with_layer(&rest.layer(host))
        .with_layer(&FenceLayer::new(fence.clone()))
        .build())
}

async fn load_config(kubeconfig: Option<&Path>) -> Result<kube::Config, ClientError> {
    let Some(path) = kubeconfig else {
        return kube::Config::infer().await.map_err(ClientError::Infer);
    };
    let shown = path.display().to_string();
    let kc = Kubeconfig::read_from(path).map_err(|source| ClientError::ReadKubeconfig {
        path: shown.clone(),
        source,
    })?;
    kube::Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default())
        .await
        .map_err(|source| ClientError::Kubeconfig { path: shown, source })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn user_agent_names_binary_version_and_identity() {
        let b = BinaryInfo {
            name: "provider-nop",
            version: "0.1.0",
        };
        assert_eq!(
            user_agent(&b, "provider-nop-7d9f-x2k4"),
            "provider-nop/0.1.0 (provider-nop-7d9f-x2k4)"
        );
    }
}
