//! `cargo xtask generate [--check]`: writes `deploy/` from the code, so the manifests cannot drift.
//!
//! - `deploy/crds/`: every CRD from the Rust types, one file each;
//! - `deploy/<binary>/`: a kustomize base per binary (Deployment, ServiceAccount, a Role and RoleBinding
//!   for its Lease and events, a ClusterRole and ClusterRoleBinding from the needs its controllers
//!   declare in code, a PodDisruptionBudget);
//! - `deploy/crossplane-roles/`: the user-facing `crossplane-{admin,edit,view,browse}` ClusterRoles that
//!   the RBAC manager's per-XRD roles aggregate into (`crossplane::roles`);
//! - `deploy/charts/crossplane-rs/`: the same as a Helm chart with upstream Crossplane's value names
//!   ([`crate::chart`]);
//! - `deploy/kustomization.yaml`: all of it, in namespace `crossplane-system`, with the Namespace;
//! - `deploy/fencing/`: opt-in, a ValidatingAdmissionPolicy and binding per binary that make the
//!   apiserver refuse the binary's writes unless they come from the pod holding its Lease
//!   (`election::admission`).
//!
//! Every file is YAML rendered from JSON with sorted keys; file lists are sorted. `--check` renders into
//! memory and fails, listing the files, when `deploy/` differs.
//!
//! Composition needs access to kinds known only at run time (XRs, and the providers' managed resources).
//! As in Crossplane, the core's ClusterRole `crossplane` aggregates every ClusterRole labelled
//! `rbac.crossplane.io/aggregate-to-crossplane: "true"`: its own declared needs
//! (`crossplane:system:aggregate-to-crossplane`), each provider's kinds (`crossplane:provider:<name>:
//! aggregate-to-crossplane`, from the provider's CRDs) and the per-XRD roles the RBAC manager writes.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::Context;
use manager::Defaults;
use manager::controller::rbac::Rule;
use serde_json::{Value, json};

pub use crate::binaries::{Deployed, deployed};
use crate::registry::Registry;

/// The namespace everything runs in.
pub const NAMESPACE: &str = "crossplane-system";
/// The directory of the user-facing ClusterRoles (`crossplane::roles`).
const USER_ROLES: &str = "crossplane-roles";
/// The label that makes a ClusterRole part of the core's aggregated `crossplane` role.
pub const AGGREGATE_TO_CROSSPLANE: &str = "rbac.crossplane.io/aggregate-to-crossplane";
/// The manager's default `--graceful-shutdown-timeout` (manager `Args`).
const GRACEFUL_SHUTDOWN: Duration = Duration::from_secs(30);
/// Slack on top of the graceful shutdown and the renew deadline in `terminationGracePeriodSeconds`.
const TERMINATION_SLACK: Duration = Duration::from_secs(10);
/// The non-root user and group (the images' user).
const USER: i64 = 65532;
/// The port of /metrics (manager `--metrics-bind-address` default).
pub(crate) const METRICS_PORT: i64 = 8080;
/// The port of /healthz and /readyz (manager `--health-probe-bind-address` default).
const PROBE_PORT: i64 = 8081;

