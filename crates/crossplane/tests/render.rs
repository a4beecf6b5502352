//! `crossplane render XR COMPOSITION FUNCTIONS`, no cluster: a pipeline of our SDK function (running
//! locally, named by the development annotations) then the built-in patch-and-transform prints the
//! desired XR and both composed resources; bad input exits 2 with one clear message.

mod support;

use std::path::Path;
use std::process::Output;

use anyhow::Context;
use serde_json::{Value, json};
use support::function_process::*;

fn write(dir: &Path, name: &str, docs: &[Value]) -> anyhow::Result<String> {
    let text: String = docs
        .iter()
        .map(|d| format!("---\n{}\n", serde_json::to_string(d).unwrap_or_default()))
        .collect();
    let p = dir.join(name);
    std::fs::write(&p, text)?;
    Ok(p.to_str().context("utf-8 path")?.to_owned())
}

fn render(args: &[&str]) -> anyhow::Result<Output> {
    Ok(std::process::Command::new(env!("CARGO_BIN_EXE_crossplane"))
        .arg("render")
        .args(args)
        .output()?)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn render_runs_a_function_then_patch_and_transform_without_a_cluster() -> anyhow::Result<()> {
    let script = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/functions/misbehave.py");
    let f = serve(
        venv_bin("python")?,
        &[script.to_str().context("utf-8 path")?],
        "render",
    )
    .await?;
    let dir = std::env::temp_dir().join(format!("render-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let xr = write(
        &dir,
        "xr.yaml",
        &[json!({"apiVersion": "example.org/v1", "kind": "XApp",
        "metadata": {"name": "app", "namespace": "team"}, "spec": {"value": "hello"}})],
    )?;
    let comp = write(
        &dir,
        "composition.yaml",
        &[json!({"apiVersion": "apiextensions.crossplane.io/v1",
        "kind": "Composition", "metadata": {"name": "app"},
        "spec": {"compositeTypeRef": {"apiVersion": "example.org/v1", "kind": "XApp"}, "mode": "Pipeline",
          "pipeline": [
            {"step": "sdk", "functionRef": {"name": "function-sdk"},
             "input": {"apiVersion": "test.crossplane-rs.io/v1", "kind": "Input", "mode": "compose"}},
            {"step": "pt", "functionRef": {"name": "function-patch-and-transform"},
             "input": {"apiVersion": "pt.fn.crossplane.io/v1beta1", "kind": "Resources", "resources": [{
               "name": "fromPT", "base": {"apiVersion": "v1", "kind": "ConfigMap"},
               "patches": [{"type": "FromCompositeFieldPath", "fromFieldPath": "spec.value", "toFieldPath": "data.pt"},
                           {"type": "ToCompositeFieldPath", "fromFieldPath": "data.pt", "toFieldPath": "status.echo"}]}]}}]}})],
    )?;
    let fns = write(
        &dir,
        "functions.yaml",
        &[json!({"apiVersion": "pkg.crossplane.io/v1", "kind": "Function",
        "metadata": {"name": "function-sdk", "annotations": {"render.crossplane.io/runtime": "Development",
            "render.crossplane.io/runtime-development-target": f.address}},
        "spec": {"package": "unused"}})],
    )?;

    let out = render(&[&xr, &comp, &fns])?;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "render failed: {stderr}");
    let docs: Vec<Value> = serde_saphyr::from_multiple(&String::from_utf8(out.stdout)?)?;
    assert_eq!(docs.len(), 3, "{docs:?}");
    assert_eq!(docs[0]["kind"], "XApp");
    assert_eq!(docs[0]["status"]["conditions"][0]["type"], "FunctionComposed");
    let by_name = |t: &str| {
        docs.iter()
            .find(|d| d["metadata"]["annotations"]["crossplane.io/composition-resource-name"] == t)
            .cloned()
    };
    let sdk = by_name("config").context("the SDK function's ConfigMap")?;
    assert_eq!(sdk["data"]["value"], "hello");
    assert_eq!(sdk["metadata"]["namespace"], "team");
    assert_eq!(sdk["metadata"]["generateName"], "app-");
    assert_eq!(sdk["metadata"]["ownerReferences"][0]["kind"], "XApp");
    let pt = by_name("fromPT").context("patch-and-transform's ConfigMap")?;
    assert_eq!(pt["data"]["pt"], "hello");
    assert!(
        stderr.contains("Normal: sdk: composed config with value 'hello'"),
        "{stderr}"
    );

    // Bad input: a Function render cannot reach, and a missing file.
    let bad = write(
        &dir,
        "bad-functions.yaml",
        &[json!({"apiVersion": "pkg.crossplane.io/v1", "kind": "Function",
        "metadata": {"name": "function-sdk"}, "spec": {"package": "xpkg.crossplane.io/x:v1"}})],
    )?;
    let out = render(&[&xr, &comp, &bad])?;
    assert_eq!(out.status.code(), Some(2));
    let e = String::from_utf8_lossy(&out.stderr);
    assert!(
        e.contains("must be annotated render.crossplane.io/runtime: Development"),
        "{e}"
    );
    let out = render(&[&xr, &comp, "/nonexistent/functions.yaml"])?;
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("cannot read /nonexistent/functions.yaml"));
    std::fs::remove_dir_all(&dir)?;
    Ok(())
}
