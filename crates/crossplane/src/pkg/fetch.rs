//! The core's package fetch: `xpkg`'s fetcher with the ImageConfigs applied (a prefix rewrite, a pull
//! secret; [`super::image_config`]), the pull secrets a package names, read from the core's namespace
//! ([`super::pull_secret`]), and its pull policy. One fetcher (and its cache by digest) serves every
//! package and revision controller.
//!
//! As upstream: the rewrite comes first, and the pull secret is the one of the ImageConfig matching
//! the rewritten image.

use apis::pkg::ImageConfig;
use kube::Api;
use kube::api::{DynamicObject, ListParams};
use serde_json::Value;
use xpkg::registry::{Client, PullSecrets};
use xpkg::{Cache, Fetched, Fetcher, PullPolicy, Reference};

use super::image_config::{self, Applied, REASON_PULL_SECRET, REASON_REWRITE};
use super::pull_secret::{self, NamedBy};
use crate::error::Error;

/// Fetches packages for the package manager.
#[derive(Debug, Clone)]
pub struct Source {
    fetcher: Fetcher,
    namespace: String,
}

/// Where an image is fetched from once the ImageConfigs are applied.
#[derive(Debug, Clone)]
pub struct Located {
    /// The image after the prefix rewrite (the original when none applied).
    pub image: String,
    /// The credentials: the package's pull secrets, then the ImageConfig's.
    pub secrets: PullSecrets,
    /// The ImageConfigs applied, in upstream's order (rewrite, then pull secret).
    pub applied: Vec<Applied>,
}

/// A package fetched through the ImageConfigs.
#[derive(Debug, Clone)]
pub struct Resolved {
    /// The package, fetched from [`Resolved::image`].
    pub fetched: Fetched,
    /// The image it was fetched from: `status.resolvedPackage` (`resolvedImage` on a revision).
    pub image: String,
    /// The ImageConfigs applied: `status.appliedImageConfigRefs`.
    pub applied: Vec<Applied>,
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

    /// Fetches `reference` through the ImageConfigs, with the pull policy and pull secrets of `obj`'s
    /// spec (a package or a revision). The error is the sentence a condition shows.
    pub async fn fetch(
        &self,
        client: &kube::Client,
        obj: &DynamicObject,
        reference: &str,
    ) -> Result<Resolved, String> {
        let policy = match obj
            .data
            .pointer("/spec/packagePullPolicy")
            .and_then(Value::as_str)
        {
            Some("Always") => PullPolicy::Always,
            Some("Never") => PullPolicy::Never,
            _ => PullPolicy::IfNotPresent,
        };
        let located = self.locate(client, Some(obj), reference).await?;
        let fetched = self
            .fetcher
            .fetch(&located.image, policy, &located.secrets)
            .await
            .map_err(|e| rewritten(reference, &located, e.to_string()))?;
        Ok(Resolved {
            fetched,
            image: located.image,
            applied: located.applied,
        })
    }

    /// The tags of the repository of `reference` (a dependency's), through the ImageConfigs.
    pub async fn tags(&self, client: &kube::Client, reference: &str) -> Result<Vec<String>, String> {
        let located = self.locate(client, None, reference).await?;
        let parsed = Reference::parse(&located.image).map_err(|e| e.to_string())?;
        let creds = located.secrets.for_registry(&parsed.registry);
        self.client()
            .tags(&parsed, creds)
            .await
            .map_err(|e| rewritten(reference, &located, e.to_string()))
    }

    /// Applies the ImageConfigs to `reference`: the rewrite, then the pull secrets of `obj` (when
    /// given) and of the ImageConfig matching the rewritten image.
    pub async fn locate(
        &self,
        client: &kube::Client,
        obj: Option<&DynamicObject>,
        reference: &str,
    ) -> Result<Located, String> {
        let configs = image_configs(client).await?;
        let mut applied = Vec::new();
        let image = match image_config::rewrite(&configs, reference) {
            Some((name, image)) => {
                applied.push(Applied {
                    name,
                    reason: REASON_REWRITE,
                });
                image
            }
            None => reference.to_string(),
        };
        let mut secrets = PullSecrets::default();
        for name in obj.map(package_pull_secrets).unwrap_or_default() {
            pull_secret::add(client, &self.namespace, &name, NamedBy::Package, &mut secrets).await?;
        }
        if let Some((config, name)) = image_config::pull_secret(&configs, &image) {
            let by = NamedBy::ImageConfig(&config);
            pull_secret::add(client, &self.namespace, &name, by, &mut secrets).await?;
            applied.push(Applied {
                name: config,
                reason: REASON_PULL_SECRET,
            });
        }
        Ok(Located {
            image,
            secrets,
            applied,
        })
    }
}

/// Every ImageConfig. The error is a sentence.
async fn image_configs(client: &kube::Client) -> Result<Vec<ImageConfig>, String> {
    let api: Api<ImageConfig> = Api::all(client.clone());
    api.list(&ListParams::default())
        .await
        .map(|l| l.items)
        .map_err(|e| format!("cannot list ImageConfigs: {}", crate::error::explain(&e)))
}

/// The names `spec.packagePullSecrets` of `obj` gives.
fn package_pull_secrets(obj: &DynamicObject) -> Vec<String> {
    obj.data
        .pointer("/spec/packagePullSecrets")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(|s| s.get("name").and_then(Value::as_str).map(str::to_string))
                .filter(|s| !s.is_empty())
                .collect()
        })
        .unwrap_or_default()
}

/// A fetch error of a rewritten image says where it was rewritten to, and by which ImageConfig.
fn rewritten(reference: &str, located: &Located, error: String) -> String {
    match located.applied.iter().find(|a| a.reason == REASON_REWRITE) {
        Some(a) if located.image != reference => format!(
            "{error} (ImageConfig {} rewrote {reference} to {})",
            a.name, located.image
        ),
        _ => error,
    }
}
