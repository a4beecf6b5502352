//! `cargo xtask conformance`: runs the conformance suite (`crates/crossplane/tests/conformance.rs`)
//! against a fresh control plane with `CONFORMANCE_OUT` set, and collects the outcome each scenario
//! wrote (pass, fail or cannot-run, with seconds and detail) into `docs/conformance.json`, sorted by
//! upstream file and test name. A failing scenario still lands in the file, and the command exits
//! non-zero.

use anyhow::Context;
use serde_json::{Value, json};

use release::{provenance, target_dir};

/// Runs the suite and writes `docs/conformance.json`; returns the exit code of the tests.
pub fn run() -> anyhow::Result<i32> {
    let dir = target_dir().join("conformance");
    if dir.exists() {
        std::fs::remove_dir_all(&dir).with_context(|| format!("removing {}", dir.display()))?;
    }
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    let provenance = provenance::for_artifact("conformance.json", "cargo xtask conformance")?;
    let args: Vec<String> = ["-p", "crossplane", "--test", "conformance"]
        .map(String::from)
        .to_vec();
    let code = crate::suite::run_with_env(&args, &[("CONFORMANCE_OUT", &dir)])?;
    let mut outcomes: Vec<Value> = Vec::new();
    for entry in std::fs::read_dir(&dir).with_context(|| format!("reading {}", dir.display()))? {
        let path = entry?.path();
        if path.extension().and_then(|e| e.to_str()) != Some("json") {
            continue;
        }
        let text = std::fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))?;
        outcomes.push(serde_json::from_str(&text).with_context(|| format!("parsing {}", path.display()))?);
    }
    outcomes.sort_by_key(|o| {
        (
            o["file"].as_str().map(str::to_owned),
            o["upstream"].as_str().map(str::to_owned),
        )
    });
    let count = |r: &str| outcomes.iter().filter(|o| o["result"] == r).count();
    let (pass, fail, cannot) = (count("pass"), count("fail"), count("cannot-run"));
    let when = jiff::Timestamp::now().strftime("%Y-%m-%d %H:%M UTC").to_string();
    let doc = json!({"written": when, "pass": pass, "fail": fail, "cannot_run": cannot, "tests": outcomes,
                     "provenance": provenance});
    let path = testenv::harness::repo_root()
        .join("docs")
        .join("conformance.json");
    std::fs::write(&path, serde_json::to_string_pretty(&doc)? + "\n")
        .with_context(|| format!("writing {}", path.display()))?;
    println!(
        "cargo xtask conformance: {pass} pass, {fail} fail, {cannot} cannot run; wrote docs/conformance.json"
    );
    Ok(if code == 0 && fail == 0 { 0 } else { code.max(1) })
}