/// `cargo xtask generate [--check] [--registry PREFIX]`. Returns the exit code.
pub fn run(check: bool, registry: &Registry) -> anyhow::Result<i32> {
    let root = testenv::harness::repo_root().join("deploy");
    let files = render(registry)?;
    let readme_path = testenv::harness::repo_root().join("README.md");
    let readme = std::fs::read_to_string(&readme_path).context("reading README.md")?;
    let new_readme = crate::upstream::readme(&readme)?;
    let new_readme = crate::figures::readme(&new_readme, &testenv::harness::repo_root().join("docs"))?;
    let artifacts = crate::provenance::check(&testenv::harness::repo_root().join("docs"))?;
    if check {
        let mut drift = drift(&root, &files)?;
        if new_readme != readme {
            drift.push("../README.md (the upstream tables, or the figures from docs/*.json)".to_owned());
        }
        if drift.is_empty() && artifacts.is_empty() {
            eprintln!(
                "[generate] deploy/ is up to date ({} files); README figures match docs/*.json; {} artifacts \
                 name their commit and are newer than the code they measure",
                files.len(),
                crate::provenance::ARTIFACTS.len()
            );
            return Ok(0);
        }
        if !artifacts.is_empty() {
            eprintln!(
                "[generate] artifacts under docs/ that cannot back their figures (rerun the command named):"
            );
            for a in &artifacts {
                eprintln!("  {a}");
            }
        }
        if drift.is_empty() {
            return Ok(1);
        }
        eprintln!(
            "[generate] deploy/ or the README differ from the code and docs/*.json; run `cargo xtask generate`:"
        );
        for d in &drift {
            eprintln!("  {d}");
        }
        return Ok(1);
    }
    // Remove stale files first, so a removed CRD or binary does not linger.
    for stale in existing_files(&root)? {
        if !files.contains_key(&stale) {
            std::fs::remove_file(root.join(&stale))
                .with_context(|| format!("removing {}", stale.display()))?;
        }
    }
    if new_readme != readme {
        std::fs::write(&readme_path, new_readme).context("writing README.md")?;
    }
    for (path, text) in &files {
        let full = root.join(path);
        if let Some(dir) = full.parent() {
            std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        }
        if std::fs::read_to_string(&full).ok().as_deref() != Some(text.as_str()) {
            std::fs::write(&full, text).with_context(|| format!("writing {}", full.display()))?;
        }
    }
    eprintln!("[generate] wrote {} files under {}", files.len(), root.display());
    for a in &artifacts {
        eprintln!("[generate] warning: {a}");
    }
    Ok(0)
}

/// The differences between `files` and what is under `root`: `+ path` missing, `- path` extra, `~ path`
/// changed.
pub fn drift(root: &Path, files: &BTreeMap<PathBuf, String>) -> anyhow::Result<Vec<String>> {
    let mut out = Vec::new();
    for (path, text) in files {
        match std::fs::read_to_string(root.join(path)) {
            Ok(current) if current == *text => {}
            Ok(_) => out.push(format!("~ deploy/{}", path.display())),
            Err(_) => out.push(format!("+ deploy/{} (missing)", path.display())),
        }
    }
    for extra in existing_files(root)? {
        if !files.contains_key(&extra) {
            out.push(format!("- deploy/{} (not generated)", extra.display()));
        }
    }
    Ok(out)
}

/// Every file under `root`, relative to it.
fn existing_files(root: &Path) -> anyhow::Result<Vec<PathBuf>> {
    let mut out = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        let entries = match std::fs::read_dir(&dir) {
            Ok(e) => e,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => return Err(e).with_context(|| format!("reading {}", dir.display())),
        };
        for entry in entries {
            let path = entry?.path();
            if path.is_dir() {
                stack.push(path);
            } else if let Ok(rel) = path.strip_prefix(root) {
                out.push(rel.to_path_buf());
            }
        }
    }
    out.sort();
    Ok(out)
}

/// Every file of deploy/, by path relative to it, with images named under `registry`.
pub fn render(registry: &Registry) -> anyhow::Result<BTreeMap<PathBuf, String>> {
    render_binaries(&deployed(), registry)
}

/// Every file of deploy/ for `binaries` (deploy/ itself is [`render`] of [`deployed`]): what one more
/// line in [`deployed`] would add is `render_binaries` of the list with that line.
pub fn render_binaries(
    binaries: &[Deployed],
    registry: &Registry,
) -> anyhow::Result<BTreeMap<PathBuf, String>> {
    let mut files = BTreeMap::new();
    let version = env!("CARGO_PKG_VERSION");
    crd_files(&mut files, binaries)?;
    base_files(&mut files, binaries, version, registry)?;
    fence_files(&mut files, binaries)?;
    user_role_files(&mut files)?;
    files.insert(
        "namespace.yaml".into(),
        yaml(&json!({
            "apiVersion": "v1",
            "kind": "Namespace",
            "metadata": {"name": NAMESPACE, "labels": labels("crossplane-system")},
        }))?,
    );
    // The same objects as a Helm chart with upstream's value names.
    files.extend(crate::chart::render(binaries, version, registry)?);

    let mut resources = vec!["namespace.yaml".to_owned(), "crds".to_owned()];
    resources.extend(binaries.iter().map(|b| b.name.to_owned()));
    resources.push(USER_ROLES.to_owned());
    files.insert(
        "kustomization.yaml".into(),
        yaml(&kustomization(&resources, Some(NAMESPACE)))?,
    );
    Ok(files)
}

