//! The package manager's fetch: a reference in, a parsed package and its digest out.
//!
//! 1. Resolve the tag to a digest (`HEAD` of the manifest; a digest reference needs no request).
//! 2. Unless the pull policy is `Always`, a package already in the [`Cache`] under that digest is
//!    returned without another request; with `Never`, a miss is an error.
//! 3. Fetch the manifest by digest. An index (several platforms) yields its only manifest, or its
//!    `linux/amd64` one.
//! 4. Fetch the layer annotated `io.crossplane.xpkg: base`, or every layer when none is (legacy),
//!    read `package.yaml` from it, parse it ([`Package::parse`]) and keep it in the cache.

use std::{
    collections::HashMap,
    io::{Read, Write},
    path::PathBuf,
    sync::{Arc, Mutex},
};

use flate2::{Compression, read::GzDecoder, write::GzEncoder};
use oci_spec::image::{ImageIndex, ImageManifest};

use crate::{
    Error, MAX_PACKAGE_BYTES, Package, Reference, Result,
    image::{has_base_layer, package_layers, package_yaml},
    registry::{Client, PullSecrets},
};

/// When to ask the registry again for a package already in the cache (`packagePullPolicy`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum PullPolicy {
    /// Fetch only what the cache lacks (upstream's default).
    #[default]
    IfNotPresent,
    /// Fetch every time.
    Always,
    /// Never fetch: only what the cache has.
    Never,
}

/// Packages by manifest digest: in memory, and gzipped on disk under a directory when given (one
/// `<hex>.yaml.gz` each, as upstream keeps its cache), so a restart does not fetch again.
#[derive(Debug, Clone, Default)]
pub struct Cache {
    memory: Arc<Mutex<HashMap<String, Arc<Package>>>>,
    dir: Option<PathBuf>,
}

impl Cache {
    /// A cache in memory only.
    pub fn in_memory() -> Cache {
        Cache::default()
    }

    /// A cache in memory, backed by `dir` on disk.
    pub fn on_disk(dir: impl Into<PathBuf>) -> Cache {
        Cache {
            memory: Arc::default(),
            dir: Some(dir.into()),
        }
    }

    /// The package under `digest`, if cached.
    pub fn get(&self, digest: &str) -> Option<Arc<Package>> {
        if let Some(p) = self.memory.lock().ok().and_then(|m| m.get(digest).cloned()) {
            return Some(p);
        }
        let path = self.path(digest)?;
        let gz = std::fs::read(&path).ok()?;
        let mut yaml = Vec::new();
        GzDecoder::new(gz.as_slice())
            .take(MAX_PACKAGE_BYTES)
            .read_to_end(&mut yaml)
            .ok()?;
        // A cache file that no longer parses is a miss; the fetch writes it again.
        let package = Arc::new(Package::parse(&yaml).ok()?);
        if let Ok(mut m) = self.memory.lock() {
            m.insert(digest.to_string(), package.clone());
        }
        Some(package)
    }

    /// Keeps `package` under `digest` (its `package.yaml` is `yaml`).
    pub fn put(&self, digest: &str, yaml: &[u8], package: Arc<Package>) -> Result<()> {
        if let Ok(mut m) = self.memory.lock() {
            m.insert(digest.to_string(), package);
        }
        let (Some(dir), Some(path)) = (&self.dir, self.path(digest)) else {
            return Ok(());
        };
        std::fs::create_dir_all(dir).map_err(Error::io("creating the package cache", dir.display()))?;
        let mut gz = GzEncoder::new(Vec::new(), Compression::default());
        gz.write_all(yaml)
            .and_then(|()| gz.finish())
            .and_then(|bytes| {
                let tmp = path.with_extension("partial");
                std::fs::write(&tmp, bytes)?;
                std::fs::rename(&tmp, &path)
            })
            .map_err(Error::io("writing to the package cache", path.display()))
    }

    fn path(&self, digest: &str) -> Option<PathBuf> {
        let hex = digest.strip_prefix("sha256:")?;
        hex.bytes()
            .all(|b| b.is_ascii_hexdigit())
            .then(|| self.dir.as_ref().map(|d| d.join(format!("{hex}.yaml.gz"))))
            .flatten()
    }
}

/// A fetched package.
#[derive(Debug, Clone)]
pub struct Fetched {
    /// The reference it was fetched by.
    pub reference: Reference,
    /// The manifest digest the reference resolved to (of the index, for a multi-platform image).
    pub digest: String,
    /// The package.
    pub package: Arc<Package>,
    /// Whether it came from the cache.
    pub cached: bool,
}

impl Fetched {
    /// The reference pinned to its digest (`registry/repo@sha256:…`), as the package's image.
    pub fn resolved(&self) -> String {
        format!("{}@{}", self.reference.source(), self.digest)
    }
}

