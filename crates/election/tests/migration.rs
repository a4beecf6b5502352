//! Must show 5: migration from the seed's ConfigMap lock. ConfigMap-only holders, then MultiLock
//! (ConfigMap + Lease) holders, then Lease-only holders, replaced one at a time as a rolling update
//! would, with mutual exclusion at every step; and a legacy ConfigMap holder that never migrates.
//!
//! The protocol can exclude a ConfigMap-only candidate only from candidates that read the ConfigMap
//! (ConfigMap and MultiLock ones). A ConfigMap-only candidate and a Lease-only candidate share no object,
//! so the last step (Lease-only) is safe only once no ConfigMap-only candidate is left — as client-go's
//! migration guide says (k8s#107454). The legacy holder is therefore tested beside MultiLock holders.

mod common;

use std::time::Duration;

use anyhow::Context;
use common::{FAST, RustCandidate, assert_exclusive};
use election::LockKind;

const NAME: &str = "migrate";
const SETTLE: Duration = Duration::from_secs(15);

/// The set of candidates that ever ran, for the exclusivity check.
#[derive(Default)]
struct Pool {
    running: Vec<RustCandidate>,
    stopped: Vec<(String, Vec<(i64, i64)>)>,
}

impl Pool {
    fn check(&self) -> anyhow::Result<()> {
        let mut sets: Vec<(&str, Vec<(i64, i64)>)> = self
            .stopped
            .iter()
            .map(|(n, i)| (n.as_str(), i.clone()))
            .collect();
        for c in &self.running {
            sets.push((c.identity.as_str(), c.intervals()));
        }
        assert_exclusive(&sets)?;
        let leading = self.running.iter().filter(|c| c.is_leading()).count();
        anyhow::ensure!(leading <= 1, "{leading} candidates lead at once");
        Ok(())
    }

    async fn start(
        &mut self,
        cluster: &testenv::Cluster,
        ns: &str,
        id: &str,
        kind: LockKind,
    ) -> anyhow::Result<()> {
        self.running
            .push(RustCandidate::spawn_kind(cluster, ns, NAME, id, kind).await?);
        self.check()
    }

    async fn stop(&mut self, id: &str) -> anyhow::Result<()> {
        let i = self
            .running
            .iter()
            .position(|c| c.identity == id)
            .context("no such candidate")?;
        let mut c = self.running.remove(i);
        c.stop().await?;
        self.stopped.push((c.identity.clone(), c.intervals()));
        self.check()
    }

    async fn crash(&mut self, id: &str) -> anyhow::Result<()> {
        let i = self
            .running
            .iter()
            .position(|c| c.identity == id)
            .context("no such candidate")?;
        let mut c = self.running.remove(i);
        c.crash();
        tokio::time::sleep(Duration::from_millis(50)).await;
        self.stopped.push((c.identity.clone(), c.intervals()));
        self.check()
    }