/// Every binary's CRDs under crds/, with their kustomization.
fn crd_files(files: &mut BTreeMap<PathBuf, String>, binaries: &[Deployed]) -> anyhow::Result<()> {
    let mut crd_files = Vec::new();
    for b in binaries {
        for crd in (b.crds)() {
            let name = crd.metadata.name.clone().context("a CRD without a name")?;
            let file = format!("{name}.yaml");
            files.insert(
                PathBuf::from("crds").join(&file),
                yaml(&serde_json::to_value(&crd)?)?,
            );
            crd_files.push(file);
        }
    }
    crd_files.sort();
    files.insert(
        "crds/kustomization.yaml".into(),
        yaml(&kustomization(&crd_files, None))?,
    );

    Ok(())
}

/// Each binary's kustomize base, and each image's Dockerfile.
fn base_files(
    files: &mut BTreeMap<PathBuf, String>,
    binaries: &[Deployed],
    version: &str,
    registry: &Registry,
) -> anyhow::Result<()> {
    for b in binaries {
        for (file, obj) in base(b, registry) {
            files.insert(PathBuf::from(b.name).join(file), yaml(&obj)?);
        }
    }

    for image in &crate::image::images_of(binaries) {
        files.insert(
            PathBuf::from(image.name).join("Dockerfile"),
            dockerfile(image, version, registry),
        );
    }

    Ok(())
}

/// The server-side fence of each binary, opt-in (`kubectl apply -k deploy/fencing`): it needs every
/// replica to run with leader election and a pod-bound token (see `election::admission`).
fn fence_files(files: &mut BTreeMap<PathBuf, String>, binaries: &[Deployed]) -> anyhow::Result<()> {
    let mut fence_files = Vec::new();
    for b in binaries {
        let name = format!("crossplane-rs-fence-{}", b.name);
        let fence = election::admission::FencePolicy {
            name: &name,
            service_account_namespace: NAMESPACE,
            service_account: b.name,
            lease_namespace: NAMESPACE,
            lease: b.lease.lease_id,
            covers: fence_covers(b)?,
        };
        let objects = [
            ("policy", serde_json::to_value(fence.policy()?)?),
            ("binding", serde_json::to_value(fence.binding()?)?),
        ];
        for (kind, obj) in objects {
            let file = format!("{}-{kind}.yaml", b.name);
            files.insert(PathBuf::from("fencing").join(&file), yaml(&obj)?);
            fence_files.push(file);
        }
    }
    fence_files.sort();
    files.insert(
        "fencing/kustomization.yaml".into(),
        yaml(&kustomization(&fence_files, None))?,
    );

    Ok(())
}

/// The user-facing roles (crossplane-admin, -edit, -view, -browse) that the RBAC manager's per-XRD
/// roles aggregate into, as upstream's chart ships them.
fn user_role_files(files: &mut BTreeMap<PathBuf, String>) -> anyhow::Result<()> {
    let mut role_files = Vec::new();
    for role in crossplane::roles::user_roles() {
        let name = role
            .metadata
            .name
            .clone()
            .context("a ClusterRole without a name")?;
        let file = format!("clusterrole-{}.yaml", name.replace(':', "-"));
        files.insert(
            PathBuf::from(USER_ROLES).join(&file),
            yaml(&serde_json::to_value(&role)?)?,
        );
        role_files.push(file);
    }
    let file = "clusterrolebinding-crossplane-admin.yaml".to_owned();
    files.insert(
        PathBuf::from(USER_ROLES).join(&file),
        yaml(&serde_json::to_value(crossplane::roles::admin_binding())?)?,
    );
    role_files.push(file);
    role_files.sort();
    files.insert(
        PathBuf::from(USER_ROLES).join("kustomization.yaml"),
        yaml(&kustomization(&role_files, None))?,
    );

    Ok(())
}

fn kustomization(resources: &[String], namespace: Option<&str>) -> Value {
    let mut k = json!({
        "apiVersion": "kustomize.config.k8s.io/v1beta1",
        "kind": "Kustomization",
        "resources": resources,
    });
    if let Some(ns) = namespace {
        k["namespace"] = json!(ns);
    }
    k
}

