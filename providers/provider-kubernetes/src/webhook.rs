//! The conversion webhook of the cluster-scoped Object (v1alpha1 ⇄ v1alpha2, [`crate::conversion`]), as
//! upstream serves it: on every replica, leader or not, on `--webhook-port` (`WEBHOOK_PORT`, 9443),
//! path `/convert`.
//!
//! The serving certificate comes from the directory in `WEBHOOK_TLS_CERT_DIR` or `TLS_SERVER_CERTS_DIR`
//! (upstream's variables; `tls.crt`, `tls.key`, optionally `ca.crt`) when one is set, or from upstream's
//! default `/tls/server` when it holds a `tls.crt`. Otherwise (there is no package manager to make one)
//! the provider self-signs a CA and a certificate for its Service once, keeps them in the Secret
//! [`SECRET`] of its namespace, which every replica shares, and keeps that CA in the CRD's `caBundle`
//! (checked every minute). A `ca.crt` in the directory is kept there as well.
//!
//! Installed by a package manager (which sets [`REVISION_ENV`]), the provider keeps no `caBundle`: the
//! package manager points the CRD's conversion at the revision's Service and injects the CA that signed
//! the mounted certificate, as upstream's does, and a revision has no rights on CRDs.
//!
//! Only the Lease holder writes: it creates the Secret when it is missing and keeps the `caBundle`
//! (a leader-gated runnable); every replica reads the Secret, waiting until it exists, and serves. So a
//! standby sends no write the server-side fence (`deploy/fencing`) would refuse.
//!
//! A port that cannot be bound, or a Secret that cannot be created, is retried every 5 s with the
//! reason in the log (once per distinct reason; not at all while the apiserver is unreachable, which the
//! elector reports) rather than stopping the provider: its controllers do not depend on the webhook.
//! Conversion of Objects fails meanwhile, and the apiserver says so to the client (see the README).

use std::net::{Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    CustomResourceConversion, CustomResourceDefinition, ServiceReference, WebhookClientConfig,
    WebhookConversion,
};
use kube::CustomResourceExt;
use managed::Options;
use manager::{AlwaysContext, Manager, TermContext};
use webhook::{Server, ServingCert};

use crate::types::v1alpha1;

/// The Service the CRD's conversion points at (the provider's Deployment name).
pub const SERVICE: &str = "provider-kubernetes";
/// Its namespace.
pub const SERVICE_NAMESPACE: &str = "crossplane-system";
/// Upstream's default `--webhook-port`, also the Service's port.
pub const PORT: u16 = 9443;
/// The CRD with the webhook conversion.
pub const CRD: &str = "objects.kubernetes.crossplane.io";
/// The Secret holding the self-signed certificate.
pub const SECRET: &str = "provider-kubernetes-webhook-tls";
/// Upstream's certificate directory variables, in the order it reads them.
pub const CERT_DIR_ENV: [&str; 2] = ["WEBHOOK_TLS_CERT_DIR", "TLS_SERVER_CERTS_DIR"];
/// Upstream's certificate directory when neither variable is set.
pub const DEFAULT_CERT_DIR: &str = "/tls/server";
/// Set by a package manager on a revision's runtime (upstream's `REVISION_NAME`).
pub const REVISION_ENV: &str = "REVISION_NAME";
/// How often the CRD's `caBundle` is checked.
const CA_BUNDLE_CHECK: Duration = Duration::from_secs(60);
/// How often a taken port, or a certificate Secret that cannot be created, is tried again.
const RETRY: Duration = Duration::from_secs(5);
/// How often a replica looks for the certificate Secret the leader makes.
const SECRET_POLL: Duration = Duration::from_secs(1);

