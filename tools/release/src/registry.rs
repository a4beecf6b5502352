//! The registry prefix images are named under: `cargo xtask generate --registry ghcr.io/acme` writes
//! deploy/ and the chart with `ghcr.io/acme/<binary>:<version>`, and `cargo xtask image --registry
//! ghcr.io/acme` names the archives the same, so a node that imports them finds what deploy/ references.
//! The default, `crossplane-rs`, has no registry host; container runtimes read it as
//! `docker.io/crossplane-rs` ([`Registry::full_reference`]).

use std::fmt;

/// A validated registry prefix: an optional host (with an optional port) and repository path components,
/// in lower case, without a tag or digest.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Registry(String);

/// The prefix deploy/ is generated with unless `--registry` says otherwise.
pub const DEFAULT: &str = "crossplane-rs";

impl Default for Registry {
    fn default() -> Self {
        Self(DEFAULT.to_owned())
    }
}

impl fmt::Display for Registry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// A repository path component of the OCI distribution grammar:
/// `[a-z0-9]+((\.|_|__|-+)[a-z0-9]+)*`.
fn path_component(c: &str) -> bool {
    let bytes = c.as_bytes();
    let alnum = |b: u8| b.is_ascii_lowercase() || b.is_ascii_digit();
    if bytes.is_empty() || !alnum(bytes[0]) || !alnum(bytes[bytes.len() - 1]) {
        return false;
    }
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        if alnum(b) {
            i += 1;
            continue;
        }
        let run = bytes[i..].iter().take_while(|b| !alnum(**b)).count();
        let sep = &c[i..i + run];
        let ok = sep == "." || sep == "_" || sep == "__" || sep.bytes().all(|b| b == b'-');
        if !ok {
            return false;
        }
        i += run;
    }
    true
}

/// A registry host: DNS labels of lower-case letters, digits and inner dashes, optionally `:port`.
fn host(c: &str) -> bool {
    let (name, port) = match c.split_once(':') {
        Some((n, p)) => (n, Some(p)),
        None => (c, None),
    };
    let label_ok = |l: &str| {
        !l.is_empty()
            && !l.starts_with('-')
            && !l.ends_with('-')
            && l.bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
    };
    name.split('.').all(label_ok)
        && port.is_none_or(|p| !p.is_empty() && p.len() <= 5 && p.bytes().all(|b| b.is_ascii_digit()))
}

/// Whether the first component names a registry host, as container runtimes decide it: it has a `.` or
/// a `:port`, or is `localhost`.
fn is_host(first: &str) -> bool {
    first.contains('.') || first.contains(':') || first == "localhost"
}

impl Registry {
    /// Checks `value` (e.g. `ghcr.io/acme`, `localhost:5000/team/x`, `acme`); the error says what is
    /// wrong and what a valid value looks like.
    pub fn parse(value: &str) -> Result<Self, String> {
        const HINT: &str = "give a registry host and repository path without a tag, in lower case, \
                            e.g. `ghcr.io/acme` or `localhost:5000/team`";
        let v = value.strip_suffix('/').unwrap_or(value);
        if v.is_empty() {
            return Err(format!("the registry prefix is empty; {HINT}"));
        }
        if v.contains('@') {
            return Err(format!("{value:?} has a digest; {HINT}"));
        }
        if v.chars().any(|c| c.is_ascii_uppercase()) {
            return Err(format!("{value:?} has upper-case letters; {HINT}"));
        }
        if v.contains("://") {
            return Err(format!("{value:?} has a URL scheme; {HINT}"));
        }
        let parts: Vec<&str> = v.split('/').collect();
        let (first, rest) = (parts[0], &parts[1..]);
        let tagged = |p: &str| p.contains(':');
        // Alone, `name:1234` is a host and port; `name:v1` a tag.
        let port_only = |p: &str| {
            p.split_once(':')
                .is_some_and(|(_, port)| port.bytes().all(|b| b.is_ascii_digit()))
        };
        if rest.iter().any(|p| tagged(p)) || (rest.is_empty() && tagged(first) && !port_only(first)) {
            return Err(format!(
                "{value:?} has a tag; the tag is the workspace version ({}); {HINT}",
                crate::image::TAG
            ));
        }
        let first_ok = if is_host(first) {
            host(first)
        } else {
            path_component(first)
        };
        if !first_ok || !rest.iter().all(|p| path_component(p)) {
            return Err(format!(
                "{value:?} is not a registry prefix (allowed: a host, then path components of \
                 a-z, 0-9 and inner `.`, `_`, `-`); {HINT}"
            ));
        }
        Ok(Self(v.to_owned()))
    }

    /// The image name deploy/ and the chart use: `<prefix>/<name>:<tag>`.
    pub fn image(&self, name: &str, tag: &str) -> String {
        format!("{}/{name}:{tag}", self.0)
    }

    /// The reference a container runtime looks [`Self::image`] up by: with `docker.io/` in front when
    /// the prefix names no registry host (what `ctr images import` must store it under).
    pub fn full_reference(&self, name: &str, tag: &str) -> String {
        let first = self.0.split('/').next().unwrap_or_default();
        if is_host(first) {
            self.image(name, tag)
        } else {
            format!("docker.io/{}", self.image(name, tag))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_registry_prefixes() {
        for (value, image, full) in [
            (
                DEFAULT,
                "crossplane-rs/provider-nop:1.0",
                "docker.io/crossplane-rs/provider-nop:1.0",
            ),
            (
                "ghcr.io/acme",
                "ghcr.io/acme/provider-nop:1.0",
                "ghcr.io/acme/provider-nop:1.0",
            ),
            (
                "ghcr.io/acme/",
                "ghcr.io/acme/provider-nop:1.0",
                "ghcr.io/acme/provider-nop:1.0",
            ),
            (
                "localhost:5000/team/x_y",
                "localhost:5000/team/x_y/provider-nop:1.0",
                "localhost:5000/team/x_y/provider-nop:1.0",
            ),
            (
                "registry.example.com:443",
                "registry.example.com:443/provider-nop:1.0",
                "registry.example.com:443/provider-nop:1.0",
            ),
        ] {
            let r = Registry::parse(value).unwrap_or_else(|e| panic!("{value}: {e}"));
            assert_eq!(r.image("provider-nop", "1.0"), image);
            assert_eq!(r.full_reference("provider-nop", "1.0"), full);
        }
        assert_eq!(Registry::default().to_string(), DEFAULT);
    }

    #[test]
    fn rejects_tags_case_and_junk_with_a_reason() {
        for (value, says) in [
            ("ghcr.io/acme:v1", "has a tag"),
            ("acme:latest", "has a tag"),
            ("ghcr.io/Acme", "upper-case"),
            ("ghcr.io/acme@sha256:abc", "digest"),
            ("", "empty"),
            ("https://ghcr.io/acme", "URL scheme"),
            ("ghcr.io//acme", "not a registry prefix"),
            ("ghcr.io/-acme", "not a registry prefix"),
            ("ghcr.io/ac me", "not a registry prefix"),
            ("ghcr.io:port/acme", "not a registry prefix"),
        ] {
            let e = Registry::parse(value).expect_err(value);
            assert!(e.contains(says), "{value}: {e}");
            assert!(e.contains("e.g. `ghcr.io/acme`"), "{value}: {e}");
        }
    }
}
