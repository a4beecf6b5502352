//! `cargo xtask metrics-names`: runs provider-nop's metric-name diff (`providers/provider-nop/tests/
//! metrics_names.rs`) on a fresh control plane and publishes its figures in `docs/metrics-names.json`
//! (with their provenance) and `docs/metrics-names.md`.

use anyhow::{Context, bail};
use serde_json::Value;

use release::{provenance, target_dir};

const COMMAND: &str = "cargo xtask metrics-names";

/// Runs the test and writes the documents; returns the exit code.
pub fn run() -> anyhow::Result<i32> {
    let dir = target_dir().join("metrics-names");
    if dir.exists() {
        std::fs::remove_dir_all(&dir).with_context(|| format!("removing {}", dir.display()))?;
    }
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    let provenance = provenance::for_artifact("metrics-names.json", COMMAND)?;
    let args: Vec<String> = [
        "-p",
        "provider-nop",
        "--test",
        "metrics_names",
        "--",
        "--nocapture",
    ]
    .map(String::from)
    .to_vec();
    let code = crate::suite::run_with_env(&args, &[("METRICS_NAMES_DIR", &dir)])?;
    if code != 0 {
        bail!("the metric-name test failed (exit code {code}); docs/metrics-names.* left as they were");
    }
    let path = dir.join("metrics-names.json");
    let text = std::fs::read_to_string(&path).with_context(|| {
        format!(
            "reading {} (the test passed but wrote no figures)",
            path.display()
        )
    })?;
    let mut json: Value =
        serde_json::from_str(&text).with_context(|| format!("parsing {}", path.display()))?;
    json["provenance"] = provenance;
    let docs = testenv::harness::repo_root().join("docs");
    let out = docs.join("metrics-names.json");
    std::fs::write(&out, serde_json::to_string_pretty(&json)? + "\n")
        .with_context(|| format!("writing {}", out.display()))?;
    let out = docs.join("metrics-names.md");
    std::fs::write(&out, markdown(&json)).with_context(|| format!("writing {}", out.display()))?;
    println!("{COMMAND}: wrote docs/metrics-names.md and docs/metrics-names.json");
    Ok(0)
}

/// The document: every upstream name, whether we serve it, and the fixture's word on it.
fn markdown(json: &Value) -> String {
    let mut s = format!(
        "# Metric names: upstream's beside crossplane-rs's\n\nWritten by `{COMMAND}` from a scrape of \
         provider-nop's `/metrics` after a NopResource's life (created, Ready, deleted), diffed against \
         `providers/provider-nop/tests/fixtures/upstream-metrics.txt`. {}\n\n\
         | upstream metric | crossplane-rs | fixture | note |\n|---|---|---|---|\n",
        provenance::markdown_line(&json["provenance"])
    );
    for row in json["names"].as_array().into_iter().flatten() {
        s += &format!(
            "| `{}` | {} | {} | {} |\n",
            row["name"].as_str().unwrap_or("?"),
            if row["served"] == true { "served" } else { "—" },
            row["fixture"].as_str().unwrap_or("?"),
            row["note"].as_str().unwrap_or(""),
        );
    }
    let extra: Vec<String> = json["served_only_by_us"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|v| format!("`{}`", v.as_str().unwrap_or("?")))
        .collect();
    s += &format!(
        "\n{} of {} upstream names served; claimed {}, lacking {}, n/a {}. Served only by crossplane-rs: {}.\n",
        json["served"],
        json["upstream_names"],
        json["claimed"],
        json["lacking"],
        json["not_applicable"],
        if extra.is_empty() {
            "none".to_owned()
        } else {
            extra.join(", ")
        }
    );
    s
}
