//! `cargo xtask fencing`: runs the server-side fence's tests (`providers/provider-nop/tests/fencing.rs`)
//! against a fresh control plane, collects the figures each test wrote, and publishes them in
//! `docs/fencing.md` and `docs/fencing.json`, so that the README quotes a run rather than a hand copy.

use std::path::Path;

use anyhow::{Context, bail};
use serde_json::{Value, json};

use release::{provenance, target_dir};

/// The tests and what each shows, in the order the document gives them.
const TESTS: [(&str, &str); 2] = [
    (
        "refuses_pods_that_do_not_hold_the_lease",
        "A replica started without leader election, and a leader frozen with SIGSTOP (its writes in flight held in a relay) until its standby took over",
    ),
    (
        "refuses_writes_delayed_past_the_takeover",
        "The leader's writes held in a relay after they passed its client-side fence, delivered after client-go's candidate took the Lease",
    ),
];

/// Runs the tests and writes the documents; returns the exit code.
pub fn run() -> anyhow::Result<i32> {
    let dir = target_dir().join("fencing-figures");
    if dir.exists() {
        std::fs::remove_dir_all(&dir).with_context(|| format!("removing {}", dir.display()))?;
    }
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    let provenance = provenance::for_artifact("fencing.json", "cargo xtask fencing")?;
    let args: Vec<String> = ["-p", "provider-nop", "--test", "fencing", "--", "--nocapture"]
        .map(String::from)
        .to_vec();
    let code = crate::suite::run_with_env(&args, &[("FENCING_FIGURES_DIR", &dir)])?;
    if code != 0 {
        bail!("the fencing tests failed (exit code {code}); docs/fencing.* left as they were");
    }
    let mut figures = serde_json::Map::new();
    for (test, _) in TESTS {
        figures.insert(test.to_owned(), read(&dir.join(format!("{test}.json")))?);
    }
    let when = jiff::Timestamp::now().strftime("%Y-%m-%d %H:%M UTC").to_string();
    let docs = testenv::harness::repo_root().join("docs");
    let json = json!({ "written": when, "tests": figures, "provenance": provenance });
    let path = docs.join("fencing.json");
    std::fs::write(&path, serde_json::to_string_pretty(&json)? + "\n")
        .with_context(|| format!("writing {}", path.display()))?;
    let path = docs.join("fencing.md");
    std::fs::write(&path, markdown(&json, &when)).with_context(|| format!("writing {}", path.display()))?;
    println!("cargo xtask fencing: wrote docs/fencing.md and docs/fencing.json");
    Ok(0)
}

fn read(path: &Path) -> anyhow::Result<Value> {
    let text = std::fs::read_to_string(path).with_context(|| {
        format!(
            "reading {} (the test passed but wrote no figures)",
            path.display()
        )
    })?;
    serde_json::from_str(&text).with_context(|| format!("parsing {}", path.display()))
}

/// The document: one table per test, each figure as the test recorded it.
fn markdown(json: &Value, when: &str) -> String {
    let mut s = format!(
        "# The server-side fence\n\nWritten by `cargo xtask fencing` on {when}: the tests of \
         `providers/provider-nop/tests/fencing.rs`, on a control plane of their own, with provider-nop \
         replicas holding ServiceAccount tokens bound to pods, and the fence (`deploy/fencing`) in force. \
         Counts come from the apiserver's audit log. {}\n",
        provenance::markdown_line(&json["provenance"])
    );
    for (test, what) in TESTS {
        s += &format!("\n## {what}\n\n`{test}`\n\n| Figure | Value |\n|---|---|\n");
        if let Some(map) = json["tests"][test].as_object() {
            for (k, v) in map {
                let v = match v {
                    Value::Array(items) => items
                        .iter()
                        .map(|i| i.as_str().map_or_else(|| i.to_string(), str::to_owned))
                        .collect::<Vec<_>>()
                        .join("; "),
                    Value::Number(n) if n.is_f64() => format!("{:.1}", n.as_f64().unwrap_or(0.0)),
                    other => other.to_string(),
                };
                s += &format!("| {} | {v} |\n", k.replace('_', " "));
            }
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markdown_lists_every_figure_of_every_test() {
        let json = json!({ "tests": {
            "refuses_pods_that_do_not_hold_the_lease": { "rogue_writes": 12, "frozen_seconds": 7.25 },
            "refuses_writes_delayed_past_the_takeover": { "late_writes": 5, "late_write_list": ["create a 403"] },
        }});
        let md = markdown(&json, "now");
        assert!(md.contains("| rogue writes | 12 |"), "{md}");
        assert!(
            md.contains("| frozen seconds | 7.2 |") || md.contains("| frozen seconds | 7.3 |"),
            "{md}"
        );
        assert!(md.contains("| late write list | create a 403 |"), "{md}");
    }
}
