//! The registry client: requests, authentication retries and error mapping.

use std::{
    collections::HashMap,
    sync::{Arc, Mutex},
    time::Duration,
};

use bytes::Bytes;
use http::{HeaderMap, HeaderValue, Method, Request, StatusCode, header};
use http_body_util::{BodyExt, Full, Limited};
use hyper_util::{
    client::legacy::{Client as HyperClient, connect::HttpConnector},
    rt::TokioExecutor,
};

use super::{Challenge, Credentials, MANIFEST_ACCEPT, auth::token_of};
use crate::{Error, Image, Reference, Result, image::digest_of};

/// How long one request may take before the registry counts as unreachable.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);
/// How long a blob transfer may take.
const BLOB_TIMEOUT: Duration = Duration::from_secs(300);
/// The largest manifest read.
const MAX_MANIFEST_BYTES: usize = 4 * 1024 * 1024;

type Https = hyper_rustls::HttpsConnector<HttpConnector>;

/// A manifest as the registry sent it.
#[derive(Debug, Clone)]
pub struct Manifest {
    /// Its digest (checked against the bytes).
    pub digest: String,
    /// Its media type (`Content-Type`).
    pub media_type: String,
    /// The bytes.
    pub bytes: Bytes,
}

/// A client for OCI registries. Cheap to clone; tokens are shared between clones.
#[derive(Clone)]
pub struct Client {
    http: HyperClient<Https, Full<Bytes>>,
    /// Bearer tokens by `registry/repository`.
    tokens: Arc<Mutex<HashMap<String, String>>>,
    user_agent: String,
    /// Registry hosts (`host:port`) reached over plain HTTP besides loopback ones.
    plain_http: Arc<Vec<String>>,
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client")
            .field("user_agent", &self.user_agent)
            .finish()
    }
}

/// An answer: status, headers and body.
struct Answer {
    status: StatusCode,
    headers: HeaderMap,
    body: Bytes,
}

impl Client {
    /// A client that trusts the system's CA roots (rustls with ring) and names itself `user_agent`.
    pub fn new(user_agent: &str) -> Result<Client> {
        let tls = hyper_rustls::HttpsConnectorBuilder::new()
            .with_provider_and_native_roots(Arc::new(rustls::crypto::ring::default_provider()))
            .map_err(|e| Error::Build(format!("loading the system's CA roots: {e}")))?
            .https_or_http()
            .enable_http1()
            .build();
        Ok(Client {
            http: HyperClient::builder(TokioExecutor::new()).build(tls),
            tokens: Arc::default(),
            user_agent: user_agent.to_string(),
            plain_http: Arc::default(),
        })
    }

    /// This client, reaching the registries `hosts` (`host:port`, as they begin a reference) over
    /// plain HTTP as well as loopback ones: for a registry on a private address of the machine, such
    /// as a test bed's, which has no certificate.
    pub fn with_plain_http(mut self, hosts: impl IntoIterator<Item = String>) -> Client {
        let mut all: Vec<String> = self.plain_http.iter().cloned().collect();
        all.extend(
            hosts
                .into_iter()
                .map(|h| h.trim().to_string())
                .filter(|h| !h.is_empty()),
        );
        self.plain_http = Arc::new(all);
        self
    }

