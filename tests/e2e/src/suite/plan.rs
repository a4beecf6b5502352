//! Which test binaries the workspace run has, and in which order two lanes take them: read from
//! cargo's build messages (`cargo test --no-run --message-format=json`), grouped so that binaries that
//! were written to run one after another still do.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// One test executable that `cargo test --no-run` built.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Binary {
    /// The package it tests.
    pub package: String,
    /// The target's name: `faults`, or the crate's name for its unit tests.
    pub target: String,
    /// What cargo calls it on its `Running` line: `tests/faults.rs` or `unittests src/lib.rs`.
    pub label: String,
    /// What selects it for `cargo test -p <package>`: `--test faults`, `--lib` or `--bin name`.
    pub selector: String,
    /// The executable.
    pub executable: PathBuf,
    /// The package's directory, where cargo runs its tests.
    pub manifest_dir: PathBuf,
}

/// The test executables named by cargo's JSON build messages in `messages`, in the order cargo built
/// them. Lines that are not a test artifact (other messages, other output) are skipped.
pub fn binaries(messages: &str) -> Vec<Binary> {
    messages
        .lines()
        .filter_map(|line| serde_json::from_str::<serde_json::Value>(line).ok())
        .filter_map(|m| binary(&m))
        .collect()
}

/// The test executable one `compiler-artifact` message names, if it names one.
fn binary(m: &serde_json::Value) -> Option<Binary> {
    if m["reason"] != "compiler-artifact" || m["profile"]["test"] != true {
        return None;
    }
    let executable = PathBuf::from(m["executable"].as_str()?);
    let manifest_dir = Path::new(m["manifest_path"].as_str()?).parent()?.to_path_buf();
    let target = m["target"]["name"].as_str()?.to_owned();
    let src = Path::new(m["target"]["src_path"].as_str()?);
    let relative = src
        .strip_prefix(&manifest_dir)
        .unwrap_or(src)
        .display()
        .to_string();
    let kinds: Vec<&str> = m["target"]["kind"]
        .as_array()?
        .iter()
        .filter_map(|k| k.as_str())
        .collect();
    let (label, selector) = if kinds.contains(&"test") {
        (relative, format!("--test {target}"))
    } else if kinds.contains(&"bin") {
        (format!("unittests {relative}"), format!("--bin {target}"))
    } else {
        (format!("unittests {relative}"), "--lib".to_owned())
    };
    Some(Binary {
        package: package_name(m["package_id"].as_str()?, &manifest_dir)?,
        target,
        label,
        selector,
        executable,
        manifest_dir,
    })
}

/// The package's name from its id: `path+file:///dir#name@0.1.0`, or `path+file:///dir#0.1.0` when the
/// name is the directory's.
fn package_name(id: &str, manifest_dir: &Path) -> Option<String> {
    let fragment = id.rsplit_once('#').map(|(_, f)| f)?;
    match fragment.split_once('@') {
        Some((name, _)) => Some(name.to_owned()),
        None => Some(manifest_dir.file_name()?.to_str()?.to_owned()),
    }
}

/// The group a package's binaries run in: no two binaries of one group run at once.
///
/// A package's binaries were written to run one after another, as `cargo test` runs them (the core's
/// suites, for one, each run cores on the shared control plane), so each package is a group. The
/// `xtask` and `release` packages share one: their binaries build images and start the node, and two
/// node test beds on one machine break each other's Pods.
pub fn group(package: &str) -> &str {
    match package {
        "xtask" | "release" => "xtask",
        p => p,
    }
}

/// How long a binary is expected to take, in seconds: measured on 2 cores for the slow ones (a warm
/// run), a few seconds for the rest. Only the order depends on it: the slowest groups start first, so
/// that neither lane is left with a long binary at the end.
pub fn expected_seconds(b: &Binary) -> u32 {
    const MEASURED: &[(&str, &str, u32)] = &[
        ("crossplane", "conformance", 160),
        ("e2e", "faults", 160),
        ("xtask", "node", 120),
        ("election", "standby", 97),
        ("xtask", "packages_on_node", 75),
        ("crossplane", "packages", 60),
        ("e2e", "checker_not_blind", 50),
        ("provider-kubernetes", "object", 45),
        ("crossplane", "functions", 43),
        ("provider-nop", "ha", 41),
        ("xtask", "demo", 40),
        ("provider-sql", "lifecycle", 37),
        ("provider-sql", "postgres", 35),
        ("crossplane", "bad_input", 33),
        ("provider-kubernetes", "ha", 32),
        ("election", "migration", 29),
        ("e2e", "bad_input", 27),
        ("manager", "own_pod", 24),
        ("election", "interop", 23),
        ("provider-sql", "ha", 22),
        ("election", "interop_process", 20),
        ("xtask", "image", 17),
    ];
    MEASURED
        .iter()
        .find(|(p, t, _)| *p == b.package && *t == b.target)
        .map_or(3, |(_, _, s)| *s)
}

