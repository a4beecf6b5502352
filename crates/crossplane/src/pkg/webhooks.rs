//! Pointing a package's webhooks at its runtime, as upstream's establisher does: a CRD of a Provider
//! package that converts through a webhook, and every webhook of a Mutating- or
//! ValidatingWebhookConfiguration in it, gets its `clientConfig` set to the revision's Service on port
//! 9443 (the package's path kept) and the core's CA as its `caBundle`. The runtime's TLS server
//! certificate is signed by that CA and names that Service ([`super::runtime::tls`]), so the apiserver
//! trusts the provider's webhooks without the provider writing objects it has no rights on.

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

/// The kinds of webhook configuration a Provider package may carry.
pub const CONFIGURATIONS: [&str; 2] = ["MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"];

/// Whether `object` is a CRD that converts through a webhook.
pub fn converts_by_webhook(object: &Value) -> bool {
    object.get("kind").and_then(Value::as_str) == Some("CustomResourceDefinition")
        && object
            .pointer("/spec/conversion/strategy")
            .and_then(Value::as_str)
            == Some("Webhook")
}

/// Whether `object` has webhooks to point at the runtime: a CRD that converts through one, or a
/// webhook configuration.
pub fn has_webhooks(object: &Value) -> bool {
    converts_by_webhook(object) || is_configuration(object)
}

fn is_configuration(object: &Value) -> bool {
    object
        .get("kind")
        .and_then(Value::as_str)
        .is_some_and(|k| CONFIGURATIONS.contains(&k))
}

/// A webhook's `clientConfig` pointing at `target`, keeping the path of the one the package gave
/// (`default_path` when it gave none); a `url` it gave is replaced by the Service.
fn client_config(given: &Value, target: &Target, default_path: Option<&str>) -> Value {
    let mut service = json!({
        "name": target.service,
        "namespace": target.namespace,
        "port": PORT,
    });
    if let Some(path) = given
        .pointer("/service/path")
        .and_then(Value::as_str)
        .or(default_path)
    {
        service["path"] = json!(path);
    }
    json!({
        "service": service,
        "caBundle": k8s_openapi::ByteString(target.ca_pem.as_bytes().to_vec()),
    })
}

/// Points `object`'s webhooks at `target` ([`has_webhooks`]); anything else is left as it is. A CRD's
/// conversion keeps its path (else `/convert`) and `conversionReviewVersions` defaults to `v1`; each
/// webhook of a configuration keeps its path.
pub fn inject(object: &mut Value, target: &Target) {
    if is_configuration(object) {
        if let Some(hooks) = object.get_mut("webhooks").and_then(Value::as_array_mut) {
            for hook in hooks {
                hook["clientConfig"] = client_config(&hook["clientConfig"], target, None);
            }
        }
        return;
    }
    if !converts_by_webhook(object) {
        return;
    }
    let conversion = &mut object["spec"]["conversion"];
    if !conversion["webhook"].is_object() {
        conversion["webhook"] = json!({});
    }
    let webhook = &mut conversion["webhook"];
    webhook["clientConfig"] = client_config(&webhook["clientConfig"], target, Some(CONVERT_PATH));
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
    fn every_webhook_of_a_configuration_points_at_the_runtime() {
        for kind in CONFIGURATIONS {
            let mut o = json!({
                "apiVersion": "admissionregistration.k8s.io/v1", "kind": kind,
                "metadata": {"name": "provider-webhooks"},
                "webhooks": [
                    {"name": "a.example.org", "clientConfig": {"service": {"name": "x", "namespace": "y", "path": "/validate-a"}}},
                    {"name": "b.example.org", "clientConfig": {"url": "https://elsewhere/b"}},
                ],
            });
            assert!(has_webhooks(&o));
            inject(&mut o, &target());
            let a = &o["webhooks"][0]["clientConfig"];
            assert_eq!(a["service"]["name"], "provider-kubernetes");
            assert_eq!(a["service"]["namespace"], "crossplane-system");
            assert_eq!(a["service"]["port"], 9443);
            assert_eq!(a["service"]["path"], "/validate-a");
            let b = &o["webhooks"][1]["clientConfig"];
            assert!(b.get("url").is_none());
            assert!(b["service"].get("path").is_none());
            assert!(b["caBundle"].is_string());
        }
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
        assert!(!has_webhooks(&xrd));
    }
}
