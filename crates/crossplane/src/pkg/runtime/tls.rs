//! The runtime's TLS Secrets, `<package>-tls-server` and `<package>-tls-client`, signed by the core's
//! CA (`crossplane-root-ca`, [`crate::composite::pki`]) as upstream's: the server certificate names the
//! runtime's Service, the client certificate the package. Each is created once and then kept, and
//! both belong to the package, since every revision of it uses them.

use pki::Usage;

use super::plan::Plan;
use super::service::dns_names;
use crate::composite::pki::Pki;

/// Makes sure the revision's TLS Secrets exist. The error is a sentence for a condition.
pub async fn ensure(client: &kube::Client, pki: &Pki, plan: &Plan) -> Result<(), String> {
    let owners = plan.package_owners();
    if let Some(name) = &plan.tls_server {
        pki.ensure(
            client,
            &plan.namespace,
            name,
            &plan.service_name(),
            &dns_names(plan),
            Usage::Server,
            &owners,
        )
        .await?;
    }
    if let Some(name) = &plan.tls_client {
        pki.ensure(
            client,
            &plan.namespace,
            name,
            &plan.package,
            &[],
            Usage::Client,
            &owners,
        )
        .await?;
    }
    Ok(())
}
