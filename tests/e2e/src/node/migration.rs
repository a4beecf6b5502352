//! A live migration between implementations on one Lease (issue 24, item 4): provider-nop's Deployment
//! switches its image from ours (Rust) to the crossplane-runtime peer (`tests/peers/provider-nop-go`, Go,
//! controller-runtime's leader election at its defaults), then back to ours, then to the peer again,
//! while its NopResources keep changing. Only the image changes, as a user switching images would do:
//! the same Deployment, ServiceAccount, fence, env (`POD_NAME`, `LEADER_ELECTION`) and ports.
//!
//! The audit log then proves one writer per term across implementations (the fault schedule's checker:
//! no two holders at once, no write outside its writer's term), names the implementation that acted in
//! each term (the product in its writes' user agents), and gives each switch's longest time with no
//! leader. At the end every NopResource is Ready and Synced at its last generation.

use std::{
    path::{Path, PathBuf},
    time::{Duration, Instant},
};

use anyhow::{Context, ensure};
use flate2::Compression;
use jiff::Timestamp;
use k8s_openapi::api::{apps::v1::Deployment, core::v1::Pod};
use kube::{
    Api,
    api::{ListParams, Patch, PatchParams, PostParams},
};
use serde_json::json;
use testenv::workload;

use crate::checker::{self, Lock};
use release::{image, target_dir};

use super::{NAMESPACE, READY_TIMEOUT};

/// The Deployment switched.
const APP: &str = "provider-nop";
/// The peer's image name.
pub const PEER_IMAGE: &str = "provider-nop-go";
/// The peer's product in its user agent (`provider-nop-go/<version> (<identity>)`).
const PEER_AGENT: &str = "provider-nop-go";
/// Ours (`provider-nop/<version> (<identity>)`).
const OUR_AGENT: &str = "provider-nop";
const NOPS: usize = 8;
/// How often a NopResource changes while the switches run.
const CHANGE_EVERY: Duration = Duration::from_millis(250);

/// Builds provider-nop-go (cached with the other Go peers) and packs it as `<out>/provider-nop-go.oci.tar`.
pub fn build_peer_image(out: &Path) -> anyhow::Result<PathBuf> {
    let binary = testenv::peers::ensure_provider_nop(&target_dir(), |line| eprintln!("[peers] {line}"))
        .context("building provider-nop-go (Go, crossplane-runtime)")?;
    let archive = out.join(format!("{PEER_IMAGE}.oci.tar"));
    image::pack_static(
        PEER_IMAGE,
        "crossplane-rs's Go peer of provider-nop, on crossplane-runtime (tests/peers/provider-nop-go), static",
        &binary,
        &archive,
        Compression::new(1),
    )?;
    Ok(archive)
}

/// The reference the peer's image is imported under.
pub fn peer_reference() -> String {
    release::registry::Registry::default().full_reference(PEER_IMAGE, image::TAG)
}

/// Which implementation a user agent's product names.
fn implementation(product: &str) -> &'static str {
    match product {
        PEER_AGENT => "Go",
        OUR_AGENT => "Rust",
        _ => "other",
    }
}

/// One switch of the Deployment's image.
pub struct Switch {
    /// The implementation switched to.
    pub to: &'static str,
    /// From the patch until 2 Ready Pods of the new image, one holding the Lease.
    pub seconds: f64,
    /// The longest time with no valid Lease during the switch (audit log), in ms: from a term's end (its
    /// release, or its expiry) to the next term's start.
    pub no_leader_ms: f64,
    /// The longest time with nobody acting during the switch, in ms: from the old leader's last request
    /// to the apiserver to the next term's start. A leader that exits without releasing leaves its Lease
    /// valid until it expires: this time includes that wait, [`Switch::no_leader_ms`] does not.
    pub nobody_acting_ms: f64,
}

