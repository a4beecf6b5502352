//! The audit-log checker is not blind (issue 8, must-show 2; issue 15).
//!
//! Two provider-nop processes reconcile the same NopResources against the real control plane, each with
//! a ServiceAccount token bound to a pod of its own (as the fault schedule's replicas have), so the
//! apiserver authenticates every write as coming from one pod. Three runs, same setup, same filter:
//!
//! - **rogue**: the second replica runs with leader election off (the guard off), so it reconciles
//!   without ever holding the Lease. The checker reports every write of it as outside any of its terms,
//!   each with its time, user, object, term holder and HTTP answer; those the apiserver admitted are
//!   what the fault schedule counts as violations.
//! - **impersonator**: the second replica runs with the guard off *and* claims the leader's identity in
//!   its user agent. Attributed by user agent its writes would look like the leader's, inside the
//!   leader's term; attributed by the pod its token is bound to, every one is caught, and the
//!   attribution check flags each for a user agent without its pod's identity.
//! - **gated**: both replicas are elected and the leader is SIGKILLed half-way, so both write, each in
//!   its own term; the checker reports nothing.

mod common;

use std::time::Duration;

use anyhow::ensure;
use common::{Replica, nop};
use e2e::checker::{self, Lock, writer};
use jiff::Timestamp;
use k8s_openapi::api::rbac::v1::ClusterRoleBinding;
use kube::Api;
use kube::api::PostParams;
use serde_json::json;

const LEASE: &str = "crossplane-leader-election-provider-nop";
const COUNT: usize = 8;
/// The replicas' ServiceAccount in the test's namespace.
const SA: &str = "provider-nop";

#[derive(Clone, Copy, PartialEq)]
enum Mode {
    Gated,
    Rogue,
    Impersonator,
}

struct Run {
    ns: String,
    leader: String,
    other: String,
    lock_violations: Vec<checker::Violation>,
    /// Every write outside its writer's terms, attributed by pod, whatever the answer.
    write_violations: Vec<checker::Violation>,
    /// The same, attributed by user agent only (the pod names removed from the events).
    by_user_agent: Vec<checker::Violation>,
    /// Writes of the ServiceAccount checked for their user agent, and those that failed.
    attribution: (usize, Vec<checker::Violation>),
    /// Controller writes checked, by the first leader and by the other replica (attributed by pod).
    writes: (usize, usize),
    /// Of the other replica's controller writes, those the apiserver admitted.
    other_admitted: usize,
    terms: Vec<checker::Term>,
}

