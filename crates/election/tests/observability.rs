//! Observability: the metrics `leader_election_master_status{name}` and
//! `leader_election_slowpath_total{name}` in the caller's registry, and the Events `became leader` and
//! `stopped leading` on the lock object.

mod common;

use std::time::Duration;

use anyhow::Context;
use common::{FAST, RustCandidate};
use k8s_openapi::api::{coordination::v1::Lease, events::v1::Event};
use kube::{Api, api::PostParams};

fn metric(registry: &prometheus::Registry, family: &str, name: &str) -> Option<f64> {
    registry
        .gather()
        .iter()
        .find(|f| f.name() == family)
        .and_then(|f| {
            f.get_metric()
                .iter()
                .find(|m| {
                    m.get_label()
                        .iter()
                        .any(|l| l.name() == "name" && l.value() == name)
                })
                .map(|m| {
                    if family.ends_with("_total") {
                        m.get_counter().get_value()
                    } else {
                        m.get_gauge().get_value()
                    }
                })
        })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_and_events() -> anyhow::Result<()> {
    let (cluster, ns) = common::bed("election-observe").await?;
    let name = format!("observe-{ns}"); // metric labels are process-wide: keep this one unique
    let registry = prometheus::Registry::new();
    let mut c =
        RustCandidate::spawn_with(&cluster, &ns, &name, "observed-1", FAST, |b| b.metrics(&registry)).await?;
    c.wait_leading(Duration::from_secs(5)).await?;
    assert_eq!(
        metric(&registry, "leader_election_master_status", &name),
        Some(1.0)
    );

    // Hammer the Lease with label edits so that some renewals conflict and take the slow path; the
    // leader keeps its term throughout.
    let client = common::client(&cluster, "editor").await?;
    let api: Api<Lease> = Api::namespaced(client.clone(), &ns);
    let guard = c.term().context("term")?.guard();
    let until = tokio::time::Instant::now() + Duration::from_secs(4);
    let mut i = 0u32;
    while tokio::time::Instant::now() < until {
        let mut lease = api.get(&name).await?;
        lease
            .metadata
            .labels
            .get_or_insert_default()
            .insert("edit".into(), i.to_string());
        let _ = api.replace(&name, &PostParams::default(), &lease).await;
        i += 1;
    }
    assert!(guard.is_valid(), "label edits must not end the term");
    let slow = metric(&registry, "leader_election_slowpath_total", &name).unwrap_or(0.0);
    assert!(
        slow >= 1.0,
        "no slow-path renewal counted after {i} concurrent edits"
    );

    c.stop().await?;
    assert_eq!(
        metric(&registry, "leader_election_master_status", &name),
        Some(0.0)
    );

    // Events on the Lease, as client-go posts them.
    let events: Api<Event> = Api::namespaced(client, &ns);
    let mut notes = Vec::new();
    for _ in 0..50 {
        notes = events
            .list(&Default::default())
            .await?
            .items
            .into_iter()
            .filter(|e| {
                e.regarding
                    .as_ref()
                    .is_some_and(|r| r.kind.as_deref() == Some("Lease") && r.name.as_deref() == Some(&name))
                    && e.reason.as_deref() == Some("LeaderElection")
                    && e.type_.as_deref() == Some("Normal")
            })
            .filter_map(|e| e.note)
            .collect::<Vec<_>>();
        if notes.len() >= 2 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(
        notes.contains(&"observed-1 became leader".to_string()),
        "{notes:?}"
    );
    assert!(
        notes.contains(&"observed-1 stopped leading".to_string()),
        "{notes:?}"
    );
    Ok(())
}

/// A leader that releases posts its `stopped leading` Event only once its successor holds the Lease, so
/// that the Event's request never competes with the successor's acquiring write.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_stopped_leading_event_waits_for_the_successor() -> anyhow::Result<()> {
    let (cluster, ns) = common::bed("election-successor").await?;
    let name = "handed-over";
    let mut first = RustCandidate::spawn(&cluster, &ns, name, "handing-1", FAST).await?;
    first.wait_leading(Duration::from_secs(5)).await?;
    let mut second = RustCandidate::spawn(&cluster, &ns, name, "handing-2", FAST).await?;
    tokio::time::timeout(
        Duration::from_secs(5),
        second.rx.wait_for(
            |l| matches!(l, election::Leadership::Following { leader: Some(h) } if h == "handing-1"),
        ),
    )
    .await
    .context("the second candidate did not see the first one leading")??;
    first.stop().await?;
    second.wait_leading(Duration::from_secs(5)).await?;

    // The stop returned after the Event was posted (or its request timed out): it is in the log now.
    let writes = common::lock_writes(&cluster, "leases", &ns, name)?;
    let released = writes
        .iter()
        .find(|w| w.lock_holder().as_deref() == Some(""))
        .context("handing-1 did not release the Lease")?;
    let acquired = writes
        .iter()
        .find(|w| w.lock_holder().as_deref() == Some("handing-2"))
        .context("no write of the Lease names handing-2")?;
    let posted: Vec<_> = cluster
        .audit()
        .read()?
        .events
        .into_iter()
        .filter(|e| {
            e.resource == "events"
                && e.namespace == ns
                && e.verb == "create"
                && e.user_agent.contains("(handing-1)")
        })
        .collect();
    // handing-1 posted `became leader` before and `stopped leading` after the handover.
    assert_eq!(posted.len(), 2, "handing-1's Events: {posted:?}");
    let last = posted
        .iter()
        .max_by_key(|e| e.received)
        .context("handing-1 posted no Event")?;
    // It waits for the successor for at most 250 ms after its release: a successor slower than that
    // (a loaded machine) does not fail the test, and is said.
    let bound = released.stage_time + jiff::SignedDuration::from_millis(250);
    assert!(
        last.received >= acquired.stage_time || last.received >= bound,
        "the stopped leading Event arrived at {}, before the successor's acquiring write was answered at {} \
         and less than 250 ms after the release was answered at {}",
        last.received,
        acquired.stage_time,
        released.stage_time
    );
    if last.received < acquired.stage_time {
        eprintln!(
            "the successor took the Lease more than 250 ms after the release; the Event did not wait longer"
        );
    }
    second.stop().await?;
    Ok(())
}
