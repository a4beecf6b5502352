//! A small certificate authority and the Secrets that keep one: what a controller needs to serve or
//! call over TLS without a certificate manager.
//!
//! - [`Ca`]: a CA (generated, or loaded from its PEM), issuing server and client certificates, and
//!   Kubernetes users' client certificates (user and groups in the subject);
//! - [`KeyPem`]: a bare key pair, such as a service-account token signing key;
//! - [`secret`]: `kubernetes.io/tls` Secrets, created once and read back, so replicas racing at start-up
//!   all end up with the first one.
//!
//! Keys are ECDSA P-256 (rcgen's default).
#![forbid(unsafe_code)]

pub mod secret;

use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer,
    KeyPair, KeyUsagePurpose,
};

/// Generating or loading a certificate failed.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct Error(#[from] rcgen::Error);

/// What an issued certificate is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Usage {
    /// A TLS server (`serverAuth`).
    Server,
    /// A TLS client (`clientAuth`).
    Client,
}

/// An issued certificate and its key, PEM-encoded.
#[derive(Clone)]
pub struct Issued {
    /// The certificate.
    pub cert_pem: String,
    /// Its private key.
    pub key_pem: String,
}

impl std::fmt::Debug for Issued {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Issued").finish_non_exhaustive()
    }
}

/// A certificate authority: its certificate and key.
pub struct Ca {
    name: String,
    cert_pem: String,
    key: KeyPair,
}

impl std::fmt::Debug for Ca {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ca")
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

/// The CA's parameters: its common name, unconstrained, for signing certificates and CRLs.
fn ca_params(name: &str) -> Result<CertificateParams, rcgen::Error> {
    let mut params = CertificateParams::new(Vec::<String>::new())?;
    params.distinguished_name = DistinguishedName::new();
    params.distinguished_name.push(DnType::CommonName, name);
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    Ok(params)
}

impl Ca {
    /// A new self-signed CA with common name `name`.
    pub fn generate(name: &str) -> Result<Self, Error> {
        let key = KeyPair::generate()?;
        let cert = ca_params(name)?.self_signed(&key)?;
        Ok(Self {
            name: name.to_owned(),
            cert_pem: cert.pem(),
            key,
        })
    }

    /// The CA made by [`Ca::generate`] with common name `name`, from its certificate and key.
    pub fn from_pem(name: &str, cert_pem: &str, key_pem: &str) -> Result<Self, Error> {
        Ok(Self {
            name: name.to_owned(),
            cert_pem: cert_pem.to_owned(),
            key: KeyPair::from_pem(key_pem)?,
        })
    }

    /// Its certificate (what clients trust).
    pub fn cert_pem(&self) -> &str {
        &self.cert_pem
    }

    /// Its private key.
    pub fn key_pem(&self) -> String {
        self.key.serialize_pem()
    }

    /// A certificate with common name `cn` for `names` (DNS names or IP addresses), signed by this CA.
    pub fn issue(&self, cn: &str, names: &[String], usage: Usage) -> Result<Issued, Error> {
        self.sign(cn, &[], names, usage)
    }

    /// A client certificate for the Kubernetes user `user` in `groups` (the apiserver's x509
    /// authenticator reads the common name and the organisations), signed by this CA.
    pub fn issue_user(&self, user: &str, groups: &[&str]) -> Result<Issued, Error> {
        self.sign(user, groups, &[], Usage::Client)
    }

    fn sign(
        &self,
        cn: &str,
        organizations: &[&str],
        names: &[String],
        usage: Usage,
    ) -> Result<Issued, Error> {
        let issuer = Issuer::new(ca_params(&self.name)?, &self.key);
        let mut params = CertificateParams::new(names.to_vec())?;
        params.distinguished_name = DistinguishedName::new();
        params.distinguished_name.push(DnType::CommonName, cn);
        for o in organizations {
            params.distinguished_name.push(DnType::OrganizationName, *o);
        }
        params.key_usages = vec![
            KeyUsagePurpose::DigitalSignature,
            KeyUsagePurpose::KeyEncipherment,
        ];
        params.extended_key_usages = vec![match usage {
            Usage::Server => ExtendedKeyUsagePurpose::ServerAuth,
            Usage::Client => ExtendedKeyUsagePurpose::ClientAuth,
        }];
        let key = KeyPair::generate()?;
        let cert = params.signed_by(&key, &issuer)?;
        Ok(Issued {
            cert_pem: cert.pem(),
            key_pem: key.serialize_pem(),
        })
    }
}

/// A bare key pair, PEM-encoded (for example the service-account token signing key of an apiserver).
#[derive(Clone)]
pub struct KeyPem {
    /// The private key.
    pub private_pem: String,
    /// The public key.
    pub public_pem: String,
}

impl std::fmt::Debug for KeyPem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KeyPem").finish_non_exhaustive()
    }
}

impl KeyPem {
    /// A new key pair.
    pub fn generate() -> Result<Self, Error> {
        let key = KeyPair::generate()?;
        Ok(Self {
            private_pem: key.serialize_pem(),
            public_pem: key.public_key_pem(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_loaded_ca_issues_like_the_generated_one() {
        let ca = Ca::generate("test-ca").expect("generated");
        assert!(ca.cert_pem().starts_with("-----BEGIN CERTIFICATE-----"));
        let again = Ca::from_pem("test-ca", ca.cert_pem(), &ca.key_pem()).expect("loaded");
        let issued = again
            .issue(
                "svc",
                &["svc.ns.svc".to_owned(), "127.0.0.1".to_owned()],
                Usage::Server,
            )
            .expect("issued");
        assert!(issued.cert_pem.contains("BEGIN CERTIFICATE"));
        assert!(issued.key_pem.contains("PRIVATE KEY"));
        assert!(Ca::from_pem("test-ca", ca.cert_pem(), "garbage").is_err());
        let user = ca.issue_user("admin", &["system:masters"]).expect("issued");
        assert!(user.cert_pem.contains("BEGIN CERTIFICATE"));
        let key = KeyPem::generate().expect("key");
        assert!(key.private_pem.contains("PRIVATE KEY") && key.public_pem.contains("PUBLIC KEY"));
    }
}
