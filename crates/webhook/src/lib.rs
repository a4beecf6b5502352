//! CRD conversion and validating admission webhooks for kube-rs, the parts controller-runtime's webhook
//! server and a package manager's certificate handling give a Go controller:
//!
//! - [`review`]: a `ConversionReview` (`apiextensions.k8s.io/v1`) in, the review with its response out,
//!   given a function that converts one object;
//! - [`admission`]: an `AdmissionReview` (`admission.k8s.io/v1`) in, the review with its response out,
//!   given an async function that decides one request;
//! - [`server`]: an HTTPS server (hyper on rustls) that answers `POST` on each of its routes
//!   (`/convert` for conversion), bound early so a taken port fails fast;
//! - [`certs`]: the serving certificate, from a directory (`tls.crt`, `tls.key`) or self-signed and kept
//!   in a Secret that every replica shares;
//! - [`ca_bundle`]: keeps the CA in a CRD's `spec.conversion.webhook.clientConfig.caBundle`.
//!
//! Nothing here knows which CRD, which versions or which objects: the caller names them.
#![forbid(unsafe_code)]

pub mod admission;
pub mod ca_bundle;
pub mod certs;
pub mod review;
pub mod server;

pub use certs::ServingCert;
pub use server::{Routes, Server};

/// What can go wrong setting the webhook up.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A certificate or key file could not be read.
    #[error("cannot read {path}: {source}")]
    Read {
        /// The file.
        path: std::path::PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The certificate or key is not usable PEM.
    #[error("bad serving certificate or key ({what}): {message}")]
    Pem {
        /// Where it came from.
        what: String,
        /// Why.
        message: String,
    },
    /// Generating a certificate failed.
    #[error("cannot generate the serving certificate: {0}")]
    Generate(#[from] pki::Error),
    /// rustls refused the certificate and key.
    #[error("cannot use the serving certificate: {0}")]
    Tls(#[from] rustls::Error),
    /// The API server refused a request.
    #[error("{action}: {source}")]
    Kube {
        /// What was being done.
        action: String,
        /// Why it failed.
        source: kube::Error,
    },
    /// The listener could not be bound.
    #[error("cannot listen on {addr} for the webhook (--webhook-port): {source}")]
    Bind {
        /// The address.
        addr: std::net::SocketAddr,
        /// Why.
        source: std::io::Error,
    },
}

impl Error {
    /// The API server could not be reached (no answer at all, as opposed to a refusal): the caller
    /// retries quietly, since an apiserver that cannot be reached does not call the webhook either, and
    /// the leader elector already reports it.
    pub fn is_unreachable(&self) -> bool {
        matches!(self, Error::Kube { source, .. } if !matches!(source, kube::Error::Api(_)))
    }
}

/// Logs a repeated failure once: the first time and whenever its message changes at warn level, a
/// repeat (or an unreachable apiserver, [`Error::is_unreachable`]) at debug level.
#[derive(Debug, Default)]
pub struct Quiet {
    last: Option<String>,
}

impl Quiet {
    /// Reports `error` from `what` (a short phrase: "cannot keep the caBundle").
    pub fn report(&mut self, what: &str, error: &Error) {
        let message = error.to_string();
        if error.is_unreachable() || self.last.as_deref() == Some(message.as_str()) {
            tracing::debug!(error = %message, "{what}");
        } else {
            tracing::warn!(error = %message, "{what}");
        }
        self.last = Some(message);
    }

    /// Forgets the last failure (the operation succeeded).
    pub fn clear(&mut self) {
        self.last = None;
    }
}

/// Converts one object (JSON) to the desired `apiVersion`, or says why not.
pub type Convert = dyn Fn(serde_json::Value, &str) -> Result<serde_json::Value, String> + Send + Sync;
