//! Resolving composed resources' kinds to API resources, with a cache.

use std::collections::HashMap;
use std::sync::Mutex;

use kube::core::{ApiResource, GroupVersionKind};
use kube::discovery::Scope;

use crate::error::Error;

/// A kind resolved through discovery.
#[derive(Debug, Clone)]
pub struct Kind {
    /// The API resource.
    pub resource: ApiResource,
    /// Whether it is namespaced.
    pub namespaced: bool,
}

/// Discovery results by `apiVersion` and `kind`.
#[derive(Debug, Default)]
pub struct Discovery {
    cache: Mutex<HashMap<(String, String), Kind>>,
}

impl Discovery {
    /// Resolves `api_version`/`kind`, asking the apiserver on a cache miss.
    pub async fn resolve(&self, client: &kube::Client, api_version: &str, kind: &str) -> Result<Kind, Error> {
        let key = (api_version.to_owned(), kind.to_owned());
        if let Some(k) = self.lock().get(&key) {
            return Ok(k.clone());
        }
        let (group, version) = match api_version.split_once('/') {
            Some((g, v)) => (g, v),
            None => ("", api_version),
        };
        let gvk = GroupVersionKind::gvk(group, version, kind);
        let (resource, caps) = kube::discovery::pinned_kind(client, &gvk).await.map_err(|e| {
            Error::Message(format!(
                "cannot find the API of {api_version}, Kind={kind}: {}",
                crate::error::explain(&e)
            ))
        })?;
        let k = Kind {
            resource,
            namespaced: caps.scope == Scope::Namespaced,
        };
        self.lock().insert(key, k.clone());
        Ok(k)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<(String, String), Kind>> {
        self.cache
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}
