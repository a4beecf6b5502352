//! Must show 6: bad input is never a panic. One test per case in the crate docs' table. Values the
//! apiserver refuses on a Lease (a zero or negative duration, an unparsable time) are shown refused, and
//! exercised through the ConfigMap lock, whose record is free-form JSON. The same cases run against the
//! real binaries in `tests/e2e/tests/bad_input.rs`.

mod common;

use std::{
    io::Write,
    sync::{Arc, Mutex, OnceLock},
    time::Duration,
};

use anyhow::Context;
use common::{FAST, RustCandidate};
use election::{LapseReason, Leadership, LockKind};
use k8s_openapi::api::{
    coordination::v1::Lease,
    core::v1::ConfigMap,
    rbac::v1::{PolicyRule, Role, RoleBinding, RoleRef, Subject},
};
use kube::{
    Api,
    api::{ApiResource, DeleteParams, DynamicObject, ObjectMeta, PostParams},
};
use serde_json::json;
use tokio::time::Instant;

const NAME: &str = "bad";
const ANNOTATION: &str = "control-plane.alpha.kubernetes.io/leader";

async fn put_lease(client: &kube::Client, ns: &str, spec: serde_json::Value) -> anyhow::Result<()> {
    let ar = ApiResource::erase::<Lease>(&());
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), ns, &ar);
    let obj: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
        "metadata": {"name": NAME, "namespace": ns}, "spec": spec,
    }))?;
    api.create(&PostParams::default(), &obj).await?;
    Ok(())
}

async fn put_configmap(client: &kube::Client, ns: &str, annotation: &str) -> anyhow::Result<()> {
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), ns);
    let cm = ConfigMap {
        metadata: ObjectMeta {
            name: Some(NAME.into()),
            annotations: Some([(ANNOTATION.to_string(), annotation.to_string())].into()),
            ..Default::default()
        },
        data: Some([("keep".to_string(), "me".to_string())].into()),
        ..Default::default()
    };
    api.create(&PostParams::default(), &cm).await?;
    Ok(())
}

/// Edits the Lease as `kubectl edit` does: get, change, replace; retried on conflict. Returns when the
/// edit was accepted.
async fn edit_lease(api: &Api<Lease>, f: impl Fn(&mut Lease)) -> anyhow::Result<Instant> {
    loop {
        let mut lease = api.get(NAME).await?;
        f(&mut lease);
        match api.replace(NAME, &PostParams::default(), &lease).await {
            Ok(_) => return Ok(Instant::now()),
            Err(kube::Error::Api(s)) if s.is_conflict() => continue,
            Err(e) => return Err(e.into()),
        }
    }
}

/// Starts a candidate and measures how long it takes to lead.
async fn time_to_lead(c: &mut RustCandidate, timeout: Duration) -> anyhow::Result<Duration> {
    let start = Instant::now();
    c.wait_leading(timeout).await?;
    Ok(start.elapsed())
}

/// Puts an annotation that is not JSON on the ConfigMap and starts one candidate on a lock of `kind`.
/// It follows an unknown holder, takes over after about one lease duration, and writes its own record
/// into the annotation while the ConfigMap keeps its data. Returns that record and the candidate.
async fn not_json_is_overwritten(
    cluster: &testenv::Cluster,
    client: &kube::Client,
    ns: &str,
    kind: LockKind,
) -> anyhow::Result<(serde_json::Value, RustCandidate)> {
    put_configmap(client, ns, "this is not json").await?;
    let mut c = RustCandidate::spawn_kind(cluster, ns, NAME, "me", kind).await?;
    tokio::time::timeout(
        Duration::from_secs(5),
        c.rx.wait_for(
            |l| matches!(l, Leadership::Following { leader: Some(x) } if x == election::UNKNOWN_LEADER),
        ),
    )
    .await??;
    let took = time_to_lead(&mut c, FAST.lease + Duration::from_secs(3)).await?;
    assert!(
        took >= FAST.lease - Duration::from_secs(1),
        "took over after only {took:?}"
    );
    let cm = common::configmap(client, ns, NAME).await?.context("configmap")?;
    let raw = cm
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(ANNOTATION))
        .context("annotation")?;
    let record: serde_json::Value = serde_json::from_str(raw)?;
    assert_eq!(record["holderIdentity"], "me");
    assert_eq!(
        cm.data.as_ref().and_then(|d| d.get("keep")).map(String::as_str),
        Some("me")
    );
    Ok((record, c))
}