fn labels(name: &str) -> Value {
    json!({
        "app.kubernetes.io/name": name,
        "app.kubernetes.io/part-of": "crossplane-rs",
    })
}

fn rules_json(rules: &[Rule]) -> Value {
    Value::Array(
        rules
            .iter()
            .map(|r| {
                let mut v = json!({
                    "apiGroups": r.api_groups,
                    "resources": r.resources,
                    "verbs": r.verbs,
                });
                if !r.resource_names.is_empty() {
                    v["resourceNames"] = json!(r.resource_names);
                }
                v
            })
            .collect(),
    )
}

/// `terminationGracePeriodSeconds`: the graceful shutdown, then the renew deadline (a leader that stops
/// renewing keeps its term that long), plus slack.
pub fn termination_grace(lease: &Defaults) -> u64 {
    (GRACEFUL_SHUTDOWN + lease.timings.renew_deadline + TERMINATION_SLACK).as_secs()
}

/// The Service through which the apiserver calls `b`'s webhooks, and its port: the core's admission
/// webhooks (Usages' deletion protection, upstream's `crossplane-webhooks` on 9443), or a provider's
/// conversion webhook at the Service its CRDs name. Every replica serves them, leader or not.
pub fn webhook_service(b: &Deployed) -> Option<(String, i32)> {
    if b.core {
        return Some((
            crossplane::usage::webhook::SERVICE.to_owned(),
            i32::from(crossplane::usage::webhook::PORT),
        ));
    }
    (b.crds)().iter().find_map(|crd| {
        let service = crd
            .spec
            .conversion
            .as_ref()?
            .webhook
            .as_ref()?
            .client_config
            .as_ref()?
            .service
            .as_ref()?;
        (service.name == b.name).then(|| (service.name.clone(), service.port.unwrap_or(443)))
    })
}

/// The objects of one binary's base, by file name, its image named under `registry`.
pub fn base(b: &Deployed, registry: &Registry) -> Vec<(String, Value)> {
    let name = b.name;
    let mut out = vec![(
        "serviceaccount.yaml".to_owned(),
        json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": meta(name, name)}),
    )];
    out.extend(election_rbac(b));
    out.extend(cluster_rbac(b));
    out.push((
        "poddisruptionbudget.yaml".to_owned(),
        json!({
            "apiVersion": "policy/v1",
            "kind": "PodDisruptionBudget",
            "metadata": meta(name, name),
            // maxUnavailable, not minAvailable: an overlay that scales to one replica must not block drains.
            "spec": {"maxUnavailable": 1, "selector": {"matchLabels": {"app.kubernetes.io/name": name}},
                     "unhealthyPodEvictionPolicy": "AlwaysAllow"},
        }),
    ));
    if let Some((service, port)) = webhook_service(b) {
        // The webhooks' Service: every replica serves them, leader or not.
        out.push((
            "service.yaml".to_owned(),
            json!({
                "apiVersion": "v1",
                "kind": "Service",
                "metadata": meta(name, &service),
                "spec": {
                    "selector": {"app.kubernetes.io/name": name},
                    "ports": [{"name": "webhook", "port": port, "targetPort": "webhook", "protocol": "TCP"}],
                },
            }),
        ));
    }
    out.push(("deployment.yaml".to_owned(), deployment(b, registry)));
    let mut files: Vec<String> = out.iter().map(|(f, _)| f.clone()).collect();
    files.sort();
    out.push(("kustomization.yaml".to_owned(), kustomization(&files, None)));
    out
}

/// The metadata of binary `binary`'s object `name` in the namespace.
fn meta(binary: &str, name: &str) -> Value {
    json!({"name": name, "namespace": NAMESPACE, "labels": labels(binary)})
}

/// The metadata of binary `binary`'s cluster-scoped object `name`.
fn cluster_meta(binary: &str, name: &str) -> Value {
    json!({"name": name, "labels": labels(binary)})
}

/// The binary's ServiceAccount as a binding's only subject.
fn subject(binary: &str) -> Value {
    json!([{"kind": "ServiceAccount", "name": binary, "namespace": NAMESPACE}])
}

