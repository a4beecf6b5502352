//! Where a published figure came from: every JSON artifact under `docs/` records the commit, the command
//! and the machine (cores, load) that produced it, and the paths of the code it measures. `cargo xtask
//! generate --check` fails when an artifact lacks that record, was written from uncommitted changes to
//! the code it measures, or predates a commit that changed that code (then its figures describe code
//! that is gone: rerun the command).
//!
//! The measured paths of each artifact are listed in [`ARTIFACTS`]: the code a figure is *about* (the
//! elector for the elector benchmark, the schedule and its checker for the reliability figures), not
//! every crate it happens to link, so that a refactor elsewhere does not silently keep an artifact fresh
//! and an unrelated edit does not invalidate it.

use std::path::Path;
use std::process::Command;

use anyhow::{Context, bail};
use serde_json::{Value, json};

/// One published artifact: its JSON under `docs/`, the command that writes it, what it measures.
pub struct Artifact {
    /// File name under `docs/`.
    pub json: &'static str,
    /// The Markdown document written beside it in the same run, if any (it names the same commit).
    pub markdown: Option<&'static str>,
    /// The command that writes it.
    pub command: &'static str,
    /// Repository paths of the code it measures.
    pub measures: &'static [&'static str],
}

/// Every artifact `docs/` publishes.
pub const ARTIFACTS: &[Artifact] = &[
    Artifact {
        json: "reliability.json",
        markdown: Some("reliability.md"),
        command: "cargo xtask chaos",
        measures: &[
            "crates/election/src",
            "tests/e2e/src/schedule",
            "tests/e2e/src/checker.rs",
            "tests/e2e/src/checker",
            "tests/e2e/src/relay.rs",
            "deploy/fencing",
        ],
    },
    Artifact {
        json: "fencing.json",
        markdown: Some("fencing.md"),
        command: "cargo xtask fencing",
        measures: &[
            "crates/election/src",
            "providers/provider-nop/tests/fencing.rs",
            "deploy/fencing",
        ],
    },
    Artifact {
        json: "benchmarks.json",
        markdown: Some("benchmarks.md"),
        command: "cargo xtask bench",
        measures: &[
            "crates/election/src",
            "crates/election/examples",
            "tests/control-plane/candidate.go",
            "tests/control-plane/candidate_main.go",
            "tests/e2e/src/bench",
            // The functions benchmark shares the folder and is an artifact of its own.
            ":(exclude)tests/e2e/src/bench/functions.rs",
        ],
    },
    Artifact {
        json: "functions-benchmark.json",
        markdown: Some("functions-benchmark.md"),
        command: "cargo xtask bench --functions",
        measures: &[
            "crates/function/src",
            "crates/composition/src",
            "tests/e2e/src/bench/functions.rs",
        ],
    },
    Artifact {
        json: "conformance.json",
        markdown: None,
        command: "cargo xtask conformance",
        measures: &[
            "crates/crossplane/src",
            "crates/crossplane/tests/conformance.rs",
            "crates/crossplane/tests/conformance",
        ],
    },
    Artifact {
        json: "node.json",
        markdown: Some("node.md"),
        command: "cargo xtask node-bench",
        measures: &[
            "crates/election/src",
            "crates/testenv/src/node",
            "crates/testenv/src/workload.rs",
            "crates/manager/src/run/own_pod.rs",
            // The node applies the fence, which every write in the handover's window goes through.
            "deploy/fencing",
            "tests/e2e/src/node",
            // The rolling update's and the migration's verdicts are the checker's.
            "tests/e2e/src/checker.rs",
            "tests/peers/provider-nop-go",
        ],
    },
    Artifact {
        json: "scale.json",
        markdown: Some("scale.md"),
        command: "cargo xtask bench --scale",
        measures: &[
            "crates/managed/src",
            "crates/manager/src",
            "crates/crossplane/src",
            "providers/provider-nop/src",
            "tests/peers/provider-nop-go",
            "tests/peers/go.mod",
            "tests/e2e/src/scale",
        ],
    },
    Artifact {
        json: "packages.json",
        markdown: Some("packages.md"),
        command: "cargo xtask package-bench",
        measures: &[
            "crates/crossplane/src/pkg",
            "crates/crossplane/src/rbac",
            "crates/xpkg/src",
            "tests/e2e/src/packages",
            "tests/peers/function-go",
        ],
    },
    Artifact {
        json: "metrics-names.json",
        markdown: Some("metrics-names.md"),
        command: "cargo xtask metrics-names",
        measures: &[
            "providers/provider-nop/tests/metrics_names.rs",
            "providers/provider-nop/tests/fixtures/upstream-metrics.txt",
        ],
    },
];

