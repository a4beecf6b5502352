//! Errors of the test bed. Each says what went wrong and what to do.

use std::path::PathBuf;

/// A test-bed result.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// What can go wrong while building, starting or using the test bed.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The shared test bed is not configured.
    #[error(
        "no test control plane: the environment variable {var} is unset. \
         Run the tests with `cargo xtask test`, which builds and starts one \
         (or `cargo xtask control-plane up` and export the variable it prints)"
    )]
    NoTestBed {
        /// The variable that was looked up.
        var: &'static str,
    },
    /// A file operation failed.
    #[error("{context}: {path}: {source}")]
    Io {
        /// What was being done.
        context: &'static str,
        /// The file or directory.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// A Kubernetes API request failed.
    #[error("{context}: {source}")]
    Kube {
        /// What was being done.
        context: String,
        /// The cause.
        #[source]
        source: kube::Error,
    },
    /// Certificates could not be generated.
    #[error("generating test-bed certificates: {0}")]
    Certs(#[from] pki::Error),
    /// A process of the control plane failed or did not become ready.
    #[error("{component}: {message} (log: {log})")]
    Component {
        /// The component's name.
        component: String,
        /// What happened.
        message: String,
        /// Its log file.
        log: PathBuf,
    },
    /// The harness could not be built.
    #[error("building the Go harness: {0}")]
    Build(String),
    /// A Go peer (`tests/peers`) could not be built.
    #[error("building {peer} (tests/peers): {message}")]
    PeerBuild {
        /// Which peer.
        peer: &'static str,
        /// What failed, and what to do.
        message: String,
    },
    /// A state or audit file did not parse.
    #[error("{context}: {path}: {source}")]
    Parse {
        /// What was being parsed.
        context: &'static str,
        /// The file.
        path: PathBuf,
        /// The cause.
        #[source]
        source: serde_json::Error,
    },
    /// The apiserver answered something that should not happen.
    #[error("unexpected answer: {0}")]
    Unexpected(String),
    /// kubectl failed (or could not be started).
    #[error(
        "kubectl {args} failed: {stderr} (kubectl comes from the Debian package `kubectl`, which `cargo xtask test` installs)"
    )]
    Kubectl {
        /// Its arguments after `--kubeconfig`.
        args: String,
        /// What it printed on stderr, or why it did not start.
        stderr: String,
    },
    /// Something did not happen in time.
    #[error("timed out after {seconds}s waiting for {what}")]
    Timeout {
        /// What was awaited.
        what: String,
        /// How long.
        seconds: u64,
    },
}

impl Error {
    pub(crate) fn io(
        context: &'static str,
        path: impl Into<PathBuf>,
    ) -> impl FnOnce(std::io::Error) -> Error {
        let path = path.into();
        move |source| Error::Io {
            context,
            path,
            source,
        }
    }

    pub(crate) fn kube(context: impl Into<String>) -> impl FnOnce(kube::Error) -> Error {
        let context = context.into();
        move |source| Error::Kube { context, source }
    }
}
