//! Registry credentials: pull secrets (`kubernetes.io/dockerconfigjson`) and the registry's
//! `WWW-Authenticate` challenge (Basic, or a Bearer token from the realm it names).

use std::collections::BTreeMap;

use base64::{Engine, engine::general_purpose::STANDARD};
use serde::Deserialize;

use crate::{Error, Result};

/// A user name and password (or token) for one registry.
#[derive(Clone, PartialEq, Eq)]
pub struct Credentials {
    /// The user name.
    pub username: String,
    /// The password or token.
    pub password: String,
    /// The pull secret they come from, for messages (empty when they come from elsewhere).
    pub secret: String,
}

impl std::fmt::Debug for Credentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Credentials")
            .field("username", &self.username)
            .field("password", &"<redacted>")
            .field("secret", &self.secret)
            .finish()
    }
}

impl Credentials {
    /// `username` and `password` that come from no pull secret.
    pub fn new(username: impl Into<String>, password: impl Into<String>) -> Credentials {
        Credentials {
            username: username.into(),
            password: password.into(),
            secret: String::new(),
        }
    }

    /// Whose credentials these are, for a message: `user <username> of pull secret <secret>`.
    pub fn describe(&self) -> String {
        match self.secret.as_str() {
            "" => format!("user {}", self.username),
            s => format!("user {} of pull secret {s}", self.username),
        }
    }

    /// The `Authorization: Basic …` value.
    pub fn basic(&self) -> String {
        format!(
            "Basic {}",
            STANDARD.encode(format!("{}:{}", self.username, self.password))
        )
    }
}

/// The credentials of one or more pull secrets, by registry host.
#[derive(Debug, Clone, Default)]
pub struct PullSecrets {
    auths: Vec<(String, Credentials)>,
}

#[derive(Deserialize)]
struct DockerConfig {
    #[serde(default)]
    auths: BTreeMap<String, DockerAuth>,
}

#[derive(Deserialize)]
struct DockerAuth {
    #[serde(default)]
    auth: Option<String>,
    #[serde(default)]
    username: Option<String>,
    #[serde(default)]
    password: Option<String>,
}

impl PullSecrets {
    /// Adds the `.dockerconfigjson` of the Secret `name`. Earlier secrets win for the same registry,
    /// as the kubelet reads `imagePullSecrets` in order.
    pub fn add_dockerconfigjson(&mut self, name: &str, json: &[u8]) -> Result<()> {
        let bad = |reason: String| Error::PullSecret {
            name: name.to_string(),
            reason,
        };
        let config: DockerConfig = serde_json::from_slice(json)
            .map_err(|e| bad(format!("its .dockerconfigjson is not JSON ({e})")))?;
        for (host, a) in config.auths {
            let creds = match (a.username, a.password, a.auth) {
                (Some(username), Some(password), _) => Credentials {
                    username,
                    password,
                    secret: name.to_string(),
                },
                (_, _, Some(auth)) => {
                    let decoded = STANDARD
                        .decode(auth.trim())
                        .map_err(|_| bad(format!("the auth of {host} is not base64")))?;
                    let decoded = String::from_utf8(decoded)
                        .map_err(|_| bad(format!("the auth of {host} is not UTF-8")))?;
                    let (u, p) = decoded
                        .split_once(':')
                        .ok_or_else(|| bad(format!("the auth of {host} is not `user:password`")))?;
                    Credentials {
                        username: u.to_string(),
                        password: p.to_string(),
                        secret: name.to_string(),
                    }
                }
                _ => {
                    return Err(bad(format!(
                        "the entry for {host} has neither auth nor username and password"
                    )));
                }
            };
            self.auths.push((normalize_host(&host), creds));
        }
        Ok(())
    }

    /// The credentials for `registry` (a host with an optional port), if any secret has some.
    pub fn for_registry(&self, registry: &str) -> Option<&Credentials> {
        let want = normalize_host(registry);
        self.auths.iter().find(|(h, _)| *h == want).map(|(_, c)| c)
    }
}

/// A registry key as docker writes it (`https://index.docker.io/v1/`, `ghcr.io`) reduced to its host,
/// with Docker Hub's aliases as `docker.io`.
fn normalize_host(key: &str) -> String {
    let host = key
        .trim_start_matches("https://")
        .trim_start_matches("http://")
        .split('/')
        .next()
        .unwrap_or_default()
        .to_ascii_lowercase();
    match host.as_str() {
        "index.docker.io" | "registry-1.docker.io" | "registry.hub.docker.com" => "docker.io".into(),
        _ => host,
    }
}