    /// Waits until exactly one running candidate leads (checking exclusivity meanwhile).
    async fn leader(&self) -> anyhow::Result<String> {
        let deadline = tokio::time::Instant::now() + SETTLE;
        loop {
            self.check()?;
            if let Some(c) = self.running.iter().find(|c| c.is_leading()) {
                return Ok(c.identity.clone());
            }
            anyhow::ensure!(
                tokio::time::Instant::now() < deadline,
                "no leader within {SETTLE:?}"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Watches for `d`, checking exclusivity every 50 ms.
    async fn hold(&self, d: Duration) -> anyhow::Result<()> {
        let deadline = tokio::time::Instant::now() + d;
        while tokio::time::Instant::now() < deadline {
            self.check()?;
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        Ok(())
    }

    fn standby(&self, leader: &str) -> anyhow::Result<String> {
        self.running
            .iter()
            .find(|c| c.identity != leader)
            .map(|c| c.identity.clone())
            .context("no standby")
    }
}

fn cm_holder(cm: &Option<k8s_openapi::api::core::v1::ConfigMap>) -> Option<String> {
    let raw = cm
        .as_ref()?
        .metadata
        .annotations
        .as_ref()?
        .get("control-plane.alpha.kubernetes.io/leader")?;
    let v: serde_json::Value = serde_json::from_str(raw).ok()?;
    v.get("holderIdentity")
        .and_then(|h| h.as_str())
        .map(str::to_string)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn configmap_to_multilock_to_lease_rolling() -> anyhow::Result<()> {
    let (cluster, ns) = common::bed("election-migrate").await?;
    let client = common::client(&cluster, "observer").await?;
    let mut pool = Pool::default();

    // Step 1: the seed's ConfigMap-only replicas.
    pool.start(&cluster, &ns, "cm-1", LockKind::ConfigMap).await?;
    pool.start(&cluster, &ns, "cm-2", LockKind::ConfigMap).await?;
    let leader = pool.leader().await?;
    pool.hold(FAST.lease).await?;
    assert_eq!(
        cm_holder(&common::configmap(&client, &ns, NAME).await?).as_deref(),
        Some(leader.as_str())
    );
    assert!(
        common::lease(&client, &ns, NAME).await?.is_none(),
        "a ConfigMap lock must not create a Lease"
    );

    // Step 2: roll to MultiLock, standby first, the leader last.
    let standby = pool.standby(&leader)?;
    pool.stop(&standby).await?;
    pool.start(&cluster, &ns, "multi-1", LockKind::ConfigMapAndLease)
        .await?;
    pool.hold(FAST.lease).await?;
    assert_eq!(
        pool.leader().await?,
        leader,
        "a MultiLock standby must not take the ConfigMap holder's lock"
    );
    pool.stop(&leader).await?;
    let leader = pool.leader().await?;
    assert_eq!(leader, "multi-1");
    pool.start(&cluster, &ns, "multi-2", LockKind::ConfigMapAndLease)
        .await?;
    pool.hold(FAST.lease).await?;
    // A MultiLock leader holds both objects.
    assert_eq!(
        cm_holder(&common::configmap(&client, &ns, NAME).await?).as_deref(),
        Some("multi-1")
    );
    assert_eq!(common::holder(&client, &ns, NAME).await?, "multi-1");

    // Step 3: roll to Lease-only, standby first, the leader last; Lease-only standbys respect the
    // MultiLock leader through the Lease.
    pool.stop("multi-2").await?;
    pool.start(&cluster, &ns, "lease-1", LockKind::Lease).await?;
    pool.hold(FAST.lease).await?;
    assert_eq!(pool.leader().await?, "multi-1");
    // The MultiLock leader crashes: the Lease-only candidate waits out the lease, then takes it.
    pool.start(&cluster, &ns, "multi-3", LockKind::ConfigMapAndLease)
        .await?;
    pool.crash("multi-1").await?;
    let leader = pool.leader().await?;
    pool.hold(FAST.lease).await?;
    // Whoever won, the other one respects it: a Lease-only leader renews the Lease, which the MultiLock
    // standby watches; a MultiLock leader renews both.
    assert_eq!(pool.leader().await?, leader);
    pool.stop("multi-3").await?;
    pool.start(&cluster, &ns, "lease-2", LockKind::Lease).await?;
    if leader != "lease-1" {
        pool.stop(&leader).await?;
    }
    let last = pool.leader().await?;
    assert!(
        last.starts_with("lease-"),
        "a Lease-only candidate leads at the end, not {last}"
    );
    pool.hold(FAST.lease).await?;
    assert_eq!(common::holder(&client, &ns, NAME).await?, last);
    for mut c in std::mem::take(&mut pool.running) {
        c.stop().await?;
        pool.stopped.push((c.identity.clone(), c.intervals()));
    }
    pool.check()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn legacy_configmap_holder_that_never_migrates() -> anyhow::Result<()> {
    let (cluster, ns) = common::bed("election-legacy").await?;
    let client = common::client(&cluster, "observer").await?;
    let mut pool = Pool::default();

    // The legacy holder leads with the ConfigMap alone.
    pool.start(&cluster, &ns, "legacy", LockKind::ConfigMap).await?;
    assert_eq!(pool.leader().await?, "legacy");
    // MultiLock candidates see a ConfigMap holder and no Lease: they follow and create nothing.
    pool.start(&cluster, &ns, "multi-1", LockKind::ConfigMapAndLease)
        .await?;
    pool.start(&cluster, &ns, "multi-2", LockKind::ConfigMapAndLease)
        .await?;
    pool.hold(FAST.lease * 2).await?;
    assert_eq!(pool.leader().await?, "legacy");
    assert!(
        common::lease(&client, &ns, NAME).await?.is_none(),
        "MultiLock standbys must not create the Lease"
    );

    // The legacy holder dies without releasing; a MultiLock candidate takes both locks after expiry.
    pool.crash("legacy").await?;
    let leader = pool.leader().await?;
    assert!(leader.starts_with("multi-"));
    pool.hold(Duration::from_secs(1)).await?;
    assert_eq!(
        cm_holder(&common::configmap(&client, &ns, NAME).await?).as_deref(),
        Some(leader.as_str())
    );
    assert_eq!(common::holder(&client, &ns, NAME).await?, leader);

    // The legacy binary comes back, still ConfigMap-only: it follows the MultiLock leader.
    pool.start(&cluster, &ns, "legacy-again", LockKind::ConfigMap)
        .await?;
    pool.hold(FAST.lease * 2).await?;
    assert_eq!(pool.leader().await?, leader);

    // The MultiLock leader releases both objects; either the legacy or the other MultiLock candidate
    // takes over, and only one.
    pool.stop(&leader).await?;
    let next = pool.leader().await?;
    pool.hold(FAST.lease * 2).await?;
    assert_eq!(pool.leader().await?, next);
    for mut c in std::mem::take(&mut pool.running) {
        c.stop().await?;
        pool.stopped.push((c.identity.clone(), c.intervals()));
    }
    pool.check()
}