/// A record whose holder is missing, `""` or `null` is released: acquired at once even with a one-hour
/// duration.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn missing_empty_or_null_holder_is_acquired_at_once() -> anyhow::Result<()> {
    let (cluster, ns) = common::bed("election-bad-holder").await?;
    let client = common::client(&cluster, "setup").await?;
    let now = "2026-01-01T00:00:00.000000Z";
    for (i, spec) in [
        json!({"leaseDurationSeconds": 3600, "renewTime": now, "leaseTransitions": 5}),
        json!({"holderIdentity": "", "leaseDurationSeconds": 3600, "renewTime": now, "leaseTransitions": 5}),
    ]
    .into_iter()
    .enumerate()
    {
        let ns = cluster.namespace(&format!("election-bad-holder-{i}")).await?;
        put_lease(&client, &ns, spec).await?;
        let mut c = RustCandidate::spawn(&cluster, &ns, NAME, "me", FAST).await?;
        let took = time_to_lead(&mut c, Duration::from_secs(5)).await?;
        assert!(took < Duration::from_secs(2), "took {took:?}");
        let lease = common::lease(&client, &ns, NAME)
            .await?
            .and_then(|l| l.spec)
            .context("spec")?;
        assert_eq!(
            lease.lease_transitions,
            Some(6),
            "taking a released lease is a transition"
        );
        c.stop().await?;
    }
    // null in a ConfigMap record.
    put_configmap(
        &client,
        &ns,
        r#"{"holderIdentity":null,"leaseDurationSeconds":3600,"leaderTransitions":1}"#,
    )
    .await?;
    let mut c = RustCandidate::spawn_kind(&cluster, &ns, NAME, "me", LockKind::ConfigMap).await?;
    let took = time_to_lead(&mut c, Duration::from_secs(5)).await?;
    assert!(took < Duration::from_secs(2), "took {took:?}");
    c.stop().await?;
    Ok(())
}

/// A duration that is missing, 0 or negative means expired: acquired at once although someone holds it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn missing_zero_or_negative_duration_is_expired() -> anyhow::Result<()> {
    let (cluster, ns) = common::bed("election-bad-duration").await?;
    let client = common::client(&cluster, "setup").await?;
    put_lease(
        &client,
        &ns,
        json!({"holderIdentity": "ghost", "renewTime": "2026-01-01T00:00:00.000000Z"}),
    )
    .await?;
    let mut c = RustCandidate::spawn(&cluster, &ns, NAME, "me", FAST).await?;
    let took = time_to_lead(&mut c, Duration::from_secs(5)).await?;
    assert!(took < Duration::from_secs(2), "missing duration: took {took:?}");
    c.stop().await?;

    for (i, d) in ["0", "-15", "\"fifteen\"", "1.5"].iter().enumerate() {
        let ns = cluster.namespace(&format!("election-bad-duration-{i}")).await?;
        put_configmap(
            &client,
            &ns,
            &format!(r#"{{"holderIdentity":"ghost","leaseDurationSeconds":{d}}}"#),
        )
        .await?;
        let mut c = RustCandidate::spawn_kind(&cluster, &ns, NAME, "me", LockKind::ConfigMap).await?;
        let took = time_to_lead(&mut c, Duration::from_secs(5)).await?;
        assert!(took < Duration::from_secs(2), "duration {d}: took {took:?}");
        c.stop().await?;
    }
    Ok(())
}

