//! mTLS with functions, as upstream: the core keeps a CA in the Secret `crossplane-root-ca` of its
//! namespace (created on first use), issues itself a client certificate, and issues each Function a
//! server certificate in the Secret `<function>-tls-server` (`tls.crt`, `tls.key`, `ca.crt`: what a
//! function reads from `TLS_SERVER_CERTS_DIR`) naming the host of its endpoint.

use k8s_openapi::api::core::v1::Secret;
use kube::Api;
use pki::{Ca, Usage};

/// The CA Secret.
pub const ROOT_CA_SECRET: &str = "crossplane-root-ca";

/// The CA and the core's client identity.
pub struct Pki {
    ca: Ca,
    /// The client material for [`function::Client::mtls`].
    pub client: function::Tls,
}

impl Pki {
    /// The CA's certificate (PEM): what a `caBundle` trusts.
    pub fn ca_pem(&self) -> &str {
        self.ca.cert_pem()
    }

    /// Loads the CA from its Secret in `ns`, creating it first if it does not exist.
    pub async fn load_or_create(client: &kube::Client, ns: &str) -> Result<Self, String> {
        let api: Api<Secret> = Api::namespaced(client.clone(), ns);
        let stored = match api
            .get_opt(ROOT_CA_SECRET)
            .await
            .map_err(|e| crate::error::explain(&e))?
        {
            Some(s) => s,
            None => {
                let ca = Ca::generate(ROOT_CA_SECRET).map_err(|e| e.to_string())?;
                let d = [
                    ("tls.crt".to_owned(), ca.cert_pem().as_bytes().to_vec()),
                    ("tls.key".to_owned(), ca.key_pem().into_bytes()),
                ]
                .into();
                pki::secret::create_or_get(&api, &pki::secret::tls(ns, ROOT_CA_SECRET, d))
                    .await
                    .map_err(|e| {
                        format!(
                            "cannot create Secret {ROOT_CA_SECRET}: {}",
                            crate::error::explain(&e)
                        )
                    })?
            }
        };
        let bad = || {
            format!(
                "Secret {ns}/{ROOT_CA_SECRET} lacks tls.crt or tls.key: delete it and the core makes a new CA"
            )
        };
        let ca_pem = pki::secret::text(&stored, "tls.crt").ok_or_else(bad)?;
        let key_pem = pki::secret::text(&stored, "tls.key").ok_or_else(bad)?;
        let ca = Ca::from_pem(ROOT_CA_SECRET, &ca_pem, &key_pem)
            .map_err(|e| format!("Secret {ns}/{ROOT_CA_SECRET}: {e}"))?;
        let issued = ca
            .issue("crossplane", &[], Usage::Client)
            .map_err(|e| e.to_string())?;
        let client = function::Tls {
            ca: ca_pem.into_bytes(),
            cert: issued.cert_pem.into_bytes(),
            key: issued.key_pem.into_bytes(),
        };
        Ok(Self { ca, client })
    }

    /// Makes sure Function `function` has its server certificate Secret in `ns`, naming `host`.
    pub async fn ensure_server(
        &self,
        client: &kube::Client,
        ns: &str,
        function: &str,
        host: &str,
    ) -> Result<(), String> {
        let name = format!("{function}-tls-server");
        self.ensure(
            client,
            ns,
            &name,
            function,
            &[host.to_owned()],
            Usage::Server,
            &[],
        )
        .await
    }

    /// Makes sure the Secret `ns/name` holds a certificate with common name `cn` for `names`, signed by
    /// the CA (`tls.crt`, `tls.key`, `ca.crt`), owned by `owners`. An existing Secret is kept as it is:
    /// the first writer wins, so replicas and controllers racing at start-up agree.
    #[allow(clippy::too_many_arguments)]
    pub async fn ensure(
        &self,
        client: &kube::Client,
        ns: &str,
        name: &str,
        cn: &str,
        names: &[String],
        usage: Usage,
        owners: &[k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference],
    ) -> Result<(), String> {
        let api: Api<Secret> = Api::namespaced(client.clone(), ns);
        if api
            .get_opt(name)
            .await
            .map_err(|e| format!("cannot read Secret {ns}/{name}: {}", crate::error::explain(&e)))?
            .is_some()
        {
            return Ok(());
        }
        let issued = self.ca.issue(cn, names, usage).map_err(|e| e.to_string())?;
        let d = [
            ("tls.crt".to_owned(), issued.cert_pem.into_bytes()),
            ("tls.key".to_owned(), issued.key_pem.into_bytes()),
            ("ca.crt".to_owned(), self.ca.cert_pem().as_bytes().to_vec()),
        ]
        .into();
        let mut secret = pki::secret::tls(ns, name, d);
        if !owners.is_empty() {
            secret.metadata.owner_references = Some(owners.to_vec());
        }
        pki::secret::create_or_get(&api, &secret)
            .await
            .map(|_| ())
            .map_err(|e| format!("cannot create Secret {ns}/{name}: {}", crate::error::explain(&e)))
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
