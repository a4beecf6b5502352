//! Must show 2: a record written by Rust reads back field by field as client-go writes it — the same
//! fields, MicroTime with six fractional digits in UTC, `acquireTime` kept by renewals — and
//! `leaseTransitions` counts only changes of holder. Go and Rust take turns on one Lease and every
//! record is read back as served.

mod common;

use std::time::Duration;

use anyhow::{Context, bail, ensure};
use common::{FAST, RustCandidate};
use serde_json::Value;
use testenv::{CandidateOptions, GoCandidate};

const NAME: &str = "formats";

fn is_micro_time(v: &Value) -> bool {
    let Some(s) = v.as_str() else { return false };
    let b = s.as_bytes();
    b.len() == 27
        && s.ends_with('Z')
        && b[19] == b'.'
        && b[20..26].iter().all(u8::is_ascii_digit)
        && s[..19].parse::<jiff::civil::DateTime>().is_ok()
}

/// The Lease spec as served, checked for client-go's shape.
async fn spec(client: &kube::Client, ns: &str) -> anyhow::Result<Value> {
    let lease = common::lease_json(client, ns, NAME)
        .await?
        .context("the Lease is missing")?;
    let spec = lease.get("spec").cloned().context("the Lease has no spec")?;
    let mut keys: Vec<&str> = spec
        .as_object()
        .context("spec")?
        .keys()
        .map(String::as_str)
        .collect();
    keys.sort_unstable();
    ensure!(
        keys == [
            "acquireTime",
            "holderIdentity",
            "leaseDurationSeconds",
            "leaseTransitions",
            "renewTime"
        ],
        "unexpected spec fields {keys:?}"
    );
    ensure!(
        is_micro_time(&spec["acquireTime"]),
        "acquireTime {} is not a MicroTime",
        spec["acquireTime"]
    );
    ensure!(
        is_micro_time(&spec["renewTime"]),
        "renewTime {} is not a MicroTime",
        spec["renewTime"]
    );
    ensure!(
        spec["leaseDurationSeconds"].is_i64() && spec["leaseTransitions"].is_i64(),
        "integer fields: {spec}"
    );
    ensure!(
        spec["holderIdentity"].is_string(),
        "holderIdentity must be a string: {spec}"
    );
    Ok(spec)
}

/// The spec of the first Lease write by `author`, from the audit log.
fn first_write_by(cluster: &testenv::Cluster, ns: &str, author: &str) -> anyhow::Result<Value> {
    let write = common::lock_writes(cluster, "leases", ns, NAME)?
        .into_iter()
        .find(|w| w.agent_identity() == Some(author))
        .with_context(|| format!("no Lease write by {author}"))?;
    let spec = write
        .request_object
        .and_then(|b| b.get("spec").cloned())
        .context("no request body")?;
    ensure!(
        is_micro_time(&spec["acquireTime"]) && is_micro_time(&spec["renewTime"]),
        "times in {spec}"
    );
    Ok(spec)
}