/// A huge duration is clamped (to one hour): the candidate keeps waiting without panicking or
/// overflowing, and still takes over at once when the holder releases.
///
/// "Keeps waiting" is judged against a positive control: a second candidate, started at the same time
/// with the same timings on a record that differs only in a 2 s duration, takes over; the one facing the
/// huge duration must still be waiting when it does.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn huge_duration_is_clamped() -> anyhow::Result<()> {
    let (cluster, ns) = common::bed("election-bad-huge").await?;
    let client = common::client(&cluster, "setup").await?;
    put_lease(
        &client,
        &ns,
        json!({"holderIdentity": "ghost", "leaseDurationSeconds": i32::MAX, "renewTime": "2026-01-01T00:00:00.000000Z"}),
    )
    .await?;
    let control_ns = cluster.namespace("election-bad-huge-control").await?;
    put_lease(
        &client,
        &control_ns,
        json!({"holderIdentity": "ghost", "leaseDurationSeconds": 2, "renewTime": "2026-01-01T00:00:00.000000Z"}),
    )
    .await?;
    let mut c = RustCandidate::spawn(&cluster, &ns, NAME, "me", FAST).await?;
    let mut control = RustCandidate::spawn(&cluster, &control_ns, NAME, "control", FAST).await?;
    tokio::time::timeout(
        Duration::from_secs(5),
        c.rx.wait_for(|l| matches!(l, Leadership::Following { leader: Some(x) } if x == "ghost")),
    )
    .await??;
    control.wait_leading(Duration::from_secs(15)).await?;
    assert!(
        !c.is_leading() && c.is_running(),
        "the candidate facing a huge duration took over (or stopped) when the 2 s control did"
    );
    control.stop().await?;
    // The ghost "releases" (someone edits the holder to ""): taken at once.
    let api: Api<Lease> = Api::namespaced(client.clone(), &ns);
    let mut lease = api.get(NAME).await?;
    if let Some(spec) = lease.spec.as_mut() {
        spec.holder_identity = Some(String::new());
    }
    api.replace(NAME, &PostParams::default(), &lease).await?;
    let took = time_to_lead(&mut c, Duration::from_secs(5)).await?;
    assert!(took < Duration::from_secs(2), "took {took:?}");
    c.stop().await?;

    // The same in a ConfigMap record, beyond i64.
    let ns = cluster.namespace("election-bad-huge-cm").await?;
    put_configmap(
        &client,
        &ns,
        r#"{"holderIdentity":"ghost","leaseDurationSeconds":1e300}"#,
    )
    .await?;
    let control_ns = cluster.namespace("election-bad-huge-cm-control").await?;
    put_configmap(
        &client,
        &control_ns,
        r#"{"holderIdentity":"ghost","leaseDurationSeconds":2}"#,
    )
    .await?;
    let c = RustCandidate::spawn_kind(&cluster, &ns, NAME, "me", LockKind::ConfigMap).await?;
    let mut control =
        RustCandidate::spawn_kind(&cluster, &control_ns, NAME, "control", LockKind::ConfigMap).await?;
    control.wait_leading(Duration::from_secs(15)).await?;
    assert!(
        !c.is_leading() && c.is_running(),
        "the candidate facing a 1e300 s duration took over (or stopped) when the 2 s control did"
    );
    control.stop().await?;
    Ok(())
}

/// Missing or unparsable times are ignored: expiry is local, so the record expires a lease duration
/// after it was observed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn missing_or_unparsable_times_are_ignored() -> anyhow::Result<()> {
    let (cluster, ns) = common::bed("election-bad-time").await?;
    let client = common::client(&cluster, "setup").await?;
    put_lease(
        &client,
        &ns,
        json!({"holderIdentity": "ghost", "leaseDurationSeconds": 2}),
    )
    .await?;
    let mut c = RustCandidate::spawn(&cluster, &ns, NAME, "me", FAST).await?;
    let took = time_to_lead(&mut c, Duration::from_secs(6)).await?;
    assert!(
        took >= Duration::from_millis(1900) && took < Duration::from_secs(4),
        "took {took:?}"
    );
    let spec = common::lease(&client, &ns, NAME)
        .await?
        .and_then(|l| l.spec)
        .context("spec")?;
    assert!(
        spec.acquire_time.is_some() && spec.renew_time.is_some(),
        "times are written on takeover"
    );
    c.stop().await?;

    let ns = cluster.namespace("election-bad-time-cm").await?;
    put_configmap(
        &client,
        &ns,
        r#"{"holderIdentity":"ghost","leaseDurationSeconds":2,"acquireTime":"yesterday","renewTime":12}"#,
    )
    .await?;
    let mut c = RustCandidate::spawn_kind(&cluster, &ns, NAME, "me", LockKind::ConfigMap).await?;
    let took = time_to_lead(&mut c, Duration::from_secs(6)).await?;
    assert!(
        took >= Duration::from_millis(1900) && took < Duration::from_secs(4),
        "took {took:?}"
    );
    c.stop().await?;
    Ok(())
}

