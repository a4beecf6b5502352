//! The test bed's OCI registry: go-containerregistry's `pkg/registry` served by `harness registry` on a
//! loopback port the test bed picks, with blobs on disk under the test bed's directory. Package tests
//! push xpkg images to it and the package manager fetches them from it over plain HTTP (a loopback
//! registry needs no TLS: containerd, ggcr and our fetcher all speak HTTP to loopback hosts).

use serde::{Deserialize, Serialize};

/// Where the test bed's registry listens.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Registry {
    /// `127.0.0.1:<port>`.
    pub host: String,
}

impl Registry {
    /// The registry's `host:port`, as it begins an image reference (`127.0.0.1:5000/org/pkg:v1`).
    pub fn host(&self) -> &str {
        &self.host
    }

    /// The reference of `repository:tag` in this registry, e.g. `127.0.0.1:5000/crossplane-rs/provider-nop:v1`.
    pub fn reference(&self, repository: &str, tag: &str) -> String {
        format!("{}/{repository}:{tag}", self.host)
    }

    /// The registry's base URL, `http://127.0.0.1:<port>`.
    pub fn url(&self) -> String {
        format!("http://{}", self.host)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_references_in_the_registry() {
        let r = Registry {
            host: "127.0.0.1:5000".into(),
        };
        assert_eq!(r.host(), "127.0.0.1:5000");
        assert_eq!(r.reference("org/pkg", "v1"), "127.0.0.1:5000/org/pkg:v1");
        assert_eq!(r.url(), "http://127.0.0.1:5000");
    }
}
