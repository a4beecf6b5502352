//! The generated Helm chart (`deploy/charts/crossplane-rs/`), with real Helm (built by `cargo xtask test`):
//! - `helm lint` passes;
//! - with default values it renders exactly the objects of the kustomize bases in deploy/;
//! - with an upstream-style values file (the value names of Crossplane's chart) each value lands where
//!   upstream puts it, and switched-off parts are gone;
//! - both renderings pass a server-side dry run on the real apiserver.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result, ensure};
use serde_json::{Value, json};
use testenv::support::cluster;

fn deploy_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../deploy")
}

fn chart_dir() -> PathBuf {
    deploy_dir().join("charts/crossplane-rs")
}

fn run(program: &Path, args: &[&str], stdin: Option<&str>) -> Result<String> {
    use std::io::Write;
    let mut child = Command::new(program)
        .args(args)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .with_context(|| format!("running {}", program.display()))?;
    if let Some(input) = stdin
        && let Some(mut s) = child.stdin.take()
    {
        s.write_all(input.as_bytes())?;
    }
    drop(child.stdin.take());
    let out = child.wait_with_output()?;
    ensure!(
        out.status.success(),
        "{} {} failed:\n{}\n{}",
        program.display(),
        args.join(" "),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

fn helm(args: &[&str]) -> Result<String> {
    run(&testenv::helm::find()?, args, None)
}

/// Drops nulls and empty maps (Helm renders `args:` with no items as null), recursively.
fn normalized(v: Value) -> Value {
    match v {
        Value::Object(m) => Value::Object(
            m.into_iter()
                .map(|(k, v)| (k, normalized(v)))
                .filter(|(_, v)| !v.is_null() && v.as_object().is_none_or(|m| !m.is_empty()))
                .collect(),
        ),
        Value::Array(a) => Value::Array(a.into_iter().map(normalized).collect()),
        other => other,
    }
}

/// The objects of a multi-document YAML stream, by `kind/name`.
fn objects(text: &str) -> Result<BTreeMap<String, Value>> {
    let mut out = BTreeMap::new();
    for doc in text.split("\n---") {
        let v: Value = serde_saphyr::from_str(doc).unwrap_or(Value::Null);
        if v.is_null() {
            continue;
        }
        let key = format!(
            "{}/{}",
            v["kind"].as_str().context("an object without a kind")?,
            v["metadata"]["name"]
                .as_str()
                .context("an object without a name")?
        );
        out.insert(key, normalized(v));
    }
    Ok(out)
}

/// Every object of the kustomize bases (not the CRDs, the fence or the kustomizations).
fn kustomize_objects() -> Result<BTreeMap<String, Value>> {
    let mut out = BTreeMap::new();
    for entry in std::fs::read_dir(deploy_dir())? {
        let dir = entry?.path();
        let name = dir
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or_default()
            .to_owned();
        if !dir.is_dir() || ["crds", "fencing", "charts"].contains(&name.as_str()) {
            continue;
        }
        for file in std::fs::read_dir(&dir)? {
            let file = file?.path();
            if file.extension().is_some_and(|e| e == "yaml")
                && file.file_name().is_some_and(|n| n != "kustomization.yaml")
            {
                out.extend(objects(&std::fs::read_to_string(&file)?)?);
            }
        }
    }
    Ok(out)
}

/// Values an operator might carry over from upstream's chart.
const UPSTREAM_VALUES: &str = r#"
replicas: 3
image:
  repository: registry.example.com/crossplane-rs/crossplane
  tag: v9.9.9
  pullPolicy: Always
leaderElection: true
args: ["--debug", "--enable-usages=false"]
resourcesCrossplane:
  limits: {cpu: 500m, memory: 1Gi}
  requests: {cpu: 200m, memory: 256Mi}
nodeSelector: {kubernetes.io/os: linux}
tolerations: [{key: dedicated, operator: Equal, value: crossplane, effect: NoSchedule}]
affinity:
  nodeAffinity:
    requiredDuringSchedulingIgnoredDuringExecution:
      nodeSelectorTerms: [{matchExpressions: [{key: pool, operator: In, values: [system]}]}]
topologySpreadConstraints: []
priorityClassName: system-cluster-critical
imagePullSecrets: [{name: regcred}]
serviceAccount:
  customAnnotations: {eks.amazonaws.com/role-arn: "arn:aws:iam::1:role/x"}
extraEnvVarsCrossplane: {TOKIO_WORKER_THREADS: "2", sample.var: "x"}
metrics:
  enabled: false
rbacManager:
  deploy: false
providers:
  sql:
    enabled: false
  nop:
    replicas: 1
    args: ["--poll", "30s"]
"#;

#[test]
fn chart_lints_and_renders_what_deploy_has() -> Result<()> {
    let chart = chart_dir().display().to_string();
    let lint = helm(&["lint", "--strict", &chart])?;
    ensure!(lint.contains("0 chart(s) failed"), "helm lint:\n{lint}");

    let rendered = objects(&helm(&[
        "template",
        "crossplane",
        &chart,
        "--namespace",
        "crossplane-system",
    ])?)?;
    let expected = kustomize_objects()?;
    let missing: Vec<&String> = expected.keys().filter(|k| !rendered.contains_key(*k)).collect();
    let extra: Vec<&String> = rendered.keys().filter(|k| !expected.contains_key(*k)).collect();
    ensure!(
        missing.is_empty() && extra.is_empty(),
        "chart vs deploy/: missing {missing:?}, extra {extra:?}"
    );
    for (key, want) in &expected {
        ensure!(
            rendered.get(key) == Some(want),
            "{key} differs from deploy/:\nchart:  {}\ndeploy: {want}",
            rendered.get(key).map(Value::to_string).unwrap_or_default()
        );
    }
    Ok(())
}

#[test]
fn upstream_value_names_land_where_upstream_puts_them() -> Result<()> {
    let dir = tempdir()?;
    let values = dir.join("values.yaml");
    std::fs::write(&values, UPSTREAM_VALUES)?;
    let chart = chart_dir().display().to_string();
    let out = helm(&[
        "template",
        "crossplane",
        &chart,
        "-n",
        "xp",
        "-f",
        &values.display().to_string(),
    ])?;
    let objs = objects(&out)?;
    let core = objs.get("Deployment/crossplane").context("no core Deployment")?;
    let pod = &core["spec"]["template"]["spec"];
    let c = &pod["containers"][0];
    ensure!(
        core["spec"]["replicas"] == 3,
        "replicas: {}",
        core["spec"]["replicas"]
    );
    ensure!(
        c["image"] == "registry.example.com/crossplane-rs/crossplane:v9.9.9",
        "image: {}",
        c["image"]
    );
    ensure!(c["imagePullPolicy"] == "Always");
    ensure!(
        c["args"] == json!(["core", "start", "--debug", "--enable-usages=false"]),
        "args: {}",
        c["args"]
    );
    ensure!(c["resources"]["limits"]["memory"] == "1Gi");
    let env: Vec<&Value> = c["env"].as_array().context("env")?.iter().collect();
    ensure!(
        env.iter()
            .any(|e| e["name"] == "TOKIO_WORKER_THREADS" && e["value"] == "2")
    );
    ensure!(
        env.iter().any(|e| e["name"] == "sample_var"),
        "extraEnvVars keys have . replaced"
    );
    ensure!(
        env.iter()
            .any(|e| e["name"] == "LEADER_ELECTION" && e["value"] == "true")
    );
    ensure!(pod["nodeSelector"]["kubernetes.io/os"] == "linux");
    ensure!(pod["tolerations"][0]["key"] == "dedicated");
    ensure!(pod["priorityClassName"] == "system-cluster-critical");
    ensure!(pod["imagePullSecrets"][0]["name"] == "regcred");
    // Helm merges maps: the operator's node affinity comes on top of the default pod anti-affinity.
    ensure!(
        pod["affinity"]["nodeAffinity"].is_object(),
        "affinity: {}",
        pod["affinity"]
    );
    ensure!(
        pod["affinity"]["podAntiAffinity"].is_object(),
        "affinity: {}",
        pod["affinity"]
    );
    // A list replaces the default: no spread constraints.
    ensure!(
        pod["topologySpreadConstraints"].is_null(),
        "spread: {}",
        pod["topologySpreadConstraints"]
    );
    ensure!(
        core["spec"]["template"]["metadata"]["annotations"].is_null(),
        "metrics.enabled=false drops the prometheus.io annotations"
    );
    ensure!(core["metadata"]["namespace"] == "xp");
    let sa = objs
        .get("ServiceAccount/crossplane")
        .context("no core ServiceAccount")?;
    ensure!(sa["metadata"]["annotations"]["eks.amazonaws.com/role-arn"] == "arn:aws:iam::1:role/x");
    ensure!(
        !objs.contains_key("Deployment/crossplane-rbac-manager"),
        "rbacManager.deploy=false"
    );
    ensure!(
        !objs.contains_key("ClusterRole/crossplane-edit"),
        "the user roles go with the RBAC manager"
    );
    ensure!(
        !objs.contains_key("Deployment/provider-sql"),
        "providers.sql.enabled=false"
    );
    let nop = objs.get("Deployment/provider-nop").context("no provider-nop")?;
    ensure!(nop["spec"]["replicas"] == 1);
    ensure!(nop["spec"]["template"]["spec"]["containers"][0]["args"] == json!(["--poll", "30s"]));
    Ok(())
}

#[tokio::test]
async fn renderings_pass_a_server_side_dry_run() -> Result<()> {
    let c = cluster();
    let ns = c.namespace("chart").await?;
    let dir = tempdir()?;
    let values = dir.join("values.yaml");
    std::fs::write(&values, UPSTREAM_VALUES)?;
    let chart = chart_dir().display().to_string();
    let kubectl = PathBuf::from("kubectl");
    for extra in [vec![], vec!["-f".to_owned(), values.display().to_string()]] {
        let mut args = vec!["template", "crossplane", &chart, "--include-crds", "-n", &ns];
        args.extend(extra.iter().map(String::as_str));
        let rendered = helm(&args)?;
        let kubeconfig = format!("--kubeconfig={}", c.kubeconfig().display());
        let out = run(
            &kubectl,
            &[
                &kubeconfig,
                "apply",
                "--dry-run=server",
                "--validate=strict",
                "-f",
                "-",
            ],
            Some(&rendered),
        )?;
        ensure!(
            out.contains("deployment.apps/crossplane created (server dry run)")
                && out.contains("deployment.apps/provider-nop created (server dry run)"),
            "dry run of the chart ({extra:?}):\n{out}"
        );
    }
    Ok(())
}

fn tempdir() -> Result<PathBuf> {
    let dir = std::env::temp_dir().join(format!(
        "chart-test-{}-{}",
        std::process::id(),
        jiff::Timestamp::now().as_nanosecond()
    ));
    std::fs::create_dir_all(&dir)?;
    Ok(dir)
}
