//! `cargo xtask bench --functions`: composition functions on a fresh control plane.
//!
//! - **Composition**: 100 namespaced XRs, each composing 5 ConfigMaps through a 2-step pipeline (our
//!   Python SDK function `crates/crossplane/tests/functions/misbehave.py` composes 4 over gRPC, then the
//!   built-in patch-and-transform composes the fifth), created at once and taken to Ready by the core
//!   (debug build). Reports the total time and the function calls per XR (counted in the function's log:
//!   one line per call).
//! - **Per-call cost**, the same step 1 000 times: a tonic function on loopback that answers at once
//!   (the gRPC overhead: encode, HTTP/2, decode), the Python SDK function (what a real function adds),
//!   and the built-in patch-and-transform step in process; p50 and p99 (nearest rank), after 50 warm-up
//!   calls.
//!
//! Writes `docs/functions-benchmark.md` and `docs/functions-benchmark.json` (its provenance, and the
//! figures the README renders). About 3 minutes on 2 cores after the builds.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};
use testenv::free_port;

use anyhow::{Context, bail};
use function::proto::v1;
use function::proto::v1::function_runner_service_server::{
    FunctionRunnerService, FunctionRunnerServiceServer,
};
use function::structs;
use jiff::Timestamp;
use kube::Api;
use kube::api::{ApiResource, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use serde_json::{Value, json};

use super::stats::pct;
use tokio::process::Command;

use release::{harness, runtime, target_dir};

const XRS: usize = 100;
const CALLS: usize = 1_000;
const WARMUP: usize = 50;

struct Echo;

#[tonic::async_trait]
impl FunctionRunnerService for Echo {
    async fn run_function(
        &self,
        req: tonic::Request<v1::RunFunctionRequest>,
    ) -> Result<tonic::Response<v1::RunFunctionResponse>, tonic::Status> {
        let req = req.into_inner();
        Ok(tonic::Response::new(v1::RunFunctionResponse {
            desired: req.desired,
            ..Default::default()
        }))
    }
}

async fn wait_port(addr: &str) -> anyhow::Result<()> {
    let deadline = Instant::now() + Duration::from_secs(60);
    while tokio::net::TcpStream::connect(addr).await.is_err() {
        if Instant::now() > deadline {
            bail!("nothing listens on {addr} after 60 s");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    Ok(())
}

/// The request of the per-call measurements: an XR and four desired ConfigMaps.
fn request() -> v1::RunFunctionRequest {
    let xr = json!({"apiVersion": "bench.crossplane-rs.io/v1", "kind": "XApp",
        "metadata": {"name": "app", "namespace": "bench"}, "spec": {"value": "v"}});
    v1::RunFunctionRequest {
        observed: Some(v1::State {
            composite: Some(v1::Resource {
                resource: structs::struct_of(&xr),
                ..Default::default()
            }),
            resources: BTreeMap::new(),
        }),
        input: structs::struct_of(&json!({"apiVersion": "test.crossplane-rs.io/v1", "kind": "Input",
            "mode": "compose", "count": 4})),
        ..Default::default()
    }
}

async fn time_calls(client: &function::Client) -> anyhow::Result<Vec<f64>> {
    // Warm up: connect, and let both sides reach a steady state.
    for _ in 0..WARMUP {
        client.run(request(), Duration::from_secs(20)).await?;
    }
    let mut ms = Vec::with_capacity(CALLS);
    for _ in 0..CALLS {
        let t = Instant::now();
        client.run(request(), Duration::from_secs(20)).await?;
        ms.push(t.elapsed().as_secs_f64() * 1e3);
    }
    ms.sort_by(f64::total_cmp);
    Ok(ms)
}

fn pt_input() -> Value {
    json!({"apiVersion": "pt.fn.crossplane.io/v1beta1", "kind": "Resources", "resources": [{
        "name": "fromPT", "base": {"apiVersion": "v1", "kind": "ConfigMap", "data": {}},
        "patches": [{"type": "FromCompositeFieldPath", "fromFieldPath": "spec.value", "toFieldPath": "data.value"}],
        "readinessChecks": [{"type": "None"}]}]})
}

fn time_builtin() -> anyhow::Result<Vec<f64>> {
    let req = request();
    let xr = builtin_json(&req);
    let input = pt_input();
    let mut ms = Vec::with_capacity(CALLS);
    for _ in 0..CALLS {
        let t = Instant::now();
        crossplane::composite::builtin::run(
            Some(&input),
            &xr,
            &BTreeMap::new(),
            &v1::State::default(),
            &serde_json::Map::new(),
        )?;
        ms.push(t.elapsed().as_secs_f64() * 1e3);
    }
    ms.sort_by(f64::total_cmp);
    Ok(ms)
}

fn builtin_json(req: &v1::RunFunctionRequest) -> Value {
    crossplane::composite::builtin::json_of(req.observed.as_ref().and_then(|o| o.composite.as_ref()))
}

async fn apply(api: &Api<DynamicObject>, v: Value) -> anyhow::Result<()> {
    let o: DynamicObject = serde_json::from_value(v)?;
    let name = o.metadata.name.clone().context("name")?;
    api.patch(
        &name,
        &PatchParams::apply("xtask-bench").force(),
        &Patch::Apply(&o),
    )
    .await?;
    Ok(())
}

fn dynamic(group: &str, version: &str, kind: &str, plural: &str) -> ApiResource {
    ApiResource {
        group: group.into(),
        version: version.into(),
        api_version: format!("{group}/{version}"),
        kind: kind.into(),
        plural: plural.into(),
    }
}

fn ready(x: &DynamicObject) -> bool {
    x.data
        .pointer("/status/conditions")
        .and_then(Value::as_array)
        .is_some_and(|cs| cs.iter().any(|c| c["type"] == "Ready" && c["status"] == "True"))
}

struct Composed {
    total_secs: f64,
    calls: usize,
}

async fn compose(
    cluster: &testenv::Cluster,
    core: &Path,
    python: &Path,
    script: &Path,
    logs: &Path,
) -> anyhow::Result<Composed> {
    let client = cluster.client().await?;
    install_crds(&client).await?;
    let fn_log = logs.join("function.log");
    let (_function, address) = start_function(python, script, &fn_log).await?;
    let _core = start_core(cluster, core, logs)?;
    let ns = cluster.namespace("bench-fn").await?;
    let group = "bench.crossplane-rs.io";
    install_pipeline(&client, group, &address).await?;
    let xr_ar = dynamic(group, "v1", "XApp", "xapps");
    let xrs: Api<DynamicObject> = Api::namespaced_with(client.clone(), &ns, &xr_ar);
    wait_served(&xrs, logs).await?;
    let started = Instant::now();
    for i in 0..XRS {
        let o: DynamicObject = serde_json::from_value(
            json!({"apiVersion": format!("{group}/v1"), "kind": "XApp",
            "metadata": {"name": format!("app-{i:03}"), "namespace": ns}, "spec": {"value": format!("v{i}")}}),
        )?;
        xrs.create(&PostParams::default(), &o).await?;
    }
    let deadline = Instant::now() + Duration::from_secs(900);
    loop {
        let n = xrs
            .list(&ListParams::default())
            .await?
            .items
            .iter()
            .filter(|x| ready(x))
            .count();
        if n == XRS {
            break;
        }
        if Instant::now() > deadline {
            bail!("{n} of {XRS} XRs Ready after 900 s; see {}", logs.display());
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let total_secs = started.elapsed().as_secs_f64();
    let cms: Api<k8s_openapi::api::core::v1::ConfigMap> = Api::namespaced(client.clone(), &ns);
    let composed = cms
        .list(&ListParams::default().labels("crossplane.io/composite"))
        .await?
        .items
        .len();
    if composed != XRS * 5 {
        bail!("{composed} composed ConfigMaps, expected {}", XRS * 5);
    }
    let calls = std::fs::read_to_string(&fn_log)?
        .lines()
        .filter(|l| l.starts_with("RunFunction"))
        .count();
    Ok(Composed { total_secs, calls })
}

/// The core's CRDs.
async fn install_crds(client: &kube::Client) -> anyhow::Result<()> {
    let crds: Api<
        k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition,
    > = Api::all(client.clone());
    for crd in crossplane::crds() {
        let name = crd.metadata.name.clone().context("CRD name")?;
        crds.patch(
            &name,
            &PatchParams::apply("xtask-bench").force(),
            &Patch::Apply(&crd),
        )
        .await?;
    }
    Ok(())
}

/// The SDK function on a free loopback port, logging to `fn_log`; the process and its address.
async fn start_function(
    python: &Path,
    script: &Path,
    fn_log: &Path,
) -> anyhow::Result<(tokio::process::Child, String)> {
    let port = free_port()?;
    let address = format!("127.0.0.1:{port}");
    let out = std::fs::File::create(fn_log)?;
    let function = Command::new(python)
        .arg(script)
        .args(["--address", &address])
        .stdin(Stdio::null())
        .stdout(out.try_clone()?)
        .stderr(out)
        .kill_on_drop(true)
        .spawn()
        .context("starting the SDK function")?;
    wait_port(&address).await?;
    Ok((function, address))
}

/// The core, unelected, logging to `<logs>/core.log`.
fn start_core(cluster: &testenv::Cluster, core: &Path, logs: &Path) -> anyhow::Result<tokio::process::Child> {
    let core_log = std::fs::File::create(logs.join("core.log"))?;
    let core = Command::new(core)
        .args(["core", "start", "--kubeconfig"])
        .arg(cluster.kubeconfig())
        .args(["--metrics-bind-address", "0", "--health-probe-bind-address", "0"])
        // The bench runs its function itself (a development runtime), so no package runtime.
        .args(["--package-runtime", "External"])
        .env_remove("LEADER_ELECTION")
        .env_remove("KUBECONFIG")
        .env("RUST_LOG", "info")
        .stdin(Stdio::null())
        .stdout(core_log.try_clone()?)
        .stderr(core_log)
        .kill_on_drop(true)
        .spawn()
        .context("starting the core")?;
    Ok(core)
}

/// The XRD, the Function (a development runtime at `address`) and the two-step Composition.
async fn install_pipeline(client: &kube::Client, group: &str, address: &str) -> anyhow::Result<()> {
    let xrd = dynamic(
        "apiextensions.crossplane.io",
        "v2",
        "CompositeResourceDefinition",
        "compositeresourcedefinitions",
    );
    let xrds: Api<DynamicObject> = Api::all_with(client.clone(), &xrd);
    apply(&xrds, json!({"apiVersion": "apiextensions.crossplane.io/v2", "kind": "CompositeResourceDefinition",
        "metadata": {"name": format!("xapps.{group}")},
        "spec": {"group": group, "names": {"kind": "XApp", "plural": "xapps"},
                 "versions": [{"name": "v1", "referenceable": true, "served": true, "schema": {"openAPIV3Schema": {
                     "type": "object", "properties": {"spec": {"type": "object", "properties": {"value": {"type": "string"}}}}}}}]}})).await?;
    let fns: Api<DynamicObject> = Api::all_with(
        client.clone(),
        &dynamic("pkg.crossplane.io", "v1", "Function", "functions"),
    );
    apply(
        &fns,
        json!({"apiVersion": "pkg.crossplane.io/v1", "kind": "Function",
        "metadata": {"name": "function-sdk", "annotations": {"render.crossplane.io/runtime": "Development",
            "render.crossplane.io/runtime-development-target": address}},
        "spec": {"package": "xpkg.crossplane.io/crossplane-rs/function-sdk:v0.0.0"}}),
    )
    .await?;
    let comps: Api<DynamicObject> = Api::all_with(
        client.clone(),
        &dynamic("apiextensions.crossplane.io", "v1", "Composition", "compositions"),
    );
    apply(&comps, json!({"apiVersion": "apiextensions.crossplane.io/v1", "kind": "Composition",
        "metadata": {"name": "bench"},
        "spec": {"compositeTypeRef": {"apiVersion": format!("{group}/v1"), "kind": "XApp"}, "mode": "Pipeline",
                 "pipeline": [
                    {"step": "sdk", "functionRef": {"name": "function-sdk"},
                     "input": {"apiVersion": "test.crossplane-rs.io/v1", "kind": "Input", "mode": "compose", "count": 4}},
                    {"step": "pt", "functionRef": {"name": "function-patch-and-transform"}, "input": pt_input()}]}})).await?;
    Ok(())
}

/// Waits until the XR kind is served (the core has rendered the XRD's CRD).
async fn wait_served(xrs: &Api<DynamicObject>, logs: &Path) -> anyhow::Result<()> {
    // The XR kind is served once the core has rendered the XRD's CRD.
    let deadline = Instant::now() + Duration::from_secs(120);
    while xrs.list(&ListParams::default().limit(1)).await.is_err() {
        if Instant::now() > deadline {
            bail!(
                "the XApp kind is not served after 120 s; see {}",
                logs.join("core.log").display()
            );
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    tokio::time::sleep(Duration::from_secs(2)).await;
    Ok(())
}

/// Runs the benchmark and writes `docs/functions-benchmark.md`.
pub fn run() -> anyhow::Result<i32> {
    release::prereq::function_venv()?;
    let harness = harness()?;
    let status = release::cargo()
        .args(["build", "-p", "crossplane", "--bin", "crossplane"])
        .status()?;
    if !status.success() {
        bail!("cargo build -p crossplane failed");
    }
    let provenance =
        release::provenance::for_artifact("functions-benchmark.json", "cargo xtask bench --functions")?;
    let core = target_dir().join("debug").join("crossplane");
    let python = target_dir().join("function-venv").join("bin").join("python");
    let root = target_dir()
        .parent()
        .map(Path::to_path_buf)
        .context("workspace root")?;
    let script = root.join("crates/crossplane/tests/functions/misbehave.py");
    let dir = target_dir().join("testbed").join("bench-functions");
    if dir.exists() {
        std::fs::remove_dir_all(&dir)?;
    }
    let logs = dir.join("logs");
    let rt = runtime()?;
    let mut cp = rt.block_on(testenv::ControlPlane::start(&dir, &harness, false))?;
    std::fs::create_dir_all(&logs)?;
    let began = Timestamp::now();
    let result = rt.block_on(async {
        eprintln!("[bench] {XRS} XRs x 5 ConfigMaps through function-sdk then patch-and-transform");
        let composed = compose(cp.cluster(), &core, &python, &script, &logs).await?;
        let (echo, sdk, builtin) = per_call(&python, &script).await?;
        anyhow::Ok((composed, echo, sdk, builtin))
    });
    cp.stop().context("stopping the bench control plane")?;
    let (composed, echo, sdk, builtin) = result?;
    let md = markdown(&began, &provenance, &composed, &echo, &sdk, &builtin)?;
    let path = root.join("docs").join("functions-benchmark.md");
    std::fs::create_dir_all(path.parent().context("docs dir")?)?;
    std::fs::write(&path, &md)?;
    let call = |s: &[f64]| serde_json::json!({"n": s.len(), "p50_ms": pct(s, 50.0), "p99_ms": pct(s, 99.0)});
    let json = serde_json::json!({
        "xrs": XRS,
        "resources_per_xr": 5,
        "total_s": composed.total_secs,
        "function_calls": composed.calls,
        "function_calls_per_xr": composed.calls as f64 / XRS as f64,
        "grpc_echo": call(&echo),
        "grpc_python_sdk": call(&sdk),
        "builtin_patch_and_transform": call(&builtin),
        "provenance": provenance,
    });
    std::fs::write(
        root.join("docs").join("functions-benchmark.json"),
        serde_json::to_string_pretty(&json)? + "\n",
    )?;
    eprintln!("{md}");
    eprintln!("[bench] wrote {}", path.display());
    Ok(0)
}

/// The per-call cost, [`CALLS`] sequential calls each: a tonic function that answers at once (the gRPC
/// overhead), the Python SDK function, and the built-in step in process.
async fn per_call(python: &Path, script: &Path) -> anyhow::Result<(Vec<f64>, Vec<f64>, Vec<f64>)> {
    eprintln!("[bench] {CALLS} calls each: tonic echo, the Python SDK function, the built-in step");
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let echo_addr = listener.local_addr()?.to_string();
    tokio::spawn(
        tonic::transport::Server::builder()
            .add_service(FunctionRunnerServiceServer::new(Echo))
            .serve_with_incoming(tonic::transport::server::TcpIncoming::from(listener)),
    );
    let echo = time_calls(&function::Client::insecure(&echo_addr)?).await?;
    let port = free_port()?;
    let address = format!("127.0.0.1:{port}");
    let _py = Command::new(python)
        .arg(script)
        .args(["--address", &address])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()?;
    wait_port(&address).await?;
    let sdk = time_calls(&function::Client::insecure(&address)?).await?;
    let builtin = time_builtin()?;
    Ok((echo, sdk, builtin))
}

/// docs/functions-benchmark.md.
fn markdown(
    began: &Timestamp,
    provenance: &serde_json::Value,
    composed: &Composed,
    echo: &[f64],
    sdk: &[f64],
    builtin: &[f64],
) -> anyhow::Result<String> {
    let mut md = String::new();
    writeln!(md, "# Composition functions benchmark\n")?;
    writeln!(
        md,
        "Written by `cargo xtask bench --functions` on {began} (core: debug build). {}\n",
        release::provenance::markdown_line(provenance)
    )?;
    writeln!(md, "## {XRS} XRs x 5 composed resources, 2-step pipeline\n")?;
    writeln!(
        md,
        "Step 1: our Python SDK function over gRPC composes 4 ConfigMaps; step 2: the built-in"
    )?;
    writeln!(
        md,
        "patch-and-transform composes the fifth. All XRs created at once, then taken to Ready.\n"
    )?;
    writeln!(md, "| measure | value |\n|---|---|")?;
    writeln!(md, "| total time to all Ready | {:.1} s |", composed.total_secs)?;
    writeln!(md, "| function calls | {} |", composed.calls)?;
    writeln!(
        md,
        "| function calls per XR | {:.2} |\n",
        composed.calls as f64 / XRS as f64
    )?;
    writeln!(
        md,
        "## Per-call cost ({CALLS} calls each, sequential, after {WARMUP} warm-up calls)\n"
    )?;
    writeln!(md, "| call | p50 | p99 |\n|---|---|---|")?;
    for (what, s) in [
        (
            "gRPC round trip to a tonic function that answers at once (the gRPC overhead)",
            echo,
        ),
        ("gRPC call of the Python SDK function (4 ConfigMaps)", sdk),
        ("built-in patch-and-transform step, in process", builtin),
    ] {
        writeln!(md, "| {what} | {:.3} ms | {:.3} ms |", pct(s, 50.0), pct(s, 99.0))?;
    }
    Ok(md)
}
