//! The test bed's PKI: a serving CA and certificate for the apiserver, a client CA with an admin client
//! certificate (group `system:masters`), and the service-account signing key. All keys are ECDSA P-256,
//! as envtest and the apiserver's own test server use.

use std::path::{Path, PathBuf};

use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DistinguishedName, DnType, ExtendedKeyUsagePurpose,
    IsCa, KeyPair, KeyUsagePurpose,
};

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

        let serving_ca = ca("crossplane-rs test bed serving CA")?;
        let serving = leaf("kube-apiserver", &[], ExtendedKeyUsagePurpose::ServerAuth)?;
        let mut serving_params = serving.0;
        let mut sans = vec![
            "localhost".to_string(),
            "127.0.0.1".to_string(),
            "kubernetes.default.svc".to_string(),
        ];
        sans.extend(extra_sans.iter().cloned());
        serving_params.subject_alt_names = CertificateParams::new(sans)?.subject_alt_names;
        let serving_cert = serving_params.signed_by(&serving.1, &serving_ca)?;

        let client_ca = ca("crossplane-rs test bed client CA")?;
        let (admin_params, admin_key) =
            leaf("admin", &["system:masters"], ExtendedKeyUsagePurpose::ClientAuth)?;
        let admin_cert = admin_params.signed_by(&admin_key, &client_ca)?;

        let sa_key = KeyPair::generate()?;

        write(&pki.serving_ca, &serving_ca.pem())?;
        write(&pki.serving_cert, &serving_cert.pem())?;
        write(&pki.serving_key, &serving.1.serialize_pem())?;
        write(&pki.client_ca, &client_ca.pem())?;
        write(&pki.client_ca_key, &client_ca.key().serialize_pem())?;
        write(&pki.admin_cert, &admin_cert.pem())?;
        write(&pki.admin_key, &admin_key.serialize_pem())?;
        write(&pki.sa_pub, &sa_key.public_key_pem())?;
        write(&pki.sa_key, &sa_key.serialize_pem())?;
        Ok(pki)
    }
}

fn ca(name: &str) -> Result<CertifiedIssuer<'static, KeyPair>> {
    let mut params = CertificateParams::new(Vec::<String>::new())?;
    params.distinguished_name = DistinguishedName::new();
    params.distinguished_name.push(DnType::CommonName, name);
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    Ok(CertifiedIssuer::self_signed(params, KeyPair::generate()?)?)
}

fn leaf(cn: &str, groups: &[&str], usage: ExtendedKeyUsagePurpose) -> Result<(CertificateParams, KeyPair)> {
    let mut params = CertificateParams::new(Vec::<String>::new())?;
    params.distinguished_name = DistinguishedName::new();
    params.distinguished_name.push(DnType::CommonName, cn);
    for group in groups {
        params.distinguished_name.push(DnType::OrganizationName, *group);
    }
    params.key_usages = vec![
        KeyUsagePurpose::DigitalSignature,
        KeyUsagePurpose::KeyEncipherment,
    ];
    params.extended_key_usages = vec![usage];
    Ok((params, KeyPair::generate()?))
}

fn write(path: &Path, pem: &str) -> Result<()> {
    std::fs::write(path, pem).map_err(Error::io("writing a PEM file", path))
}