/// The binaries still to run, and the groups running now.
#[derive(Debug, Default)]
pub struct Queue {
    pending: Vec<Binary>,
    running: BTreeSet<String>,
}

impl Queue {
    /// A queue of `binaries`: the groups with the most expected time first, and in a group the slowest
    /// binary first.
    pub fn new(mut binaries: Vec<Binary>) -> Queue {
        let mut totals: BTreeMap<String, u32> = BTreeMap::new();
        for b in &binaries {
            *totals.entry(group(&b.package).to_owned()).or_default() += expected_seconds(b);
        }
        let total = |b: &Binary| totals.get(group(&b.package)).copied().unwrap_or_default();
        binaries.sort_by(|a, b| {
            total(b)
                .cmp(&total(a))
                .then(group(&a.package).cmp(group(&b.package)))
                .then(expected_seconds(b).cmp(&expected_seconds(a)))
                .then(a.label.cmp(&b.label))
        });
        Queue {
            pending: binaries,
            running: BTreeSet::new(),
        }
    }

    /// The next binary whose group is not running, now marked running; `None` when every pending
    /// binary's group is busy (or none is pending).
    pub fn take(&mut self) -> Option<Binary> {
        let i = self
            .pending
            .iter()
            .position(|b| !self.running.contains(group(&b.package)))?;
        let b = self.pending.remove(i);
        self.running.insert(group(&b.package).to_owned());
        Some(b)
    }

    /// Marks `b`'s group free again.
    pub fn finish(&mut self, b: &Binary) {
        self.running.remove(group(&b.package));
    }

    /// Whether no binary is left to take.
    pub fn is_empty(&self) -> bool {
        self.pending.is_empty()
    }
}

/// What one binary's run reported: the counts of its `test result:` lines.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Counts {
    /// Tests passed.
    pub passed: usize,
    /// Tests failed.
    pub failed: usize,
    /// Tests ignored.
    pub ignored: usize,
    /// How many `test result:` lines there were (0: the binary never finished a run).
    pub results: usize,
}

impl Counts {
    /// The counts of every `test result: ok. 3 passed; 0 failed; 1 ignored; ...` line in `output`.
    pub fn of(output: &str) -> Counts {
        let mut c = Counts::default();
        for line in output.lines() {
            let Some(rest) = line.strip_prefix("test result: ") else {
                continue;
            };
            c.results += 1;
            for part in rest.split(';') {
                let mut words = part.split_whitespace().rev();
                let (Some(what), Some(n)) = (words.next(), words.next()) else {
                    continue;
                };
                let Ok(n) = n.parse::<usize>() else { continue };
                match what {
                    "passed" => c.passed += n,
                    "failed" => c.failed += n,
                    "ignored" => c.ignored += n,
                    _ => {}
                }
            }
        }
        c
    }
}

impl std::ops::Add for Counts {
    type Output = Counts;

