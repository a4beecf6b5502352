//! The error of one reconcile.

use manager::FencedError;

/// Why a reconcile failed.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A read failed.
    #[error(transparent)]
    Kube(#[from] kube::Error),
    /// A write failed or was refused by the fence.
    #[error(transparent)]
    Fenced(#[from] FencedError),
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
            Self::Fenced(e) => e.is_not_leader(),
            Self::Kube(e) => manager::refusal(e).is_some(),
            _ => false,
        }
    }

    /// True for a 409 Conflict: someone else wrote first; retry soon, quietly.
    pub fn is_conflict(&self) -> bool {
        let api = match self {
            Self::Kube(kube::Error::Api(s)) | Self::Fenced(FencedError::Kube(kube::Error::Api(s))) => s,
            _ => return false,
        };
        api.code == 409
    }
}

/// True when `e` is a 404.
pub fn is_not_found(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == 404)
}

/// True when the fenced write failed with a 404.
pub fn fenced_not_found(e: &FencedError) -> bool {
    matches!(e, FencedError::Kube(k) if is_not_found(k))
}
