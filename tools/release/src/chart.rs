//! The Helm chart `deploy/charts/crossplane-rs/`, generated from the same objects as the kustomize bases,
//! with upstream Crossplane's value names, so an operator's values file carries over.
//!
//! - The core uses upstream's top-level names (`replicas`, `image`, `leaderElection`, `args`,
//!   `resourcesCrossplane`, `securityContextCrossplane`, `podSecurityContextCrossplane`,
//!   `extraEnvVarsCrossplane`, `nodeSelector`, `tolerations`, `affinity`, `topologySpreadConstraints`,
//!   `priorityClassName`), the RBAC manager `rbacManager.*` and `*RBACManager` as upstream, and each
//!   provider the same names under `providers.<name>.*`. Shared: `imagePullSecrets`,
//!   `serviceAccount.customAnnotations`, `metrics.enabled`.
//! - Defaults are what the kustomize bases have (2 replicas, leader election on, the probes, the security
//!   contexts, the anti-affinity and spread), taken from the rendered objects themselves, so the chart with
//!   default values renders the same Deployments as `deploy/`.
//! - The templates are the rendered objects with markers where a value goes; each marker is replaced by
//!   its Go template text ([`Marker`]).

use std::collections::BTreeMap;
use std::path::PathBuf;

use anyhow::Context;
use serde_json::{Value, json};

use crate::generate::{Deployed, NAMESPACE, base, deployment, yaml};
use crate::registry::Registry;

/// The chart's directory under deploy/.
pub const DIR: &str = "charts/crossplane-rs";

/// Where one Deployment's values live.
struct Keys {
    replicas: Vec<&'static str>,
    image: Vec<&'static str>,
    leader: Vec<&'static str>,
    args: Vec<&'static str>,
    resources: Vec<&'static str>,
    security: Vec<&'static str>,
    pod_security: Vec<&'static str>,
    env: Vec<&'static str>,
    node_selector: Vec<&'static str>,
    tolerations: Vec<&'static str>,
    affinity: Vec<&'static str>,
    spread: Vec<&'static str>,
    priority: Vec<&'static str>,
    /// The switch that deploys it, if it can be turned off.
    enabled: Option<Vec<&'static str>>,
}