/// What a binary's fence matches: for the core, whose ClusterRole aggregates what providers and XRDs
/// bring, every write (but the node's and Kubernetes' own status writes); for the others, exactly the
/// writes their controllers' generated RBAC grants (`cluster_rbac`), since RBAC refuses any other before
/// admission. The election's own RBAC is left out: it grants writes only on the Lease and on Events,
/// which every fence lets through. A binary whose RBAC grants no other write would get a policy that
/// fences nothing, so that is an error.
fn fence_covers(b: &Deployed) -> anyhow::Result<election::admission::Covers> {
    use election::admission::{Covers, WriteRule};
    if b.core {
        return Ok(Covers::Everything);
    }
    let rules: Vec<WriteRule> = manager::controller::rbac::normalize((b.needs)())
        .iter()
        .filter_map(|r| WriteRule::from_rbac(&r.api_groups, &r.resources, &r.resource_names, &r.verbs))
        .collect();
    let covers = Covers::Only(rules);
    anyhow::ensure!(
        covers.fences_a_write(b.lease.lease_id),
        "{}'s RBAC grants no write but on Leases, Events and its ConfigMap lock, which the fence lets \
         through, so its fence policy would refuse nothing: give the binary the writes its controllers make, \
         or leave it out of deploy/fencing",
        b.name
    );
    Ok(covers)
}

/// The Role and RoleBinding of its Lease.
fn election_rbac(b: &Deployed) -> Vec<(String, Value)> {
    let election = format!("{}:leader-election", b.name);
    vec![
        (
            "role.yaml".to_owned(),
            json!({
                "apiVersion": "rbac.authorization.k8s.io/v1",
                "kind": "Role",
                "metadata": meta(b.name, &election),
                "rules": rules_json(&manager::controller::rbac::election_needs(b.lease.lease_id)),
            }),
        ),
        (
            "rolebinding.yaml".to_owned(),
            json!({
                "apiVersion": "rbac.authorization.k8s.io/v1",
                "kind": "RoleBinding",
                "metadata": meta(b.name, &election),
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": election},
                "subjects": subject(b.name),
            }),
        ),
    ]
}

/// A ClusterRole `name` of binary `binary` that Crossplane's aggregated role takes in, with `rules`.
fn aggregated_to_crossplane(binary: &str, name: &str, rules: Value) -> Value {
    let mut m = cluster_meta(binary, name);
    m["labels"][AGGREGATE_TO_CROSSPLANE] = json!("true");
    json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": m, "rules": rules})
}

/// Its ClusterRoles (the core's aggregated one with its own rules beside it; a provider's, and the one
/// that lets the core compose its kinds) and their binding.
fn cluster_rbac(b: &Deployed) -> Vec<(String, Value)> {
    let name = b.name;
    let needs = manager::controller::rbac::normalize((b.needs)());
    let mut out = Vec::new();
    if b.core {
        // The aggregated role: its rules are filled in by the clusterrole-aggregation controller.
        out.push((
            "clusterrole.yaml".to_owned(),
            json!({
                "apiVersion": "rbac.authorization.k8s.io/v1",
                "kind": "ClusterRole",
                "metadata": cluster_meta(name, name),
                "aggregationRule": {"clusterRoleSelectors": [{"matchLabels": {AGGREGATE_TO_CROSSPLANE: "true"}}]},
            }),
        ));
        let system = format!("crossplane:system:{}", aggregate_suffix());
        out.push((
            "clusterrole-system.yaml".to_owned(),
            aggregated_to_crossplane(name, &system, rules_json(&needs)),
        ));
    } else {
        out.push((
            "clusterrole.yaml".to_owned(),
            json!({
                "apiVersion": "rbac.authorization.k8s.io/v1",
                "kind": "ClusterRole",
                "metadata": cluster_meta(name, name),
                "rules": rules_json(&needs),
            }),
        ));
    }
    if b.provider {
        // What the core needs to compose this provider's kinds.
        let kinds: Vec<Rule> = (b.crds)()
            .iter()
            .map(|crd| Rule::plural(&crd.spec.group, &crd.spec.names.plural, &["", "status"], &["*"]))
            .collect();
        let role = format!("crossplane:provider:{name}:{}", aggregate_suffix());
        out.push((
            "clusterrole-aggregate-to-crossplane.yaml".to_owned(),
            aggregated_to_crossplane(
                name,
                &role,
                rules_json(&manager::controller::rbac::normalize(kinds)),
            ),
        ));
    }
    out.push((
        "clusterrolebinding.yaml".to_owned(),
        json!({
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRoleBinding",
            "metadata": cluster_meta(name, name),
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name},
            "subjects": subject(name),
        }),
    ));
    out
}