/// The record of where an artifact came from, as a JSON object for its `provenance` key.
pub fn capture(command: &str, measures: &[&str]) -> anyhow::Result<Value> {
    let root = testenv::harness::repo_root();
    let commit = git(&root, &["rev-parse", "HEAD"])?;
    let mut status = vec!["status", "--porcelain", "--"];
    status.extend(measures);
    let dirty = git(&root, &status)?;
    let cores = std::thread::available_parallelism().map_or(0, std::num::NonZero::get);
    let load = std::fs::read_to_string("/proc/loadavg").context("reading /proc/loadavg")?;
    let load: Vec<f64> = load
        .split_whitespace()
        .take(3)
        .map(|x| x.parse().context("parsing /proc/loadavg"))
        .collect::<anyhow::Result<_>>()?;
    Ok(json!({
        "commit": commit,
        "uncommitted_changes_to_measured_code": !dirty.is_empty(),
        "command": command,
        "written": jiff::Timestamp::now().to_string(),
        "machine": {
            "cores": cores,
            "load_average_1_5_15_min": load,
            "kernel": std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default().trim(),
        },
        "measures": measures,
    }))
}

/// The `provenance` of `command`'s artifact from [`ARTIFACTS`] (the command as given, with its flags).
pub fn for_artifact(json_name: &str, command: &str) -> anyhow::Result<Value> {
    let a = ARTIFACTS
        .iter()
        .find(|a| a.json == json_name)
        .with_context(|| format!("docs/{json_name} is not a registered artifact"))?;
    capture(command, a.measures)
}

/// A Markdown line naming where a document's figures came from.
pub fn markdown_line(provenance: &Value) -> String {
    let p = provenance;
    format!(
        "Commit `{}`; machine: {} cores, load average {}; written {}.",
        short(p["commit"].as_str().unwrap_or("?")),
        p["machine"]["cores"],
        p["machine"]["load_average_1_5_15_min"]
            .as_array()
            .map(|l| l.iter().map(ToString::to_string).collect::<Vec<_>>().join(" / "))
            .unwrap_or_default(),
        p["written"].as_str().unwrap_or("?"),
    )
}

fn short(commit: &str) -> &str {
    commit.get(..12).unwrap_or(commit)
}

/// Every problem with the artifacts under `docs`: a missing or incomplete record, uncommitted measured
/// code, a Markdown document from another run, or measured code changed since the recorded commit.
pub fn check(docs: &Path) -> anyhow::Result<Vec<String>> {
    let root = testenv::harness::repo_root();
    let mut problems = Vec::new();
    for a in ARTIFACTS {
        let path = docs.join(a.json);
        let text = match std::fs::read_to_string(&path) {
            Ok(t) => t,
            Err(e) => {
                problems.push(format!(
                    "docs/{}: cannot read it ({e}); run `{}`",
                    a.json, a.command
                ));
                continue;
            }
        };
        let json: Value = serde_json::from_str(&text).with_context(|| format!("parsing docs/{}", a.json))?;
        problems.extend(check_one(&root, docs, a, &json)?);
    }
    Ok(problems)
}

fn check_one(root: &Path, docs: &Path, a: &Artifact, json: &Value) -> anyhow::Result<Vec<String>> {
    let mut problems = Vec::new();
    let p = &json["provenance"];
    let Some(commit) = p["commit"].as_str() else {
        problems.push(format!(
            "docs/{} records no provenance (commit, command, machine); run `{}`",
            a.json, a.command
        ));
        return Ok(problems);
    };
    if p["machine"]["cores"].as_u64().is_none() || p["command"].as_str().is_none() {
        problems.push(format!(
            "docs/{}: its provenance lacks the command or the machine; run `{}`",
            a.json, a.command
        ));
    }
    if p["uncommitted_changes_to_measured_code"] != Value::Bool(false) {
        problems.push(format!(
            "docs/{} was written from uncommitted changes to the code it measures; commit them and run `{}`",
            a.json, a.command
        ));
    }
    if let Some(md) = a.markdown {
        let text = std::fs::read_to_string(docs.join(md)).unwrap_or_default();
        // A report names its run's commit in backticks, short or in full.
        let named = [short(commit), commit]
            .iter()
            .any(|c| text.contains(&format!("`{c}`")));
        if !named {
            problems.push(format!(
                "docs/{md} does not name commit {} as docs/{} does: they come from different runs; run `{}`",
                short(commit),
                a.json,
                a.command
            ));
        }
    }
    if Command::new("git")
        .args(["cat-file", "-e", &format!("{commit}^{{commit}}")])
        .current_dir(root)
        .status()
        .map_or(true, |s| !s.success())
    {
        problems.push(format!(
            "docs/{} names commit {}, which this repository does not have (a shallow clone lacks history: \
             `git fetch --unshallow`); if the commit is gone, run `{}`",
            a.json,
            short(commit),
            a.command
        ));
        return Ok(problems);
    }
    let mut log = vec!["log", "--format=%h %s", &format!("{commit}..HEAD"), "--"]
        .into_iter()
        .map(str::to_owned)
        .collect::<Vec<_>>();
    log.extend(a.measures.iter().map(|m| (*m).to_owned()));
    let log: Vec<&str> = log.iter().map(String::as_str).collect();
    let changed = git(root, &log)?;
    if !changed.is_empty() {
        let first = changed.lines().last().unwrap_or_default();
        problems.push(format!(
            "docs/{} is stale: it was written at {}, and {} commit(s) since changed the code it measures ({}), \
             the first: {first}; run `{}`",
            a.json,
            short(commit),
            changed.lines().count(),
            a.measures.join(", "),
            a.command
        ));
    }
    Ok(problems)
}

