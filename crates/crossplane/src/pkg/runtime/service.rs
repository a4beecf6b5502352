//! The runtime's Service, named after the package as upstream's: a provider's serves its webhooks on
//! `webhook` 9443; a function's is headless (`clusterIP: None`) on `grpc` 9443, and its address is the
//! FunctionRevision's `status.endpoint`, `dns:///<service>.<namespace>:9443`.
//!
//! Unlike upstream, the Service selects every Pod of the package, not only the active revision's:
//! during an upgrade both revisions' Pods serve, so the address never points at nothing. Every revision
//! of the package writes the same Service, owned by the package.

use k8s_openapi::api::core::v1::{Service, ServicePort, ServiceSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use super::deployment::TLS_PORT;
use super::plan::Plan;
use crate::pkg::kind::Kind;

/// The runtime's Service.
pub fn service(plan: &Plan) -> Service {
    let tmeta = plan
        .config
        .service_template
        .as_ref()
        .and_then(|t| t.metadata.clone())
        .unwrap_or_default();
    let mut labels = plan.labels.clone();
    // The revision label would flip between revisions; the Service is the package's.
    labels.remove(apis::pkg::LABEL_REVISION);
    labels.extend(tmeta.labels.unwrap_or_default());
    let function = plan.kind == Kind::Function;
    let port_name = if function { "grpc" } else { "webhook" };
    Service {
        metadata: ObjectMeta {
            name: Some(plan.service_name()),
            namespace: Some(plan.namespace.clone()),
            labels: Some(labels),
            annotations: tmeta.annotations,
            owner_references: Some(plan.package_owners()),
            ..Default::default()
        },
        spec: Some(ServiceSpec {
            selector: Some(plan.service_selector()),
            cluster_ip: function.then(|| "None".to_string()),
            ports: Some(vec![ServicePort {
                name: Some(port_name.into()),
                port: TLS_PORT,
                target_port: Some(IntOrString::String(port_name.into())),
                protocol: Some("TCP".into()),
                ..Default::default()
            }]),
            ..Default::default()
        }),
        status: None,
    }
}

/// A function's endpoint: `dns:///<service>.<namespace>:9443`, as upstream.
pub fn endpoint(plan: &Plan) -> String {
    format!("dns:///{}.{}:{TLS_PORT}", plan.service_name(), plan.namespace)
}

/// The DNS names the TLS server certificate is for: the Service's short, namespaced and cluster names.
pub fn dns_names(plan: &Plan) -> Vec<String> {
    let (s, ns) = (plan.service_name(), &plan.namespace);
    vec![
        s.clone(),
        format!("{s}.{ns}"),
        format!("{s}.{ns}.svc"),
        format!("{s}.{ns}.svc.cluster.local"),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pkg::runtime::plan::tests::plan;

    #[test]
    fn a_function_gets_a_headless_service_and_its_endpoint() {
        let p = plan(Kind::Function);
        let v = serde_json::to_value(service(&p)).expect("json");
        assert_eq!(v["metadata"]["name"], "pkg-x");
        assert_eq!(v["spec"]["clusterIP"], "None");
        assert_eq!(v["spec"]["ports"][0]["name"], "grpc");
        assert_eq!(v["spec"]["ports"][0]["port"], 9443);
        assert_eq!(
            v["spec"]["selector"],
            serde_json::json!({"pkg.crossplane.io/function": "pkg-x"})
        );
        assert_eq!(v["metadata"]["ownerReferences"][0]["kind"], "Function");
        assert!(
            v["metadata"]["labels"]
                .get("pkg.crossplane.io/revision")
                .is_none()
        );
        assert_eq!(endpoint(&p), "dns:///pkg-x.crossplane-system:9443");
        assert!(dns_names(&p).contains(&"pkg-x.crossplane-system".to_string()));
    }

    #[test]
    fn a_provider_service_serves_webhooks() {
        let v = serde_json::to_value(service(&plan(Kind::Provider))).expect("json");
        assert!(v["spec"].get("clusterIP").is_none());
        assert_eq!(v["spec"]["ports"][0]["targetPort"], "webhook");
    }
}
