//! Must show 3: standbys do not poll. With lease 60 s, renew 50 s and retry 10 s, a standby takes over
//! within 2 s of the leader's release — far below the retry period — and over 60 s the audit log shows
//! that it made no request but its watch.

mod common;

use std::time::Duration;

use anyhow::Context;
use common::{RustCandidate, Timings};
use election::Leadership;
use testenv::{CandidateOptions, GoCandidate};

const NAME: &str = "standby";
const SLOW: Timings = Timings {
    lease: Duration::from_secs(60),
    renew: Duration::from_secs(50),
    retry: Duration::from_secs(10),
};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn standby_watches_and_takes_over_a_release_at_once() -> anyhow::Result<()> {
    let (cluster, ns) = common::bed("election-standby").await?;
    let mut opts = CandidateOptions::new(&ns, NAME, "go-leader");
    opts.lease_duration = SLOW.lease;
    opts.renew_deadline = SLOW.renew;
    opts.retry_period = SLOW.retry;
    let go = GoCandidate::spawn(&cluster, &opts)?;
    go.wait_for("started_leading", Duration::from_secs(20), |e| {
        e.event == "started_leading"
    })
    .await?;

    let mut standby = RustCandidate::spawn(&cluster, &ns, NAME, "rust-standby", SLOW).await?;
    tokio::time::timeout(
        Duration::from_secs(10),
        standby
            .rx
            .wait_for(|l| matches!(l, Leadership::Following { leader: Some(x) } if x == "go-leader")),
    )
    .await??;
    tokio::time::sleep(Duration::from_secs(1)).await;

    // 60 s of steady state: the leader renews six times; the standby only watches.
    let from = jiff::Timestamp::now();
    tokio::time::sleep(Duration::from_secs(60)).await;
    let to = jiff::Timestamp::now();
    assert!(!standby.is_leading());
    let all = cluster.audit().read_all_stages()?.events;
    let by_standby: Vec<_> = all
        .iter()
        .filter(|e| e.agent_identity() == Some("rust-standby") && e.received >= from && e.received <= to)
        .collect();
    let not_watch: Vec<_> = by_standby
        .iter()
        .filter(|e| e.verb != "watch")
        .map(|e| (&e.verb, &e.request_uri))
        .collect();
    assert!(
        not_watch.is_empty(),
        "the standby made requests other than its watch: {not_watch:?}"
    );
    let renewals = all
        .iter()
        .filter(|e| {
            e.agent_identity() == Some("go-leader")
                && e.verb == "update"
                && e.stage == "ResponseComplete"
                && e.received >= from
                && e.received <= to
        })
        .count();
    assert!(renewals >= 5, "the leader renewed only {renewals} times in 60 s");
    // The standby's watch is open: it started before the window and has not completed.
    let watch_started = all.iter().any(|e| {
        e.agent_identity() == Some("rust-standby")
            && e.verb == "watch"
            && e.resource == "leases"
            && e.stage == "ResponseStarted"
            && e.received < from
    });
    assert!(watch_started, "no watch by the standby in the audit log");

    // The leader releases; the standby takes over within 2 s, well inside one 10 s retry period.
    go.terminate()?;
    standby.wait_leading(Duration::from_secs(10)).await?;
    let writes = common::lock_writes(&cluster, "leases", &ns, NAME)?;
    let release = writes
        .iter()
        .find(|w| w.agent_identity() == Some("go-leader") && w.lock_holder().as_deref() == Some(""))
        .context("no release by the leader")?;
    let acquire = writes
        .iter()
        .find(|w| {
            w.agent_identity() == Some("rust-standby") && w.lock_holder().as_deref() == Some("rust-standby")
        })
        .context("no acquire by the standby")?;
    let gap = acquire.received.duration_since(release.stage_time);
    eprintln!("the standby's acquire reached the apiserver {gap:?} after the release completed");
    assert!(
        gap < jiff::SignedDuration::from_secs(2),
        "the standby took over {gap:?} after the release"
    );
    standby.stop().await?;
    Ok(())
}