/// A provider's key under the chart's `providers`: its binary's name without `provider-` (upstream's
/// chart has no such keys; ours are named like upstream's provider packages).
fn provider_key(name: &'static str) -> &'static str {
    name.strip_prefix("provider-").unwrap_or(name)
}

fn keys(b: &Deployed) -> Keys {
    match b.name {
        "crossplane" => Keys {
            replicas: vec!["replicas"],
            image: vec!["image"],
            leader: vec!["leaderElection"],
            args: vec!["args"],
            resources: vec!["resourcesCrossplane"],
            security: vec!["securityContextCrossplane"],
            pod_security: vec!["podSecurityContextCrossplane"],
            env: vec!["extraEnvVarsCrossplane"],
            node_selector: vec!["nodeSelector"],
            tolerations: vec!["tolerations"],
            affinity: vec!["affinity"],
            spread: vec!["topologySpreadConstraints"],
            priority: vec!["priorityClassName"],
            enabled: None,
        },
        "crossplane-rbac-manager" => Keys {
            replicas: vec!["rbacManager", "replicas"],
            image: vec!["image"],
            leader: vec!["rbacManager", "leaderElection"],
            args: vec!["rbacManager", "args"],
            resources: vec!["resourcesRBACManager"],
            security: vec!["securityContextRBACManager"],
            pod_security: vec!["podSecurityContextRBACManager"],
            env: vec!["extraEnvVarsRBACManager"],
            node_selector: vec!["rbacManager", "nodeSelector"],
            tolerations: vec!["rbacManager", "tolerations"],
            affinity: vec!["rbacManager", "affinity"],
            spread: vec!["rbacManager", "topologySpreadConstraints"],
            priority: vec!["priorityClassName"],
            enabled: Some(vec!["rbacManager", "deploy"]),
        },
        other => {
            let p = provider_key(other);
            Keys {
                replicas: vec!["providers", p, "replicas"],
                image: vec!["providers", p, "image"],
                leader: vec!["providers", p, "leaderElection"],
                args: vec!["providers", p, "args"],
                resources: vec!["providers", p, "resources"],
                security: vec!["providers", p, "securityContext"],
                pod_security: vec!["providers", p, "podSecurityContext"],
                env: vec!["providers", p, "extraEnvVars"],
                node_selector: vec!["providers", p, "nodeSelector"],
                tolerations: vec!["providers", p, "tolerations"],
                affinity: vec!["providers", p, "affinity"],
                spread: vec!["providers", p, "topologySpreadConstraints"],
                priority: vec!["providers", p, "priorityClassName"],
                enabled: Some(vec!["providers", p, "enabled"]),
            }
        }
    }
}

fn expr(path: &[&str]) -> String {
    format!(".Values.{}", path.join("."))
}

fn set(values: &mut Value, path: &[&str], value: Value) {
    let mut at = values;
    for (i, key) in path.iter().enumerate() {
        if i + 1 == path.len() {
            at[*key] = value;
            return;
        }
        if !at[*key].is_object() {
            at[*key] = json!({});
        }
        at = &mut at[*key];
    }
}

/// A place in a rendered manifest that becomes template text.
enum Marker {
    /// `key: <marker>` becomes `key: <text>` (the text is inline).
    Inline(String),
    /// `key: <marker>` becomes the value at `expr` as YAML, or nothing when it is empty.
    Block(String),
    /// `key: <marker>` becomes `key: <value>` when the value at `expr` is set.
    Scalar(String),
    /// A list item `- <marker>` becomes one item per element of `expr` (quoted).
    Items(String),
    /// A list item `- name: <marker>` becomes one `name`/`value` item per entry of the map at `expr`.
    EnvItems(String),
    /// A map entry `<marker>: x` becomes the prometheus.io annotations when metrics are enabled.
    MetricsAnnotations,
}

/// Replaces every marker line in `text`.
fn apply(text: &str, markers: &BTreeMap<String, Marker>) -> String {
    let mut out = Vec::new();
    for line in text.lines() {
        let Some((token, marker)) = markers.iter().find(|(t, _)| line.contains(t.as_str())) else {
            out.push(line.to_owned());
            continue;
        };
        let indent = line.len() - line.trim_start().len();
        let pad = " ".repeat(indent);
        let key = line.trim_start().split(':').next().unwrap_or_default();
        match marker {
            Marker::Inline(t) => out.push(line.replace(token.as_str(), t)),
            Marker::Block(e) => {
                out.push(format!("{pad}{{{{- with {e} }}}}"));
                out.push(format!("{pad}{key}:"));
                out.push(format!("{pad}  {{{{- toYaml . | nindent {} }}}}", indent + 2));
                out.push(format!("{pad}{{{{- end }}}}"));
            }
            Marker::Scalar(e) => {
                out.push(format!("{pad}{{{{- with {e} }}}}"));
                out.push(format!("{pad}{key}: {{{{ . | quote }}}}"));
                out.push(format!("{pad}{{{{- end }}}}"));
            }
            Marker::Items(e) => {
                out.push(format!("{pad}{{{{- range {e} }}}}"));
                out.push(format!("{pad}- {{{{ . | quote }}}}"));
                out.push(format!("{pad}{{{{- end }}}}"));
            }
            Marker::EnvItems(e) => {
                out.push(format!("{pad}{{{{- range $key, $value := {e} }}}}"));
                out.push(format!("{pad}- name: {{{{ $key | replace \".\" \"_\" }}}}"));
                out.push(format!("{pad}  value: {{{{ $value | quote }}}}"));
                out.push(format!("{pad}{{{{- end }}}}"));
            }
            Marker::MetricsAnnotations => {
                out.push(format!("{pad}{{{{- if .Values.metrics.enabled }}}}"));
                out.push(format!("{pad}prometheus.io/scrape: \"true\""));
                out.push(format!(
                    "{pad}prometheus.io/port: \"{}\"",
                    crate::generate::METRICS_PORT
                ));
                out.push(format!("{pad}prometheus.io/path: /metrics"));
                out.push(format!("{pad}{{{{- end }}}}"));
            }
        }
    }
    out.join("\n") + "\n"
}

/// The release namespace instead of the bases' fixed one.
fn in_release_namespace(text: &str) -> String {
    text.replace(
        &format!("namespace: {NAMESPACE}"),
        "namespace: {{ .Release.Namespace }}",
    )
}

fn gated(text: String, enabled: &Option<Vec<&str>>) -> String {
    match enabled {
        Some(path) => format!("{{{{- if {} }}}}\n{text}{{{{- end }}}}\n", expr(path)),
        None => text,
    }
}

/// The Deployment template of `b`, with its defaults written into `values`.
fn deployment_template(b: &Deployed, registry: &Registry, values: &mut Value) -> anyhow::Result<String> {
    let k = keys(b);
    let mut d = deployment(b, registry);
    let mut markers = BTreeMap::new();
    let mut mark = |name: &str, m: Marker| {
        let token = format!("__chart_{name}__");
        markers.insert(token.clone(), m);
        Value::String(token)
    };

    set(values, &k.replicas, d["spec"]["replicas"].take());
    d["spec"]["replicas"] = mark(
        "replicas",
        Marker::Inline(format!("{{{{ {} }}}}", expr(&k.replicas))),
    );
    let pod = &mut d["spec"]["template"]["spec"];
    let c = &mut pod["containers"][0];
    let image = c["image"]
        .as_str()
        .context("the Deployment names no image")?
        .to_owned();
    let (repository, _) = image.rsplit_once(':').context("an image without a tag")?;
    set(
        values,
        &[k.image.as_slice(), &["repository"]].concat(),
        json!(repository),
    );
    set(values, &[k.image.as_slice(), &["tag"]].concat(), json!(""));
    set(
        values,
        &[k.image.as_slice(), &["pullPolicy"]].concat(),
        c["imagePullPolicy"].take(),
    );
    let img = expr(&k.image);
    c["image"] = mark(
        "image",
        Marker::Inline(format!(
            "\"{{{{ {img}.repository }}}}:{{{{ {img}.tag | default .Chart.AppVersion }}}}\""
        )),
    );
    c["imagePullPolicy"] = mark(
        "pullPolicy",
        Marker::Inline(format!("{{{{ {img}.pullPolicy }}}}")),
    );

    let mut args: Vec<Value> = c["args"].as_array().cloned().unwrap_or_default();
    args.push(mark("args", Marker::Items(expr(&k.args))));
    c["args"] = Value::Array(args);
    set(values, &k.args, json!([]));

    let env = c["env"].as_array_mut().context("the container has no env")?;
    for e in env.iter_mut() {
        if e["name"] == "LEADER_ELECTION" {
            set(values, &k.leader, json!(true));
            e["value"] = mark(
                "leader",
                Marker::Inline(format!("{{{{ {} | quote }}}}", expr(&k.leader))),
            );
        }
    }
    env.push(json!({"name": mark("env", Marker::EnvItems(expr(&k.env)))}));
    set(values, &k.env, json!({}));

    for (field, path, name) in [
        ("resources", &k.resources, "resources"),
        ("securityContext", &k.security, "security"),
    ] {
        set(values, path, c[field].take());
        c[field] = mark(name, Marker::Block(expr(path)));
    }
    for (field, path, name, default) in [
        ("securityContext", &k.pod_security, "podSecurity", None),
        ("affinity", &k.affinity, "affinity", None),
        ("topologySpreadConstraints", &k.spread, "spread", None),
        ("nodeSelector", &k.node_selector, "nodeSelector", Some(json!({}))),
        ("tolerations", &k.tolerations, "tolerations", Some(json!([]))),
    ] {
        let value = default.unwrap_or_else(|| pod[field].take());
        set(values, path, value);
        pod[field] = mark(name, Marker::Block(expr(path)));
    }
    set(values, &k.priority, json!(""));
    pod["priorityClassName"] = mark("priority", Marker::Scalar(expr(&k.priority)));
    pod["imagePullSecrets"] = mark("pullSecrets", Marker::Block(".Values.imagePullSecrets".into()));
    let template_meta = &mut d["spec"]["template"]["metadata"];
    // deploy/'s prometheus.io annotations when metrics.enabled (true by default, as deploy/ has them).
    template_meta["annotations"] =
        json!({mark("metrics", Marker::MetricsAnnotations).as_str().unwrap_or_default(): "x"});
    if let Some(path) = &k.enabled {
        set(values, path, json!(true));
    }
    Ok(gated(
        apply(&in_release_namespace(&yaml(&d)?), &markers),
        &k.enabled,
    ))
}

/// Every file of the chart, by path relative to deploy/.
pub fn render(
    binaries: &[Deployed],
    version: &str,
    registry: &Registry,
) -> anyhow::Result<BTreeMap<PathBuf, String>> {
    let dir = PathBuf::from(DIR);
    let mut files = BTreeMap::new();
    let mut values = json!({
        "imagePullSecrets": [],
        "serviceAccount": {"customAnnotations": {}},
        "metrics": {"enabled": true},
    });
    for b in binaries {
        for crd in (b.crds)() {
            let name = crd.metadata.name.clone().context("a CRD without a name")?;
            files.insert(
                dir.join("crds").join(format!("{name}.yaml")),
                yaml(&serde_json::to_value(&crd)?)?,
            );
        }
        let k = keys(b);
        files.insert(
            dir.join("templates").join(format!("{}-deployment.yaml", b.name)),
            deployment_template(b, registry, &mut values)?,
        );
        for (file, mut obj) in base(b, registry) {
            if file == "kustomization.yaml" || file == "deployment.yaml" {
                continue;
            }
            let mut markers = BTreeMap::new();
            if obj["kind"] == "ServiceAccount" {
                let token = "__chart_sa__".to_owned();
                obj["metadata"]["annotations"] = json!(token);
                markers.insert(
                    token,
                    Marker::Block(".Values.serviceAccount.customAnnotations".into()),
                );
            }
            let text = apply(&in_release_namespace(&yaml(&obj)?), &markers);
            files.insert(
                dir.join("templates").join(format!("{}-{file}", b.name)),
                gated(text, &k.enabled),
            );
        }
    }
    let mut roles = String::new();
    for role in crossplane::roles::user_roles() {
        roles.push_str(&yaml(&serde_json::to_value(&role)?)?);
        roles.push_str("---\n");
    }
    roles.push_str(&yaml(&serde_json::to_value(crossplane::roles::admin_binding())?)?);
    files.insert(
        dir.join("templates").join("crossplane-roles.yaml"),
        gated(roles, &Some(vec!["rbacManager", "deploy"])),
    );
    files.insert(
        dir.join("Chart.yaml"),
        yaml(&json!({
            "apiVersion": "v2",
            "name": "crossplane-rs",
            "description": "Crossplane's core, RBAC manager and providers, rebuilt in Rust, with leader election on by default",
            "type": "application",
            "version": version,
            "appVersion": version,
            "home": "https://github.com/crossplane-rs/crossplane-rs",
        }))?,
    );
    files.insert(dir.join("values.yaml"), yaml(&values)?);
    Ok(files)
}
