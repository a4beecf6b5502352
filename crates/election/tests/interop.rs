//! Must show 1: Rust candidates and client-go `lease-candidate`s share one Lease. Handover works in all
//! four directions, each by release and by expiry, and the audit log shows that every Lease write was
//! made by a candidate while it held the Lease.
//!
//! "Expiry" of a Go candidate is SIGKILL of its process. For a Rust candidate, which runs in the test
//! process, it is aborting its task: it then neither releases nor sends another request, which is all
//! the Lease can tell of a SIGKILL.

mod common;

use std::time::Duration;

use common::{FAST, RustCandidate, assert_exclusive, assert_writes_while_held, go_intervals, mono};
use election::Leadership;
use testenv::{CandidateOptions, GoCandidate};

const NAME: &str = "interop";
const TOLERANCE: Duration = Duration::from_millis(100);

fn go(cluster: &testenv::Cluster, ns: &str, identity: &str) -> anyhow::Result<GoCandidate> {
    Ok(GoCandidate::spawn(
        cluster,
        &CandidateOptions::new(ns, NAME, identity),
    )?)
}

async fn go_leads(g: &GoCandidate, timeout: Duration) -> anyhow::Result<i64> {
    let ev = g
        .wait_for("started_leading", timeout, |e| e.event == "started_leading")
        .await?;
    Ok(ev.mono_ns)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn go_to_rust_by_release() -> anyhow::Result<()> {
    let (cluster, ns) = common::bed("election-g2r-release").await?;
    let g = go(&cluster, &ns, "go-1")?;
    go_leads(&g, Duration::from_secs(20)).await?;
    let mut r = RustCandidate::spawn(&cluster, &ns, NAME, "rust-1", FAST).await?;
    // The standby sees the Go leader and waits.
    tokio::time::timeout(
        Duration::from_secs(5),
        r.rx.wait_for(|l| matches!(l, Leadership::Following { leader: Some(x) } if x == "go-1")),
    )
    .await??;
    tokio::time::sleep(FAST.lease).await;
    assert!(!r.is_leading(), "rust-1 must not lead while go-1 renews");

    let released = mono();
    g.terminate()?;
    r.wait_leading(Duration::from_secs(5)).await?;
    let took = Duration::from_nanos(u64::try_from(mono() - released)?);
    assert!(
        took < Duration::from_secs(2),
        "takeover after a release took {took:?}"
    );

    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_exclusive(&[("go-1", go_intervals(&g)), ("rust-1", r.intervals())])?;
    r.stop().await?;
    let writes = assert_writes_while_held(&cluster, &ns, NAME, TOLERANCE)?;
    assert!(
        writes.iter().any(|w| w.agent_identity() == Some("rust-1")),
        "no write by rust-1 in the audit log"
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn go_to_rust_by_expiry() -> anyhow::Result<()> {
    let (cluster, ns) = common::bed("election-g2r-expiry").await?;
    let g = go(&cluster, &ns, "go-1")?;
    go_leads(&g, Duration::from_secs(20)).await?;
    let mut r = RustCandidate::spawn(&cluster, &ns, NAME, "rust-1", FAST).await?;
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert!(!r.is_leading());

    let killed = mono();
    g.kill()?;
    r.wait_leading(FAST.lease + Duration::from_secs(5)).await?;
    let took = Duration::from_nanos(u64::try_from(mono() - killed)?);
    // It waits out the lease from its last observed renewal (at most a retry period before the kill).
    assert!(
        took >= FAST.lease - FAST.retry - TOLERANCE,
        "took over after only {took:?}"
    );
    assert!(
        took < FAST.lease + Duration::from_secs(2),
        "takeover after expiry took {took:?}"
    );

    r.stop().await?;
    assert_writes_while_held(&cluster, &ns, NAME, TOLERANCE)?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rust_to_go_by_release() -> anyhow::Result<()> {
    let (cluster, ns) = common::bed("election-r2g-release").await?;
    let mut r = RustCandidate::spawn(&cluster, &ns, NAME, "rust-1", FAST).await?;
    r.wait_leading(Duration::from_secs(10)).await?;
    let g = go(&cluster, &ns, "go-1")?;
    g.wait_for("new_leader rust-1", Duration::from_secs(10), |e| {
        e.event == "new_leader" && e.leader == "rust-1"
    })
    .await?;
    tokio::time::sleep(FAST.lease).await;
    assert!(!g.is_leading(), "go-1 must not lead while rust-1 renews");

    let released = mono();
    let intervals_before = r.intervals();
    r.stop().await?;
    let led = go_leads(&g, Duration::from_secs(10)).await?;
    // client-go polls every retry period (with jitter up to 2.2×).
    let took = Duration::from_nanos(u64::try_from(led - released)?);
    assert!(
        took < FAST.retry.mul_f64(2.2) + Duration::from_secs(1),
        "takeover after a release took {took:?}"
    );

    assert_exclusive(&[("go-1", go_intervals(&g)), ("rust-1", intervals_before)])?;
    g.terminate()?;
    g.wait_for("exited", Duration::from_secs(10), |e| e.event == "exited")
        .await?;
    let writes = assert_writes_while_held(&cluster, &ns, NAME, TOLERANCE)?;
    assert!(
        writes.iter().any(|w| w.agent_identity() == Some("go-1")),
        "no write by go-1"
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rust_to_go_by_expiry() -> anyhow::Result<()> {
    let (cluster, ns) = common::bed("election-r2g-expiry").await?;
    let mut r = RustCandidate::spawn(&cluster, &ns, NAME, "rust-1", FAST).await?;
    r.wait_leading(Duration::from_secs(10)).await?;
    let g = go(&cluster, &ns, "go-1")?;
    g.wait_for("new_leader rust-1", Duration::from_secs(10), |e| {
        e.event == "new_leader" && e.leader == "rust-1"
    })
    .await?;
    tokio::time::sleep(Duration::from_secs(2)).await;

    let killed = mono();
    r.crash();
    let led = go_leads(&g, FAST.lease + Duration::from_secs(5)).await?;
    let took = Duration::from_nanos(u64::try_from(led - killed)?);
    // client-go compares the records it reads with `renewTime` cut to whole seconds: renewals within one
    // second look unchanged to it, so it may count the lease from up to a second before the last renewal.
    assert!(
        took >= FAST.lease - FAST.retry - Duration::from_secs(1) - TOLERANCE,
        "go-1 took over after only {took:?}"
    );

    assert_exclusive(&[("go-1", go_intervals(&g)), ("rust-1", r.intervals())])?;
    g.terminate()?;
    g.wait_for("exited", Duration::from_secs(10), |e| e.event == "exited")
        .await?;
    assert_writes_while_held(&cluster, &ns, NAME, TOLERANCE)?;
    Ok(())
}

/// Two Go and two Rust candidates on one Lease; leaders leave in turn, alternately by release and by
/// crash, until one is left. Exactly one leads at a time and every write is made while held.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mixed_pool_hands_over_in_turn() -> anyhow::Result<()> {
    let (cluster, ns) = common::bed("election-mixed").await?;
    let mut gos = vec![go(&cluster, &ns, "go-1")?, go(&cluster, &ns, "go-2")?];
    let mut rusts = vec![
        RustCandidate::spawn(&cluster, &ns, NAME, "rust-1", FAST).await?,
        RustCandidate::spawn(&cluster, &ns, NAME, "rust-2", FAST).await?,
    ];
    let mut finished: Vec<(String, Vec<(i64, i64)>)> = Vec::new();
    let client = common::client(&cluster, "observer").await?;
    for round in 0..3 {
        // Wait for a leader, then remove it.
        let leader =
            common::wait_holder(&client, &ns, NAME, Duration::from_secs(15), |h| !h.is_empty()).await?;
        let by_release = round % 2 == 0;
        if let Some(i) = gos.iter().position(|g| g.identity() == leader) {
            go_leads(&gos[i], Duration::from_secs(5)).await?;
            let mut g = gos.remove(i);
            if by_release {
                g.terminate()?
            } else {
                g.kill()?
            }
            let _ = g.wait().await?;
            finished.push((leader.clone(), go_intervals(&g)));
        } else if let Some(i) = rusts.iter().position(|r| r.identity == leader) {
            rusts[i].wait_leading(Duration::from_secs(5)).await?;
            let mut r = rusts.remove(i);
            if by_release {
                r.stop().await?;
                finished.push((leader.clone(), r.intervals()));
            } else {
                r.crash();
                tokio::time::sleep(Duration::from_millis(100)).await;
                finished.push((leader.clone(), r.intervals()));
            }
        } else {
            anyhow::bail!("unknown holder {leader:?}");
        }
        // Someone else takes over.
        common::wait_holder(&client, &ns, NAME, FAST.lease + Duration::from_secs(6), |h| {
            !h.is_empty() && h != leader
        })
        .await?;
    }
    // The last one standing leads: wait for it to report so, rather than for a fixed time.
    let last = common::wait_holder(&client, &ns, NAME, Duration::from_secs(15), |h| !h.is_empty()).await?;
    if let Some(g) = gos.iter().find(|g| g.identity() == last) {
        go_leads(g, Duration::from_secs(10)).await?;
    } else if let Some(r) = rusts.iter_mut().find(|r| r.identity == last) {
        r.wait_leading(Duration::from_secs(10)).await?;
    } else {
        anyhow::bail!("the last holder {last:?} is not a remaining candidate");
    }
    tokio::time::sleep(Duration::from_millis(200)).await;
    let mut sets: Vec<(&str, Vec<(i64, i64)>)> =
        finished.iter().map(|(n, i)| (n.as_str(), i.clone())).collect();
    for g in &gos {
        sets.push((g.identity(), go_intervals(g)));
    }
    for r in &rusts {
        sets.push((r.identity.as_str(), r.intervals()));
    }
    assert_exclusive(&sets)?;
    let leaders: usize = sets.iter().map(|(_, i)| i.len()).sum();
    assert!(
        leaders >= 4,
        "expected at least four terms, saw {leaders}: {sets:?}"
    );
    for g in &gos {
        g.terminate()?;
    }
    for mut r in rusts {
        r.stop().await?;
    }
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_writes_while_held(&cluster, &ns, NAME, TOLERANCE)?;
    Ok(())
}
