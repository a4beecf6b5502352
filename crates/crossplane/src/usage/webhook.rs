//! The admission webhook that blocks deleting a resource in use (upstream's
//! `internal/webhook/protection/usage`): the ValidatingWebhookConfiguration `crossplane-no-usages`
//! sends every DELETE of an object labelled `crossplane.io/in-use: "true"` to `/validate-no-usages`,
//! and the core refuses it (409) while a Usage, ClusterUsage or legacy Usage names the object, with
//! upstream's message ([`super::message::in_use`]). The refused deletion's propagation policy is kept
//! on the object (`usage.crossplane.io/deletion-attempt-with-policy`) for `replayDeletion`.
//!
//! Like controller-runtime's webhook server, it serves on every replica, standbys too, since the
//! apiserver may call any of them through the Service. Only the Lease holder writes the configuration
//! and the serving certificate's Secret ([`register`]); every replica reads the Secret and serves. The
//! one write a standby may make is the deletion-attempt annotation, on a request the apiserver sent it
//! (upstream's webhook makes the same patch); if that patch fails, the deletion is refused all the same.
//!
//! Out of the cluster (the tests, a core run from a laptop) the hidden `--webhook-url` points the
//! configuration at the core's own address instead of the Service. Under `--watch-label-selector` the
//! configuration is named after the selector and matches only objects carrying its labels, so cores
//! sharing one apiserver do not answer for each other.

