//! mTLS with functions, as upstream: the core keeps a CA in the Secret `crossplane-root-ca` of its
//! namespace (created on first use), issues itself a client certificate, and issues each Function a
//! server certificate in the Secret `<function>-tls-server` (`tls.crt`, `tls.key`, `ca.crt`: what a
//! function reads from `TLS_SERVER_CERTS_DIR`) naming the host of its endpoint.

use std::collections::BTreeMap;

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use kube::Api;
use kube::api::PostParams;
use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer,
    KeyPair, KeyUsagePurpose,
};

/// The CA Secret.
pub const ROOT_CA_SECRET: &str = "crossplane-root-ca";

/// The CA and the core's client identity.
pub struct Pki {
    ca_pem: String,
    ca_key: KeyPair,
    /// The client material for [`function::Client::mtls`].
    pub client: function::Tls,
}

fn ca_params() -> Result<CertificateParams, rcgen::Error> {
    let mut params = CertificateParams::new(Vec::<String>::new())?;
    params.distinguished_name = DistinguishedName::new();
    params.distinguished_name.push(DnType::CommonName, ROOT_CA_SECRET);
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    Ok(params)
}

fn leaf(
    cn: &str,
    names: Vec<String>,
    usage: ExtendedKeyUsagePurpose,
) -> Result<(CertificateParams, KeyPair), rcgen::Error> {
    let mut params = CertificateParams::new(names)?;
    params.distinguished_name = DistinguishedName::new();
    params.distinguished_name.push(DnType::CommonName, cn);
    params.key_usages = vec![
        KeyUsagePurpose::DigitalSignature,
        KeyUsagePurpose::KeyEncipherment,
    ];
    params.extended_key_usages = vec![usage];
    Ok((params, KeyPair::generate()?))
}

fn data(s: &Secret, key: &str) -> Option<Vec<u8>> {
    s.data.as_ref()?.get(key).map(|b| b.0.clone())
}

fn secret(ns: &str, name: &str, data: BTreeMap<String, Vec<u8>>) -> Secret {
    Secret {
        metadata: kube::api::ObjectMeta {
            name: Some(name.to_owned()),
            namespace: Some(ns.to_owned()),
            ..Default::default()
        },
        type_: Some("kubernetes.io/tls".into()),
        data: Some(data.into_iter().map(|(k, v)| (k, ByteString(v))).collect()),
        ..Default::default()
    }
}

/// Creates `s` unless it exists; returns what is stored (someone else's if it won the race).
async fn create_or_get(api: &Api<Secret>, s: Secret) -> Result<Secret, String> {
    let name = s.metadata.name.clone().unwrap_or_default();
    match api.create(&PostParams::default(), &s).await {
        Ok(s) => Ok(s),
        Err(kube::Error::Api(e)) if e.code == 409 => api
            .get(&name)
            .await
            .map_err(|e| format!("cannot get Secret {name}: {e}")),
        Err(e) => Err(format!("cannot create Secret {name}: {e}")),
    }
}

impl Pki {
    /// Loads the CA from its Secret in `ns`, creating it first if it does not exist.
    pub async fn load_or_create(client: &kube::Client, ns: &str) -> Result<Self, String> {
        let api: Api<Secret> = Api::namespaced(client.clone(), ns);
        let stored = match api.get_opt(ROOT_CA_SECRET).await.map_err(|e| e.to_string())? {
            Some(s) => s,
            None => {
                let key = KeyPair::generate().map_err(|e| e.to_string())?;
                let cert = ca_params()
                    .and_then(|p| p.self_signed(&key))
                    .map_err(|e| e.to_string())?;
                let d = [
                    ("tls.crt".to_owned(), cert.pem().into_bytes()),
                    ("tls.key".to_owned(), key.serialize_pem().into_bytes()),
                ]
                .into();
                create_or_get(&api, secret(ns, ROOT_CA_SECRET, d)).await?
            }
        };
        let bad = || {
            format!(
                "Secret {ns}/{ROOT_CA_SECRET} lacks tls.crt or tls.key: delete it and the core makes a new CA"
            )
        };
        let ca_pem = String::from_utf8(data(&stored, "tls.crt").ok_or_else(bad)?).map_err(|_| bad())?;
        let key_pem = String::from_utf8(data(&stored, "tls.key").ok_or_else(bad)?).map_err(|_| bad())?;
        let ca_key = KeyPair::from_pem(&key_pem).map_err(|e| format!("Secret {ns}/{ROOT_CA_SECRET}: {e}"))?;
        let mut pki = Self {
            ca_pem,
            ca_key,
            client: function::Tls {
                ca: vec![],
                cert: vec![],
                key: vec![],
            },
        };
        let (cert, key) = pki.issue("crossplane", vec![], ExtendedKeyUsagePurpose::ClientAuth)?;
        pki.client = function::Tls {
            ca: pki.ca_pem.clone().into_bytes(),
            cert,
            key,
        };
        Ok(pki)
    }

    fn issue(
        &self,
        cn: &str,
        names: Vec<String>,
        usage: ExtendedKeyUsagePurpose,
    ) -> Result<(Vec<u8>, Vec<u8>), String> {
        let issuer = Issuer::new(ca_params().map_err(|e| e.to_string())?, &self.ca_key);
        let (params, key) = leaf(cn, names, usage).map_err(|e| e.to_string())?;
        let cert = params.signed_by(&key, &issuer).map_err(|e| e.to_string())?;
        Ok((cert.pem().into_bytes(), key.serialize_pem().into_bytes()))
    }

    /// Makes sure Function `function` has its server certificate Secret in `ns`, naming `host`.
    pub async fn ensure_server(
        &self,
        client: &kube::Client,
        ns: &str,
        function: &str,
        host: &str,
    ) -> Result<(), String> {
        let api: Api<Secret> = Api::namespaced(client.clone(), ns);
        let name = format!("{function}-tls-server");
        if api.get_opt(&name).await.map_err(|e| e.to_string())?.is_some() {
            return Ok(());
        }
        let (cert, key) = self.issue(
            function,
            vec![host.to_owned()],
            ExtendedKeyUsagePurpose::ServerAuth,
        )?;
        let d = [
            ("tls.crt".to_owned(), cert),
            ("tls.key".to_owned(), key),
            ("ca.crt".to_owned(), self.ca_pem.clone().into_bytes()),
        ]
        .into();
        create_or_get(&api, secret(ns, &name, d)).await.map(|_| ())
    }
}

/// The host of an endpoint (`dns:///host:port`, `host:port`, `https://host:port`).
pub fn host(endpoint: &str) -> &str {
    let e = endpoint.strip_prefix("dns:///").unwrap_or(endpoint);
    let e = e.split_once("://").map_or(e, |(_, r)| r);
    e.rsplit_once(':').map_or(e, |(h, _)| h)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hosts_of_endpoints() {
        assert_eq!(
            host("dns:///function-x.crossplane-system:9443"),
            "function-x.crossplane-system"
        );
        assert_eq!(host("127.0.0.1:9443"), "127.0.0.1");
        assert_eq!(host("https://a:1"), "a");
    }
}