    fn add(self, o: Counts) -> Counts {
        Counts {
            passed: self.passed + o.passed,
            failed: self.failed + o.failed,
            ignored: self.ignored + o.ignored,
            results: self.results + o.results,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn artifact(id: &str, kind: &str, name: &str, src: &str, test: bool) -> String {
        serde_json::json!({
            "reason": "compiler-artifact",
            "package_id": id,
            "manifest_path": "/w/tests/e2e/Cargo.toml",
            "target": {"kind": [kind], "name": name, "src_path": src},
            "profile": {"test": test},
            "executable": format!("/w/target/debug/deps/{name}-abc"),
        })
        .to_string()
    }

    #[test]
    fn only_test_artifacts_become_binaries_named_as_cargo_names_them() {
        let messages = [
            artifact(
                "path+file:///w/tests/e2e#0.1.0",
                "test",
                "faults",
                "/w/tests/e2e/tests/faults.rs",
                true,
            ),
            artifact(
                "path+file:///w/tests/e2e#0.1.0",
                "lib",
                "e2e",
                "/w/tests/e2e/src/lib.rs",
                true,
            ),
            // A binary built for CARGO_BIN_EXE_*, not a test.
            artifact(
                "path+file:///w/tests/e2e#0.1.0",
                "bin",
                "e2e-provider-nop",
                "/w/tests/e2e/src/bin/x.rs",
                false,
            ),
            artifact(
                "path+file:///w/tests/e2e#other@0.1.0",
                "test",
                "t",
                "/w/tests/e2e/tests/t.rs",
                true,
            ),
            r#"{"reason":"build-finished","success":true}"#.to_owned(),
            "not json".to_owned(),
        ]
        .join("\n");
        let found = binaries(&messages);
        let names: Vec<(&str, &str, &str)> = found
            .iter()
            .map(|b| (b.package.as_str(), b.target.as_str(), b.label.as_str()))
            .collect();
        assert_eq!(
            names,
            [
                ("e2e", "faults", "tests/faults.rs"),
                ("e2e", "e2e", "unittests src/lib.rs"),
                ("other", "t", "tests/t.rs"),
            ]
        );
        assert_eq!(
            found.iter().map(|b| b.selector.as_str()).collect::<Vec<_>>(),
            ["--test faults", "--lib", "--test t"]
        );
        let main = binaries(&artifact(
            "path+file:///w/tests/e2e#0.1.0",
            "bin",
            "e2e-crossplane",
            "/w/tests/e2e/src/bin/e2e-crossplane.rs",
            true,
        ));
        assert_eq!(main[0].selector, "--bin e2e-crossplane");
        assert_eq!(main[0].label, "unittests src/bin/e2e-crossplane.rs");
        assert_eq!(found[0].manifest_dir, Path::new("/w/tests/e2e"));
        assert_eq!(found[0].executable, Path::new("/w/target/debug/deps/faults-abc"));
    }

    fn bin(package: &str, target: &str) -> Binary {
        Binary {
            package: package.into(),
            target: target.into(),
            label: format!("tests/{target}.rs"),
            selector: format!("--test {target}"),
            executable: PathBuf::from(target),
            manifest_dir: PathBuf::from(package),
        }
    }

    #[test]
    fn the_slowest_group_goes_first_and_a_group_never_runs_twice_at_once() {
        let mut q = Queue::new(vec![
            bin("apis", "a"),
            bin("e2e", "bad_input"),
            bin("crossplane", "conformance"),
            bin("e2e", "faults"),
            bin("xtask", "node"),
            bin("release", "deploy"),
        ]);
        // e2e (160 + 27) before crossplane (160 + 0) before xtask+release (120 + 3).
        let first = q.take().expect("one to take");
        assert_eq!((first.package.as_str(), first.target.as_str()), ("e2e", "faults"));
        let second = q.take().expect("another group");
        assert_eq!(second.target, "conformance");
        let third = q.take().expect("a third group");
        assert_eq!(third.target, "node");
        let fourth = q.take().expect("apis is free");
        assert_eq!(fourth.package, "apis");
        // e2e's bad_input waits for faults, release's deploy for xtask's node.
        assert_eq!(q.take(), None);
        assert!(!q.is_empty());
        q.finish(&third);
        assert_eq!(q.take().map(|b| b.target), Some("deploy".to_owned()));
        q.finish(&first);
        assert_eq!(q.take().map(|b| b.target), Some("bad_input".to_owned()));
        assert!(q.is_empty());
    }

    #[test]
    fn counts_add_up_every_result_line() {
        let out = "running 3 tests\n\
                   test result: ok. 3 passed; 0 failed; 1 ignored; 0 measured; 0 filtered out; finished in 0.5s\n\
                   test result: FAILED. 2 passed; 1 failed; 0 ignored; 0 measured; 0 filtered out; finished in 1s\n";
        assert_eq!(
            Counts::of(out),
            Counts {
                passed: 5,
                failed: 1,
                ignored: 1,
                results: 2
            }
        );
        assert_eq!(Counts::of("thread 'main' panicked").results, 0);
    }
}
