//! Image references as packages name them: `<registry host>/<repository>[:<tag>][@sha256:<digest>]`.
//!
//! Crossplane v2 demands fully qualified references (its `--registry` default was removed), so a
//! reference without a registry host is refused rather than read as Docker Hub.

use std::fmt;

use crate::{Error, Result};

/// A parsed image reference.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Reference {
    /// The registry host, with its port if any (`127.0.0.1:5000`, `xpkg.crossplane.io`).
    pub registry: String,
    /// The repository path (`crossplane-contrib/provider-nop`).
    pub repository: String,
    /// The tag, if given.
    pub tag: Option<String>,
    /// The digest (`sha256:<hex>`), if given.
    pub digest: Option<String>,
}

impl Reference {
    /// Parses `value`. A reference needs a registry host and a tag or a digest.
    pub fn parse(value: &str) -> Result<Reference> {
        let bad = |reason: &str| Error::InvalidReference {
            reference: value.to_string(),
            reason: reason.to_string(),
        };
        if value.is_empty() {
            return Err(bad("it is empty"));
        }
        if value.contains("://") {
            return Err(bad("it has a URL scheme"));
        }
        let (rest, digest) = match value.split_once('@') {
            Some((r, d)) => {
                let hex = d
                    .strip_prefix("sha256:")
                    .ok_or_else(|| bad("its digest is not `sha256:<64 hex digits>`"))?;
                if hex.len() != 64
                    || !hex
                        .bytes()
                        .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase())
                {
                    return Err(bad("its digest is not `sha256:<64 hex digits>`"));
                }
                (r, Some(d.to_string()))
            }
            None => (value, None),
        };
        let (registry, path) = rest
            .split_once('/')
            .ok_or_else(|| bad("it names no registry host"))?;
        if !(registry.contains('.') || registry.contains(':') || registry == "localhost") {
            return Err(bad(
                "it names no registry host (the first component needs a `.` or a `:port`)",
            ));
        }
        let (repository, tag) = match path.rsplit_once(':') {
            Some((repo, tag)) if !tag.contains('/') => (repo, Some(tag.to_string())),
            _ => (path, None),
        };
        if repository.is_empty() || repository.split('/').any(|c| !path_component(c)) {
            return Err(bad(
                "its repository path is not lower-case components of a-z, 0-9 and inner `.`, `_`, `-`",
            ));
        }
        if let Some(t) = &tag {
            let ok = !t.is_empty()
                && t.len() <= 128
                && t.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b))
                && !t.starts_with(['.', '-']);
            if !ok {
                return Err(bad("its tag is not 1 to 128 of A-Z, a-z, 0-9, `.`, `_`, `-`"));
            }
        }
        if tag.is_none() && digest.is_none() {
            return Err(bad("it has neither a tag nor a digest"));
        }
        Ok(Reference {
            registry: registry.to_string(),
            repository: repository.to_string(),
            tag,
            digest,
        })
    }

    /// The reference without tag or digest (`registry/repository`), as the Lock records a source.
    pub fn source(&self) -> String {
        format!("{}/{}", self.registry, self.repository)
    }

    /// The same repository at `digest`.
    pub fn with_digest(&self, digest: &str) -> Reference {
        Reference {
            digest: Some(digest.to_string()),
            ..self.clone()
        }
    }

    /// What a manifest request names: the digest if known, else the tag.
    pub fn manifest_reference(&self) -> &str {
        self.digest.as_deref().or(self.tag.as_deref()).unwrap_or("latest")
    }

    /// Whether the registry is reached over plain HTTP: a loopback registry (`localhost`,
    /// `*.localhost`, `127.0.0.0/8`, `[::1]`), as containerd and go-containerregistry decide it.
    pub fn insecure(&self) -> bool {
        is_loopback_host(&self.registry)
    }
}

/// Whether `host` (with an optional `:port`) is a loopback host.
pub fn is_loopback_host(host: &str) -> bool {
    let name = match host.strip_prefix('[') {
        Some(v6) => v6.split(']').next().unwrap_or_default(),
        None => host.rsplit_once(':').map_or(host, |(n, _)| n),
    };
    if name == "localhost" || name.ends_with(".localhost") {
        return true;
    }
    name.parse::<std::net::IpAddr>().is_ok_and(|ip| ip.is_loopback())
}

impl fmt::Display for Reference {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.registry, self.repository)?;
        if let Some(t) = &self.tag {
            write!(f, ":{t}")?;
        }
        if let Some(d) = &self.digest {
            write!(f, "@{d}")?;
        }
        Ok(())
    }
}

/// A repository path component: `[a-z0-9]+((\.|_|__|-+)[a-z0-9]+)*`.
fn path_component(c: &str) -> bool {
    let alnum = |b: u8| b.is_ascii_lowercase() || b.is_ascii_digit();
    let bytes = c.as_bytes();
    if bytes.is_empty() || !alnum(bytes[0]) || !alnum(bytes[bytes.len() - 1]) {
        return false;
    }
    let mut i = 0;
    while i < bytes.len() {
        if alnum(bytes[i]) {
            i += 1;
            continue;
        }
        let run = bytes[i..].iter().take_while(|b| !alnum(**b)).count();
        let sep = &c[i..i + run];
        if !(sep == "." || sep == "_" || sep == "__" || sep.bytes().all(|b| b == b'-')) {
            return false;
        }
        i += run;
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    const D: &str = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

    #[test]
    fn parses_tags_digests_and_ports() {
        let r = Reference::parse("127.0.0.1:5000/crossplane-rs/provider-nop:v1").expect("parses");
        assert_eq!(r.registry, "127.0.0.1:5000");
        assert_eq!(r.repository, "crossplane-rs/provider-nop");
        assert_eq!(r.tag.as_deref(), Some("v1"));
        assert!(r.insecure());
        assert_eq!(r.to_string(), "127.0.0.1:5000/crossplane-rs/provider-nop:v1");
        let d = Reference::parse(&format!("xpkg.crossplane.io/org/p@{D}")).expect("parses");
        assert_eq!(d.digest.as_deref(), Some(D));
        assert_eq!(d.manifest_reference(), D);
        assert!(!d.insecure());
        let both = Reference::parse(&format!("ghcr.io/a/b:v2@{D}")).expect("parses");
        assert_eq!((both.tag.as_deref(), both.manifest_reference()), (Some("v2"), D));
        assert_eq!(both.source(), "ghcr.io/a/b");
    }

    #[test]
    fn refuses_what_is_not_a_reference_with_a_reason() {
        for (value, says) in [
            ("", "empty"),
            ("provider-nop:v1", "no registry host"),
            ("crossplane/provider-nop:v1", "no registry host"),
            ("ghcr.io/org/p", "neither a tag nor a digest"),
            ("ghcr.io/Org/p:v1", "repository path"),
            ("ghcr.io/org/p:v1@sha256:abc", "digest"),
            ("https://ghcr.io/org/p:v1", "URL scheme"),
            ("ghcr.io/org/p:-x", "tag"),
        ] {
            let e = Reference::parse(value).expect_err(value).to_string();
            assert!(e.contains(says), "{value}: {e}");
        }
    }

    #[test]
    fn loopback_hosts_are_plain_http() {
        for (host, loopback) in [
            ("localhost:5000", true),
            ("registry.localhost", true),
            ("127.0.0.1:5000", true),
            ("127.3.2.1", true),
            ("[::1]:5000", true),
            ("10.0.0.1:5000", false),
            ("ghcr.io", false),
        ] {
            assert_eq!(is_loopback_host(host), loopback, "{host}");
        }
    }
}
