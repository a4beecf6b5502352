//! The provider's side: an [`ExternalConnector`] that produces an [`ExternalClient`] per reconcile, and
//! the results of its calls.
//!
//! The contract is crossplane-runtime's: calls are idempotent and must not block for long; `observe` must
//! not change the external resource; status set in `observe` is persisted; `create` may durably change
//! only annotations (for example the external name).

use std::collections::BTreeMap;
use std::future::Future;
use std::time::Duration;

use manager::{Fence, NotLeader};

use crate::resource::Managed;

/// Connection details: key → secret bytes.
pub type ConnectionDetails = BTreeMap<String, Vec<u8>>;

/// What `observe` found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ExternalObservation {
    /// The external resource exists.
    pub resource_exists: bool,
    /// It matches the desired state.
    pub resource_up_to_date: bool,
    /// `observe` filled unset spec fields from the external resource; the spec is written back.
    pub resource_late_initialized: bool,
    /// Connection details to publish.
    pub connection_details: ConnectionDetails,
    /// A human-readable difference, for logs.
    pub diff: Option<String>,
    /// Ask to be observed again no later than this (e.g. a scheduled state change); the poll interval
    /// applies otherwise.
    pub poll_after: Option<Duration>,
}

/// What `create` did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ExternalCreation {
    /// Connection details to publish.
    pub connection_details: ConnectionDetails,
}

/// What `update` did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ExternalUpdate {
    /// Connection details to publish.
    pub connection_details: ConnectionDetails,
}

/// What `delete` did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ExternalDelete {}

/// An error from a provider's external call. Its message ends up in `Synced=False` conditions, so make it
/// say what went wrong.
#[derive(Debug, thiserror::Error)]
#[error("{message}")]
pub struct ExternalError {
    kind: ErrorKind,
    message: String,
}

/// What an [`ExternalError`] means for the reconcile.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorKind {
    /// The call failed (the resource, the external system or the apiserver): reported in the conditions
    /// and an Event, retried with backoff.
    Failed,
    /// The fence refused a write: this replica's term ended. Nothing is reported; the next leader goes on.
    NotLeader,
}

impl ExternalError {
    /// An error with this message.
    pub fn new(message: impl Into<String>) -> Self {
        Self {
            kind: ErrorKind::Failed,
            message: message.into(),
        }
    }

    /// `"<context>: <error>"`.
    pub fn wrap(context: impl std::fmt::Display, error: impl std::fmt::Display) -> Self {
        Self::new(format!("{context}: {error}"))
    }

    /// A failed write with context; keeps the fact that the fence refused it
    /// ([`manager::fence::is_not_leader`]).
    pub fn fenced(context: impl std::fmt::Display, error: kube::Error) -> Self {
        Self {
            kind: kind_of(&error),
            message: format!("{context}: {error}"),
        }
    }

    /// The fence's refusal ([`Fence::check`]) of work on the external system, with context.
    pub fn refused(context: impl std::fmt::Display, refusal: NotLeader) -> Self {
        Self {
            kind: ErrorKind::NotLeader,
            message: format!("{context}: {refusal}"),
        }
    }

    /// What the error means for the reconcile.
    pub fn kind(&self) -> ErrorKind {
        self.kind
    }

    /// True when the error is this replica's term ending, not a problem of the resource.
    pub fn is_not_leader(&self) -> bool {
        self.kind == ErrorKind::NotLeader
    }
}

fn kind_of(e: &kube::Error) -> ErrorKind {
    if manager::fence::is_not_leader(e) {
        ErrorKind::NotLeader
    } else {
        ErrorKind::Failed
    }
}

impl From<kube::Error> for ExternalError {
    fn from(e: kube::Error) -> Self {
        Self {
            kind: kind_of(&e),
            message: e.to_string(),
        }
    }
}

/// Produces an [`ExternalClient`] for one managed resource (crossplane-runtime's `ExternalConnecter`).
pub trait ExternalConnector<K: Managed>: Send + Sync + 'static {
    /// The client type.
    type Client: ExternalClient<K>;

    /// Connects to the external system for `mr`, for example by reading its ProviderConfig. `client` is
    /// the term's client, whose writes the fence layer refuses once the term has ended; `fence` is for
    /// what it cannot see: check it before changing the external system, and fence any other client
    /// with [`manager::fence_client`].
    fn connect(
        &self,
        client: &kube::Client,
        fence: &Fence,
        mr: &K,
    ) -> impl Future<Output = Result<Self::Client, ExternalError>> + Send;
}

/// Talks to the external system about one managed resource (crossplane-runtime's `ExternalClient`).
pub trait ExternalClient<K: Managed>: Send {
    /// Reads the external resource. May set status (e.g. `atProvider`, `Ready`) on `mr`.
    fn observe(
        &mut self,
        mr: &mut K,
    ) -> impl Future<Output = Result<ExternalObservation, ExternalError>> + Send;

    /// Creates the external resource. May set the external-name annotation on `mr`.
    fn create(&mut self, mr: &mut K) -> impl Future<Output = Result<ExternalCreation, ExternalError>> + Send;

    /// Updates the external resource to match the spec.
    fn update(&mut self, mr: &mut K) -> impl Future<Output = Result<ExternalUpdate, ExternalError>> + Send;

    /// Deletes the external resource.
    fn delete(&mut self, mr: &mut K) -> impl Future<Output = Result<ExternalDelete, ExternalError>> + Send;

    /// Releases what `connect` acquired. Called once after every connected reconcile.
    fn disconnect(self) -> impl Future<Output = Result<(), ExternalError>> + Send
    where
        Self: Sized,
    {
        async { Ok(()) }
    }
}