    /// `http` for loopback registries and those of [`Client::with_plain_http`], else `https`.
    fn scheme(&self, reference: &Reference) -> &'static str {
        if reference.insecure() || self.plain_http.contains(&reference.registry) {
            "http"
        } else {
            "https"
        }
    }

    /// Resolves `reference` to its manifest's digest: the digest it names, or the tag's.
    pub async fn resolve(&self, reference: &Reference, creds: Option<&Credentials>) -> Result<String> {
        if let Some(d) = &reference.digest {
            return Ok(d.clone());
        }
        let url = manifest_url(self.scheme(reference), reference);
        let a = self
            .send(
                reference,
                creds,
                Method::HEAD,
                &url,
                accept(),
                Bytes::new(),
                0,
                REQUEST_TIMEOUT,
            )
            .await?;
        check(reference, &Method::HEAD, &url, &a)?;
        if let Some(d) = a
            .headers
            .get("docker-content-digest")
            .and_then(|v| v.to_str().ok())
            .filter(|d| d.starts_with("sha256:"))
        {
            return Ok(d.to_string());
        }
        // Some registries send no digest header on HEAD: the digest of the manifest itself.
        Ok(self.manifest(reference, creds).await?.digest)
    }

    /// The tags of `reference`'s repository (`GET /v2/<repository>/tags/list`), as the registry lists
    /// them; the package manager picks a dependency's version from these.
    pub async fn tags(&self, reference: &Reference, creds: Option<&Credentials>) -> Result<Vec<String>> {
        #[derive(serde::Deserialize)]
        struct Tags {
            #[serde(default)]
            tags: Option<Vec<String>>,
        }
        let url = format!("{}/tags/list", repo_url(self.scheme(reference), reference));
        let a = self
            .send(
                reference,
                creds,
                Method::GET,
                &url,
                {
                    let mut h = HeaderMap::new();
                    h.insert(header::ACCEPT, HeaderValue::from_static("application/json"));
                    h
                },
                Bytes::new(),
                MAX_MANIFEST_BYTES,
                REQUEST_TIMEOUT,
            )
            .await?;
        check(reference, &Method::GET, &url, &a)?;
        let tags: Tags = serde_json::from_slice(&a.body).map_err(|e| Error::BadContent {
            what: format!("the tag list of {}", reference.source()),
            reason: e.to_string(),
        })?;
        Ok(tags.tags.unwrap_or_default())
    }

    /// The manifest `reference` names (by digest when it has one, which is then checked).
    pub async fn manifest(&self, reference: &Reference, creds: Option<&Credentials>) -> Result<Manifest> {
        let url = manifest_url(self.scheme(reference), reference);
        let a = self
            .send(
                reference,
                creds,
                Method::GET,
                &url,
                accept(),
                Bytes::new(),
                MAX_MANIFEST_BYTES,
                REQUEST_TIMEOUT,
            )
            .await?;
        check(reference, &Method::GET, &url, &a)?;
        let digest = digest_of(&a.body);
        if let Some(want) = &reference.digest
            && *want != digest
        {
            return Err(Error::BadContent {
                what: format!("the manifest of {reference}"),
                reason: format!("its digest is {digest}"),
            });
        }
        let media_type = a
            .headers
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .map(|v| v.split(';').next().unwrap_or(v).trim().to_string())
            .unwrap_or_default();
        Ok(Manifest {
            digest,
            media_type,
            bytes: a.body,
        })
    }

    /// The blob `digest` of `reference`'s repository, at most `limit` bytes, checked against its digest.
    pub async fn blob(
        &self,
        reference: &Reference,
        digest: &str,
        creds: Option<&Credentials>,
        limit: usize,
    ) -> Result<Bytes> {
        let url = format!("{}/blobs/{digest}", repo_url(self.scheme(reference), reference));
        let a = self
            .send(
                reference,
                creds,
                Method::GET,
                &url,
                HeaderMap::new(),
                Bytes::new(),
                limit,
                BLOB_TIMEOUT,
            )
            .await?;
        let r = reference.with_digest(digest);
        check(&r, &Method::GET, &url, &a)?;
        if digest_of(&a.body) != digest {
            return Err(Error::BadContent {
                what: format!("blob {digest} of {}", reference.source()),
                reason: format!("its digest is {}", digest_of(&a.body)),
            });
        }
        Ok(a.body)
    }

    /// Pushes `image` as `reference` (its tag, or its digest): the blobs the registry lacks, then the
    /// manifest. Returns the manifest's digest.
    pub async fn push(
        &self,
        image: &Image,
        reference: &Reference,
        creds: Option<&Credentials>,
    ) -> Result<String> {
        for (d, bytes) in image.blobs() {
            self.push_blob(reference, d.digest().as_ref(), bytes, creds)
                .await?;
        }
        let manifest = image.manifest_bytes()?;
        let media_type = image
            .manifest
            .media_type()
            .as_ref()
            .map(ToString::to_string)
            .unwrap_or_else(|| "application/vnd.oci.image.manifest.v1+json".into());
        self.push_manifest(reference, &media_type, manifest.into(), creds)
            .await
    }

    /// Pushes the raw manifest `bytes` of `media_type` as `reference`. Returns its digest.
    pub async fn push_manifest(
        &self,
        reference: &Reference,
        media_type: &str,
        bytes: Bytes,
        creds: Option<&Credentials>,
    ) -> Result<String> {
        let digest = digest_of(&bytes);
        let url = manifest_url(self.scheme(reference), reference);
        let mut h = HeaderMap::new();
        h.insert(header::CONTENT_TYPE, value(media_type)?);
        let a = self
            .send(
                reference,
                creds,
                Method::PUT,
                &url,
                h,
                bytes,
                MAX_MANIFEST_BYTES,
                REQUEST_TIMEOUT,
            )
            .await?;
        check(reference, &Method::PUT, &url, &a)?;
        Ok(digest)
    }

    /// Uploads one blob unless the registry has it.
    async fn push_blob(
        &self,
        reference: &Reference,
        digest: &str,
        bytes: &[u8],
        creds: Option<&Credentials>,
    ) -> Result<()> {
        let repo = repo_url(self.scheme(reference), reference);
        let head = format!("{repo}/blobs/{digest}");
        let a = self
            .send(
                reference,
                creds,
                Method::HEAD,
                &head,
                HeaderMap::new(),
                Bytes::new(),
                0,
                REQUEST_TIMEOUT,
            )
            .await?;
        if a.status.is_success() {
            return Ok(());
        }
        let start = format!("{repo}/blobs/uploads/");
        let a = self
            .send(
                reference,
                creds,
                Method::POST,
                &start,
                HeaderMap::new(),
                Bytes::new(),
                MAX_MANIFEST_BYTES,
                REQUEST_TIMEOUT,
            )
            .await?;
        check(reference, &Method::POST, &start, &a)?;
        let location = a
            .headers
            .get(header::LOCATION)
            .and_then(|v| v.to_str().ok())
            .ok_or_else(|| Error::Registry {
                method: "POST".into(),
                url: start.clone(),
                status: a.status.as_u16(),
                message: "the answer has no Location to upload to".into(),
            })?;
        let location = if location.starts_with('/') {
            format!("{}{location}", base_url(self.scheme(reference), reference))
        } else {
            location.to_string()
        };
        let sep = if location.contains('?') { '&' } else { '?' };
        let put = format!("{location}{sep}digest={digest}");
        let mut h = HeaderMap::new();
        h.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/octet-stream"),
        );
        let a = self
            .send(
                reference,
                creds,
                Method::PUT,
                &put,
                h,
                Bytes::copy_from_slice(bytes),
                MAX_MANIFEST_BYTES,
                BLOB_TIMEOUT,
            )
            .await?;
        check(reference, &Method::PUT, &put, &a)
    }

    /// Sends a request, answering one authentication challenge: with the cached token, then, on a 401,
    /// with Basic credentials or a token from the challenge's realm.
    #[allow(clippy::too_many_arguments)]
    async fn send(
        &self,
        reference: &Reference,
        creds: Option<&Credentials>,
        method: Method,
        url: &str,
        headers: HeaderMap,
        body: Bytes,
        limit: usize,
        timeout: Duration,
    ) -> Result<Answer> {
        let key = reference.source();
        let cached = self.tokens.lock().ok().and_then(|t| t.get(&key).cloned());
        let auth = cached.map(|t| format!("Bearer {t}"));
        let a = self
            .once(
                reference,
                &method,
                url,
                &headers,
                body.clone(),
                auth.as_deref(),
                limit,
                timeout,
            )
            .await?;
        if a.status != StatusCode::UNAUTHORIZED {
            return Ok(a);
        }
        let challenge = a
            .headers
            .get(header::WWW_AUTHENTICATE)
            .and_then(|v| v.to_str().ok())
            .and_then(Challenge::parse);
        let auth = match challenge {
            Some(Challenge::Basic) => match creds {
                Some(c) => c.basic(),
                None => {
                    return Err(unauthorized(
                        reference,
                        "it asks for credentials and no pull secret has any for it",
                    ));
                }
            },
            Some(Challenge::Bearer {
                realm,
                service,
                scope,
            }) => {
                let push = method != Method::GET && method != Method::HEAD;
                let scope = scope.unwrap_or_else(|| {
                    format!(
                        "repository:{}:{}",
                        reference.repository,
                        if push { "pull,push" } else { "pull" }
                    )
                });
                let token = self
                    .token(reference, &realm, service.as_deref(), &scope, creds)
                    .await?;
                if let Ok(mut t) = self.tokens.lock() {
                    t.insert(key, token.clone());
                }
                format!("Bearer {token}")
            }
            None => {
                return Err(unauthorized(
                    reference,
                    "it answered 401 without a challenge this client understands",
                ));
            }
        };
        let a = self
            .once(
                reference,
                &method,
                url,
                &headers,
                body,
                Some(&auth),
                limit,
                timeout,
            )
            .await?;
        if a.status == StatusCode::UNAUTHORIZED || a.status == StatusCode::FORBIDDEN {
            return Err(unauthorized(reference, &refused(creds, &a)));
        }
        Ok(a)
    }

    /// A token from the Bearer realm, with Basic credentials when there are some.
    async fn token(
        &self,
        reference: &Reference,
        realm: &str,
        service: Option<&str>,
        scope: &str,
        creds: Option<&Credentials>,
    ) -> Result<String> {
        let mut url = format!("{realm}?scope={}", encode(scope));
        if let Some(s) = service {
            url.push_str(&format!("&service={}", encode(s)));
        }
        let auth = creds.map(Credentials::basic);
        let a = self
            .once(
                reference,
                &Method::GET,
                &url,
                &HeaderMap::new(),
                Bytes::new(),
                auth.as_deref(),
                MAX_MANIFEST_BYTES,
                REQUEST_TIMEOUT,
            )
            .await?;
        if !a.status.is_success() {
            let whose = match creds {
                Some(c) if a.status == StatusCode::UNAUTHORIZED || a.status == StatusCode::FORBIDDEN => {
                    format!(" to the credentials of {}", c.describe())
                }
                _ => String::new(),
            };
            return Err(unauthorized(
                reference,
                &format!("its token endpoint {realm} answered {}{whose}", a.status),
            ));
        }
        token_of(&a.body)
            .ok_or_else(|| unauthorized(reference, &format!("its token endpoint {realm} sent no token")))
    }

    /// One request; a failure to connect or a timeout makes the registry unreachable.
    #[allow(clippy::too_many_arguments)]
    async fn once(
        &self,
        reference: &Reference,
        method: &Method,
        url: &str,
        headers: &HeaderMap,
        body: Bytes,
        auth: Option<&str>,
        limit: usize,
        timeout: Duration,
    ) -> Result<Answer> {
        let mut req = Request::builder()
            .method(method.clone())
            .uri(url)
            .header(header::USER_AGENT, &self.user_agent)
            .body(Full::new(body))
            .map_err(|e| Error::InvalidReference {
                reference: reference.to_string(),
                reason: format!("it makes no valid URL ({url}: {e})"),
            })?;
        req.headers_mut().extend(headers.clone());
        if let Some(a) = auth {
            req.headers_mut().insert(header::AUTHORIZATION, value(a)?);
        }
        let unreachable = |message: String| Error::Unreachable {
            registry: reference.registry.clone(),
            message,
        };
        let work = async {
            let resp = self
                .http
                .request(req)
                .await
                .map_err(|e| unreachable(connect_message(&e)))?;
            let (parts, body) = resp.into_parts();
            let body = if *method == Method::HEAD {
                Bytes::new()
            } else {
                Limited::new(body, limit.max(64 * 1024))
                    .collect()
                    .await
                    .map_err(|e| unreachable(format!("reading the answer to {method} {url}: {e}")))?
                    .to_bytes()
            };
            Ok(Answer {
                status: parts.status,
                headers: parts.headers,
                body,
            })
        };
        tokio::time::timeout(timeout, work).await.map_err(|_| {
            unreachable(format!(
                "{method} {url} got no answer within {}s",
                timeout.as_secs()
            ))
        })?
    }
}

