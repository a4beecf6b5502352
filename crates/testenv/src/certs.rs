//! The test bed's PKI: a serving CA and certificate for the apiserver, a client CA with an admin client
//! certificate (group `system:masters`), and the service-account signing key, all made by the `pki`
//! crate. All keys are ECDSA P-256, as envtest and the apiserver's own test server use.

use std::path::{Path, PathBuf};

use pki::{Ca, KeyPem, Usage};

use crate::{Error, Result};

/// Paths of the generated PEM files.
#[derive(Debug, Clone)]
pub(crate) struct Pki {
    pub serving_ca: PathBuf,
    pub serving_cert: PathBuf,
    pub serving_key: PathBuf,
    pub client_ca: PathBuf,
    pub client_ca_key: PathBuf,
    pub admin_cert: PathBuf,
    pub admin_key: PathBuf,
    pub sa_key: PathBuf,
    pub sa_pub: PathBuf,
}

impl Pki {
    /// The file layout under `dir`.
    pub(crate) fn at(dir: &Path) -> Pki {
        Pki {
            serving_ca: dir.join("serving-ca.crt"),
            serving_cert: dir.join("apiserver.crt"),
            serving_key: dir.join("apiserver.key"),
            client_ca: dir.join("client-ca.crt"),
            client_ca_key: dir.join("client-ca.key"),
            admin_cert: dir.join("admin.crt"),
            admin_key: dir.join("admin.key"),
            sa_key: dir.join("sa.key"),
            sa_pub: dir.join("sa.pub"),
        }
    }

    /// Generates every file, unless they exist already (a restart keeps kubeconfigs and tokens valid).
    /// The serving certificate also names `extra_sans` (a node's address, the `kubernetes` Service's IP).
    pub(crate) fn generate(dir: &Path, extra_sans: &[String]) -> Result<Pki> {
        let pki = Pki::at(dir);
        if pki.sa_key.exists() {
            return Ok(pki);
        }
        std::fs::create_dir_all(dir).map_err(Error::io("creating the PKI directory", dir))?;

        let serving_ca = Ca::generate("crossplane-rs test bed serving CA")?;
        let mut sans = vec![
            "localhost".to_string(),
            "127.0.0.1".to_string(),
            "kubernetes.default.svc".to_string(),
        ];
        sans.extend(extra_sans.iter().cloned());
        let serving = serving_ca.issue("kube-apiserver", &sans, Usage::Server)?;
        let client_ca = Ca::generate("crossplane-rs test bed client CA")?;
        let admin = client_ca.issue_user("admin", &["system:masters"])?;
        let sa_key = KeyPem::generate()?;

        write(&pki.serving_ca, serving_ca.cert_pem())?;
        write(&pki.serving_cert, &serving.cert_pem)?;
        write(&pki.serving_key, &serving.key_pem)?;
        write(&pki.client_ca, client_ca.cert_pem())?;
        write(&pki.client_ca_key, &client_ca.key_pem())?;
        write(&pki.admin_cert, &admin.cert_pem)?;
        write(&pki.admin_key, &admin.key_pem)?;
        write(&pki.sa_pub, &sa_key.public_pem)?;
        write(&pki.sa_key, &sa_key.private_pem)?;
        Ok(pki)
    }
}

fn write(path: &Path, pem: &str) -> Result<()> {
    std::fs::write(path, pem).map_err(Error::io("writing a PEM file", path))
}