use std::collections::BTreeMap;
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use ::webhook::admission::{Validate, Verdict, refuse};
use ::webhook::{Routes, Server, ServingCert};
use k8s_openapi::api::admissionregistration::v1::{
    RuleWithOperations, ServiceReference, ValidatingWebhook, ValidatingWebhookConfiguration,
    WebhookClientConfig,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use kube::Api;
use kube::api::{Patch, PatchParams};
use kube::core::admission::{AdmissionRequest, AdmissionResponse, Operation};
use kube::core::{DynamicObject, GroupVersionKind};
use manager::{AlwaysContext, Manager, TermContext};
use serde_json::json;
use sha2::{Digest, Sha256};

use super::finder::{Finder, Target};
use super::message;

/// The path the configuration calls.
pub const PATH: &str = "/validate-no-usages";
/// The webhook's name, which the apiserver quotes in its refusal.
pub const WEBHOOK_NAME: &str = "nousages.protection.crossplane.io";
/// The configuration's name (suffixed under `--watch-label-selector`).
pub const CONFIGURATION: &str = "crossplane-no-usages";
/// Upstream's webhook Service.
pub const SERVICE: &str = "crossplane-webhooks";
/// Upstream's webhook port (`--webhook-port`), also the Service's.
pub const PORT: u16 = 9443;
/// The Secret holding the serving certificate by default (upstream's `--tls-server-secret-name`).
pub const SECRET: &str = "crossplane-tls-server";
/// The field manager of the configuration.
const MANAGER: &str = "crossplane-usage-webhook";
/// How often the configuration is checked, and a failure retried.
const RECHECK: Duration = Duration::from_secs(60);
/// How often a taken port, or a Secret that cannot be made, is tried again.
const RETRY: Duration = Duration::from_secs(5);
/// How often a replica looks for the Secret the leader makes.
const SECRET_POLL: Duration = Duration::from_secs(1);

/// Where and how the webhook serves.
#[derive(Debug, Clone)]
pub struct Options {
    /// The port to listen on (all interfaces).
    pub port: u16,
    /// The base URL the apiserver calls instead of the Service (out of the cluster).
    pub url: Option<String>,
    /// The core's namespace: the Service's and the Secret's.
    pub namespace: String,
    /// `--watch-label-selector`: the configuration matches only objects with these labels.
    pub selector: Option<String>,
}

/// `a=b,c=d` as labels; a selector of another form (set-based) gives `None`.
pub fn selector_labels(selector: &str) -> Option<BTreeMap<String, String>> {
    selector
        .split(',')
        .filter(|s| !s.trim().is_empty())
        .map(|s| {
            let (k, v) = s.split_once("==").or_else(|| s.split_once('='))?;
            let (k, v) = (k.trim(), v.trim());
            (!k.is_empty() && !k.contains('!')).then(|| (k.to_owned(), v.to_owned()))
        })
        .collect()
}

/// The configuration's name: `crossplane-no-usages`, or with a selector, suffixed by its hash.
pub fn configuration_name(selector: Option<&str>) -> String {
    match selector {
        None => CONFIGURATION.to_owned(),
        Some(s) => {
            let hash = format!("{:x}", Sha256::digest(s.as_bytes()));
            format!("{CONFIGURATION}-{}", &hash[..10])
        }
    }
}

/// The ValidatingWebhookConfiguration, as upstream ships it (`cluster/webhookconfigurations/usage.yaml`),
/// trusting `ca_pem`.
pub fn configuration(options: &Options, ca_pem: &str) -> ValidatingWebhookConfiguration {
    let mut labels = BTreeMap::from([(apis::protection::LABEL_IN_USE.to_owned(), "true".to_owned())]);
    if let Some(extra) = options.selector.as_deref().and_then(selector_labels) {
        labels.extend(extra);
    }
    let client_config = WebhookClientConfig {
        ca_bundle: Some(k8s_openapi::ByteString(ca_pem.as_bytes().to_vec())),
        url: options
            .url
            .as_ref()
            .map(|u| format!("{}{PATH}", u.trim_end_matches('/'))),
        service: options.url.is_none().then(|| ServiceReference {
            name: SERVICE.to_owned(),
            namespace: options.namespace.clone(),
            path: Some(PATH.to_owned()),
            port: Some(i32::from(PORT)),
        }),
    };
    let mut vwc = ValidatingWebhookConfiguration {
        webhooks: Some(vec![ValidatingWebhook {
            name: WEBHOOK_NAME.to_owned(),
            admission_review_versions: vec!["v1".to_owned()],
            client_config,
            failure_policy: Some("Fail".to_owned()),
            side_effects: "None".to_owned(),
            object_selector: Some(LabelSelector {
                match_labels: Some(labels),
                match_expressions: None,
            }),
            rules: Some(vec![RuleWithOperations {
                api_groups: Some(vec!["*".to_owned()]),
                api_versions: Some(vec!["*".to_owned()]),
                operations: Some(vec!["DELETE".to_owned()]),
                resources: Some(vec!["*".to_owned()]),
                scope: None,
            }]),
            ..ValidatingWebhook::default()
        }]),
        ..ValidatingWebhookConfiguration::default()
    };
    vwc.metadata.name = Some(configuration_name(options.selector.as_deref()));
    vwc
}

/// The propagation policy of a deletion (`options` of the review), `Background` when none is given.
pub fn propagation(options: Option<&serde_json::Value>) -> String {
    options
        .and_then(|o| o.get("propagationPolicy"))
        .and_then(serde_json::Value::as_str)
        .filter(|p| !p.is_empty())
        .unwrap_or("Background")
        .to_owned()
}

/// What the webhook answers before looking anything up: `Err` refuses the request (400) with the words.
pub fn precheck(operation: &Operation) -> Result<(), String> {
    match operation {
        Operation::Delete => Ok(()),
        other => {
            let op = serde_json::to_value(other)
                .ok()
                .and_then(|v| v.as_str().map(str::to_owned))
                .unwrap_or_default();
            Err(format!("unexpected operation {op:?}, expected \"DELETE\""))
        }
    }
}

/// The validator: refuses deleting an object some Usage protects.
pub fn validator(client: kube::Client, finder: Finder) -> Arc<Validate> {
    Arc::new(move |req: AdmissionRequest<DynamicObject>| -> Verdict {
        let (client, finder) = (client.clone(), finder.clone());
        Box::pin(async move { decide(&client, &finder, req).await })
    })
}

async fn decide(
    client: &kube::Client,
    finder: &Finder,
    req: AdmissionRequest<DynamicObject>,
) -> AdmissionResponse {
    let response = AdmissionResponse::from(&req);
    if let Err(e) = precheck(&req.operation) {
        return refuse(response, 400, &e);
    }
    let Some(old) = req.old_object.as_ref() else {
        return refuse(response, 400, "the DELETE request carries no oldObject");
    };
    let api_version = old
        .types
        .as_ref()
        .map_or(String::new(), |t| t.api_version.clone());
    let kind = old
        .types
        .as_ref()
        .map_or(req.kind.kind.clone(), |t| t.kind.clone());
    let target = Target {
        api_version: &api_version,
        kind: &kind,
        name: &req.name,
        namespace: req.namespace.as_deref(),
    };
    let usages = match finder.usages_of(target).await {
        Ok(u) => u,
        Err(e) => return refuse(response, 500, &e.to_string()),
    };
    if usages.is_empty() {
        return response;
    }
    let words = message::in_use(&usages);
    let policy = propagation(req.options.as_ref().map(|o| &o.0));
    let recorded = old
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(apis::protection::ANNOTATION_DELETION_ATTEMPT));
    if recorded != Some(&policy)
        && let Err(e) = note_attempt(client, &req, &api_version, &kind, &policy).await
    {
        tracing::warn!(
            kind = %kind, name = %req.name, error = %e,
            "cannot note the refused deletion on the object; replayDeletion will not replay it"
        );
    }
    tracing::debug!(kind = %kind, name = %req.name, message = %words, "deletion refused: in use");
    refuse(response, 409, &words)
}