/// A connection error's causes, innermost last, in words.
fn connect_message(e: &hyper_util::client::legacy::Error) -> String {
    let mut parts = vec![e.to_string()];
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        let text = s.to_string();
        if parts.last() != Some(&text) {
            parts.push(text);
        }
        source = s.source();
    }
    parts.join(": ")
}

/// Maps an answer's status to this crate's errors: 404 → not found, 401/403 → unauthorized.
fn check(reference: &Reference, method: &Method, url: &str, a: &Answer) -> Result<()> {
    if a.status.is_success() {
        return Ok(());
    }
    match a.status {
        StatusCode::NOT_FOUND => Err(Error::NotFound {
            reference: reference.to_string(),
            message: if *method == Method::HEAD {
                "404 Not Found".into()
            } else {
                registry_message(a)
            },
        }),
        StatusCode::UNAUTHORIZED | StatusCode::FORBIDDEN => {
            Err(unauthorized(reference, &registry_message(a)))
        }
        s => Err(Error::Registry {
            method: method.to_string(),
            url: url.to_string(),
            status: s.as_u16(),
            message: registry_message(a),
        }),
    }
}

/// The messages of the distribution spec's error body (`{"errors":[{"code","message"}]}`), else the
/// status and body as text.
fn registry_message(a: &Answer) -> String {
    #[derive(serde::Deserialize)]
    struct Errors {
        errors: Vec<Entry>,
    }
    #[derive(serde::Deserialize)]
    struct Entry {
        #[serde(default)]
        code: String,
        #[serde(default)]
        message: String,
    }
    if let Ok(e) = serde_json::from_slice::<Errors>(&a.body)
        && !e.errors.is_empty()
    {
        return e
            .errors
            .iter()
            .map(|x| format!("{} {}", x.code, x.message).trim().to_string())
            .collect::<Vec<_>>()
            .join("; ");
    }
    let text = String::from_utf8_lossy(&a.body);
    let text = text.trim();
    if text.is_empty() {
        a.status.to_string()
    } else {
        format!("{}: {}", a.status, text.chars().take(300).collect::<String>())
    }
}

