//! The test bed's OCI registry: go-containerregistry's `pkg/registry` served by `harness registry` on a
//! loopback port the test bed picks, with blobs on disk under the test bed's directory. Package tests
//! push xpkg images to it and the package manager fetches them from it over plain HTTP (a loopback
//! registry needs no TLS: containerd, ggcr and our fetcher all speak HTTP to loopback hosts).
//!
//! The same registry (the same blobs and manifests) is also served on a second port that requires HTTP
//! Basic authentication with a user and password the test bed picks ([`Authenticated`]), as a
//! distribution registry with an htpasswd file does: without them, or with a wrong password, every
//! request is answered 401 with `WWW-Authenticate: Basic realm="..."`.

use serde::{Deserialize, Serialize};

/// Where the test bed's registry listens.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Registry {
    /// `127.0.0.1:<port>`.
    pub host: String,
    /// The same registry behind Basic authentication (absent in the state of a test bed started before
    /// it had one).
    #[serde(default)]
    pub authenticated: Option<Authenticated>,
}

/// The test bed's registry behind HTTP Basic authentication.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Authenticated {
    /// `127.0.0.1:<port>`.
    pub host: String,
    /// The user name it accepts.
    pub username: String,
    /// The password it accepts.
    pub password: String,
}

impl std::fmt::Debug for Authenticated {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Authenticated")
            .field("host", &self.host)
            .field("username", &self.username)
            .field("password", &"<redacted>")
            .finish()
    }
}

/// The reference of `repository:tag` in the registry at `host`.
fn reference(host: &str, repository: &str, tag: &str) -> String {
    format!("{host}/{repository}:{tag}")
}

impl Registry {
    /// The registry's `host:port`, as it begins an image reference (`127.0.0.1:5000/org/pkg:v1`).
    pub fn host(&self) -> &str {
        &self.host
    }

    /// The reference of `repository:tag` in this registry, e.g. `127.0.0.1:5000/crossplane-rs/provider-nop:v1`.
    pub fn reference(&self, repository: &str, tag: &str) -> String {
        reference(&self.host, repository, tag)
    }

    /// The registry's base URL, `http://127.0.0.1:<port>`.
    pub fn url(&self) -> String {
        format!("http://{}", self.host)
    }
}

impl Authenticated {
    /// The registry's `host:port`, as it begins an image reference.
    pub fn host(&self) -> &str {
        &self.host
    }

    /// The reference of `repository:tag` in this registry.
    pub fn reference(&self, repository: &str, tag: &str) -> String {
        reference(&self.host, repository, tag)
    }

    /// The `.dockerconfigjson` of a `kubernetes.io/dockerconfigjson` Secret for this registry with
    /// `username` and `password` (pass [`Authenticated::username`] and [`Authenticated::password`] for
    /// credentials it accepts), as `kubectl create secret docker-registry` writes it.
    pub fn docker_config_json(&self, username: &str, password: &str) -> String {
        use base64::{Engine, engine::general_purpose::STANDARD};
        let auth = STANDARD.encode(format!("{username}:{password}"));
        serde_json::json!({"auths": {self.host.clone(): {
            "username": username, "password": password, "auth": auth,
        }}})
        .to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_references_in_the_registry() {
        let r = Registry {
            host: "127.0.0.1:5000".into(),
            authenticated: None,
        };
        assert_eq!(r.host(), "127.0.0.1:5000");
        assert_eq!(r.reference("org/pkg", "v1"), "127.0.0.1:5000/org/pkg:v1");
        assert_eq!(r.url(), "http://127.0.0.1:5000");
    }

    #[test]
    fn writes_a_docker_config_for_the_authenticated_registry() {
        let a = Authenticated {
            host: "127.0.0.1:5001".into(),
            username: "robot".into(),
            password: "s3cret".into(),
        };
        assert_eq!(a.reference("org/pkg", "v1"), "127.0.0.1:5001/org/pkg:v1");
        let config: serde_json::Value =
            serde_json::from_str(&a.docker_config_json("robot", "s3cret")).expect("JSON");
        let entry = &config["auths"]["127.0.0.1:5001"];
        assert_eq!(entry["username"], "robot");
        assert_eq!(entry["auth"], "cm9ib3Q6czNjcmV0");
        assert!(!format!("{a:?}").contains("s3cret"));
        // A state written before the authenticated registry existed still reads.
        let old: Registry = serde_json::from_str(r#"{"host":"127.0.0.1:5000"}"#).expect("reads");
        assert_eq!(old.authenticated, None);
    }
}
