//! The one error type of this crate: each variant is one thing that went wrong, with what to do.

/// A `Result` with [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// What went wrong building, pushing, fetching or parsing a package.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The image reference cannot be parsed.
    #[error(
        "{reference:?} is not an image reference: {reason}; write it as `<registry host>/<repository>:<tag>` \
         or `<registry host>/<repository>@sha256:<digest>`, e.g. `xpkg.crossplane.io/crossplane-contrib/provider-nop:v0.4.0`"
    )]
    InvalidReference {
        /// The reference as given.
        reference: String,
        /// What is wrong with it.
        reason: String,
    },
    /// The registry could not be reached at all (DNS, connection refused, TLS, timeout).
    #[error(
        "cannot reach the registry {registry}: {message}; check that the registry host in the package \
         reference is right and that it answers from here"
    )]
    Unreachable {
        /// The registry host.
        registry: String,
        /// Why the connection failed.
        message: String,
    },
    /// The tag or digest does not exist in the repository.
    #[error(
        "{reference} does not exist in the registry ({message}); check the repository and the tag or \
         digest, and that the package was pushed"
    )]
    NotFound {
        /// The reference asked for.
        reference: String,
        /// What the registry said.
        message: String,
    },
    /// The registry refused the credentials (or wanted some).
    #[error(
        "the registry {registry} refused access to {repository} ({message}); give a pull secret \
         (`packagePullSecrets`, a kubernetes.io/dockerconfigjson Secret) that may read it"
    )]
    Unauthorized {
        /// The registry host.
        registry: String,
        /// The repository.
        repository: String,
        /// What the registry said.
        message: String,
    },
    /// The registry answered a request with an unexpected status.
    #[error("{method} {url} answered {status}: {message}")]
    Registry {
        /// The request's method.
        method: String,
        /// The request's URL.
        url: String,
        /// The status code.
        status: u16,
        /// The body of the answer, or what the registry's error said.
        message: String,
    },
    /// What the registry sent does not match its digest, or is not what was asked for.
    #[error("the registry sent bad content for {what}: {reason}")]
    BadContent {
        /// The manifest or blob.
        what: String,
        /// What is wrong.
        reason: String,
    },
    /// The image is not a Crossplane package.
    #[error(
        "{reference} is not a Crossplane package: {reason}; a package image has a layer annotated \
         `io.crossplane.xpkg: base` with a package.yaml at its root (build it with `crossplane xpkg build` \
         or `cargo xtask image`)"
    )]
    NotAnXpkg {
        /// The image.
        reference: String,
        /// What is missing.
        reason: String,
    },
    /// `package.yaml` is not a YAML stream of objects.
    #[error("package.yaml cannot be parsed: {message}")]
    InvalidYaml {
        /// The parser's message.
        message: String,
    },
    /// `package.yaml` has no meta object.
    #[error(
        "package.yaml has no meta object; a package needs exactly one `meta.pkg.crossplane.io` Provider, \
         Function or Configuration (the package's crossplane.yaml)"
    )]
    NoMeta,
    /// `package.yaml` has more than one meta object.
    #[error(
        "package.yaml has {count} meta objects ({kinds}); a package needs exactly one \
         `meta.pkg.crossplane.io` Provider, Function or Configuration"
    )]
    TooManyMeta {
        /// How many.
        count: usize,
        /// Their kinds and names.
        kinds: String,
    },
    /// An object in `package.yaml` has no `apiVersion` or `kind`.
    #[error("object {index} of package.yaml has no {field}; every object needs apiVersion and kind")]
    IncompleteObject {
        /// Its position in the stream (from 0).
        index: usize,
        /// The missing field.
        field: &'static str,
    },
    /// The package is not in the cache and the pull policy forbids pulling.
    #[error(
        "{reference} ({digest}) is not in the package cache and the pull policy is Never; \
         set packagePullPolicy to IfNotPresent or Always"
    )]
    NotCached {
        /// The reference.
        reference: String,
        /// Its digest.
        digest: String,
    },
    /// A pull secret cannot be used.
    #[error("pull secret {name}: {reason}; it must be a kubernetes.io/dockerconfigjson Secret")]
    PullSecret {
        /// The Secret's name.
        name: String,
        /// What is wrong.
        reason: String,
    },
    /// An OCI archive cannot be read or written.
    #[error("OCI archive {path}: {reason}")]
    Archive {
        /// The archive.
        path: String,
        /// What went wrong.
        reason: String,
    },
    /// Building an image failed (a manifest or config that oci-spec refuses).
    #[error("building the package image: {0}")]
    Build(String),
    /// A local file could not be read or written.
    #[error("{context} {path}: {source}")]
    Io {
        /// What was being done.
        context: &'static str,
        /// The file.
        path: String,
        /// The cause.
        source: std::io::Error,
    },
}

impl Error {
    pub(crate) fn io(
        context: &'static str,
        path: impl std::fmt::Display,
    ) -> impl FnOnce(std::io::Error) -> Error {
        let path = path.to_string();
        move |source| Error::Io {
            context,
            path,
            source,
        }
    }
}