/// What the migration showed.
pub struct Migration {
    /// The switches, in order.
    pub switches: Vec<Switch>,
    /// How many changes were made to the NopResources while the switches ran.
    pub changes: u64,
    /// NopResources Ready and Synced at their last generation at the end, of [`NOPS`].
    pub ready: usize,
    /// How many NopResources changed.
    pub nops: usize,
    /// provider-nop's writes (all but Leases and Events) from the first switch on.
    pub writes: usize,
    /// How many of them the Go peer made.
    pub writes_go: usize,
    /// How many of them ours made.
    pub writes_rust: usize,
    /// What the checker found (two holders at once, writes outside their writer's term).
    pub violations: Vec<String>,
    /// Writes judged inside their term that arrived while another writer's Lease write was in flight.
    pub during_foreign_lock_write: usize,
    /// Each term from the first switch on: its holder's Pod and the implementations that wrote in it.
    pub terms: Vec<(String, String)>,
}

async fn set_image(client: &kube::Client, reference: &str) -> anyhow::Result<()> {
    let patch = json!({"spec": {"template": {"spec": {"containers": [{"name": APP, "image": reference}]}}}});
    Api::<Deployment>::namespaced(client.clone(), NAMESPACE)
        .patch(APP, &PatchParams::default(), &Patch::Strategic(&patch))
        .await
        .with_context(|| format!("setting {APP}'s image to {reference}"))?;
    Ok(())
}

/// Whether provider-nop runs 2 Ready Pods of `reference` and nothing else, one of them holding `lease`.
async fn switched(client: &kube::Client, lease: &str, reference: &str) -> anyhow::Result<bool> {
    let pods = Api::<Pod>::namespaced(client.clone(), NAMESPACE)
        .list(&ListParams::default().labels(&format!("app.kubernetes.io/name={APP}")))
        .await?
        .items;
    let all_new = pods.len() == 2
        && pods.iter().all(|p| {
            workload::is_ready(p)
                && p.spec
                    .as_ref()
                    .is_some_and(|s| s.containers[0].image.as_deref() == Some(reference))
        });
    let holder = workload::lease_holders(client, NAMESPACE)
        .await?
        .get(lease)
        .cloned()
        .unwrap_or_default();
    Ok(all_new
        && pods
            .iter()
            .any(|p| workload::name(p) == workload::holder_pod(&holder)))
}

