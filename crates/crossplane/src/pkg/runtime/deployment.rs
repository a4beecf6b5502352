//! The runtime's Deployment and PodDisruptionBudget, built from the DeploymentRuntimeConfig as
//! upstream builds them (`runtime.go`, `runtime_provider.go`, `runtime_function.go`), HA by default.
//!
//! Upstream's shape: the container `package-runtime` first, the package image, `POD_NAMESPACE`,
//! `PROVIDER_NAME` / `FUNCTION_NAME`, `REVISION_NAME`, `REVISION_UID`, the TLS directories, ports
//! `metrics` 8080 and `webhook` / `grpc` 9443, the TLS Secrets mounted at `/tls/server` and
//! `/tls/client`, the selector on the revision and package labels, a controller reference to the
//! revision. What the runtime config sets wins over the defaults below; the selector, namespace,
//! owner, pull policy from `packagePullPolicy` and the TLS wiring are always ours.
//!
//! Unlike upstream, by default:
//! - 2 replicas (upstream 1), rolled with `maxUnavailable: 0`;
//! - a provider runs with `LEADER_ELECTION=true` and `LEADER_ELECTION_ID` naming the package's Lease
//!   ([`super::plan::lease_name`]), so every revision of the package stands for one Lease, and
//!   `POD_NAME` from the downward API (the identity in the Lease, and the Pod the leader watches to
//!   leave before SIGTERM);
//! - liveness and readiness probes: a provider's `/healthz` and `/readyz` on the admin port 8081 (what
//!   every crossplane-rs binary serves), a function's gRPC port (TCP);
//! - `terminationGracePeriodSeconds` [`TERMINATION_GRACE`], longer than the graceful shutdown plus the
//!   renew deadline (a leader that stops renewing keeps its term that long);
//! - preferred pod anti-affinity on the host, topology spread over zones and hosts;
//! - a PodDisruptionBudget with `maxUnavailable: 1`.
//!
//! A DeploymentRuntimeConfig can still set 1 replica, other probes, its own env, or anything else
//! upstream allows.

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::{Deployment, DeploymentSpec, DeploymentStrategy, RollingUpdateDeployment};
use k8s_openapi::api::core::v1::{
    Affinity, Container, LocalObjectReference, PodAffinityTerm, PodAntiAffinity, PodSecurityContext, PodSpec,
    SecretVolumeSource, TopologySpreadConstraint, Volume, VolumeMount, WeightedPodAffinityTerm,
};
use k8s_openapi::api::policy::v1::{PodDisruptionBudget, PodDisruptionBudgetSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use super::container::runtime_container;
use super::plan::Plan;

/// The runtime container's name (upstream's).
pub const CONTAINER: &str = "package-runtime";
/// Replicas unless the runtime config says otherwise (upstream: 1).
pub const DEFAULT_REPLICAS: i32 = 2;
/// `metrics`, as upstream.
pub const METRICS_PORT: i32 = 8080;
/// The admin port of crossplane-rs binaries (`/healthz`, `/readyz`; manager
/// `--health-probe-bind-address`).
pub const HEALTH_PORT: i32 = 8081;
/// A provider's webhook port and a function's gRPC port, as upstream.
pub const TLS_PORT: i32 = 9443;
/// The graceful shutdown of crossplane-rs binaries (manager `--graceful-shutdown-timeout`).
const GRACEFUL_SHUTDOWN_SECONDS: i64 = 30;
/// The longest renew deadline of our binaries' Leases (the core's and provider-nop's 60/50 s).
const RENEW_DEADLINE_SECONDS: i64 = 50;
/// Slack on top.
const TERMINATION_SLACK_SECONDS: i64 = 10;
/// `terminationGracePeriodSeconds` unless the runtime config sets it: graceful shutdown + renew
/// deadline + slack, so the kubelet's SIGKILL never cuts a stop that is still in its safety margin.
pub const TERMINATION_GRACE: i64 =
    GRACEFUL_SHUTDOWN_SECONDS + RENEW_DEADLINE_SECONDS + TERMINATION_SLACK_SECONDS;
/// Upstream's non-root user and group.
pub(super) const USER: i64 = 2000;
/// Where the TLS server Secret is mounted.
pub const TLS_SERVER_DIR: &str = "/tls/server";
/// Where the TLS client Secret is mounted.
pub const TLS_CLIENT_DIR: &str = "/tls/client";

/// The revision's Deployment.
pub fn deployment(plan: &Plan) -> Deployment {
    let template = plan.config.deployment_template.clone().unwrap_or_default();
    let tmeta = template.metadata.unwrap_or_default();
    let mut spec: DeploymentSpec = template.spec.unwrap_or_default();
    let selector = plan.selector();

    spec.replicas.get_or_insert(DEFAULT_REPLICAS);
    spec.selector = LabelSelector {
        match_labels: Some(selector.clone()),
        ..Default::default()
    };
    spec.strategy.get_or_insert_with(|| DeploymentStrategy {
        type_: Some("RollingUpdate".into()),
        rolling_update: Some(RollingUpdateDeployment {
            max_surge: Some(IntOrString::Int(1)),
            max_unavailable: Some(IntOrString::Int(0)),
        }),
    });
    pod_metadata(plan, &selector, &mut spec);
    let pod = spec.template.spec.get_or_insert_with(PodSpec::default);
    pod_defaults(plan, &selector, pod);
    pull_secrets(plan, pod);
    // The runtime container, first.
    let at = pod.containers.iter().position(|c| c.name == CONTAINER);
    let mut c = match at {
        Some(i) => pod.containers.remove(i),
        None => Container {
            name: CONTAINER.into(),
            ..Default::default()
        },
    };
    runtime_container(plan, &mut c);
    pod.containers.insert(0, c);
    tls_volumes(plan, pod);

    let mut labels = plan.labels.clone();
    labels.extend(tmeta.labels.unwrap_or_default());
    Deployment {
        metadata: ObjectMeta {
            name: Some(plan.deployment_name()),
            namespace: Some(plan.namespace.clone()),
            labels: Some(labels),
            annotations: tmeta.annotations,
            owner_references: Some(plan.revision_owners()),
            ..Default::default()
        },
        spec: Some(spec),
        status: None,
    }
}

/// The Pod template's labels (the plan's unless the config sets them, and always the selector's)
/// and Prometheus annotations (unless the config sets them).
fn pod_metadata(plan: &Plan, selector: &BTreeMap<String, String>, spec: &mut DeploymentSpec) {
    let pod_meta = spec.template.metadata.get_or_insert_with(Default::default);
    let pod_labels = pod_meta.labels.get_or_insert_with(Default::default);
    for (k, v) in &plan.labels {
        pod_labels.entry(k.clone()).or_insert_with(|| v.clone());
    }
    pod_labels.extend(selector.clone());
    let annotations = pod_meta.annotations.get_or_insert_with(Default::default);
    for (k, v) in [
        ("prometheus.io/scrape", "true".to_string()),
        ("prometheus.io/port", METRICS_PORT.to_string()),
        ("prometheus.io/path", "/metrics".to_string()),
    ] {
        annotations.entry(k.into()).or_insert(v);
    }
}

/// What the Pod gets unless the config sets it: the ServiceAccount, a non-root security context,
/// [`TERMINATION_GRACE`], anti-affinity on the host and topology spread over zones and hosts.
fn pod_defaults(plan: &Plan, selector: &BTreeMap<String, String>, pod: &mut PodSpec) {
    pod.service_account_name
        .get_or_insert_with(|| plan.service_account_name());
    pod.security_context.get_or_insert_with(|| PodSecurityContext {
        run_as_non_root: Some(true),
        run_as_user: Some(USER),
        run_as_group: Some(USER),
        ..Default::default()
    });
    pod.termination_grace_period_seconds
        .get_or_insert(TERMINATION_GRACE);
    let term = |key: &str| {
        let s = LabelSelector {
            match_labels: Some(selector.clone()),
            ..Default::default()
        };
        (s, key.to_string())
    };
    pod.affinity.get_or_insert_with(|| {
        let (label_selector, topology_key) = term("kubernetes.io/hostname");
        Affinity {
            pod_anti_affinity: Some(PodAntiAffinity {
                preferred_during_scheduling_ignored_during_execution: Some(vec![WeightedPodAffinityTerm {
                    weight: 100,
                    pod_affinity_term: PodAffinityTerm {
                        label_selector: Some(label_selector),
                        topology_key,
                        ..Default::default()
                    },
                }]),
                ..Default::default()
            }),
            ..Default::default()
        }
    });
    pod.topology_spread_constraints.get_or_insert_with(|| {
        ["topology.kubernetes.io/zone", "kubernetes.io/hostname"]
            .into_iter()
            .map(|key| {
                let (label_selector, topology_key) = term(key);
                TopologySpreadConstraint {
                    max_skew: 1,
                    topology_key,
                    when_unsatisfiable: "ScheduleAnyway".into(),
                    label_selector: Some(label_selector),
                    ..Default::default()
                }
            })
            .collect()
    });
}

/// The package's pull secrets and its ImageConfig's, after the config's own (none: no field).
fn pull_secrets(plan: &Plan, pod: &mut PodSpec) {
    let secrets = pod.image_pull_secrets.get_or_insert_with(Vec::new);
    for s in plan.pull_secrets.iter().chain(&plan.image_config_pull_secret) {
        if !secrets.iter().any(|x| &x.name == s) {
            secrets.push(LocalObjectReference { name: s.clone() });
        }
    }
    if secrets.is_empty() {
        pod.image_pull_secrets = None;
    }
}

fn tls_volumes(plan: &Plan, pod: &mut PodSpec) {
    let wanted = [
        ("tls-server-certs", &plan.tls_server, TLS_SERVER_DIR),
        ("tls-client-certs", &plan.tls_client, TLS_CLIENT_DIR),
    ];
    for (volume, secret, dir) in wanted {
        let Some(secret) = secret else { continue };
        let volumes = pod.volumes.get_or_insert_with(Vec::new);
        volumes.retain(|v| v.name != volume);
        volumes.push(Volume {
            name: volume.into(),
            secret: Some(SecretVolumeSource {
                secret_name: Some(secret.clone()),
                ..Default::default()
            }),
            ..Default::default()
        });
        if let Some(c) = pod.containers.first_mut() {
            let mounts = c.volume_mounts.get_or_insert_with(Vec::new);
            mounts.retain(|m| m.name != volume);
            mounts.push(VolumeMount {
                name: volume.into(),
                mount_path: dir.into(),
                read_only: Some(true),
                ..Default::default()
            });
        }
    }
}

/// The revision's PodDisruptionBudget: at most one of its Pods voluntarily down at a time, and an
/// unhealthy Pod may always be evicted (so a broken revision never blocks a node drain).
pub fn pod_disruption_budget(plan: &Plan) -> PodDisruptionBudget {
    PodDisruptionBudget {
        metadata: ObjectMeta {
            name: Some(plan.deployment_name()),
            namespace: Some(plan.namespace.clone()),
            labels: Some(plan.labels.clone()),
            owner_references: Some(plan.revision_owners()),
            ..Default::default()
        },
        spec: Some(PodDisruptionBudgetSpec {
            max_unavailable: Some(IntOrString::Int(1)),
            selector: Some(LabelSelector {
                match_labels: Some(plan.selector()),
                ..Default::default()
            }),
            unhealthy_pod_eviction_policy: Some("AlwaysAllow".into()),
            ..Default::default()
        }),
        status: None,
    }
}

/// The labels as a `k=v,k=v` selector string.
pub fn selector_string(labels: &BTreeMap<String, String>) -> String {
    labels
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(",")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pkg::kind::Kind;
    use crate::pkg::runtime::plan::tests::plan;
    use serde_json::{Value, json};

    fn env(d: &Deployment) -> BTreeMap<String, Value> {
        let c = &d
            .spec
            .as_ref()
            .expect("spec")
            .template
            .spec
            .as_ref()
            .expect("pod")
            .containers[0];
        c.env
            .iter()
            .flatten()
            .map(|e| (e.name.clone(), serde_json::to_value(e).expect("env")))
            .collect()
    }

    #[test]
    fn a_provider_is_ha_by_default_with_upstreams_shape() {
        let d = deployment(&plan(Kind::Provider));
        let v = serde_json::to_value(&d).expect("json");
        assert_eq!(v["metadata"]["name"], "pkg-x-abc");
        assert_eq!(v["metadata"]["namespace"], "crossplane-system");
        assert_eq!(v["metadata"]["ownerReferences"][0]["kind"], "ProviderRevision");
        assert_eq!(v["metadata"]["ownerReferences"][0]["controller"], true);
        let spec = &v["spec"];
        assert_eq!(spec["replicas"], 2);
        assert_eq!(spec["strategy"]["rollingUpdate"]["maxUnavailable"], 0);
        assert_eq!(
            spec["selector"]["matchLabels"],
            json!({"pkg.crossplane.io/revision": "pkg-x-abc", "pkg.crossplane.io/provider": "pkg-x"})
        );
        let pod = &spec["template"]["spec"];
        assert_eq!(
            spec["template"]["metadata"]["labels"]["pkg.crossplane.io/revision"],
            "pkg-x-abc"
        );
        assert_eq!(pod["serviceAccountName"], "pkg-x-abc");
        assert!(pod["terminationGracePeriodSeconds"].as_i64() > Some(50 + 30));
        assert!(pod["affinity"]["podAntiAffinity"].is_object());
        assert_eq!(pod["topologySpreadConstraints"].as_array().map(Vec::len), Some(2));
        assert_eq!(pod["imagePullSecrets"], json!([{"name": "creds"}]));
        let c = &pod["containers"][0];
        assert_eq!(c["name"], "package-runtime");
        assert_eq!(c["image"], "127.0.0.1:5000/org/pkg-x:v1");
        assert_eq!(c["livenessProbe"]["httpGet"]["path"], "/healthz");
        assert_eq!(c["readinessProbe"]["httpGet"]["path"], "/readyz");
        let ports: Vec<&str> = c["ports"]
            .as_array()
            .expect("ports")
            .iter()
            .filter_map(|p| p["name"].as_str())
            .collect();
        assert_eq!(ports, ["metrics", "health", "webhook"]);
        let e = env(&d);
        assert_eq!(e["LEADER_ELECTION"]["value"], "true");
        assert_eq!(
            e["LEADER_ELECTION_ID"]["value"],
            "crossplane-leader-election-pkg-x"
        );
        assert_eq!(
            e["POD_NAME"]["valueFrom"]["fieldRef"]["fieldPath"],
            "metadata.name"
        );
        assert_eq!(
            e["POD_NAMESPACE"]["valueFrom"]["fieldRef"]["fieldPath"],
            "metadata.namespace"
        );
        assert_eq!(
            e["PROVIDER_NAME"]["valueFrom"]["fieldRef"]["fieldPath"],
            "metadata.labels['pkg.crossplane.io/provider']"
        );
        assert_eq!(e["REVISION_UID"]["value"], "uid-rev");
        assert_eq!(e["TLS_SERVER_CERTS_DIR"]["value"], "/tls/server");
        assert_eq!(e["TLS_CLIENT_CERTS_DIR"]["value"], "/tls/client");
        let mounts: Vec<&str> = c["volumeMounts"]
            .as_array()
            .expect("mounts")
            .iter()
            .filter_map(|m| m["mountPath"].as_str())
            .collect();
        assert_eq!(mounts, ["/tls/server", "/tls/client"]);
        assert_eq!(pod["volumes"][0]["secret"]["secretName"], "pkg-x-tls-server");
    }

    #[test]
    fn a_function_serves_grpc_and_elects_nothing() {
        let d = deployment(&plan(Kind::Function));
        let e = env(&d);
        assert!(e.contains_key("FUNCTION_NAME") && !e.contains_key("PROVIDER_NAME"));
        assert!(!e.contains_key("LEADER_ELECTION"));
        let v = serde_json::to_value(&d).expect("json");
        let c = &v["spec"]["template"]["spec"]["containers"][0];
        assert_eq!(c["readinessProbe"]["tcpSocket"]["port"], "grpc");
        assert!(
            c["ports"]
                .as_array()
                .expect("ports")
                .iter()
                .any(|p| p["name"] == "grpc" && p["containerPort"] == 9443)
        );
    }

    #[test]
    fn a_runtime_config_can_say_one_replica_and_its_own_container_settings() {
        let mut p = plan(Kind::Provider);
        p.config = serde_json::from_value(json!({"deploymentTemplate": {"spec": {
            "replicas": 1,
            "selector": {},
            "template": {"spec": {
                "terminationGracePeriodSeconds": 5,
                "containers": [
                    {"name": "sidecar", "image": "busybox"},
                    {"name": "package-runtime", "args": ["--debug"],
                     "env": [{"name": "LEADER_ELECTION", "value": "false"}]},
                ],
            }},
        }}}))
        .expect("config");
        let d = deployment(&p);
        let v = serde_json::to_value(&d).expect("json");
        assert_eq!(v["spec"]["replicas"], 1);
        let pod = &v["spec"]["template"]["spec"];
        assert_eq!(pod["terminationGracePeriodSeconds"], 5);
        assert_eq!(pod["containers"][0]["name"], "package-runtime", "first");
        assert_eq!(pod["containers"][0]["args"], json!(["--debug"]));
        assert_eq!(pod["containers"][0]["image"], "127.0.0.1:5000/org/pkg-x:v1");
        assert_eq!(pod["containers"][1]["name"], "sidecar");
        assert_eq!(
            env(&d)["LEADER_ELECTION"]["value"],
            "false",
            "the config's env wins"
        );
        assert_eq!(
            v["spec"]["selector"]["matchLabels"]["pkg.crossplane.io/revision"], "pkg-x-abc",
            "the selector is always ours"
        );
    }

    #[test]
    fn the_package_pull_policy_overrides_the_config() {
        let mut p = plan(Kind::Provider);
        p.pull_policy = Some("Always".into());
        let v = serde_json::to_value(deployment(&p)).expect("json");
        assert_eq!(
            v["spec"]["template"]["spec"]["containers"][0]["imagePullPolicy"],
            "Always"
        );
    }

    #[test]
    fn an_image_configs_pull_secret_follows_the_packages_own() {
        let mut p = plan(Kind::Provider);
        p.image_config_pull_secret = Some("mirror-creds".into());
        let v = serde_json::to_value(deployment(&p)).expect("json");
        assert_eq!(
            v["spec"]["template"]["spec"]["imagePullSecrets"],
            json!([{"name": "creds"}, {"name": "mirror-creds"}])
        );
        let sa = serde_json::to_value(super::super::identity::service_account(&p)).expect("json");
        assert_eq!(
            sa["imagePullSecrets"],
            json!([{"name": "creds"}]),
            "as upstream: the Pods only"
        );
    }

    #[test]
    fn the_pdb_lets_one_pod_go_at_a_time() {
        let v = serde_json::to_value(pod_disruption_budget(&plan(Kind::Provider))).expect("json");
        assert_eq!(v["spec"]["maxUnavailable"], 1);
        assert_eq!(v["spec"]["unhealthyPodEvictionPolicy"], "AlwaysAllow");
        assert_eq!(
            v["spec"]["selector"]["matchLabels"]["pkg.crossplane.io/revision"],
            "pkg-x-abc"
        );
    }
}