fn git(root: &Path, args: &[&str]) -> anyhow::Result<String> {
    let out = Command::new("git")
        .args(args)
        .current_dir(root)
        .output()
        .with_context(|| format!("running git {}", args.join(" ")))?;
    if !out.status.success() {
        bail!(
            "git {} failed: {}; artifacts name the commit they measured, so run this in a git checkout of \
             the repository",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn artifact() -> Artifact {
        Artifact {
            json: "x.json",
            markdown: None,
            command: "cargo xtask x",
            measures: &["crates/election/src"],
        }
    }

    #[test]
    fn an_artifact_without_provenance_is_a_problem() -> anyhow::Result<()> {
        let root = testenv::harness::repo_root();
        let problems = check_one(&root, &root.join("docs"), &artifact(), &json!({"figures": 1}))?;
        assert!(problems[0].contains("records no provenance"), "{problems:?}");
        Ok(())
    }

    #[test]
    fn a_fresh_record_of_head_passes_and_an_edited_one_fails() -> anyhow::Result<()> {
        let root = testenv::harness::repo_root();
        let mut p = capture("cargo xtask x", &["crates/election/src"])?;
        // The checkout may carry local edits while this runs; judge the record as if it had none.
        p["uncommitted_changes_to_measured_code"] = false.into();
        let json = json!({ "provenance": p });
        assert_eq!(
            check_one(&root, &root.join("docs"), &artifact(), &json)?,
            Vec::<String>::new()
        );
        let mut dirty = json.clone();
        dirty["provenance"]["uncommitted_changes_to_measured_code"] = true.into();
        assert!(check_one(&root, &root.join("docs"), &artifact(), &dirty)?[0].contains("uncommitted"));
        let mut unknown = json;
        unknown["provenance"]["commit"] = "0123456789abcdef0123456789abcdef01234567".into();
        assert!(
            check_one(&root, &root.join("docs"), &artifact(), &unknown)?
                .iter()
                .any(|p| p.contains("does not have"))
        );
        Ok(())
    }

    #[test]
    fn an_artifact_older_than_a_change_to_its_code_is_stale() -> anyhow::Result<()> {
        let root = testenv::harness::repo_root();
        // The root commit predates every change to the elector.
        let first = git(&root, &["rev-list", "--max-parents=0", "HEAD"])?;
        let first = first.lines().next().unwrap_or_default().to_owned();
        let json = json!({ "provenance": {
            "commit": first, "uncommitted_changes_to_measured_code": false, "command": "cargo xtask x",
            "machine": {"cores": 2}, "measures": ["crates/election/src"],
        }});
        let problems = check_one(&root, &root.join("docs"), &artifact(), &json)?;
        assert!(problems.iter().any(|p| p.contains("is stale")), "{problems:?}");
        Ok(())
    }
    #[test]
    fn a_report_names_its_commit_short_or_in_full() -> anyhow::Result<()> {
        let root = testenv::harness::repo_root();
        let mut p = capture("cargo xtask x", &["crates/election/src"])?;
        p["uncommitted_changes_to_measured_code"] = false.into();
        let commit = p["commit"].as_str().unwrap_or_default().to_owned();
        let docs = std::env::temp_dir().join(format!("provenance-{}", std::process::id()));
        std::fs::create_dir_all(&docs)?;
        let a = Artifact {
            markdown: Some("x.md"),
            ..artifact()
        };
        let json = json!({ "provenance": p });
        let names = |text: String| -> anyhow::Result<bool> {
            std::fs::write(docs.join("x.md"), text)?;
            let problems = check_one(&root, &docs, &a, &json)?;
            Ok(!problems.iter().any(|p| p.contains("does not name commit")))
        };
        assert!(names(format!("at commit `{}`", short(&commit)))?);
        assert!(names(format!("at commit `{commit}`"))?);
        assert!(!names("at commit `0123456789ab`".to_owned())?);
        std::fs::remove_dir_all(&docs)?;
        Ok(())
    }
}
