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

/// An error and its sources, `a: b: c`, skipping a source whose text is already shown. Every log line
/// of this crate and of the manager that prints an error prints it this way.
pub fn error_chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut out = e.to_string();
    let mut current = e.source();
    while let Some(err) = current {
        let text = err.to_string();
        if !out.contains(&text) {
            out.push_str(": ");
            out.push_str(&text);
        }
        current = err.source();
    }
    out
}
