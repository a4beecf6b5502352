//! The core's package fetch: `xpkg`'s fetcher with the pull secrets a package names, read from the
//! core's namespace, and its pull policy. One fetcher (and its cache by digest) serves every package
//! and revision controller.

use k8s_openapi::api::core::v1::Secret;
use kube::Api;
use kube::api::DynamicObject;
use serde_json::Value;
use xpkg::registry::{Client, PullSecrets};
use xpkg::{Cache, Fetched, Fetcher, PullPolicy};

use crate::error::Error;

/// Fetches packages for the package manager.
#[derive(Debug, Clone)]
pub struct Source {
    fetcher: Fetcher,
    namespace: String,
}

impl Source {
    /// A source with an in-memory cache whose pull secrets live in `namespace`, reaching the registries
    /// `plain_http` (and loopback ones) over plain HTTP.
    pub fn new(user_agent: &str, namespace: &str, plain_http: &[String]) -> Result<Source, Error> {
        let client = Client::new(user_agent)
            .map_err(|e| Error::Message(e.to_string()))?
            .with_plain_http(plain_http.iter().cloned());
        Ok(Source {
            fetcher: Fetcher::new(client, Cache::in_memory()),
            namespace: namespace.to_string(),
        })
    }

    /// The registry client.
    pub fn client(&self) -> &Client {
        self.fetcher.client()
    }

    /// Fetches `reference` with the pull policy and pull secrets of `obj`'s spec (a package or a
    /// revision). The error is the sentence a condition shows.
    pub async fn fetch(
        &self,
        client: &kube::Client,
        obj: &DynamicObject,
        reference: &str,
    ) -> Result<Fetched, String> {
        let policy = match obj
            .data
            .pointer("/spec/packagePullPolicy")
            .and_then(Value::as_str)
        {
            Some("Always") => PullPolicy::Always,
            Some("Never") => PullPolicy::Never,
            _ => PullPolicy::IfNotPresent,
        };
        let secrets = self.pull_secrets(client, obj).await?;
        self.fetcher
            .fetch(reference, policy, &secrets)
            .await
            .map_err(|e| e.to_string())
    }

    /// The credentials of the Secrets `spec.packagePullSecrets` names.
    pub async fn pull_secrets(
        &self,
        client: &kube::Client,
        obj: &DynamicObject,
    ) -> Result<PullSecrets, String> {
        let mut secrets = PullSecrets::default();
        let names: Vec<String> = obj
            .data
            .pointer("/spec/packagePullSecrets")
            .and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(|s| s.get("name").and_then(Value::as_str).map(str::to_string))
                    .filter(|s| !s.is_empty())
                    .collect()
            })
            .unwrap_or_default();
        let api: Api<Secret> = Api::namespaced(client.clone(), &self.namespace);
        for name in names {
            let secret = api.get(&name).await.map_err(|e| {
                format!(
                    "cannot read the pull secret {}/{name}: {}",
                    self.namespace,
                    crate::error::explain(&e)
                )
            })?;
            let data = secret
                .data
                .as_ref()
                .and_then(|d| d.get(".dockerconfigjson"))
                .map(|b| b.0.clone())
                .unwrap_or_default();
            secrets
                .add_dockerconfigjson(&name, &data)
                .map_err(|e| e.to_string())?;
        }
        Ok(secrets)
    }
}