/// What the apiserver refuses on a Lease never reaches a candidate: a zero or negative duration (422), a
/// duration beyond int32, and garbage times (400: not a string, not a time, no microseconds). What it does
/// store — a renewTime in the year 9999 or the year 1, a transition count at `i32::MAX` — is read without
/// overflow: expiry is local, so the record expires one lease duration after it was observed, and the
/// count saturates on takeover.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lease_values_the_apiserver_refuses_or_stores() -> anyhow::Result<()> {
    let (cluster, ns) = common::bed("election-bad-stored").await?;
    let client = common::client(&cluster, "setup").await?;
    for (spec, code) in [
        (json!({"holderIdentity": "ghost", "leaseDurationSeconds": 0}), 422),
        (
            json!({"holderIdentity": "ghost", "leaseDurationSeconds": -5}),
            422,
        ),
        (
            json!({"holderIdentity": "ghost", "leaseDurationSeconds": 1_i64 << 31}),
            400,
        ),
        (json!({"holderIdentity": "ghost", "renewTime": "garbage"}), 400),
        (json!({"holderIdentity": "ghost", "renewTime": 12}), 400),
        (
            json!({"holderIdentity": "ghost", "acquireTime": "2026-13-45T99:00:00.000000Z"}),
            400,
        ),
        (
            json!({"holderIdentity": "ghost", "renewTime": "2026-01-01T00:00:00Z"}),
            400,
        ),
    ] {
        match put_lease(&client, &ns, spec.clone()).await {
            Err(e) => match e.downcast_ref::<kube::Error>() {
                Some(kube::Error::Api(s)) if s.code == code => {}
                _ => anyhow::bail!("{spec}: expected {code}, got {e:#}"),
            },
            Ok(()) => anyhow::bail!("the apiserver stored {spec}"),
        }
    }
    for (i, (renew, transitions)) in [
        ("9999-12-31T23:59:59.999999Z", i32::MAX),
        ("0001-01-01T00:00:00.000000Z", 0),
    ]
    .into_iter()
    .enumerate()
    {
        let ns = cluster.namespace(&format!("election-bad-stored-{i}")).await?;
        put_lease(
            &client,
            &ns,
            json!({"holderIdentity": "ghost", "leaseDurationSeconds": 2, "acquireTime": renew,
                   "renewTime": renew, "leaseTransitions": transitions}),
        )
        .await?;
        let mut c = RustCandidate::spawn(&cluster, &ns, NAME, "me", FAST).await?;
        let took = time_to_lead(&mut c, Duration::from_secs(6)).await?;
        assert!(
            took >= Duration::from_millis(1900) && took < Duration::from_secs(4),
            "renewTime {renew}: took {took:?}"
        );
        let spec = common::lease(&client, &ns, NAME)
            .await?
            .and_then(|l| l.spec)
            .context("spec")?;
        assert_eq!(
            spec.lease_transitions,
            Some(transitions.saturating_add(1)),
            "renewTime {renew}"
        );
        c.stop().await?;
    }
    Ok(())
}