/// Notes the refused deletion's `policy` on the object, for `replayDeletion`.
async fn note_attempt(
    client: &kube::Client,
    req: &AdmissionRequest<DynamicObject>,
    api_version: &str,
    kind: &str,
    policy: &str,
) -> Result<(), String> {
    let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
    let gvk = GroupVersionKind::gvk(group, version, kind);
    let ar = kube::core::ApiResource::from_gvk_with_plural(&gvk, &req.resource.resource);
    let api: Api<DynamicObject> = match req.namespace.as_deref() {
        Some(ns) => Api::namespaced_with(client.clone(), ns, &ar),
        None => Api::all_with(client.clone(), &ar),
    };
    let patch = json!({"metadata": {"annotations": {apis::protection::ANNOTATION_DELETION_ATTEMPT: policy}}});
    api.patch(&req.name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .map(|_| ())
        .map_err(|e| crate::error::explain(&e))
}

/// The names the self-signed certificate is made for: the Service, and loopback.
fn hosts(ns: &str) -> Vec<String> {
    let mut hosts = ::webhook::certs::service_hosts(SERVICE, ns);
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

/// Applies the configuration unless it is already as wanted; returns whether it wrote.
async fn ensure_configuration(
    client: &kube::Client,
    wanted: &ValidatingWebhookConfiguration,
) -> Result<bool, String> {
    let api: Api<ValidatingWebhookConfiguration> = Api::all(client.clone());
    let name = wanted.metadata.name.clone().unwrap_or_default();
    let current = api.get_opt(&name).await.map_err(|e| crate::error::explain(&e))?;
    if current.as_ref().is_some_and(|c| c.webhooks == wanted.webhooks) {
        return Ok(false);
    }
    let mut body = wanted.clone();
    body.metadata.managed_fields = None;
    let mut doc = serde_json::to_value(&body).map_err(|e| e.to_string())?;
    doc["apiVersion"] = json!("admissionregistration.k8s.io/v1");
    doc["kind"] = json!("ValidatingWebhookConfiguration");
    api.patch(&name, &PatchParams::apply(MANAGER).force(), &Patch::Apply(&doc))
        .await
        .map_err(|e| crate::error::explain(&e))?;
    Ok(true)
}

/// Registers the webhook in two parts:
/// - `usage-webhook-configuration`, gated by the Lease: makes the serving certificate's Secret if it
///   is missing and keeps the ValidatingWebhookConfiguration (with the CA) as wanted;
/// - `usage-webhook`, on every replica: reads the certificate (waiting for the Secret) and serves.
pub fn register(mgr: &mut Manager, options: Options, secret: String) {
    let gated_secret = secret.clone();
    let gated = options.clone();
    mgr.add_gated("usage-webhook-configuration", move |ctx: TermContext| {
        let (options, secret) = (gated.clone(), gated_secret.clone());
        async move {
            let client = ctx.client().clone();
            let mut quiet = ::webhook::Quiet::default();
            let ca = loop {
                match ServingCert::in_secret(&client, &options.namespace, &secret, &hosts(&options.namespace))
                    .await
                {
                    Ok(c) => break c.ca_pem.unwrap_or_default(),
                    Err(e) => quiet.report(
                        "cannot make the usage webhook's certificate; retrying every 5 s",
                        &e,
                    ),
                }
                if sleep_or(ctx.cancelled(), RETRY).await {
                    return Ok::<(), String>(());
                }
            };
            let wanted = configuration(&options, &ca);
            let mut last: Option<String> = None;
            loop {
                match ensure_configuration(&client, &wanted).await {
                    Ok(wrote) => {
                        last = None;
                        if wrote {
                            tracing::info!(
                                name = %configuration_name(options.selector.as_deref()),
                                "usage webhook configuration applied"
                            );
                        }
                    }
                    Err(e) if last.as_deref() != Some(e.as_str()) => {
                        tracing::warn!(error = %e, "cannot apply the usage webhook configuration; retrying");
                        last = Some(e);
                    }
                    Err(_) => {}
                }
                let wait = if last.is_some() { RETRY } else { RECHECK };
                if sleep_or(ctx.cancelled(), wait).await {
                    return Ok(());
                }
            }
        }
    });
    mgr.add_always("usage-webhook", move |ctx: AlwaysContext| async move {
        // Not a readiness gate: the controllers work without it.
        ctx.mark_ready();
        let mut quiet = ::webhook::Quiet::default();
        let cert = loop {
            // Read only: the leader makes the Secret (above); every replica waits for it.
            match ServingCert::from_secret(ctx.client(), &options.namespace, &secret).await {
                Ok(Some(c)) => break c,
                Ok(None) => {}
                Err(e) => quiet.report("cannot read the usage webhook's certificate; retrying", &e),
            }
            if sleep_or(ctx.cancelled(), SECRET_POLL).await {
                return Ok(());
            }
        };
        let tls = cert
            .server_config("the usage webhook's certificate")
            .map_err(|e| e.to_string())?;
        let addr = SocketAddr::from((Ipv4Addr::UNSPECIFIED, options.port));
        let server = loop {
            match Server::bind(addr).await {
                Ok(s) => break s,
                Err(e) => quiet.report("usage webhook not serving; retrying every 5 s", &e),
            }
            if sleep_or(ctx.cancelled(), RETRY).await {
                return Ok::<(), String>(());
            }
        };
        let bound = server.local_addr().map_err(|e| e.to_string())?;
        tracing::info!(addr = %bound, path = PATH, "usage webhook serving");
        let finder = Finder::new(ctx.client().clone(), options.selector.clone());
        let routes = Routes::new().validate(PATH, validator(ctx.client().clone(), finder));
        server.serve_routes(tls, routes, ctx.token().clone()).await;
        Ok(())
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    fn options(url: Option<&str>, selector: Option<&str>) -> Options {
        Options {
            port: PORT,
            url: url.map(str::to_owned),
            namespace: "crossplane-system".into(),
            selector: selector.map(str::to_owned),
        }
    }

    #[test]
    fn the_configuration_is_upstreams() {
        let v = serde_json::to_value(configuration(&options(None, None), "CA")).expect("json");
        assert_eq!(v["metadata"]["name"], "crossplane-no-usages");
        let hook = &v["webhooks"][0];
        assert_eq!(hook["name"], WEBHOOK_NAME);
        assert_eq!(hook["failurePolicy"], "Fail");
        assert_eq!(hook["sideEffects"], "None");
        assert_eq!(
            hook["objectSelector"]["matchLabels"],
            json!({"crossplane.io/in-use": "true"})
        );
        assert_eq!(hook["rules"][0]["operations"], json!(["DELETE"]));
        assert_eq!(hook["rules"][0]["resources"], json!(["*"]));
        assert_eq!(
            hook["clientConfig"]["service"],
            json!({"name": "crossplane-webhooks", "namespace": "crossplane-system",
                   "path": "/validate-no-usages", "port": 9443})
        );
    }

    #[test]
    fn out_of_cluster_and_under_a_selector_the_configuration_is_the_cores_own() {
        let o = options(Some("https://127.0.0.1:1234/"), Some("crossplane-rs.io/test=abc"));
        let v = serde_json::to_value(configuration(&o, "CA")).expect("json");
        let name = v["metadata"]["name"].as_str().expect("name");
        assert!(
            name.starts_with("crossplane-no-usages-") && name.len() == 31,
            "{name}"
        );
        let hook = &v["webhooks"][0];
        assert_eq!(
            hook["clientConfig"]["url"],
            "https://127.0.0.1:1234/validate-no-usages"
        );
        assert!(hook["clientConfig"].get("service").is_none());
        assert_eq!(
            hook["objectSelector"]["matchLabels"],
            json!({"crossplane.io/in-use": "true", "crossplane-rs.io/test": "abc"})
        );
        assert_eq!(selector_labels("a!=b"), None);
        assert_eq!(selector_labels("a==b, c=d").map(|l| l.len()), Some(2));
    }

    #[test]
    fn only_deletes_are_judged_and_the_default_policy_is_background() {
        assert_eq!(precheck(&Operation::Delete), Ok(()));
        assert_eq!(
            precheck(&Operation::Create),
            Err("unexpected operation \"CREATE\", expected \"DELETE\"".to_owned())
        );
        assert_eq!(propagation(None), "Background");
        assert_eq!(
            propagation(Some(&json!({"propagationPolicy": "Foreground"}))),
            "Foreground"
        );
        assert_eq!(propagation(Some(&json!({"kind": "DeleteOptions"}))), "Background");
    }
}
