//! The webhook's serving certificate: read from a directory that something else fills (a mounted
//! Secret, cert-manager), or self-signed once and kept in a Secret, so that every replica serves the same
//! certificate and the CA the apiserver trusts stays the same across restarts.
//!
//! The Secret has the `kubernetes.io/tls` keys plus `ca.crt`, the layout cert-manager and Crossplane's
//! package manager write. The CA's key is not kept: the CA signs this one certificate and nothing else.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use k8s_openapi::api::core::v1::Secret;
use kube::Api;
use pki::{Ca, Usage};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};

use crate::Error;

/// A serving certificate chain and key, and the CA to trust it with.
#[derive(Clone)]
pub struct ServingCert {
    /// The certificate (PEM, chain allowed).
    pub cert_pem: String,
    /// Its private key (PEM).
    pub key_pem: String,
    /// The CA that signed it (PEM), when known: what goes into a `caBundle`.
    pub ca_pem: Option<String>,
}

impl std::fmt::Debug for ServingCert {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServingCert")
            .field("ca", &self.ca_pem.is_some())
            .finish_non_exhaustive()
    }
}

const CERT: &str = "tls.crt";
const KEY: &str = "tls.key";
const CA: &str = "ca.crt";

impl ServingCert {
    /// Reads `tls.crt`, `tls.key` and, if present, `ca.crt` from `dir`.
    pub fn from_dir(dir: &Path) -> Result<Self, Error> {
        let read = |name: &str| {
            let path = dir.join(name);
            std::fs::read_to_string(&path).map_err(|source| Error::Read { path, source })
        };
        let cert = Self {
            cert_pem: read(CERT)?,
            key_pem: read(KEY)?,
            ca_pem: read(CA).ok(),
        };
        cert.server_config(&dir.display().to_string())?;
        Ok(cert)
    }

    /// A new CA named `ca_name`, and a certificate it signs for `hosts` (DNS names or IP addresses).
    pub fn self_signed(ca_name: &str, hosts: &[String]) -> Result<Self, Error> {
        let ca = Ca::generate(ca_name)?;
        let cn = hosts.first().map_or(ca_name, String::as_str);
        let issued = ca.issue(cn, hosts, Usage::Server)?;
        Ok(Self {
            cert_pem: issued.cert_pem,
            key_pem: issued.key_pem,
            ca_pem: Some(ca.cert_pem().to_owned()),
        })
    }

    /// The certificate kept in Secret `namespace/name`: read if it exists, else self-signed for `hosts`
    /// and created. When replicas race, all end up with the one that was created first.
    pub async fn in_secret(
        client: &kube::Client,
        namespace: &str,
        name: &str,
        hosts: &[String],
    ) -> Result<Self, Error> {
        let api: Api<Secret> = Api::namespaced(client.clone(), namespace);
        let what = format!("Secret {namespace}/{name}");
        let kube_err = |action: &str| {
            let action = format!("{action} {what}");
            move |source| Error::Kube { action, source }
        };
        let stored = match api.get_opt(name).await.map_err(kube_err("cannot read"))? {
            Some(s) => s,
            None => {
                let cert = Self::self_signed(&format!("{name}-ca"), hosts)?;
                pki::secret::create_or_get(&api, &cert.secret(namespace, name))
                    .await
                    .map_err(kube_err("cannot create"))?
            }
        };
        Self::parse(&stored, &what)
    }

    /// The certificate kept in Secret `namespace/name`, if it exists: read only, for a replica that
    /// must not write (a standby under a server-side fence) and waits for the one that creates it
    /// ([`ServingCert::in_secret`]).
    pub async fn from_secret(
        client: &kube::Client,
        namespace: &str,
        name: &str,
    ) -> Result<Option<Self>, Error> {
        let api: Api<Secret> = Api::namespaced(client.clone(), namespace);
        let what = format!("Secret {namespace}/{name}");
        match api.get_opt(name).await {
            Ok(Some(stored)) => Self::parse(&stored, &what).map(Some),
            Ok(None) => Ok(None),
            Err(source) => Err(Error::Kube {
                action: format!("cannot read {what}"),
                source,
            }),
        }
    }