/// A `WWW-Authenticate` challenge.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Challenge {
    /// `Basic realm=…`: send the credentials with each request.
    Basic,
    /// `Bearer realm=…,service=…,scope=…`: ask the realm for a token.
    Bearer {
        /// The token endpoint.
        realm: String,
        /// The service to name.
        service: Option<String>,
        /// The scope the registry asked for.
        scope: Option<String>,
    },
}

impl Challenge {
    /// Parses a `WWW-Authenticate` value.
    pub fn parse(value: &str) -> Option<Challenge> {
        let (scheme, params) = value.trim().split_once(' ').unwrap_or((value.trim(), ""));
        if scheme.eq_ignore_ascii_case("basic") {
            return Some(Challenge::Basic);
        }
        if !scheme.eq_ignore_ascii_case("bearer") {
            return None;
        }
        let mut realm = None;
        let mut service = None;
        let mut scope = None;
        for (k, v) in params_of(params) {
            match k.to_ascii_lowercase().as_str() {
                "realm" => realm = Some(v),
                "service" => service = Some(v),
                "scope" => scope = Some(v),
                _ => {}
            }
        }
        Some(Challenge::Bearer {
            realm: realm?,
            service,
            scope,
        })
    }
}

/// `k="v",k2=v2` pairs; commas inside quotes stay.
fn params_of(s: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut rest = s.trim();
    while !rest.is_empty() {
        let Some((k, after)) = rest.split_once('=') else {
            break;
        };
        let (v, next) = match after.strip_prefix('"') {
            Some(q) => match q.split_once('"') {
                Some((v, n)) => (v.to_string(), n),
                None => (q.to_string(), ""),
            },
            None => match after.split_once(',') {
                Some((v, n)) => (v.trim().to_string(), n),
                None => (after.trim().to_string(), ""),
            },
        };
        out.push((k.trim().trim_start_matches(',').trim().to_string(), v));
        rest = next.trim_start_matches(',').trim();
    }
    out
}

/// The token in a token endpoint's answer (`token`, or OAuth2's `access_token`).
pub fn token_of(body: &[u8]) -> Option<String> {
    #[derive(Deserialize)]
    struct Answer {
        token: Option<String>,
        access_token: Option<String>,
    }
    let a: Answer = serde_json::from_slice(body).ok()?;
    a.token.or(a.access_token).filter(|t| !t.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_dockerconfigjson_auth_and_username_password() {
        let mut s = PullSecrets::default();
        let auth = STANDARD.encode("robot:s3cret");
        s.add_dockerconfigjson(
            "a",
            format!(r#"{{"auths":{{"https://index.docker.io/v1/":{{"auth":"{auth}"}},"127.0.0.1:5000":{{"username":"u","password":"p"}}}}}}"#).as_bytes(),
        )
        .expect("parses");
        assert_eq!(
            s.for_registry("docker.io").map(|c| c.username.as_str()),
            Some("robot")
        );
        assert_eq!(
            s.for_registry("127.0.0.1:5000").map(|c| c.password.as_str()),
            Some("p")
        );
        assert!(s.for_registry("ghcr.io").is_none());
        assert_eq!(
            s.for_registry("docker.io").map(Credentials::basic),
            Some(format!("Basic {auth}"))
        );
        assert!(!format!("{:?}", s.for_registry("docker.io")).contains("s3cret"));
        assert_eq!(
            s.for_registry("docker.io").map(Credentials::describe).as_deref(),
            Some("user robot of pull secret a")
        );
        assert_eq!(Credentials::new("u", "p").describe(), "user u");
        let e = s
            .add_dockerconfigjson("b", b"{")
            .expect_err("not json")
            .to_string();
        assert!(
            e.contains("pull secret b") && e.contains("dockerconfigjson"),
            "{e}"
        );
        let e = s
            .add_dockerconfigjson("c", br#"{"auths":{"x.io":{"auth":"bm9jb2xvbg=="}}}"#)
            .expect_err("no colon")
            .to_string();
        assert!(e.contains("user:password"), "{e}");
    }

    #[test]
    fn parses_challenges() {
        assert_eq!(
            Challenge::parse(r#"Basic realm="registry""#),
            Some(Challenge::Basic)
        );
        assert_eq!(
            Challenge::parse(
                r#"Bearer realm="https://auth.example/token",service="reg",scope="repository:a/b:pull,push""#
            ),
            Some(Challenge::Bearer {
                realm: "https://auth.example/token".into(),
                service: Some("reg".into()),
                scope: Some("repository:a/b:pull,push".into()),
            })
        );
        assert_eq!(Challenge::parse("Negotiate"), None);
        assert_eq!(token_of(br#"{"access_token":"t"}"#).as_deref(), Some("t"));
        assert_eq!(token_of(br#"{"token":""}"#), None);
    }
}
