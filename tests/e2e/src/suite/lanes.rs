//! Runs the test binaries of [`plan`](super::plan) in lanes: each lane takes the next binary whose
//! group is free, runs it with its output in a file, and prints that output whole when it ends, so the
//! log reads as `cargo test`'s does, one binary after another.

use std::ffi::OsStr;
use std::io::Write;
use std::path::Path;
use std::process::{Command, ExitStatus, Stdio};
use std::sync::{Condvar, Mutex};
use std::time::{Duration, Instant};

use anyhow::Context;

use super::plan::{Binary, Counts, Queue};

/// Where a finished binary's output goes, whole, one binary at a time.
pub type Sink<'a> = dyn Fn(&str) + Sync + 'a;

/// Writes `text` to stdout. A closed stdout (a pipe that went away) does not fail the run: the log files
/// have it all.
pub fn stdout(text: &str) {
    let mut out = std::io::stdout().lock();
    let _ = out.write_all(text.as_bytes());
    let _ = out.flush();
}

/// What the whole run came to.
#[derive(Debug, Default)]
pub struct Summary {
    /// The tests' counts over every binary.
    pub counts: Counts,
    /// The binaries that failed, as `package label`.
    pub failed: Vec<String>,
    /// The run's wall time.
    pub wall: Duration,
    /// The binaries' times added up: the wall time of running them one after another.
    pub serial: Duration,
}

/// What one binary's run came to.
struct Outcome {
    counts: Counts,
    /// Whether it exited 0 and reported at least one `test result:` line.
    ok: bool,
    elapsed: Duration,
}

/// Runs `binaries` in `lanes` lanes with `envs` set for each, their output kept in `logs/` and handed
/// to `sink` as each ends.
pub fn run(
    binaries: Vec<Binary>,
    lanes: usize,
    envs: &[(&str, &OsStr)],
    logs: &Path,
    sink: &Sink<'_>,
) -> anyhow::Result<Summary> {
    std::fs::create_dir_all(logs).with_context(|| format!("creating {}", logs.display()))?;
    let state = Mutex::new((Queue::new(binaries), Summary::default()));
    let freed = Condvar::new();
    let start = Instant::now();
    std::thread::scope(|s| {
        for lane in 1..=lanes.max(1) {
            let (state, freed) = (&state, &freed);
            s.spawn(move || lane_loop(lane, state, freed, envs, logs, sink));
        }
    });
    let (queue, mut summary) = state
        .into_inner()
        .map_err(|_| anyhow::anyhow!("a test lane panicked"))?;
    anyhow::ensure!(
        queue.is_empty(),
        "the test lanes stopped with binaries left to run"
    );
    summary.wall = start.elapsed();
    Ok(summary)
}

/// One lane: takes binaries until none is left, waiting while every pending one's group is busy.
fn lane_loop(
    lane: usize,
    state: &Mutex<(Queue, Summary)>,
    freed: &Condvar,
    envs: &[(&str, &OsStr)],
    logs: &Path,
    sink: &Sink<'_>,
) {
    let Ok(mut guard) = state.lock() else { return };
    while !guard.0.is_empty() {
        let Some(b) = guard.0.take() else {
            guard = match freed.wait(guard) {
                Ok(g) => g,
                Err(_) => return,
            };
            continue;
        };
        drop(guard);
        eprintln!("[test] lane {lane}: {} {} started", b.package, b.label);
        let outcome = run_one(&b, envs, logs, sink);
        guard = match state.lock() {
            Ok(g) => g,
            Err(_) => return,
        };
        guard.0.finish(&b);
        let summary = &mut guard.1;
        summary.counts = summary.counts + outcome.counts;
        summary.serial += outcome.elapsed;
        if !outcome.ok {
            summary.failed.push(format!("{} {}", b.package, b.label));
        }
        freed.notify_all();
    }
}

