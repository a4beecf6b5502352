//! TLS for `sslMode` `require`, `verify-ca` and `verify-full`, through rustls with the system's roots.
//!
//! - `verify-full`: the chain and the host name are verified;
//! - `verify-ca`: the chain is verified, a host-name mismatch is accepted;
//! - `require`: encrypted, the certificate is not verified (as libpq's `require` without a root file).

use std::sync::Arc;

use rustls::client::WebPkiServerVerifier;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::CryptoProvider;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{CertificateError, ClientConfig, DigitallySignedStruct, RootCertStore, SignatureScheme};
use tokio_postgres_rustls::MakeRustlsConnect;

use crate::types::SslMode;

fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

fn roots() -> RootCertStore {
    let mut roots = RootCertStore::empty();
    let found = rustls_native_certs::load_native_certs();
    roots.add_parsable_certificates(found.certs);
    roots
}

/// Verifies the chain with an inner verifier; accepts a host-name mismatch, or verifies nothing.
#[derive(Debug)]
struct Lenient {
    inner: Option<Arc<WebPkiServerVerifier>>,
    provider: Arc<CryptoProvider>,
}

impl ServerCertVerifier for Lenient {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        let Some(inner) = &self.inner else {
            return Ok(ServerCertVerified::assertion());
        };
        match inner.verify_server_cert(end_entity, intermediates, server_name, ocsp_response, now) {
            Err(rustls::Error::InvalidCertificate(
                CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. },
            )) => Ok(ServerCertVerified::assertion()),
            other => other,
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.provider
            .signature_verification_algorithms
            .supported_schemes()
    }
}

/// A TLS connector for `mode` (not `disable`).
pub fn connector(mode: SslMode) -> Result<MakeRustlsConnect, String> {
    let provider = provider();
    let builder = ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(|e| format!("cannot configure TLS: {e}"))?;
    let config = match mode {
        SslMode::Disable | SslMode::VerifyFull => {
            builder.with_root_certificates(roots()).with_no_client_auth()
        }
        SslMode::VerifyCa => {
            let inner = WebPkiServerVerifier::builder_with_provider(Arc::new(roots()), provider.clone())
                .build()
                .map_err(|e| format!("cannot configure TLS verification: {e}"))?;
            builder
                .dangerous()
                .with_custom_certificate_verifier(Arc::new(Lenient {
                    inner: Some(inner),
                    provider,
                }))
                .with_no_client_auth()
        }
        SslMode::Require => builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(Lenient {
                inner: None,
                provider,
            }))
            .with_no_client_auth(),
    };
    Ok(MakeRustlsConnect::new(config))
}
