//! The error of one reconcile.

/// Why a reconcile failed.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A request failed, or the fence refused a write ([`Error::is_not_leader`]).
    #[error(transparent)]
    Kube(#[from] kube::Error),
    /// An object could not be (de)serialised.
    #[error(transparent)]
    Json(#[from] serde_json::Error),
    /// Anything else, with a message meant for a condition.
    #[error("{0}")]
    Message(String),
}

impl manager::controller::ReconcileError for Error {
    fn is_not_leader(&self) -> bool {
        Error::is_not_leader(self)
    }

    fn is_conflict(&self) -> bool {
        Error::is_conflict(self)
    }
}

impl Error {
    /// True when the fence refused a write: the term is over.
    pub fn is_not_leader(&self) -> bool {
        match self {
            Self::Kube(e) => manager::fence::is_not_leader(e),
            _ => false,
        }
    }

    /// True for a 409 Conflict: someone else wrote first; retry soon, quietly.
    pub fn is_conflict(&self) -> bool {
        matches!(self, Self::Kube(kube::Error::Api(s)) if s.code == 409)
    }
}

/// True when `e` is a 404.
pub fn is_not_found(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == 404)
}