async fn spec_when(
    client: &kube::Client,
    ns: &str,
    what: &str,
    pred: impl Fn(&Value) -> bool,
) -> anyhow::Result<Value> {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(15);
    loop {
        if let Ok(s) = spec(client, ns).await
            && pred(&s)
        {
            return Ok(s);
        }
        if tokio::time::Instant::now() > deadline {
            bail!(
                "timed out waiting for {what}; the Lease spec is {:?}",
                spec(client, ns).await
            );
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rust_records_read_back_as_client_go_writes_them() -> anyhow::Result<()> {
    let (cluster, ns) = common::bed("election-formats").await?;
    let client = common::client(&cluster, "observer").await?;

    // client-go creates the Lease: transitions 0, acquireTime = renewTime.
    let go1 = GoCandidate::spawn(&cluster, &CandidateOptions::new(&ns, NAME, "go-1"))?;
    spec_when(&client, &ns, "go-1 to create", |s| s["holderIdentity"] == "go-1").await?;
    let created = first_write_by(&cluster, &ns, "go-1")?;
    assert_eq!(created["leaseTransitions"], 0);
    assert_eq!(created["leaseDurationSeconds"], 4);
    assert_eq!(created["acquireTime"], created["renewTime"]);
    // A renewal keeps acquireTime and transitions.
    let renewed = spec_when(&client, &ns, "go-1 to renew", |s| {
        s["renewTime"] != created["renewTime"]
    })
    .await?;
    assert_eq!(renewed["acquireTime"], created["acquireTime"]);
    assert_eq!(renewed["leaseTransitions"], 0);

    // A Rust standby does not count anything while it waits.
    let mut rust = RustCandidate::spawn(&cluster, &ns, NAME, "rust-1", FAST).await?;
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(spec(&client, &ns).await?["leaseTransitions"], 0);

    // client-go releases: holder "", duration 1, times equal, transitions kept. Rust takes over from
    // the released record: one transition.
    go1.terminate()?;
    rust.wait_leading(Duration::from_secs(5)).await?;
    spec(&client, &ns).await?;
    let acquired = first_write_by(&cluster, &ns, "rust-1")?;
    assert_eq!(acquired["holderIdentity"], "rust-1");
    assert_eq!(acquired["leaseDurationSeconds"], 4);
    assert_eq!(acquired["leaseTransitions"], 1);
    assert_eq!(acquired["acquireTime"], acquired["renewTime"]);

    // Rust renews: acquireTime and transitions kept, renewTime moves, six digits each time.
    let mut last = acquired["renewTime"].clone();
    for _ in 0..3 {
        let s = spec_when(&client, &ns, "rust-1 to renew", |s| s["renewTime"] != last).await?;
        assert_eq!(s["acquireTime"], acquired["acquireTime"]);
        assert_eq!(s["leaseTransitions"], 1);
        assert_eq!(s["holderIdentity"], "rust-1");
        last = s["renewTime"].clone();
    }

    // A Go standby reads the Rust record as a leader.
    let go2 = GoCandidate::spawn(&cluster, &CandidateOptions::new(&ns, NAME, "go-2"))?;
    go2.wait_for("new_leader rust-1", Duration::from_secs(10), |e| {
        e.event == "new_leader" && e.leader == "rust-1"
    })
    .await?;

    // Rust releases exactly as client-go does.
    rust.stop().await?;
    let released = common::lock_writes(&cluster, "leases", &ns, NAME)?
        .into_iter()
        .rev()
        .find(|w| w.agent_identity() == Some("rust-1"))
        .context("no write by rust-1")?;
    let body = released.request_object.context("no request body")?;
    assert_eq!(body["spec"]["holderIdentity"], "", "release body {body}");
    assert_eq!(body["spec"]["leaseDurationSeconds"], 1);
    assert_eq!(body["spec"]["leaseTransitions"], 1);
    assert_eq!(body["spec"]["acquireTime"], body["spec"]["renewTime"]);
    assert!(
        is_micro_time(&body["spec"]["renewTime"]),
        "release renewTime {}",
        body["spec"]["renewTime"]
    );
    assert_eq!(
        body["metadata"]["labels"]["app.kubernetes.io/name"],
        "election-test"
    );

    // client-go takes over from the Rust release: one more transition.
    go2.wait_for("go-2 to lead", Duration::from_secs(10), |e| {
        e.event == "started_leading"
    })
    .await?;
    let go_took = spec_when(&client, &ns, "go-2 to lead", |s| s["holderIdentity"] == "go-2").await?;
    assert_eq!(go_took["leaseTransitions"], 2);
    go2.terminate()?;
    go2.wait_for("exited", Duration::from_secs(10), |e| e.event == "exited")
        .await?;

    // Releasing and re-acquiring by the same identity is a transition too, as in client-go.
    let mut again = RustCandidate::spawn(&cluster, &ns, NAME, "go-2", FAST).await?;
    again.wait_leading(Duration::from_secs(5)).await?;
    assert_eq!(spec(&client, &ns).await?["leaseTransitions"], 3);
    again.stop().await?;
    Ok(())
}

/// The same record written by client-go and by Rust has the same fields and encodings: the only
/// differences are the values of the holder and the times.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rust_and_go_records_have_the_same_shape() -> anyhow::Result<()> {
    let (cluster, ns) = common::bed("election-shape").await?;
    let client = common::client(&cluster, "observer").await?;
    let go = GoCandidate::spawn(&cluster, &CandidateOptions::new(&ns, NAME, "same"))?;
    let go_spec = spec_when(&client, &ns, "go to lead", |s| s["holderIdentity"] == "same").await?;
    go.kill()?;
    // Same identity: Rust renews Go's record (acquireTime and transitions kept), as a restarted
    // client-go process would.
    let mut rust = RustCandidate::spawn(&cluster, &ns, NAME, "same", FAST).await?;
    rust.wait_leading(Duration::from_secs(5)).await?;
    let rust_spec = spec_when(&client, &ns, "rust to renew", |s| {
        s["renewTime"] != go_spec["renewTime"]
    })
    .await?;
    for key in [
        "holderIdentity",
        "leaseDurationSeconds",
        "acquireTime",
        "leaseTransitions",
    ] {
        assert_eq!(rust_spec[key], go_spec[key], "{key}");
    }
    rust.stop().await?;
    Ok(())
}