/// Fetches packages from registries, through a [`Cache`].
#[derive(Debug, Clone)]
pub struct Fetcher {
    client: Client,
    cache: Cache,
}

impl Fetcher {
    /// A fetcher with `client` and `cache`.
    pub fn new(client: Client, cache: Cache) -> Fetcher {
        Fetcher { client, cache }
    }

    /// The registry client.
    pub fn client(&self) -> &Client {
        &self.client
    }

    /// The cache.
    pub fn cache(&self) -> &Cache {
        &self.cache
    }

    /// Fetches the package `reference` names (see the module docs), with the credentials `secrets`
    /// have for its registry.
    pub async fn fetch(&self, reference: &str, policy: PullPolicy, secrets: &PullSecrets) -> Result<Fetched> {
        let reference = Reference::parse(reference)?;
        let creds = secrets.for_registry(&reference.registry);
        let digest = self.client.resolve(&reference, creds).await?;
        if policy != PullPolicy::Always
            && let Some(package) = self.cache.get(&digest)
        {
            return Ok(Fetched {
                reference,
                digest,
                package,
                cached: true,
            });
        }
        if policy == PullPolicy::Never {
            return Err(Error::NotCached {
                reference: reference.to_string(),
                digest,
            });
        }
        let pinned = reference.with_digest(&digest);
        let manifest = self.image_manifest(&pinned, creds).await?;
        let name = reference.to_string();
        let wanted = package_layers(&manifest, &name)?;
        let mut layers = Vec::new();
        for i in wanted {
            let layer = &manifest.layers()[i];
            if layer.size() > MAX_PACKAGE_BYTES * 4 {
                return Err(Error::NotAnXpkg {
                    reference: name.clone(),
                    reason: format!(
                        "its layer {} has {} bytes, too many for a package",
                        layer.digest(),
                        layer.size()
                    ),
                });
            }
            let limit = usize::try_from(layer.size()).unwrap_or(usize::MAX);
            layers.push(
                self.client
                    .blob(&pinned, layer.digest().as_ref(), creds, limit)
                    .await?,
            );
        }
        let slices: Vec<&[u8]> = layers.iter().map(|b| b.as_ref()).collect();
        let yaml = package_yaml(&slices, has_base_layer(&manifest), &name)?;
        let package = Arc::new(Package::parse(&yaml)?);
        self.cache.put(&digest, &yaml, package.clone())?;
        Ok(Fetched {
            reference,
            digest,
            package,
            cached: false,
        })
    }

    /// The image manifest at `pinned`, through an index when it names one.
    async fn image_manifest(
        &self,
        pinned: &Reference,
        creds: Option<&crate::registry::Credentials>,
    ) -> Result<ImageManifest> {
        let m = self.client.manifest(pinned, creds).await?;
        let not_image = |reason: String| Error::NotAnXpkg {
            reference: pinned.to_string(),
            reason,
        };
        if m.media_type.contains("index") || m.media_type.contains("manifest.list") {
            let index: ImageIndex = serde_json::from_slice(&m.bytes)
                .map_err(|e| not_image(format!("its index cannot be read ({e})")))?;
            let entries = index.manifests();
            let chosen = match entries.as_slice() {
                [one] => one,
                many => many
                    .iter()
                    .find(|d| {
                        d.platform().as_ref().is_some_and(|p| {
                            p.os().to_string() == "linux" && p.architecture().to_string() == "amd64"
                        })
                    })
                    .ok_or_else(|| {
                        not_image(format!(
                            "its index has {} manifests and none for linux/amd64",
                            many.len()
                        ))
                    })?,
            };
            let inner = pinned.with_digest(chosen.digest().as_ref());
            let m = self.client.manifest(&inner, creds).await?;
            return serde_json::from_slice(&m.bytes)
                .map_err(|e| not_image(format!("its manifest is not an image manifest ({e})")));
        }
        serde_json::from_slice(&m.bytes)
            .map_err(|e| not_image(format!("its manifest is not an image manifest ({e})")))
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn the_disk_cache_survives_a_new_cache() {
        let dir = std::env::temp_dir().join(format!("xpkg-cache-{}", std::process::id()));
        let package = Package::new(
            json!({"apiVersion": "meta.pkg.crossplane.io/v1", "kind": "Provider", "metadata": {"name": "p"}}),
            Vec::new(),
        )
        .expect("package");
        let yaml = package.to_yaml().expect("yaml");
        let digest = format!("sha256:{}", "ab".repeat(32));
        Cache::on_disk(&dir)
            .put(&digest, yaml.as_bytes(), Arc::new(package.clone()))
            .expect("put");
        let fresh = Cache::on_disk(&dir);
        assert_eq!(fresh.get(&digest).as_deref(), Some(&package));
        assert!(fresh.get("sha256:../../etc").is_none());
        assert!(Cache::in_memory().get(&digest).is_none());
        let _ = std::fs::remove_dir_all(&dir);
    }
}