/// Runs one binary as cargo would (in its package's directory, the cargo variables of `cargo xtask`
/// itself cleared), then hands its output to `sink` under cargo's `Running` line.
fn run_one(b: &Binary, envs: &[(&str, &OsStr)], logs: &Path, sink: &Sink<'_>) -> Outcome {
    // Named by the label, not the target: a package's library and binary may share a name.
    let log = logs.join(format!("{}-{}.log", b.package, b.label.replace(['/', ' '], "-")));
    let start = Instant::now();
    let result = spawn_into(b, envs, &log);
    let elapsed = start.elapsed();
    let output = std::fs::read_to_string(&log).unwrap_or_default();
    let counts = Counts::of(&output);
    let (ok, trailer) = match &result {
        Ok(status) if status.success() && counts.results > 0 => (true, String::new()),
        Ok(status) if status.success() => (
            false,
            format!("error: {} reported no test result line (it exited 0)\n", b.label),
        ),
        Ok(status) => (
            false,
            format!(
                "error: test failed ({status}); to rerun it alone: cargo xtask test -- -p {} {}\n",
                b.package, b.selector
            ),
        ),
        Err(e) => (false, format!("error: {e:#}\n")),
    };
    sink(&format!(
        "     Running {} ({}) [{}, {:.1}s]\n{output}{trailer}",
        b.label,
        b.executable.display(),
        b.package,
        elapsed.as_secs_f64()
    ));
    Outcome { counts, ok, elapsed }
}

/// Runs `b` with stdout and stderr both into `log`, and returns how it exited.
fn spawn_into(b: &Binary, envs: &[(&str, &OsStr)], log: &Path) -> anyhow::Result<ExitStatus> {
    let file = std::fs::File::create(log).with_context(|| format!("creating {}", log.display()))?;
    let err = file.try_clone().context("sharing the log file with stderr")?;
    let mut cmd = Command::new(&b.executable);
    testenv::cargo::clear_cargo_vars(&mut cmd);
    cmd.current_dir(&b.manifest_dir)
        .env("CARGO_MANIFEST_DIR", &b.manifest_dir)
        .env("CARGO_PKG_NAME", &b.package)
        .envs(envs.iter().copied())
        .stdin(Stdio::null())
        .stdout(file)
        .stderr(err);
    cmd.status()
        .with_context(|| format!("starting {}", b.executable.display()))
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt;

    use super::*;

    /// A stand-in test binary: a shell script that prints `out` and exits with `code`.
    fn script(dir: &Path, name: &str, package: &str, out: &str, code: i32) -> Binary {
        let path = dir.join(name);
        std::fs::write(&path, format!("#!/bin/sh\nprintf '%s\\n' '{out}'\nexit {code}\n")).expect("write");
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).expect("chmod");
        Binary {
            package: package.into(),
            target: name.into(),
            label: format!("tests/{name}.rs"),
            selector: format!("--test {name}"),
            executable: path,
            manifest_dir: dir.to_path_buf(),
        }
    }

    #[test]
    fn a_failed_test_a_crash_and_a_silent_exit_each_fail_the_run() {
        let dir = std::env::temp_dir().join(format!("xtask-lanes-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("temp dir");
        let ok = "test result: ok. 2 passed; 0 failed; 1 ignored; 0 measured; 0 filtered out";
        let failed = "test result: FAILED. 1 passed; 1 failed; 0 ignored; 0 measured; 0 filtered out";
        let binaries = vec![
            script(&dir, "good", "a", ok, 0),
            script(&dir, "red", "b", failed, 101),
            script(&dir, "crash", "c", "thread 'main' panicked", 101),
            script(&dir, "silent", "a", "nothing ran", 0),
        ];
        let printed = Mutex::new(String::new());
        let sink = |text: &str| printed.lock().expect("sink").push_str(text);
        let summary = run(binaries, 2, &[], &dir.join("logs"), &sink).expect("the run");
        let printed = printed.into_inner().expect("sink");
        assert!(printed.contains("     Running tests/red.rs ("), "{printed}");
        assert!(
            printed.contains("to rerun it alone: cargo xtask test -- -p b --test red"),
            "{printed}"
        );
        assert!(
            printed.contains("tests/silent.rs reported no test result line"),
            "{printed}"
        );
        let mut failed = summary.failed.clone();
        failed.sort();
        assert_eq!(
            failed,
            ["a tests/silent.rs", "b tests/red.rs", "c tests/crash.rs"]
        );
        let c = summary.counts;
        assert_eq!((c.passed, c.failed, c.ignored, c.results), (3, 1, 1, 2));
        assert!(dir.join("logs").join("b-tests-red.rs.log").is_file());
        let _ = std::fs::remove_dir_all(&dir);
    }
}