/// Adds v1alpha1 (served, deprecated, not stored) to the Object CRD `crd` and points its conversion at
/// the webhook through the provider's Service, as upstream's CRD does.
pub fn serve_v1alpha1(crd: &mut CustomResourceDefinition) {
    let mut v1 = v1alpha1::Object::crd().spec.versions;
    for v in &mut v1 {
        v.storage = false;
        v.deprecated = Some(true);
    }
    crd.spec.versions.splice(0..0, v1);
    crd.spec.conversion = Some(CustomResourceConversion {
        strategy: "Webhook".to_owned(),
        webhook: Some(WebhookConversion {
            conversion_review_versions: vec!["v1".to_owned()],
            client_config: Some(WebhookClientConfig {
                service: Some(ServiceReference {
                    name: SERVICE.to_owned(),
                    namespace: SERVICE_NAMESPACE.to_owned(),
                    path: Some(webhook::server::PATH.to_owned()),
                    port: Some(i32::from(PORT)),
                }),
                ..Default::default()
            }),
        }),
    });
}

/// `--webhook-port`: upstream's flag (or `WEBHOOK_PORT`), else 9443.
fn port(options: &Options) -> Result<u16, String> {
    match options.compat_flag("webhook-port") {
        None => Ok(PORT),
        Some(p) => p
            .parse()
            .map_err(|_| format!("--webhook-port {p:?} is not a port number (0-65535)")),
    }
}

/// The certificate directory: upstream's variables, else upstream's default directory if it holds a
/// certificate, else none (self-signed).
fn cert_dir() -> Option<PathBuf> {
    CERT_DIR_ENV
        .iter()
        .find_map(|k| std::env::var_os(k).filter(|v| !v.is_empty()))
        .map(PathBuf::from)
        .or_else(|| {
            let default = PathBuf::from(DEFAULT_CERT_DIR);
            default.join("tls.crt").exists().then_some(default)
        })
}

/// The namespace of the certificate Secret: the Lease's, else `POD_NAMESPACE`, else the Service's.
fn namespace(mgr: &Manager) -> String {
    mgr.settings()
        .election
        .as_ref()
        .map(|e| e.namespace.clone())
        .or_else(|| std::env::var("POD_NAMESPACE").ok().filter(|n| !n.is_empty()))
        .unwrap_or_else(|| SERVICE_NAMESPACE.to_owned())
}

/// The names the self-signed certificate is made for: the Service, and loopback for a webhook reached as
/// `url: https://127.0.0.1:<port>/convert` (a provider run outside the cluster, the tests).
fn hosts(ns: &str) -> Vec<String> {
    let mut hosts = webhook::certs::service_hosts(SERVICE, ns);
    hosts.extend(["localhost".to_owned(), "127.0.0.1".to_owned()]);
    hosts
}

/// Sleeps `d`, or returns `true` at once if `cancelled` resolves first.
async fn sleep_or(cancelled: impl std::future::Future<Output = ()>, d: Duration) -> bool {
    tokio::select! {
        () = cancelled => true,
        () = tokio::time::sleep(d) => false,
    }
}