    /// The certificate, key and CA of a stored Secret (`what` names it in errors).
    fn parse(stored: &Secret, what: &str) -> Result<Self, Error> {
        let field = |key: &str| pki::secret::text(stored, key);
        let bad = |key: &str| Error::Pem {
            what: what.to_owned(),
            message: format!("no {key}; delete the Secret and a new certificate is made"),
        };
        let cert = Self {
            cert_pem: field(CERT).ok_or_else(|| bad(CERT))?,
            key_pem: field(KEY).ok_or_else(|| bad(KEY))?,
            ca_pem: Some(field(CA).ok_or_else(|| bad(CA))?),
        };
        cert.server_config(what)?;
        Ok(cert)
    }

    fn secret(&self, namespace: &str, name: &str) -> Secret {
        let mut data = BTreeMap::from([
            (CERT.to_owned(), self.cert_pem.clone().into_bytes()),
            (KEY.to_owned(), self.key_pem.clone().into_bytes()),
        ]);
        if let Some(ca) = &self.ca_pem {
            data.insert(CA.to_owned(), ca.clone().into_bytes());
        }
        pki::secret::tls(namespace, name, data)
    }

    /// The rustls server configuration serving this certificate (HTTP/1.1). `what` names the source in
    /// errors.
    pub fn server_config(&self, what: &str) -> Result<Arc<rustls::ServerConfig>, Error> {
        let pem = |message: String| Error::Pem {
            what: what.to_owned(),
            message,
        };
        let chain = CertificateDer::pem_slice_iter(self.cert_pem.as_bytes())
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| pem(format!("{CERT}: {e}")))?;
        if chain.is_empty() {
            return Err(pem(format!("{CERT} holds no certificate")));
        }
        let key =
            PrivateKeyDer::from_pem_slice(self.key_pem.as_bytes()).map_err(|e| pem(format!("{KEY}: {e}")))?;
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut config = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()?
            .with_no_client_auth()
            .with_single_cert(chain, key)?;
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        Ok(Arc::new(config))
    }
}

/// The names a Service `name` in `namespace` answers to inside the cluster.
pub fn service_hosts(name: &str, namespace: &str) -> Vec<String> {
    vec![
        name.to_owned(),
        format!("{name}.{namespace}"),
        format!("{name}.{namespace}.svc"),
        format!("{name}.{namespace}.svc.cluster.local"),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_self_signed_certificate_serves_and_reads_back_from_a_directory() {
        let cert = ServingCert::self_signed("test-ca", &service_hosts("svc", "ns")).expect("generated");
        assert!(
            cert.ca_pem
                .as_deref()
                .is_some_and(|c| c.contains("BEGIN CERTIFICATE"))
        );
        cert.server_config("test").expect("usable");
        let dir = std::env::temp_dir().join(format!("webhook-certs-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("dir");
        std::fs::write(dir.join(CERT), &cert.cert_pem).expect("write");
        std::fs::write(dir.join(KEY), &cert.key_pem).expect("write");
        let read = ServingCert::from_dir(&dir).expect("read");
        assert_eq!(read.cert_pem, cert.cert_pem);
        assert_eq!(read.ca_pem, None, "no ca.crt in the directory");
        std::fs::write(dir.join(KEY), "garbage").expect("write");
        let e = ServingCert::from_dir(&dir).expect_err("bad key").to_string();
        assert!(e.contains("tls.key"), "{e}");
        let _ = std::fs::remove_dir_all(&dir);
        let e = ServingCert::from_dir(&dir).expect_err("missing").to_string();
        assert!(e.contains("tls.crt"), "{e}");
    }
}