/// The migration lock (ConfigMap first, then Lease) with a garbage annotation. Not JSON: an unknown
/// holder for one lease duration, then both objects get a valid record and the ConfigMap keeps its data.
/// A JSON record with a negative transition count (the apiserver refuses one on a Lease): taken once it
/// expires, and the Lease is written with a count the apiserver accepts.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn garbage_annotation_on_the_migration_lock() -> anyhow::Result<()> {
    let (cluster, ns) = common::bed("election-bad-multi").await?;
    let client = common::client(&cluster, "setup").await?;
    let (_, mut c) = not_json_is_overwritten(&cluster, &client, &ns, LockKind::ConfigMapAndLease).await?;
    let lease = common::lease(&client, &ns, NAME)
        .await?
        .and_then(|l| l.spec)
        .context("the Lease is created too")?;
    assert_eq!(lease.holder_identity.as_deref(), Some("me"));
    c.stop().await?;

    let ns = cluster.namespace("election-bad-multi-neg").await?;
    put_configmap(
        &client,
        &ns,
        r#"{"holderIdentity":"ghost","leaseDurationSeconds":2,"leaderTransitions":-5}"#,
    )
    .await?;
    let mut c = RustCandidate::spawn_kind(&cluster, &ns, NAME, "me", LockKind::ConfigMapAndLease).await?;
    let took = time_to_lead(&mut c, Duration::from_secs(6)).await?;
    assert!(
        took >= Duration::from_millis(1900) && took < Duration::from_secs(4),
        "took {took:?}"
    );
    let lease = common::lease(&client, &ns, NAME)
        .await?
        .and_then(|l| l.spec)
        .context("the Lease is created too")?;
    assert_eq!(lease.holder_identity.as_deref(), Some("me"));
    // The negative count reads as 0, and taking over from "ghost" is one transition.
    assert_eq!(lease.lease_transitions, Some(1), "{lease:?}");
    c.stop().await?;
    Ok(())
}

/// An annotation that is not JSON is a record held by an unknown holder for one configured lease
/// duration after it was observed; then it is overwritten with a valid record. Other data is kept.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn annotation_that_is_not_json_is_overwritten_after_a_lease_duration() -> anyhow::Result<()> {
    let (cluster, ns) = common::bed("election-bad-json").await?;
    let client = common::client(&cluster, "setup").await?;
    let (record, mut c) = not_json_is_overwritten(&cluster, &client, &ns, LockKind::ConfigMap).await?;
    assert_eq!(record["leaderTransitions"], 1);
    c.stop().await?;
    Ok(())
}

/// The Lease deleted under the leader: the leader re-creates it at once and its term goes on; the
/// standby does not take the deleted record as a release.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lease_deleted_under_the_leader() -> anyhow::Result<()> {
    let (cluster, ns) = common::bed("election-bad-deleted").await?;
    let client = common::client(&cluster, "setup").await?;
    let mut a = RustCandidate::spawn(&cluster, &ns, NAME, "a", FAST).await?;
    let term = a.wait_leading(Duration::from_secs(5)).await?;
    let b = RustCandidate::spawn(&cluster, &ns, NAME, "b", FAST).await?;
    tokio::time::sleep(Duration::from_secs(1)).await;
    let api: Api<Lease> = Api::namespaced(client.clone(), &ns);
    let before = api.get(NAME).await?.spec.context("spec")?;

    let deleted = Instant::now();
    api.delete(NAME, &DeleteParams::default()).await?;
    common::eventually("the Lease to be re-created", Duration::from_secs(2), || {
        let api = api.clone();
        async move { Ok(api.get_opt(NAME).await?.is_some()) }
    })
    .await?;
    assert!(
        deleted.elapsed() < Duration::from_secs(1),
        "re-created after {:?}",
        deleted.elapsed()
    );
    let after = api.get(NAME).await?.spec.context("spec")?;
    assert_eq!(after.holder_identity.as_deref(), Some("a"));
    assert_eq!(after.acquire_time, before.acquire_time, "the term goes on");
    assert_eq!(after.lease_transitions, before.lease_transitions);
    // Not a fixed wait before "nothing happened": the leader must be seen renewing the re-created
    // Lease for two lease durations (its renewTime moves on), all the while b, polling every 500 ms,
    // could have taken a deleted record for a release.
    let recreated = after.renew_time.clone().context("renewTime")?;
    common::eventually(
        "the leader to renew the re-created Lease for two lease durations",
        FAST.lease * 4,
        || {
            let (api, recreated) = (api.clone(), recreated.clone());
            async move {
                let renewed = api.get(NAME).await?.spec.and_then(|s| s.renew_time);
                Ok(renewed.is_some_and(|r| {
                    r.0.duration_since(recreated.0)
                        >= jiff::SignedDuration::try_from(FAST.lease * 2).unwrap_or_default()
                }))
            }
        },
    )
    .await?;
    assert!(term.guard().is_valid(), "the leader's term must go on");
    assert!(!b.is_leading());
    common::assert_exclusive(&[("a", a.intervals()), ("b", b.intervals())])?;
    a.stop().await?;
    Ok(())
}