fn aggregate_suffix() -> String {
    AGGREGATE_TO_CROSSPLANE
        .rsplit('/')
        .next()
        .unwrap_or_default()
        .to_owned()
}

/// The Deployment of `b`, its image named under `registry`.
pub(crate) fn deployment(b: &Deployed, registry: &Registry) -> Value {
    let name = b.name;
    let selector = json!({"matchLabels": {"app.kubernetes.io/name": name}});
    let field = |path: &str| json!({"fieldRef": {"apiVersion": "v1", "fieldPath": path}});
    let probe = |path: &str, period: u64, failures: u64| {
        json!({
            "httpGet": {"path": path, "port": "health"},
            "periodSeconds": period,
            "failureThreshold": failures,
            "timeoutSeconds": 2,
        })
    };
    let mut container = json!({
        "name": name,
        "image": registry.image(b.image, crate::image::TAG),
        "imagePullPolicy": "IfNotPresent",
        "env": [
            {"name": "POD_NAME", "valueFrom": field("metadata.name")},
            {"name": "POD_NAMESPACE", "valueFrom": field("metadata.namespace")},
            {"name": "LEADER_ELECTION", "value": "true"},
        ],
        "ports": [
            {"name": "metrics", "containerPort": METRICS_PORT, "protocol": "TCP"},
            {"name": "health", "containerPort": PROBE_PORT, "protocol": "TCP"},
        ],
        "livenessProbe": probe("/healthz", 10, 3),
        "readinessProbe": probe("/readyz", 5, 2),
        "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}},
        "securityContext": {
            "allowPrivilegeEscalation": false,
            "readOnlyRootFilesystem": true,
            "runAsNonRoot": true,
            "runAsUser": USER,
            "runAsGroup": USER,
            "capabilities": {"drop": ["ALL"]},
            "seccompProfile": {"type": "RuntimeDefault"},
        },
    });
    if !b.args.is_empty() {
        container["args"] = json!(b.args);
    }
    if let Some((_, port)) = webhook_service(b)
        && let Some(ports) = container["ports"].as_array_mut()
    {
        ports.push(json!({"name": "webhook", "containerPort": port, "protocol": "TCP"}));
    }
    json!({
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": NAMESPACE, "labels": labels(name)},
        "spec": {
            "replicas": 2,
            "revisionHistoryLimit": 3,
            "selector": selector,
            "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 0, "maxSurge": 1}},
            "template": {
                // Scraped by a Prometheus that honours these annotations, as upstream's chart sets them.
                "metadata": {"labels": labels(name), "annotations": {
                    "prometheus.io/scrape": "true",
                    "prometheus.io/port": METRICS_PORT.to_string(),
                    "prometheus.io/path": "/metrics",
                }},
                "spec": {
                    "serviceAccountName": name,
                    "terminationGracePeriodSeconds": termination_grace(&b.lease),
                    "securityContext": {
                        "runAsNonRoot": true,
                        "runAsUser": USER,
                        "runAsGroup": USER,
                        "seccompProfile": {"type": "RuntimeDefault"},
                    },
                    "affinity": {"podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [{
                        "weight": 100,
                        "podAffinityTerm": {"labelSelector": selector, "topologyKey": "kubernetes.io/hostname"},
                    }]}},
                    "topologySpreadConstraints": [
                        {
                            "maxSkew": 1,
                            "topologyKey": "topology.kubernetes.io/zone",
                            "whenUnsatisfiable": "ScheduleAnyway",
                            "labelSelector": selector,
                        },
                        {
                            "maxSkew": 1,
                            "topologyKey": "kubernetes.io/hostname",
                            "whenUnsatisfiable": "ScheduleAnyway",
                            "labelSelector": selector,
                        },
                    ],
                    "containers": [container],
                },
            },
        },
    })
}

/// The image the Dockerfiles build in: the toolchain the workspace is built and tested with.
const RUST_IMAGE: &str = "docker.io/library/rust:1.95-bookworm";
/// The runtime base of the Dockerfiles: glibc, libgcc and CA certificates, user 65532 (`nonroot`); the
/// same content `cargo xtask image` packs.
const RUNTIME_IMAGE: &str = "gcr.io/distroless/cc-debian12:nonroot";