/// What a registry said when it refused the request that answered its challenge: the credentials it
/// was sent (whose they were) and its own words.
fn refused(creds: Option<&Credentials>, a: &Answer) -> String {
    match creds {
        Some(c) => format!(
            "it refused the credentials of {}: {}",
            c.describe(),
            registry_message(a)
        ),
        None => registry_message(a),
    }
}

fn unauthorized(reference: &Reference, message: &str) -> Error {
    Error::Unauthorized {
        registry: reference.registry.clone(),
        repository: reference.repository.clone(),
        message: message.to_string(),
    }
}

fn accept() -> HeaderMap {
    let mut h = HeaderMap::new();
    h.insert(header::ACCEPT, HeaderValue::from_static(MANIFEST_ACCEPT));
    h
}

fn value(v: &str) -> Result<HeaderValue> {
    HeaderValue::from_str(v).map_err(|_| Error::Build(format!("{v:?} is not a valid header value")))
}

/// The registry's base URL with `scheme`; Docker Hub's API host for `docker.io`.
fn base_url(scheme: &str, reference: &Reference) -> String {
    let host = match reference.registry.as_str() {
        "docker.io" | "index.docker.io" => "registry-1.docker.io",
        h => h,
    };
    format!("{scheme}://{host}")
}

fn repo_url(scheme: &str, reference: &Reference) -> String {
    format!("{}/v2/{}", base_url(scheme, reference), reference.repository)
}

