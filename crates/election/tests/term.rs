//! Must show 4: the term ends on time. With etcd or the apiserver paused, the leader's guard turns
//! invalid no later than `sent + renew_deadline` plus 200 ms, and its Leadership flips to Following.
//! After the resume exactly one candidate leads. Each test runs its own control plane.

mod common;

use std::time::Duration;

use anyhow::Context;
use common::{FAST, RustCandidate};
use testenv::ControlPlane;
use tokio::time::Instant;

const NAME: &str = "term";
const SLACK: Duration = Duration::from_millis(200);

#[derive(Clone, Copy, Debug)]
enum Pause {
    Etcd,
    Apiserver,
}

async fn term_ends_on_time(what: Pause) -> anyhow::Result<()> {
    let mut cp = ControlPlane::private().await?;
    let cluster = cp.cluster().clone();
    let ns = cluster.namespace("election-term").await?;
    let mut candidates = Vec::new();
    for id in ["rust-1", "rust-2", "rust-3"] {
        candidates.push(RustCandidate::spawn(&cluster, &ns, NAME, id, FAST).await?);
    }
    let client = common::client(&cluster, "observer").await?;
    let leader = common::wait_holder(&client, &ns, NAME, Duration::from_secs(15), |h| !h.is_empty()).await?;
    let l = candidates
        .iter_mut()
        .find(|c| c.identity == leader)
        .context("leader is not ours")?;
    let term = l.wait_leading(Duration::from_secs(5)).await?;
    let guard = term.guard();
    tokio::time::sleep(Duration::from_secs(2)).await; // a few renewals
    assert!(guard.is_valid());

    let mut rx = l.rx.clone();
    let flipped = tokio::spawn(async move {
        let _ = rx.wait_for(|s| !s.is_leading()).await;
        Instant::now()
    });
    let lapsed = tokio::spawn({
        let guard = guard.clone();
        async move {
            guard.lapsed().await;
            Instant::now()
        }
    });
    match what {
        Pause::Etcd => cp.etcd().pause()?,
        Pause::Apiserver => cp.apiserver().pause()?,
    }
    let paused_at = Instant::now();
    let lapsed_at = lapsed.await?;
    let flipped_at = tokio::time::timeout(Duration::from_secs(10), flipped).await??;
    // No renew can succeed once the pause began, so this is the final deadline.
    let deadline = guard.deadline();
    assert_eq!(deadline, guard.last_renew_sent() + FAST.renew);
    assert!(
        guard.last_renew_sent() <= paused_at,
        "a renew was sent after the pause and succeeded"
    );
    assert!(!guard.is_valid());
    let late = |t: Instant| t.checked_duration_since(deadline).unwrap_or_default();
    eprintln!(
        "{what:?} paused: guard lapsed {:?} and Following published {:?} after the deadline",
        late(lapsed_at),
        late(flipped_at)
    );
    assert!(
        lapsed_at <= deadline + SLACK,
        "guard lapsed {:?} after its deadline",
        lapsed_at - deadline
    );
    assert!(
        flipped_at <= deadline + SLACK,
        "Following published {:?} after the deadline",
        flipped_at - deadline
    );
    assert!(
        candidates.iter().all(|c| !c.is_leading()),
        "someone leads while the control plane is paused"
    );

    match what {
        Pause::Etcd => cp.etcd().resume()?,
        Pause::Apiserver => cp.apiserver().resume()?,
    }
    // Exactly one candidate leads after the resume, and it is the Lease's holder.
    let deadline = Instant::now() + FAST.lease * 4;
    loop {
        let leading: Vec<_> = candidates
            .iter()
            .filter(|c| c.is_leading())
            .map(|c| c.identity.clone())
            .collect();
        if leading.len() == 1 {
            break;
        }
        assert!(
            leading.len() <= 1,
            "several leaders after the resume: {leading:?}"
        );
        anyhow::ensure!(Instant::now() < deadline, "no leader after the resume");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    for _ in 0..40 {
        let leading: Vec<_> = candidates
            .iter()
            .filter(|c| c.is_leading())
            .map(|c| c.identity.clone())
            .collect();
        assert_eq!(leading.len(), 1, "leaders: {leading:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let leader = candidates
        .iter()
        .find(|c| c.is_leading())
        .map(|c| c.identity.clone())
        .unwrap_or_default();
    assert_eq!(common::holder(&client, &ns, NAME).await?, leader);
    let sets: Vec<_> = candidates
        .iter()
        .map(|c| (c.identity.as_str(), c.intervals()))
        .collect();
    common::assert_exclusive(&sets)?;
    for mut c in candidates {
        c.stop().await?;
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn term_ends_on_time_when_etcd_pauses() -> anyhow::Result<()> {
    term_ends_on_time(Pause::Etcd).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn term_ends_on_time_when_the_apiserver_pauses() -> anyhow::Result<()> {
    term_ends_on_time(Pause::Apiserver).await
}