/// The Dockerfile of `image`, for users who build with Docker (BuildKit): a release build in the Rust
/// image, copied onto distroless, with the labels, user and entrypoint of `cargo xtask image`.
pub fn dockerfile(image: &crate::image::Binary, version: &str, registry: &Registry) -> String {
    let name = image.name;
    let quote = |s: &str| serde_json::to_string(s).unwrap_or_default();
    let labels = [
        ("title", quote(name)),
        ("description", quote(image.description)),
        ("version", quote(version)),
        ("source", quote(env!("CARGO_PKG_REPOSITORY"))),
        ("licenses", quote(env!("CARGO_PKG_LICENSE"))),
        ("revision", "\"${REVISION}\"".to_owned()),
    ]
    .iter()
    .map(|(k, v)| format!("org.opencontainers.image.{k}={v}"))
    .collect::<Vec<_>>()
    .join(" \\\n      ");
    let entrypoint = format!("/usr/local/bin/{name}");
    let mut out = format!(
        "# syntax=docker/dockerfile:1
# Generated by `cargo xtask generate`; do not edit.
# {name} for users with Docker; `cargo xtask image {name}` builds the same image without a daemon.
# Build from the repository root:
#   docker build -f deploy/{name}/Dockerfile --build-arg REVISION=$(git rev-parse HEAD) \\
#     -t {registry}/{name}:{version} .
FROM {RUST_IMAGE} AS build
WORKDIR /src
COPY . .
RUN --mount=type=cache,target=/usr/local/cargo/registry \\
    --mount=type=cache,target=/src/target \\
    cargo build --release --locked -p {package} --bin {name} \\
    && install -D -m 0755 target/release/{name} /out/{name}

FROM {RUNTIME_IMAGE}
ARG REVISION=unknown
LABEL {labels}
COPY --from=build /out/{name} {entrypoint}
USER {user}
ENTRYPOINT {entrypoint_json}
",
        package = image.package,
        user = crate::image::USER,
        entrypoint_json = serde_json::to_string(&[&entrypoint]).unwrap_or_default(),
    );
    if !image.cmd.is_empty() {
        out.push_str(&format!(
            "CMD {}\n",
            serde_json::to_string(image.cmd).unwrap_or_default()
        ));
    }
    out
}

/// `value` as YAML with its object keys sorted.
pub fn yaml(value: &Value) -> anyhow::Result<String> {
    let text = serde_saphyr::to_string(&sorted(value)).context("rendering YAML")?;
    let newline = if text.ends_with('\n') { "" } else { "\n" };
    Ok(format!(
        "# Generated by `cargo xtask generate`; do not edit.\n{text}{newline}"
    ))
}