/// The Lease deleted after its leader died: the standby waits out the deleted record, then creates it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lease_deleted_after_its_leader_died() -> anyhow::Result<()> {
    let (cluster, ns) = common::bed("election-bad-deleted-dead").await?;
    let client = common::client(&cluster, "setup").await?;
    let mut a = RustCandidate::spawn(&cluster, &ns, NAME, "a", FAST).await?;
    a.wait_leading(Duration::from_secs(5)).await?;
    let mut b = RustCandidate::spawn(&cluster, &ns, NAME, "b", FAST).await?;
    tokio::time::sleep(Duration::from_secs(1)).await;
    a.crash();
    let crashed = Instant::now();
    Api::<Lease>::namespaced(client.clone(), &ns)
        .delete(NAME, &DeleteParams::default())
        .await?;
    b.wait_leading(FAST.lease + Duration::from_secs(3)).await?;
    let took = crashed.elapsed();
    // b last saw a renew at most one retry period before the crash.
    assert!(
        took >= FAST.lease - FAST.retry - Duration::from_millis(100),
        "b created it after only {took:?}"
    );
    common::assert_exclusive(&[("a", a.intervals()), ("b", b.intervals())])?;
    b.stop().await?;
    Ok(())
}

/// The Lease rewritten by someone else (as `kubectl edit` would): the leader steps down at once, and
/// the intruder's record is respected until it expires.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lease_rewritten_by_someone_else() -> anyhow::Result<()> {
    let (cluster, ns) = common::bed("election-bad-edit").await?;
    let client = common::client(&cluster, "kubectl").await?;
    let mut a = RustCandidate::spawn(&cluster, &ns, NAME, "a", FAST).await?;
    let term = a.wait_leading(Duration::from_secs(5)).await?;
    let mut b = RustCandidate::spawn(&cluster, &ns, NAME, "b", FAST).await?;
    tokio::time::sleep(Duration::from_secs(1)).await;

    // A label edit keeps "a" as holder: not a takeover.
    let api: Api<Lease> = Api::namespaced(client.clone(), &ns);
    edit_lease(&api, |lease| {
        lease
            .metadata
            .labels
            .get_or_insert_default()
            .insert("edited".into(), "yes".into());
    })
    .await?;
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert!(term.guard().is_valid(), "a label edit must not end the term");
    let lease = api.get(NAME).await?;
    assert_eq!(
        lease
            .metadata
            .labels
            .as_ref()
            .and_then(|l| l.get("edited"))
            .map(String::as_str),
        Some("yes")
    );

    // kubectl edit of the holder.
    let edited = edit_lease(&api, |lease| {
        if let Some(spec) = lease.spec.as_mut() {
            spec.holder_identity = Some("intruder".into());
        }
    })
    .await?;
    a.wait_following(Duration::from_secs(2)).await?;
    let stepped = edited.elapsed();
    assert!(
        stepped < Duration::from_millis(1000),
        "stepped down {stepped:?} after the edit"
    );
    assert_eq!(
        term.guard().check().map_err(|e| e.reason),
        Err(LapseReason::SteppedDown)
    );
    assert!(matches!(&*a.rx.borrow(), Leadership::Following { leader: Some(x) } if x == "intruder"));

    // Nobody takes the intruder's lease before it expires (4 s after the edit was observed).
    tokio::time::sleep(FAST.lease - Duration::from_millis(500) - edited.elapsed()).await;
    assert!(
        !a.is_leading() && !b.is_leading(),
        "someone took the intruder's lease before it expired"
    );
    let holder = common::wait_holder(&client, &ns, NAME, Duration::from_secs(5), |h| {
        h == "a" || h == "b"
    })
    .await?;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let leaders: Vec<_> = [&a, &b]
        .iter()
        .filter(|c| c.is_leading())
        .map(|c| c.identity.clone())
        .collect();
    assert_eq!(leaders, vec![holder]);
    a.stop().await?;
    b.stop().await?;
    Ok(())
}

