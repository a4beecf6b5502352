//! The runtime container of a revision's Deployment ([`super::deployment`]): the package image,
//! upstream's environment (`POD_NAMESPACE`, `PROVIDER_NAME` / `FUNCTION_NAME`, `REVISION_NAME`,
//! `REVISION_UID`, the TLS directories), ports `metrics` and `webhook` / `grpc`, and our defaults (a
//! provider's leader election and admin port, the probes). What the runtime config sets wins, except
//! the pull policy from `packagePullPolicy`.

use k8s_openapi::api::core::v1::{
    Container, ContainerPort, EnvVar, EnvVarSource, HTTPGetAction, ObjectFieldSelector, Probe,
    SecurityContext, TCPSocketAction,
};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use super::deployment::{HEALTH_PORT, METRICS_PORT, TLS_CLIENT_DIR, TLS_PORT, TLS_SERVER_DIR, USER};
use super::plan::Plan;
use crate::pkg::kind::Kind;

/// Fills runtime container `c` (as the runtime config gave it, or empty) for `plan`.
pub(super) fn runtime_container(plan: &Plan, c: &mut Container) {
    c.image.get_or_insert_with(|| plan.image.clone());
    c.image_pull_policy.get_or_insert_with(|| "IfNotPresent".into());
    if let Some(p) = &plan.pull_policy {
        c.image_pull_policy = Some(p.clone());
    }
    c.security_context.get_or_insert_with(|| SecurityContext {
        run_as_user: Some(USER),
        run_as_group: Some(USER),
        run_as_non_root: Some(true),
        allow_privilege_escalation: Some(false),
        privileged: Some(false),
        ..Default::default()
    });
    merge_env(c, env(plan));
    ports(plan, c);
    c.liveness_probe
        .get_or_insert_with(|| probe(plan.kind, "/healthz", 10, 3));
    c.readiness_probe
        .get_or_insert_with(|| probe(plan.kind, "/readyz", 5, 2));
}

/// Our environment for the runtime of `plan`.
fn env(plan: &Plan) -> Vec<EnvVar> {
    let name_label = plan.kind.runtime_label().unwrap_or(apis::pkg::LABEL_PACKAGE);
    let mut env = vec![
        field_env("POD_NAME", "metadata.name"),
        field_env("POD_NAMESPACE", "metadata.namespace"),
        field_env(
            if plan.kind == Kind::Function {
                "FUNCTION_NAME"
            } else {
                "PROVIDER_NAME"
            },
            &format!("metadata.labels['{name_label}']"),
        ),
        field_env(
            "REVISION_NAME",
            &format!("metadata.labels['{}']", apis::pkg::LABEL_REVISION),
        ),
        value_env("REVISION_UID", &plan.revision_uid),
    ];
    if plan.kind == Kind::Provider {
        env.push(value_env("LEADER_ELECTION", "true"));
        env.push(value_env("LEADER_ELECTION_ID", &plan.lease()));
    }
    if plan.tls_server.is_some() {
        env.push(value_env("TLS_SERVER_CERTS_DIR", TLS_SERVER_DIR));
        if plan.kind == Kind::Provider {
            env.push(value_env("WEBHOOK_TLS_CERT_DIR", "$(TLS_SERVER_CERTS_DIR)"));
        }
    }
    if plan.tls_client.is_some() {
        env.push(value_env("TLS_CLIENT_CERTS_DIR", TLS_CLIENT_DIR));
    }
    env
}

/// Puts `ours` before the container's own variables, leaving out those it sets itself.
fn merge_env(c: &mut Container, ours: Vec<EnvVar>) {
    let have = c.env.get_or_insert_with(Vec::new);
    // Ours go first, so `$(TLS_SERVER_CERTS_DIR)` and the config's own references resolve.
    let theirs: Vec<EnvVar> = std::mem::take(have);
    let mut merged: Vec<EnvVar> = ours
        .into_iter()
        .filter(|e| !theirs.iter().any(|t| t.name == e.name))
        .collect();
    merged.extend(theirs);
    *have = merged;
}

/// Adds our ports to container `c` unless it has one of the same name or number.
fn ports(plan: &Plan, c: &mut Container) {
    let tls_port_name = if plan.kind == Kind::Function {
        "grpc"
    } else {
        "webhook"
    };
    let mut ports = vec![port("metrics", METRICS_PORT)];
    if plan.kind == Kind::Provider {
        ports.push(port("health", HEALTH_PORT));
    }
    if plan.kind == Kind::Function || plan.tls_server.is_some() {
        ports.push(port(tls_port_name, TLS_PORT));
    }
    let have = c.ports.get_or_insert_with(Vec::new);
    for p in ports {
        if !have
            .iter()
            .any(|h| h.name == p.name || h.container_port == p.container_port)
        {
            have.push(p);
        }
    }
}

/// A probe of a runtime of `kind`: a function's gRPC port (TCP), anyone else's `path` on the admin
/// port.
fn probe(kind: Kind, path: &str, period: i32, failures: i32) -> Probe {
    match kind {
        Kind::Function => Probe {
            tcp_socket: Some(TCPSocketAction {
                port: IntOrString::String("grpc".into()),
                ..Default::default()
            }),
            period_seconds: Some(period),
            failure_threshold: Some(failures),
            timeout_seconds: Some(2),
            ..Default::default()
        },
        _ => Probe {
            http_get: Some(HTTPGetAction {
                path: Some(path.into()),
                port: IntOrString::String("health".into()),
                ..Default::default()
            }),
            period_seconds: Some(period),
            failure_threshold: Some(failures),
            timeout_seconds: Some(2),
            ..Default::default()
        },
    }
}

fn field_env(name: &str, path: &str) -> EnvVar {
    EnvVar {
        name: name.into(),
        value_from: Some(EnvVarSource {
            field_ref: Some(ObjectFieldSelector {
                api_version: Some("v1".into()),
                field_path: path.into(),
            }),
            ..Default::default()
        }),
        ..Default::default()
    }
}

fn value_env(name: &str, value: &str) -> EnvVar {
    EnvVar {
        name: name.into(),
        value: Some(value.into()),
        ..Default::default()
    }
}

fn port(name: &str, number: i32) -> ContainerPort {
    ContainerPort {
        name: Some(name.into()),
        container_port: number,
        protocol: Some("TCP".into()),
        ..Default::default()
    }
}
