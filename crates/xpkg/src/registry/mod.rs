//! The few requests of the OCI distribution protocol a package manager needs, on hyper's client.
//!
//! Why not `oci-client`: it brings reqwest 0.13 and its own tree (and aws-lc-rs unless its TLS
//! features are re-chosen), while an xpkg pull is a manifest HEAD and GET and a blob GET, and pushing
//! (for `cargo xtask` and the tests) three more requests. Written here on hyper 1, hyper-util's client
//! and hyper-rustls with ring and the system's roots, which kube already links, the crate adds no new
//! dependency to the tree. What it covers:
//!
//! - `HEAD /v2/<repo>/manifests/<tag>` resolves a tag to its digest (`Docker-Content-Digest`, else
//!   the digest of a GET), `GET …/manifests/<digest>` and `GET …/blobs/<digest>` check what they
//!   receive against the digest;
//! - pushing: `HEAD`, `POST …/blobs/uploads/` then `PUT <location>?digest=` per blob, `PUT` of the
//!   manifest;
//! - authentication: credentials from pull secrets ([`PullSecrets`]), sent as Basic, or exchanged for
//!   a Bearer token at the realm of the registry's `WWW-Authenticate` challenge;
//! - plain HTTP for loopback registries (`localhost`, `127.0.0.0/8`, `::1`), HTTPS for every other;
//! - Docker Hub's API host (`docker.io` is served at `registry-1.docker.io`).

mod auth;
mod client;

pub use auth::{Challenge, Credentials, PullSecrets};
pub use client::{Client, Manifest};

/// The manifest media types asked for, in order of preference.
pub const MANIFEST_ACCEPT: &str = "application/vnd.oci.image.manifest.v1+json, \
application/vnd.docker.distribution.manifest.v2+json, application/vnd.oci.image.index.v1+json, \
application/vnd.docker.distribution.manifest.list.v2+json";
