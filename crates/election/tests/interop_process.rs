//! Must show 1, with both candidates as processes: the Rust `lease-candidate` example and client-go's
//! `harness lease-candidate` share one Lease, and each hands over to the other by SIGKILL (expiry) and
//! by SIGTERM (release). The audit log shows every Lease write made by its holder while it held it.

mod common;

use std::{path::PathBuf, time::Duration};

use common::{FAST, assert_exclusive, assert_writes_while_held, go_intervals};
use testenv::{CandidateOptions, Cluster, GoCandidate};

const NAME: &str = "interop-process";
const TOLERANCE: Duration = Duration::from_millis(100);

/// The Rust candidate process: this crate's `lease-candidate` example, which `cargo test` builds.
fn rust_binary() -> anyhow::Result<PathBuf> {
    let target = PathBuf::from(env!("CARGO_TARGET_TMPDIR"));
    let path = target
        .parent()
        .map(|t| t.join("debug").join("examples").join("lease-candidate"))
        .ok_or_else(|| anyhow::anyhow!("no target directory above {}", target.display()))?;
    anyhow::ensure!(
        path.exists(),
        "{} is missing: build it with `cargo build -p election --example lease-candidate`",
        path.display()
    );
    Ok(path)
}

fn opts(ns: &str, identity: &str) -> CandidateOptions {
    let mut o = CandidateOptions::new(ns, NAME, identity);
    o.lease_duration = FAST.lease;
    o.renew_deadline = FAST.renew;
    o.retry_period = FAST.retry;
    o
}

fn rust(cluster: &Cluster, ns: &str, identity: &str) -> anyhow::Result<GoCandidate> {
    Ok(GoCandidate::spawn_program(
        cluster,
        &rust_binary()?,
        &[],
        &opts(ns, identity),
    )?)
}

fn go(cluster: &Cluster, ns: &str, identity: &str) -> anyhow::Result<GoCandidate> {
    Ok(GoCandidate::spawn(cluster, &opts(ns, identity))?)
}

/// `first` leads, `second` follows it; `first` is then SIGKILLed (or SIGTERMed) and `second` must lead:
/// after a kill no sooner than the lease allows, after a release at once.
async fn hand_over(
    cluster: &Cluster,
    ns: &str,
    first: GoCandidate,
    second: impl FnOnce() -> anyhow::Result<GoCandidate>,
    kill: bool,
) -> anyhow::Result<()> {
    first
        .wait_for("to lead", Duration::from_secs(20), |e| {
            e.event == "started_leading"
        })
        .await?;
    let second = second()?;
    second
        .wait_for("to see the leader", Duration::from_secs(20), |e| {
            e.event == "new_leader" && e.leader == first.identity()
        })
        .await?;
    tokio::time::sleep(FAST.lease).await;
    anyhow::ensure!(
        !second.is_leading(),
        "{} leads while {} renews",
        second.identity(),
        first.identity()
    );

    let at = testenv::monotonic_ns();
    if kill {
        first.kill()?;
    } else {
        first.terminate()?;
    }
    let led = second
        .wait_for("to take over", FAST.lease + Duration::from_secs(5), |e| {
            e.event == "started_leading"
        })
        .await?;
    let took = Duration::from_nanos(u64::try_from(led.mono_ns - at)?);
    if kill {
        // A client-go taker compares records with `renewTime` cut to whole seconds, so it may count the
        // lease from up to a second before the last renewal (see common::assert_writes_while_held).
        let go_slack = if second.identity().starts_with("go") {
            Duration::from_secs(1)
        } else {
            Duration::ZERO
        };
        anyhow::ensure!(
            took >= FAST.lease - FAST.retry - go_slack - TOLERANCE,
            "{} took over only {took:?} after {} was killed",
            second.identity(),
            first.identity()
        );
    } else {
        anyhow::ensure!(
            took < Duration::from_secs(3),
            "takeover after a release took {took:?}"
        );
    }
    // A killed process prints no `stopped_leading`: its last term ends when it was killed.
    let first_terms: Vec<(i64, i64)> = go_intervals(&first)
        .into_iter()
        .map(|(s, e)| (s, if kill { e.min(at) } else { e }))
        .collect();
    assert_exclusive(&[
        (first.identity(), first_terms),
        (second.identity(), go_intervals(&second)),
    ])?;
    second.terminate()?;
    second
        .wait_for("to exit", Duration::from_secs(10), |e| e.event == "exited")
        .await?;
    assert_writes_while_held(cluster, ns, NAME, TOLERANCE)?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rust_process_to_go_by_sigkill() -> anyhow::Result<()> {
    let (cluster, ns) = common::bed("election-rp2g-kill").await?;
    let first = rust(&cluster, &ns, "rust-p1")?;
    hand_over(&cluster, &ns, first, || go(&cluster, &ns, "go-p1"), true).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn go_process_to_rust_by_sigkill() -> anyhow::Result<()> {
    let (cluster, ns) = common::bed("election-gp2r-kill").await?;
    let first = go(&cluster, &ns, "go-p2")?;
    hand_over(&cluster, &ns, first, || rust(&cluster, &ns, "rust-p2"), true).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rust_process_to_go_by_release() -> anyhow::Result<()> {
    let (cluster, ns) = common::bed("election-rp2g-release").await?;
    let first = rust(&cluster, &ns, "rust-p3")?;
    hand_over(&cluster, &ns, first, || go(&cluster, &ns, "go-p3"), false).await
}