#[derive(Clone, Default)]
struct Captured(Arc<Mutex<Vec<u8>>>);

impl Write for Captured {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        if let Ok(mut v) = self.0.lock() {
            v.extend_from_slice(buf);
        }
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

fn captured_logs() -> Captured {
    static LOGS: OnceLock<Captured> = OnceLock::new();
    LOGS.get_or_init(|| {
        let logs = Captured::default();
        let writer = logs.clone();
        let _ = tracing_subscriber::fmt()
            .with_ansi(false)
            .with_env_filter("election=info")
            .with_writer(move || writer.clone())
            .try_init();
        logs
    })
    .clone()
}

/// Forbidden: the candidate neither panics nor exits; the error names the verb, the resource, the
/// namespace and the RBAC rule to add; once the rule is granted it carries on and leads.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forbidden_names_the_rbac_rule_and_recovers() -> anyhow::Result<()> {
    let logs = captured_logs();
    let (cluster, ns) = common::bed("election-bad-rbac").await?;
    let admin = common::client(&cluster, "setup").await?;
    let kubeconfig = cluster.service_account_kubeconfig(&ns, "elector").await?;
    let client = common::client_from(&kubeconfig, "unprivileged").await?;
    let mut c = RustCandidate::spawn_client(client, &ns, NAME, "unprivileged", FAST, |b| b)?;
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert!(c.is_running(), "run must not end on Forbidden");
    assert!(!c.is_leading());
    let text = String::from_utf8_lossy(&logs.0.lock().map(|l| l.clone()).unwrap_or_default()).to_string();
    let rule = r#"{apiGroups: ["coordination.k8s.io"], resources: ["leases"], verbs: ["get", "list", "watch", "create", "update"]}"#;
    for verb in ["get", "list"] {
        let want = format!("forbidden to {verb} leases in namespace {ns}");
        let line = text
            .lines()
            .find(|l| l.contains(&want))
            .with_context(|| format!("no log line {want:?} in:\n{text}"))?;
        assert!(line.contains(rule), "the line does not name the rule: {line}");
    }

    // Grant the rule; the candidate recovers without a restart.
    let role = Role {
        metadata: ObjectMeta {
            name: Some("elector".into()),
            ..Default::default()
        },
        rules: Some(vec![PolicyRule {
            api_groups: Some(vec!["coordination.k8s.io".into()]),
            resources: Some(vec!["leases".into()]),
            verbs: ["get", "list", "watch", "create", "update"]
                .map(String::from)
                .to_vec(),
            ..Default::default()
        }]),
    };
    Api::<Role>::namespaced(admin.clone(), &ns)
        .create(&PostParams::default(), &role)
        .await?;
    let binding = RoleBinding {
        metadata: ObjectMeta {
            name: Some("elector".into()),
            ..Default::default()
        },
        role_ref: RoleRef {
            api_group: Some("rbac.authorization.k8s.io".into()),
            kind: "Role".into(),
            name: "elector".into(),
        },
        subjects: Some(vec![Subject {
            kind: "ServiceAccount".into(),
            name: "elector".into(),
            namespace: Some(ns.clone()),
            ..Default::default()
        }]),
    };
    Api::<RoleBinding>::namespaced(admin.clone(), &ns)
        .create(&PostParams::default(), &binding)
        .await?;
    c.wait_leading(Duration::from_secs(20)).await?;
    c.stop().await?;
    Ok(())
}