/// Runs the migration on provider-nop's Deployment, whose replicas stand for `lease`. The peer's image
/// ([`peer_reference`]) must be on the node.
pub async fn run(
    client: &kube::Client,
    cluster: &testenv::Cluster,
    lease: &str,
) -> anyhow::Result<Migration> {
    let deployments = Api::<Deployment>::namespaced(client.clone(), NAMESPACE);
    let ours = deployments
        .get(APP)
        .await?
        .spec
        .and_then(|s| s.template.spec)
        .and_then(|s| s.containers.into_iter().next())
        .and_then(|c| c.image)
        .with_context(|| format!("{APP}'s Deployment names no image"))?;
    let peer = peer_reference();
    let nops = workload::nop_api(client);
    for i in 0..NOPS {
        nops.create(
            &PostParams::default(),
            &workload::ready_nop(&format!("migrate-{i}")),
        )
        .await?;
    }
    crate::churn::wait_settled(workload::nop_api(client), "migrate", NOPS, READY_TIMEOUT).await?;
    eprintln!("[node] {NOPS} NopResources Ready; switching {APP} Rust -> Go -> Rust -> Go while they change");

    let churn = crate::churn::Churn::start(nops.clone(), "migrate", NOPS, CHANGE_EVERY);
    let started_at = Timestamp::now();
    let mut windows = Vec::new();
    let outcome = async {
        for (to, reference) in [("Go", &peer), ("Rust", &ours), ("Go", &peer)] {
            let from = Timestamp::now();
            let started = Instant::now();
            set_image(client, reference).await?;
            while !switched(client, lease, reference).await? {
                ensure!(
                    started.elapsed() < READY_TIMEOUT,
                    "{APP} did not switch to {reference} (2 Ready Pods, one holding {lease}) within {}s",
                    READY_TIMEOUT.as_secs()
                );
                tokio::time::sleep(Duration::from_millis(250)).await;
            }
            let seconds = started.elapsed().as_secs_f64();
            eprintln!("[node] {APP} switched to {to} ({reference}) in {seconds:.1}s");
            windows.push((to, seconds, from, Timestamp::now()));
        }
        anyhow::Ok(())
    }
    .await;
    let changes = churn.stop().await?;
    outcome?;
    let ready = crate::churn::wait_settled(workload::nop_api(client), "migrate", NOPS, READY_TIMEOUT).await?;

    let events: Vec<testenv::AuditEvent> = cluster
        .audit()
        .read()?
        .events
        .into_iter()
        .filter(|e| e.resource == "leases" || e.received >= started_at)
        .collect();
    let lock = Lock::lease(NAMESPACE, lease);
    let user = format!("system:serviceaccount:{NAMESPACE}:{APP}");
    let is_write = |e: &testenv::AuditEvent| {
        e.user == user && e.resource != "leases" && e.resource != "events" && e.received >= started_at
    };
    let written: Vec<&testenv::AuditEvent> = events.iter().filter(|e| e.is_write() && is_write(e)).collect();
    let product = |e: &testenv::AuditEvent| e.user_agent.split('/').next().unwrap_or_default().to_owned();
    let writes_go = written.iter().filter(|e| product(e) == PEER_AGENT).count();
    let writes_rust = written.iter().filter(|e| product(e) == OUR_AGENT).count();
    let judged = super::judge(&events, &lock, started_at, is_write);
    let all_terms = checker::terms(&events, &lock);
    let terms = all_terms
        .iter()
        .filter(|t| t.valid_until() >= started_at)
        .map(|t| {
            // Every write of the holder in its term, Lease writes too, so that a term with no other
            // write still names its implementation.
            let mut acted: Vec<&str> = events
                .iter()
                .filter(|e| e.is_write() && e.agent_identity() == Some(t.holder.as_str()))
                .filter(|e| t.covers(e.received, e.stage_time))
                .map(|e| implementation(&product(e)))
                .collect();
            acted.sort_unstable();
            acted.dedup();
            (workload::holder_pod(&t.holder).to_owned(), acted.join(","))
        })
        .collect();
    let switches = windows
        .into_iter()
        .map(|(to, seconds, from, until)| Switch {
            to,
            seconds,
            no_leader_ms: crate::packages::longest_gap(&all_terms, from, until).0,
            nobody_acting_ms: nobody_acting(&events, &all_terms, from, until),
        })
        .collect();
    Ok(Migration {
        switches,
        changes,
        ready,
        nops: NOPS,
        writes: written.len(),
        writes_go,
        writes_rust,
        violations: judged.violations,
        during_foreign_lock_write: judged.during_foreign_lock_write,
        terms,
    })
}

/// The longest time in `[start, end]` from a leader's last request (of any kind, by the identity in its
/// user agent) to the next term's start, in ms.
fn nobody_acting(
    events: &[testenv::AuditEvent],
    terms: &[checker::Term],
    start: Timestamp,
    end: Timestamp,
) -> f64 {
    let mut longest = 0.0f64;
    for pair in terms.windows(2) {
        let (prev, next) = (&pair[0], &pair[1]);
        if next.start < start || next.start > end {
            continue;
        }
        let last = events
            .iter()
            .filter(|e| e.agent_identity() == Some(prev.holder.as_str()) && e.received <= next.start)
            .map(|e| e.received)
            .max()
            .unwrap_or(prev.last_renew);
        let gap = next.start.duration_since(last).as_secs_f64() * 1000.0;
        longest = longest.max(gap.max(0.0));
    }
    longest
}

impl Migration {
    /// One line for a log.
    pub fn summary(&self) -> String {
        let switches = self
            .switches
            .iter()
            .map(|s| {
                format!(
                    "to {} in {:.1} s (no valid Lease {:.0} ms, nobody acting {:.0} ms)",
                    s.to, s.seconds, s.no_leader_ms, s.nobody_acting_ms
                )
            })
            .collect::<Vec<_>>()
            .join(", ");
        format!(
            "live migration: {switches}; {} changes; {} writes checked ({} by Go, {} by Rust), {} violations, {} \
             during another writer's Lease write; implementation per term: {}; {} of {} NopResources Ready at their last generation",
            self.changes,
            self.writes,
            self.writes_go,
            self.writes_rust,
            self.violations.len(),
            self.during_foreign_lock_write,
            self.terms
                .iter()
                .map(|(_, i)| if i.is_empty() { "no write" } else { i.as_str() })
                .collect::<Vec<_>>()
                .join(" → "),
            self.ready,
            self.nops
        )
    }