fn manifest_url(scheme: &str, reference: &Reference) -> String {
    format!(
        "{}/manifests/{}",
        repo_url(scheme, reference),
        reference.manifest_reference()
    )
}

/// Percent-encodes a query value.
fn encode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_use_http_for_loopback_and_docker_hubs_api_host() {
        let client = Client::new("t")
            .expect("a client")
            .with_plain_http(["10.244.7.1:5000".to_string()]);
        let r = Reference::parse("127.0.0.1:5000/a/b:v1").expect("parses");
        assert_eq!(
            manifest_url(client.scheme(&r), &r),
            "http://127.0.0.1:5000/v2/a/b/manifests/v1"
        );
        let r = Reference::parse("10.244.7.1:5000/a/b:v1").expect("parses");
        assert_eq!(client.scheme(&r), "http");
        let r = Reference::parse("10.244.7.2:5000/a/b:v1").expect("parses");
        assert_eq!(client.scheme(&r), "https");
        let r = Reference::parse("docker.io/a/b:v1").expect("parses");
        assert_eq!(
            manifest_url(client.scheme(&r), &r),
            "https://registry-1.docker.io/v2/a/b/manifests/v1"
        );
        assert_eq!(
            encode("repository:a/b:pull,push"),
            "repository%3Aa%2Fb%3Apull%2Cpush"
        );
    }

    #[test]
    fn registry_errors_are_read_from_the_spec_body() {
        let a = Answer {
            status: StatusCode::NOT_FOUND,
            headers: HeaderMap::new(),
            body: Bytes::from_static(
                br#"{"errors":[{"code":"MANIFEST_UNKNOWN","message":"Unknown manifest"}]}"#,
            ),
        };
        assert_eq!(registry_message(&a), "MANIFEST_UNKNOWN Unknown manifest");
        let r = Reference::parse("127.0.0.1:1/a/b:v9").expect("parses");
        let e = check(&r, &Method::GET, "u", &a).expect_err("404");
        assert!(matches!(e, Error::NotFound { .. }), "{e}");
        assert!(e.to_string().contains("127.0.0.1:1/a/b:v9 does not exist"), "{e}");
    }
}