/// Registers the webhook in two parts, so that only the Lease holder writes (a standby's write would be
/// refused under `deploy/fencing`, and counted as a refusal):
/// - `conversion-webhook-certificate`, leader-gated: creates the self-signed certificate's Secret if it
///   is missing, and keeps the CA in the CRD's `caBundle`;
/// - `conversion-webhook`, on every replica: reads the certificate (waiting for the Secret) and serves.
pub fn register(mgr: &mut Manager, options: &Options) {
    let port = port(options);
    let dir = cert_dir();
    let ns = namespace(mgr);
    let (gated_dir, gated_ns) = (dir.clone(), ns.clone());
    let packaged = std::env::var_os(REVISION_ENV).is_some_and(|v| !v.is_empty());
    mgr.add_gated("conversion-webhook-certificate", move |ctx: TermContext| {
        let (dir, ns) = (gated_dir.clone(), gated_ns.clone());
        async move {
            if packaged && dir.is_some() {
                // The package manager injected the CA of the mounted certificate into the CRD.
                return Ok::<(), String>(());
            }
            let client = ctx.client().clone();
            let ca = match &dir {
                // A mounted certificate: its `ca.crt`, if it has one, is what the apiserver must trust.
                Some(d) => ServingCert::from_dir(d).ok().and_then(|c| c.ca_pem),
                None => {
                    let mut quiet = webhook::Quiet::default();
                    loop {
                        match ServingCert::in_secret(&client, &ns, SECRET, &hosts(&ns)).await {
                            Ok(c) => break c.ca_pem,
                            Err(e) => quiet.report(
                                "cannot make the conversion webhook's certificate; retrying every 5 s",
                                &e,
                            ),
                        }
                        if sleep_or(ctx.cancelled(), RETRY).await {
                            return Ok::<(), String>(());
                        }
                    }
                }
            };
            if let Some(ca) = ca {
                webhook::ca_bundle::keep(client, CRD.to_owned(), ca, CA_BUNDLE_CHECK, ctx.token().clone())
                    .await;
            }
            Ok(())
        }
    });
    mgr.add_always("conversion-webhook", move |ctx: AlwaysContext| async move {
        // Not a readiness gate: the controllers work without it (see the module docs).
        ctx.mark_ready();
        let port = port?;
        let cert = match &dir {
            Some(d) => ServingCert::from_dir(d).map_err(|e| format!("{}: {e}", CERT_DIR_ENV.join(" or ")))?,
            None => {
                // Read only: the leader makes the Secret (above); every replica waits for it.
                let mut quiet = webhook::Quiet::default();
                loop {
                    match ServingCert::from_secret(ctx.client(), &ns, SECRET).await {
                        Ok(Some(c)) => break c,
                        Ok(None) => {}
                        Err(e) => {
                            quiet.report("cannot read the conversion webhook's certificate; retrying", &e)
                        }
                    }
                    if sleep_or(ctx.cancelled(), SECRET_POLL).await {
                        return Ok(());
                    }
                }
            }
        };
        let tls = cert
            .server_config("the webhook certificate")
            .map_err(|e| e.to_string())?;
        let addr = SocketAddr::from((Ipv4Addr::UNSPECIFIED, port));
        let mut quiet = webhook::Quiet::default();
        let server = loop {
            match Server::bind(addr).await {
                Ok(s) => break s,
                Err(e) => quiet.report("conversion webhook not serving; retrying every 5 s", &e),
            }
            if sleep_or(ctx.cancelled(), RETRY).await {
                return Ok::<(), String>(());
            }
        };
        let bound = server.local_addr().map_err(|e| e.to_string())?;
        tracing::info!(addr = %bound, path = webhook::server::PATH, "conversion webhook serving");
        let convert: Arc<webhook::Convert> = Arc::new(|object, desired: &str| {
            crate::conversion::convert(object, desired).map_err(|e| e.to_string())
        });
        server.serve(tls, convert, ctx.token().clone()).await;
        Ok(())
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_crd_serves_both_versions_and_stores_v1alpha2() {
        let crds = crate::crds();
        let crd = crds
            .iter()
            .find(|c| c.metadata.name.as_deref() == Some(CRD))
            .expect("the Object CRD");
        let versions: Vec<(&str, bool, bool, Option<bool>)> = crd
            .spec
            .versions
            .iter()
            .map(|v| (v.name.as_str(), v.served, v.storage, v.deprecated))
            .collect();
        assert_eq!(
            versions,
            [
                ("v1alpha1", true, false, Some(true)),
                ("v1alpha2", true, true, None)
            ]
        );
        let conversion = crd.spec.conversion.as_ref().expect("conversion");
        assert_eq!(conversion.strategy, "Webhook");
        let service = conversion
            .webhook
            .as_ref()
            .and_then(|w| w.client_config.as_ref())
            .and_then(|c| c.service.as_ref())
            .expect("a service");
        assert_eq!(
            (service.name.as_str(), service.port, service.path.as_deref()),
            (SERVICE, Some(9443), Some("/convert"))
        );
    }

    #[test]
    fn the_port_is_upstreams_flag() {
        let mut o = Options::default();
        assert_eq!(port(&o), Ok(9443));
        o.compat = vec![manager::config::compat::Given {
            name: "webhook-port",
            value: "9999".into(),
            ignored: None,
        }];
        assert_eq!(port(&o), Ok(9999));
        o.compat[0].value = "nine".into();
        assert!(port(&o).is_err_and(|e| e.contains("--webhook-port")));
    }
}