/// Lets every ServiceAccount of `ns` do anything: the Lease decides, not RBAC.
async fn grant(client: &kube::Client, ns: &str) -> anyhow::Result<()> {
    let crb: ClusterRoleBinding = serde_json::from_value(json!({
        "metadata": { "name": format!("e2e-checker-{ns}") },
        "roleRef": { "apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "cluster-admin" },
        "subjects": [{ "kind": "Group", "apiGroup": "rbac.authorization.k8s.io", "name": format!("system:serviceaccounts:{ns}") }],
    }))?;
    Api::<ClusterRoleBinding>::all(client.clone())
        .create(&PostParams::default(), &crb)
        .await?;
    Ok(())
}

/// Two provider-nop replicas on `COUNT` NopResources whose specs keep changing; the second one as
/// `mode` says.
async fn run(name: &str, mode: Mode) -> anyhow::Result<Run> {
    let cluster = testenv::support::cluster();
    let client = cluster.client().await?;
    testenv::support::install_crds(&client, &provider_nop::crds()).await?;
    let ns = cluster.namespace(name).await?;
    grant(&client, &ns).await?;
    let started = Timestamp::now();

    let leader_id = format!("{ns}-a");
    let leader_kubeconfig = cluster.pod_kubeconfig(&ns, SA, &leader_id).await?;
    let mut a = nop().start(
        name,
        &leader_id,
        &nop().replica_args(&leader_kubeconfig, &ns, LEASE, true),
    )?;
    common::wait_holder(&client, &ns, LEASE, &leader_id, Duration::from_secs(20)).await?;
    let other_id = format!(
        "{ns}-{}",
        match mode {
            Mode::Gated => "b",
            Mode::Rogue => "rogue",
            Mode::Impersonator => "impostor",
        }
    );
    let other_kubeconfig = cluster.pod_kubeconfig(&ns, SA, &other_id).await?;
    let mut other_args = nop().replica_args(&other_kubeconfig, &ns, LEASE, mode == Mode::Gated);
    if mode == Mode::Impersonator {
        other_args.extend(["--leader-election-identity".to_owned(), leader_id.clone()]);
    }
    let mut b = nop().start(name, &other_id, &other_args)?;

    common::create_nops(&client, &ns, COUNT).await?;
    common::wait_all_ready(&client, &ns, COUNT, Duration::from_secs(60)).await?;
    for i in 0..COUNT {
        common::set_nop_value(&client, &ns, i, "v1").await?;
    }
    common::wait_secret_value(&client, &ns, COUNT - 1, "v1", Duration::from_secs(30)).await?;

    if mode == Mode::Gated {
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
            .filter(|e| e.is_write() && is_write(e) && writer(e) == id)
            .count()
    };
    let other_admitted = events
        .iter()
        .filter(|e| e.is_write() && is_write(e) && writer(e) == other_id && (200..300).contains(&e.code))
        .count();
    let user = format!("system:serviceaccount:{ns}:{SA}");
    let anonymous: Vec<_> = events
        .iter()
        .cloned()
        .map(|mut e| {
            e.pod_name = None;
            e
        })
        .collect();
    Ok(Run {
        writes: (by(&leader_id), by(&other_id)),
        other_admitted,
        lock_violations: checker::check_lock(&events, &lock),
        write_violations: checker::check_writes(&events, &lock, &is_write),
        by_user_agent: checker::check_writes(&anonymous, &lock, &is_write),
        attribution: checker::check_attribution(&events, |e| e.user == user),
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
    let run = run("checker-rogue", Mode::Rogue).await?;
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
    let admitted = v.iter().filter(|v| v.may_have_taken_effect()).count();
    println!(
        "  {admitted} of them admitted by the apiserver (the violations under issue 15's rules), {} refused",
        v.len() - admitted
    );
    ensure!(
        admitted > 0 && admitted >= run.other_admitted,
        "every admitted write of the rogue is a violation: {admitted} of {}",
        run.other_admitted
    );
    ensure!(
        run.attribution.0 > 0 && run.attribution.1.is_empty(),
        "the rogue's user agent names its own pod: {:?}",
        run.attribution
    );
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
    let run = run("checker-gated", Mode::Gated).await?;
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
        run.attribution.0 >= run.writes.0 + run.writes.1 && run.attribution.1.is_empty(),
        "every write carries its pod's identity: {} checked, {:#?}",
        run.attribution.0,
        run.attribution.1
    );
    ensure!(
        run.write_violations.is_empty() && run.lock_violations.is_empty(),
        "violations with gating on: {:#?} {:#?}",
        run.write_violations,
        run.lock_violations
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_impostor_claiming_the_leaders_identity_is_caught_by_its_token() -> anyhow::Result<()> {
    let run = run("checker-impostor", Mode::Impersonator).await?;
    let caught: Vec<_> = run
        .write_violations
        .iter()
        .filter(|v| v.identity == run.other)
        .collect();
    println!(
        "impostor run: {} controller writes by the impostor's pod ({} admitted); {} found outside its terms \
         attributed by pod, {} attributed by user agent (the writes look like {}'s); {} of {} \
         ServiceAccount writes lack their pod's identity",
        run.writes.1,
        run.other_admitted,
        caught.len(),
        run.by_user_agent.len(),
        run.leader,
        run.attribution.1.len(),
        run.attribution.0
    );
    for v in run.attribution.1.iter().take(3) {
        println!("  {v}");
    }
    ensure!(run.writes.1 > 0, "the impostor wrote nothing");
    ensure!(
        caught.len() == run.writes.1,
        "attributed by its token, every write of the impostor is outside its terms: {} of {}",
        caught.len(),
        run.writes.1
    );
    ensure!(
        run.by_user_agent.len() < caught.len(),
        "by user agent the impostor's writes look like {}'s, inside its term: {} found that way, {} by pod",
        run.leader,
        run.by_user_agent.len(),
        caught.len()
    );
    ensure!(
        run.attribution.1.len() >= run.writes.1
            && run
                .attribution
                .1
                .iter()
                .all(|v| v.identity == run.other && v.reason.contains("lacks the identity of the pod")),
        "every write of the impostor's pod is flagged for its user agent: {:#?}",
        run.attribution.1
    );
    ensure!(run.lock_violations.is_empty(), "{:?}", run.lock_violations);
    Ok(())
}
