//! Pointing a package's conversion webhooks at its runtime, as upstream's establisher does: a CRD of a
//! Provider package that converts through a webhook gets its `clientConfig` set to the revision's
//! Service on port 9443 and the core's CA as its `caBundle`. The runtime's TLS server certificate is
//! signed by that CA and names that Service ([`super::runtime::tls`]), so the apiserver trusts the
//! provider's webhook without the provider writing its own CRD, for which a revision has no rights.

use kube::api::DynamicObject;
use serde_json::{Value, json};

use super::Ctx;
use super::kind::Kind;
use super::runtime::{self, plan::Plan};

/// The port a provider serves its webhooks on (upstream's `--webhook-port` default).
pub const PORT: u16 = 9443;
/// The path of a conversion webhook when the package's CRD names none.
pub const CONVERT_PATH: &str = "/convert";

/// Where a revision's webhooks are served, and the CA the apiserver must trust.
#[derive(Debug, Clone, PartialEq)]
pub struct Target {
    /// The runtime's Service.
    pub service: String,
    /// Its namespace.
    pub namespace: String,
    /// The CA (PEM) that signed the runtime's TLS server certificate.
    pub ca_pem: String,
}

/// The target of revision `rev`'s webhooks: its runtime's Service (named by its
/// DeploymentRuntimeConfig, else after the package) and the core's CA. The error is a sentence for the
/// revision's condition.
pub async fn target(kind: Kind, rev: &DynamicObject, ctx: &Ctx) -> Result<Target, String> {
    let config = runtime::runtime_config(&ctx.client, rev).await?;
    let plan = Plan::of(kind, rev, &ctx.namespace, config).map_err(|e| e.to_string())?;
    let pki = runtime::pki(ctx).await?;
    Ok(Target {
        service: plan.service_name(),
        namespace: ctx.namespace.clone(),
        ca_pem: pki.ca_pem().to_owned(),
    })
}

/// Whether `object` is a CRD that converts through a webhook.
pub fn converts_by_webhook(object: &Value) -> bool {
    object.get("kind").and_then(Value::as_str) == Some("CustomResourceDefinition")
        && object
            .pointer("/spec/conversion/strategy")
            .and_then(Value::as_str)
            == Some("Webhook")
}

/// Points `object`'s conversion webhook at `target`, if it is a CRD that converts through one
/// ([`converts_by_webhook`]); anything else is left as it is. A `url` the package gave is replaced by
/// the Service, a path it gave is kept, and `conversionReviewVersions` defaults to `v1`.
pub fn inject(object: &mut Value, target: &Target) {
    if !converts_by_webhook(object) {
        return;
    }
    let conversion = &mut object["spec"]["conversion"];
    if !conversion["webhook"].is_object() {
        conversion["webhook"] = json!({});
    }
    let webhook = &mut conversion["webhook"];
    let path = webhook
        .pointer("/clientConfig/service/path")
        .and_then(Value::as_str)
        .unwrap_or(CONVERT_PATH)
        .to_owned();
    webhook["clientConfig"] = json!({
        "service": {
            "name": target.service,
            "namespace": target.namespace,
            "port": PORT,
            "path": path,
        },
        "caBundle": k8s_openapi::ByteString(target.ca_pem.as_bytes().to_vec()),
    });
    if !webhook["conversionReviewVersions"].is_array() {
        webhook["conversionReviewVersions"] = json!(["v1"]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn target() -> Target {
        Target {
            service: "provider-kubernetes".into(),
            namespace: "crossplane-system".into(),
            ca_pem: "-----BEGIN CERTIFICATE-----\nCA\n-----END CERTIFICATE-----\n".into(),
        }
    }

    fn crd(conversion: Value) -> Value {
        json!({
            "apiVersion": "apiextensions.k8s.io/v1",
            "kind": "CustomResourceDefinition",
            "metadata": {"name": "objects.kubernetes.crossplane.io"},
            "spec": {"conversion": conversion},
        })
    }

    #[test]
    fn a_webhook_conversion_points_at_the_runtime_and_trusts_the_core_ca() {
        let mut o = crd(json!({
            "strategy": "Webhook",
            "webhook": {
                "clientConfig": {"url": "https://elsewhere/convert"},
                "conversionReviewVersions": ["v1", "v1beta1"],
            },
        }));
        inject(&mut o, &target());
        let w = &o["spec"]["conversion"]["webhook"];
        assert_eq!(w["clientConfig"]["service"]["name"], "provider-kubernetes");
        assert_eq!(w["clientConfig"]["service"]["namespace"], "crossplane-system");
        assert_eq!(w["clientConfig"]["service"]["port"], 9443);
        assert_eq!(w["clientConfig"]["service"]["path"], "/convert");
        assert!(w["clientConfig"].get("url").is_none());
        let ca: k8s_openapi::ByteString =
            serde_json::from_value(w["clientConfig"]["caBundle"].clone()).unwrap_or_default();
        assert_eq!(String::from_utf8_lossy(&ca.0), target().ca_pem);
        assert_eq!(w["conversionReviewVersions"], json!(["v1", "v1beta1"]));
    }

    #[test]
    fn a_given_path_is_kept_and_review_versions_default() {
        let mut o = crd(json!({
            "strategy": "Webhook",
            "webhook": {"clientConfig": {"service": {"name": "x", "namespace": "y", "path": "/c"}}},
        }));
        inject(&mut o, &target());
        let w = &o["spec"]["conversion"]["webhook"];
        assert_eq!(w["clientConfig"]["service"]["path"], "/c");
        assert_eq!(w["clientConfig"]["service"]["name"], "provider-kubernetes");
        assert_eq!(w["conversionReviewVersions"], json!(["v1"]));
    }

    #[test]
    fn other_objects_are_left_alone() {
        let none = crd(json!({"strategy": "None"}));
        let mut o = none.clone();
        inject(&mut o, &target());
        assert_eq!(o, none);
        let xrd =
            json!({"kind": "CompositeResourceDefinition", "spec": {"conversion": {"strategy": "Webhook"}}});
        let mut o = xrd.clone();
        inject(&mut o, &target());
        assert_eq!(o, xrd);
        assert!(!converts_by_webhook(&xrd));
    }
}