    /// docs/node.md's section.
    pub fn section(&self) -> Vec<String> {
        let mut out = vec![
            "## Live migration between Go and Rust on one Lease".to_string(),
            String::new(),
            format!(
                "provider-nop's Deployment switched its image from ours (Rust) to `{PEER_IMAGE}` (our \
                 NopResource provider in Go on crossplane-runtime's managed reconciler, with \
                 controller-runtime's leader election at its defaults: 15 s / 10 s / 2 s, no release on \
                 shutdown), back to ours, and to the peer again, while {} NopResources kept changing ({} \
                 changes, one every {} ms). Only the image changed: the same Deployment, ServiceAccount, \
                 fence, env and Lease. Each switch lasted until 2 Ready Pods of the new image ran, one \
                 holding the Lease. From the audit log, per switch: the longest time with no valid Lease (a \
                 term's end, by release or expiry, to the next term's start) and the longest time with nobody \
                 acting (the old leader's last request of any kind to the next term's start).",
                self.nops,
                self.changes,
                CHANGE_EVERY.as_millis()
            ),
            String::new(),
            "| Switch to | Took | Longest time with no valid Lease | Longest time with nobody acting |"
                .to_string(),
            "|---|---:|---:|---:|".to_string(),
        ];
        for s in &self.switches {
            out.push(format!(
                "| {} | {:.1} s | {:.0} ms | {:.0} ms |",
                s.to, s.seconds, s.no_leader_ms, s.nobody_acting_ms
            ));
        }
        out.push(String::new());
        out.push(format!(
            "Going to Go, our leader releases the Lease on its Pod's deletion and a Go standby takes it at \
             its next 2 s retry. Going to Rust, the Go leader exits without releasing (controller-runtime's \
             `LeaderElectionReleaseOnCancel` is off by default), so our standby waits out the Lease's 15 s. \
             The audit log checked {} writes of provider-nop ({} by Go, {} by Rust) from the first switch \
             on: **{} violations** (two holders at once, a write outside its writer's term); {} of them \
             arrived while another writer's Lease write (a takeover, or a release by a writer whose term \
             had ended) was in flight, which the checker counts inside the writer's term \
             until that write was answered. At the end {} of {} NopResources were Ready and Synced at their \
             last generation.",
            self.writes,
            self.writes_go,
            self.writes_rust,
            self.violations.len(),
            self.during_foreign_lock_write,
            self.ready,
            self.nops
        ));
        out.push(String::new());
        out.push(format!(
            "Implementation that acted in each term, in order: {}.",
            self.terms
                .iter()
                .map(|(pod, i)| format!("{} ({pod})", if i.is_empty() { "no write" } else { i }))
                .collect::<Vec<_>>()
                .join(" → ")
        ));
        for v in &self.violations {
            out.push(String::new());
            out.push(format!("Violation: {v}"));
        }
        out
    }

    /// Fails unless the migration was safe and complete: no violation, one implementation per term,
    /// both implementations wrote, the last term the peer's, every NopResource converged.
    pub fn check(&self) -> anyhow::Result<()> {
        ensure!(self.violations.is_empty(), "violations: {:#?}", self.violations);
        ensure!(
            self.terms.iter().all(|(_, i)| !i.contains(',')),
            "a term with two implementations: {:?}",
            self.terms
        );
        ensure!(
            self.writes_go > 0 && self.writes_rust > 0,
            "the migration checked {} writes by Go and {} by Rust: both must have acted",
            self.writes_go,
            self.writes_rust
        );
        ensure!(
            self.terms.last().is_some_and(|(_, i)| i == "Go"),
            "the last term is not the Go peer's: {:?}",
            self.terms
        );
        ensure!(
            self.ready == self.nops,
            "{} of {} NopResources converged",
            self.ready,
            self.nops
        );
        Ok(())
    }
}