fn sorted(value: &Value) -> Value {
    match value {
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            Value::Object(keys.into_iter().map(|k| (k.clone(), sorted(&map[k]))).collect())
        }
        Value::Array(items) => Value::Array(items.iter().map(sorted).collect()),
        other => other.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grace_covers_shutdown_and_renew_deadline() {
        for b in deployed() {
            assert!(
                Duration::from_secs(termination_grace(&b.lease))
                    > GRACEFUL_SHUTDOWN + b.lease.timings.renew_deadline,
                "{}",
                b.name
            );
        }
    }

    #[test]
    fn every_fence_covers_a_write_it_can_refuse_and_a_lock_only_one_is_an_error() {
        use election::admission::Covers;
        for b in deployed() {
            match fence_covers(&b).expect("fence") {
                Covers::Everything => assert!(b.core, "{}", b.name),
                Covers::Only(rules) => {
                    assert!(
                        Covers::Only(rules.clone()).fences_a_write(b.lease.lease_id),
                        "{}",
                        b.name
                    );
                    assert!(
                        rules
                            .iter()
                            .all(|r| !r.resources.iter().any(|res| res == "leases")),
                        "{}: the election's Lease rule is the fence's own exclusion",
                        b.name
                    );
                }
            }
        }
        // A binary whose RBAC grants writes only on its Lease and Events gets no policy.
        fn lock_only() -> Vec<manager::controller::rbac::Rule> {
            use manager::controller::rbac::Rule;
            vec![
                Rule::new("coordination.k8s.io", &["leases"], &["get", "update"]),
                Rule::new("", &["events"], &["create", "patch"]),
            ]
        }
        let mut b = deployed()
            .into_iter()
            .find(|b| !b.core)
            .expect("a binary besides the core");
        b.needs = lock_only;
        let refused = fence_covers(&b).expect_err("a policy that fences nothing");
        assert!(refused.to_string().contains("would refuse nothing"), "{refused}");
    }

    #[test]
    fn every_deployed_image_is_built() {
        for b in deployed() {
            assert!(
                crate::image::BINARIES.iter().any(|i| i.name == b.image),
                "{} runs image {} which `cargo xtask image` does not build",
                b.name,
                b.image
            );
        }
    }

    #[test]
    fn rendering_is_deterministic_and_round_trips() {
        let a = render(&Registry::default()).expect("render");
        let b = render(&Registry::default()).expect("render");
        assert_eq!(a, b);
        for (path, text) in a
            .iter()
            .filter(|(p, _)| p.extension().is_some_and(|e| e == "yaml"))
            // The chart's templates are Go templates, checked by `helm lint` and `helm template` instead
            // (tools/release/tests/chart.rs).
            .filter(|(p, _)| !p.components().any(|c| c.as_os_str() == "templates"))
        {
            let _: Value = serde_saphyr::from_str(text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        }
    }

    #[test]
    fn registry_prefix_names_every_image() {
        let tag = crate::image::TAG;
        let default = render(&Registry::default()).expect("render");
        let acme = render(&Registry::parse("ghcr.io/acme").expect("prefix")).expect("render");
        assert_eq!(default.len(), acme.len());
        for b in deployed() {
            let path = PathBuf::from(b.name).join("deployment.yaml");
            let want = format!("image: ghcr.io/acme/{}:{tag}", b.image);
            assert!(acme[&path].contains(&want), "{}: no {want}", path.display());
            let old = format!("image: crossplane-rs/{}:{tag}", b.image);
            assert!(default[&path].contains(&old), "{}: no {old}", path.display());
            assert!(!acme[&path].contains("crossplane-rs/"), "{}", acme[&path]);
        }
        let values = &acme[&PathBuf::from(crate::chart::DIR).join("values.yaml")];
        for b in crate::image::BINARIES.iter() {
            let want = format!("repository: ghcr.io/acme/{}", b.name);
            assert!(values.contains(&want), "chart values: no {want}\n{values}");
        }
        assert!(!values.contains("repository: crossplane-rs/"), "{values}");
        let dockerfile = &acme[&PathBuf::from("provider-nop").join("Dockerfile")];
        assert!(
            dockerfile.contains(&format!("-t ghcr.io/acme/provider-nop:{tag} .")),
            "{dockerfile}"
        );
        // Only the image names differ.
        let differing: Vec<_> = default
            .iter()
            .filter(|(p, t)| acme.get(*p) != Some(t))
            .map(|(p, _)| p.display().to_string())
            .collect();
        assert!(
            differing.iter().all(|p| p.ends_with("deployment.yaml")
                || p.ends_with("Dockerfile")
                || p.ends_with("values.yaml")),
            "{differing:?}"
        );
    }

    #[test]
    fn every_image_has_a_dockerfile_like_its_oci_image() {
        let files = render(&Registry::default()).expect("render");
        for image in crate::image::BINARIES.iter() {
            let path = PathBuf::from(image.name).join("Dockerfile");
            let text = files
                .get(&path)
                .unwrap_or_else(|| panic!("{} missing", path.display()));
            assert!(text.starts_with("# syntax=docker/dockerfile:1\n"), "{text}");
            for want in [
                format!(
                    "cargo build --release --locked -p {} --bin {}",
                    image.package, image.name
                ),
                format!("USER {}", crate::image::USER),
                format!("ENTRYPOINT [\"/usr/local/bin/{}\"]", image.name),
                format!("org.opencontainers.image.title=\"{}\"", image.name),
                format!("FROM {RUNTIME_IMAGE}"),
            ] {
                assert!(text.contains(&want), "{}: no {want:?} in\n{text}", path.display());
            }
        }
    }
}
