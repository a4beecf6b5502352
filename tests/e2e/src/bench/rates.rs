//! API requests per minute and idle RSS of a leader and a standby, counted in the audit log.

use std::{
    collections::{BTreeMap, HashMap},
    time::Duration,
};

use jiff::Timestamp;
use testenv::Cluster;

use super::candidate::{Cand, Env};
use super::plan::{CROSSPLANE, DEFAULTS, Imp};
use super::stats::per_min;

/// Requests of one identity in a window, from the audit log.
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct Counts {
    pub(super) reads: usize,
    pub(super) writes: usize,
    /// Of the reads, watches opened (a standby's watch is renewed when the apiserver ends it, after
    /// kube's `timeoutSeconds` of about 290 s): counted apart so a window shows how many it caught.
    pub(super) watches: usize,
}

/// Counts each request once (by audit ID, at its first stage) by the identity of its user agent.
pub(super) fn count_requests(
    cluster: &Cluster,
    from: Timestamp,
    to: Timestamp,
) -> anyhow::Result<HashMap<String, Counts>> {
    let events = cluster.audit().read_all_stages()?.events;
    let mut seen = std::collections::HashSet::new();
    let mut out: HashMap<String, Counts> = HashMap::new();
    for e in events {
        if e.received < from || e.received >= to || !seen.insert(e.audit_id.clone()) {
            continue;
        }
        let Some(id) = e.agent_identity() else { continue };
        let c = out.entry(id.to_string()).or_default();
        if e.is_write() {
            c.writes += 1;
        } else {
            c.reads += 1;
            if e.verb == "watch" {
                c.watches += 1;
            }
        }
    }
    Ok(out)
}

/// Steady-state figures of one pair.
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct PairRates {
    pub(super) leader_writes: f64,
    pub(super) leader_reads: f64,
    pub(super) standby: f64,
    /// Watches the standby opened in the window (not per minute: a count).
    pub(super) standby_watches: usize,
    pub(super) leader_rss: u64,
    pub(super) standby_rss: u64,
}

/// A leader and a standby of each kind at each timing, all at once, counted over `window`.
pub(super) async fn rates(env: &Env, window: Duration) -> anyhow::Result<BTreeMap<(Imp, u64), PairRates>> {
    let mut pairs = Vec::new();
    for imp in [Imp::Rust, Imp::Go] {
        for t in [DEFAULTS, CROSSPLANE] {
            let ns = env
                .cluster
                .namespace(&format!("bench-{}-rate-{}", imp.short(), t.tag()))
                .await?;
            let row = |s: &str| format!("{} idle {} {s}", imp.name(), t.label());
            let a = Cand::spawn(
                env,
                imp,
                &ns,
                "bench",
                &format!("{}-rate-{}-leader", imp.short(), t.tag()),
                &row("leader"),
                t,
            )?;
            a.wait_leading(Duration::from_secs(30)).await?;
            let b = Cand::spawn(
                env,
                imp,
                &ns,
                "bench",
                &format!("{}-rate-{}-standby", imp.short(), t.tag()),
                &row("standby"),
                t,
            )?;
            pairs.push((imp, t, a, b));
        }
    }
    for (_, _, a, b) in &pairs {
        b.settle(&a.identity).await;
    }
    // Let start-up traffic (the standby's first list and watch) pass.
    tokio::time::sleep(Duration::from_secs(5)).await;
    let from = Timestamp::now();
    eprintln!("[bench] counting requests of 4 pairs for {window:?}");
    tokio::time::sleep(window / 2).await;
    let mut rss: Vec<(u64, u64)> = Vec::new();
    for (_, _, a, b) in &pairs {
        rss.push((a.rss_kib()?, b.rss_kib()?));
    }
    tokio::time::sleep(window / 2).await;
    let to = Timestamp::now();
    let mut ids = Vec::new();
    for (imp, t, a, b) in pairs {
        ids.push((imp, t, a.identity.clone(), b.identity.clone()));
        env.retire(a, false).await;
        env.retire(b, false).await;
    }
    tokio::time::sleep(Duration::from_secs(2)).await;
    let counts = count_requests(&env.cluster, from, to)?;
    let mut out = BTreeMap::new();
    for ((imp, t, a, b), (ra, rb)) in ids.into_iter().zip(rss) {
        let ca = counts.get(&a).copied().unwrap_or_default();
        let cb = counts.get(&b).copied().unwrap_or_default();
        out.insert(
            (imp, t.tag()),
            PairRates {
                leader_writes: per_min(ca.writes, window),
                leader_reads: per_min(ca.reads, window),
                standby: per_min(cb.reads + cb.writes, window),
                standby_watches: cb.watches,
                leader_rss: ra,
                standby_rss: rb,
            },
        );
    }
    Ok(out)
}
