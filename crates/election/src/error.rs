//! Errors that end [`Elector::run`](crate::Elector::run).
//!
//! `run` keeps competing through every API failure — timeouts, conflicts, 5xx, Forbidden — logging
//! and backing off instead of returning, so a misconfigured RBAC rule never becomes a crash loop. It
//! returns an error only when it cannot continue at all.

/// `run` could not continue.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The task that watches the lock ended; this is a bug in the election crate.
    #[error("the lock watch task ended unexpectedly; this is a bug in the election crate, please report it")]
    WatchEnded,
}
