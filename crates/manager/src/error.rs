//! Why building or running a manager failed.

use crate::config::client::ClientError;
use crate::config::logging::LoggingError;
use crate::config::settings::UsageError;
use crate::metrics::MetricsError;
use crate::run::admin::BindError;

/// Building or running the manager failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A command-line mistake (exit code 2).
    #[error(transparent)]
    Usage(#[from] UsageError),
    /// Logging could not be set up.
    #[error(transparent)]
    Logging(#[from] LoggingError),
    /// The Kubernetes clients could not be built.
    #[error(transparent)]
    Client(#[from] ClientError),
    /// Metrics could not be registered.
    #[error(transparent)]
    Metrics(#[from] MetricsError),
    /// An admin listener could not be bound.
    #[error(transparent)]
    Bind(#[from] BindError),
    /// The signal handlers could not be installed.
    #[error("cannot install signal handlers: {0}")]
    Signals(#[source] std::io::Error),
    /// A runnable returned an error or panicked while it was meant to be running.
    #[error("runnable {name} failed: {error}")]
    Runnable {
        /// The runnable.
        name: String,
        /// What it reported.
        error: String,
    },
    /// The term ended and `--on-lost-leadership=exit` was given.
    #[error("leader election lost: the term of {identity} on lease {lease} ended ({reason})")]
    LostLeadership {
        /// This replica.
        identity: String,
        /// `namespace/name` of the Lease.
        lease: String,
        /// Why the term ended.
        reason: String,
    },
    /// The elector loop ended with an error.
    #[error("leader election failed: {0}")]
    Election(#[from] election::Error),
    /// The elector loop ended although no shutdown was asked for.
    #[error("the leader elector stopped unexpectedly{0}")]
    ElectorStopped(String),
    /// Some work ignored cancellation and even abortion; the Lease was not released, so it will expire.
    #[error("{0} task(s) did not stop; the lease was not released and will expire instead")]
    StopIncomplete(usize),
}

impl Error {
    /// The process exit code for this error: 2 for usage errors, 1 otherwise.
    pub fn exit_code(&self) -> i32 {
        match self {
            Self::Usage(_) => UsageError::EXIT_CODE,
            _ => 1,
        }
    }
}
