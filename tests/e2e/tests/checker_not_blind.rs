//! The audit-log checker is not blind (issue 8, must-show 2).
//!
//! Two provider-nop processes reconcile the same NopResources against the real control plane. In the
//! broken run one of them runs with leader election off (no `--leader-election`), so it reconciles
//! without ever holding the Lease; the checker must report its writes as violations, each with its time,
//! user, object and the term holder of that moment. In the sound run both replicas are elected and the
//! leader is SIGKILLed half-way, so both of them write, each in its own term; the checker must report
//! nothing. Same setup, same filter: the checker tells the two apart.

mod common;

use std::time::Duration;

use anyhow::ensure;
use common::{NOP, Replica};
use e2e::checker::{self, Lock};
use jiff::Timestamp;

const LEASE: &str = "crossplane-leader-election-provider-nop";
const COUNT: usize = 8;

struct Run {
    ns: String,
    leader: String,
    other: String,
    lock_violations: Vec<checker::Violation>,
    write_violations: Vec<checker::Violation>,
    /// Controller writes checked, by the first leader and by the other replica.
    writes: (usize, usize),
    terms: Vec<checker::Term>,
}

/// Two provider-nop replicas on `COUNT` NopResources whose specs keep changing; the second one with
/// gating (leader election) on or off.
async fn run(name: &str, gated: bool) -> anyhow::Result<Run> {
    let cluster = testenv::support::cluster();
    let client = cluster.client().await?;
    testenv::support::install_crds(&client, &provider_nop::crds()).await?;
    let ns = cluster.namespace(name).await?;
    let started = Timestamp::now();

    let leader_id = format!("{ns}-a");
    let mut a = NOP.start(
        name,
        &leader_id,
        &NOP.replica_args(cluster.kubeconfig(), &ns, LEASE, true),
    )?;
    common::wait_holder(&client, &ns, LEASE, &leader_id, Duration::from_secs(20)).await?;
    let other_id = format!("{ns}-{}", if gated { "b" } else { "rogue" });
    let mut b = NOP.start(
        name,
        &other_id,
        &NOP.replica_args(cluster.kubeconfig(), &ns, LEASE, gated),
    )?;

    common::create_nops(&client, &ns, COUNT).await?;
    common::wait_all_ready(&client, &ns, COUNT, Duration::from_secs(60)).await?;
    for i in 0..COUNT {
        common::set_nop_value(&client, &ns, i, "v1").await?;
    }
    common::wait_secret_value(&client, &ns, COUNT - 1, "v1", Duration::from_secs(30)).await?;

    if gated {
        // A handover, so that both replicas write, each in its own term.
        a.process.kill();
        common::wait_holder(
            &client,
            &ns,
            LEASE,
            &other_id,
            common::LEASE + Duration::from_secs(10),
        )
        .await?;
    }
    for i in 0..COUNT {
        common::set_nop_value(&client, &ns, i, "v2").await?;
    }
    for i in 0..COUNT {
        common::wait_secret_value(&client, &ns, i, "v2", Duration::from_secs(30)).await?;
    }
    let events = common::audit_now(&cluster).await?;
    for r in [&a, &b] {
        r.assert_no_panic()?;
    }
    stop(&mut b);
    stop(&mut a);

    let events: Vec<_> = events.into_iter().filter(|e| e.received >= started).collect();
    let lock = Lock::lease(&ns, LEASE);
    let is_write = common::nop_controller_write(&ns, LEASE);
    let by = |id: &str| {
        events
            .iter()
            .filter(|e| e.is_write() && is_write(e) && e.agent_identity() == Some(id))
            .count()
    };
    Ok(Run {
        writes: (by(&leader_id), by(&other_id)),
        lock_violations: checker::check_lock(&events, &lock),
        write_violations: checker::check_writes(&events, &lock, &is_write),
        terms: checker::terms(&events, &lock),
        ns,
        leader: leader_id,
        other: other_id,
    })
}

fn stop(r: &mut Replica) {
    r.process.kill();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_without_gating_is_caught() -> anyhow::Result<()> {
    let run = run("checker-rogue", false).await?;
    let v = &run.write_violations;
    println!(
        "rogue run: {} violations; writes by the leader {}, by the rogue {}",
        v.len(),
        run.writes.0,
        run.writes.1
    );
    for violation in v.iter().take(5) {
        println!("  {violation}");
    }
    ensure!(run.writes.1 > 0, "the rogue replica wrote nothing");
    ensure!(
        v.len() == run.writes.1,
        "every write of the rogue is a violation: {} of {}",
        v.len(),
        run.writes.1
    );
    for violation in v {
        ensure!(violation.identity == run.other, "not the rogue: {violation}");
        ensure!(!violation.user.is_empty(), "no user: {violation}");
        ensure!(
            violation.object.starts_with("nopresources ")
                || violation.object.starts_with(&format!("secrets {}/", run.ns))
                || violation.object.starts_with(&format!("events {}/", run.ns)),
            "unexpected object: {violation}"
        );
        ensure!(
            violation.holder.as_deref() == Some(run.leader.as_str()),
            "the term holder must be the leader {}: {violation}",
            run.leader
        );
        ensure!(violation.reason.contains("outside any term"), "{violation}");
    }
    ensure!(
        run.lock_violations.is_empty(),
        "the Lease itself was used correctly: {:?}",
        run.lock_violations
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_gating_on_the_same_setup_has_no_violation() -> anyhow::Result<()> {
    let run = run("checker-gated", true).await?;
    println!(
        "gated run: {} terms, writes by the first leader {}, by the second {}; {} violations",
        run.terms.len(),
        run.writes.0,
        run.writes.1,
        run.write_violations.len()
    );
    ensure!(
        run.writes.0 > 0 && run.writes.1 > 0,
        "both replicas must have written, each in its term: {:?}",
        run.writes
    );
    ensure!(run.terms.len() >= 2, "a handover: {:?}", run.terms);
    ensure!(
        run.write_violations.is_empty() && run.lock_violations.is_empty(),
        "violations with gating on: {:#?} {:#?}",
        run.write_violations,
        run.lock_violations
    );
    Ok(())
}
