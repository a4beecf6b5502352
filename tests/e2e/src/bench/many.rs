//! N candidates on one Lease: their requests per minute, RSS and handovers.

use std::{
    collections::BTreeMap,
    time::{Duration, Instant},
};

use anyhow::{Context, bail};
use jiff::Timestamp;
use nix::sys::signal::Signal;
use testenv::{CandidateEvent, monotonic_ns as mono};

use super::candidate::{Cand, Env};
use super::plan::{DEFAULTS, Imp};
use super::rates::count_requests;
use super::stats::per_min;

/// N candidates on one Lease.
#[derive(Clone, Debug, Default)]
pub(super) struct ManyResult {
    pub(super) total_per_min: f64,
    pub(super) per_standby_per_min: f64,
    pub(super) handovers: Vec<f64>,
    pub(super) mean_rss: u64,
}

pub(super) async fn many(
    env: &Env,
    n: usize,
    window: Duration,
    handovers: usize,
) -> anyhow::Result<BTreeMap<Imp, ManyResult>> {
    let t = DEFAULTS;
    let mut groups = Vec::new();
    for imp in [Imp::Rust, Imp::Go] {
        let ns = env
            .cluster
            .namespace(&format!("bench-{}-many", imp.short()))
            .await?;
        let mut cands = Vec::new();
        for i in 0..n {
            let row = format!("{} {n} candidates", imp.name());
            cands.push(Cand::spawn(
                env,
                imp,
                &ns,
                "bench",
                &format!("{}-many-{i:02}", imp.short()),
                &row,
                t,
            )?);
        }
        groups.push((imp, cands));
    }
    for (imp, cands) in &groups {
        wait_any_leading(cands, 0, Duration::from_secs(60))
            .await
            .with_context(|| format!("{} candidates: no leader", imp.name()))?;
    }
    tokio::time::sleep(Duration::from_secs(8)).await;
    eprintln!("[bench] counting requests of 2×{n} candidates for {window:?}");
    let from = Timestamp::now();
    tokio::time::sleep(window / 2).await;
    let mut rss: Vec<u64> = Vec::new();
    for (_, c) in &groups {
        let mut sum = 0;
        for cand in c {
            sum += cand.rss_kib()?;
        }
        rss.push(sum / c.len().max(1) as u64);
    }
    tokio::time::sleep(window / 2).await;
    let to = Timestamp::now();
    tokio::time::sleep(Duration::from_secs(1)).await;
    let counts = count_requests(&env.cluster, from, to)?;
    let mut out = BTreeMap::new();
    for ((imp, mut cands), rss) in groups.into_iter().zip(rss) {
        let leader = cands
            .iter()
            .position(is_leading)
            .context("no leader among the candidates")?;
        let total: usize = cands
            .iter()
            .map(|c| counts.get(&c.identity).map(|c| c.reads + c.writes).unwrap_or(0))
            .sum();
        let standbys: usize = cands
            .iter()
            .enumerate()
            .filter(|(i, _)| *i != leader)
            .map(|(_, c)| counts.get(&c.identity).map(|c| c.reads + c.writes).unwrap_or(0))
            .sum();
        let mut res = ManyResult {
            total_per_min: per_min(total, window),
            per_standby_per_min: per_min(standbys, window) / (n.saturating_sub(1).max(1)) as f64,
            handovers: Vec::new(),
            mean_rss: rss,
        };
        for rep in 0..handovers {
            let leader = cands.iter().position(is_leading).context("no leader")?;
            let old = cands.remove(leader);
            let sent = mono();
            old.signal(Signal::SIGTERM)?;
            let mut old = old;
            old.ended = Some(sent);
            let (_, ev) = wait_any_leading(&cands, sent, t.lease * 2 + Duration::from_secs(10)).await?;
            let ms = (ev.mono_ns - sent) as f64 / 1e6;
            eprintln!(
                "[bench] {} {n} candidates handover #{rep}: {ms:.1} ms",
                imp.name()
            );
            res.handovers.push(ms);
            env.retire(old, false).await;
            tokio::time::sleep(t.retry * 2).await;
        }
        for c in cands.iter() {
            let _ = c.signal(Signal::SIGTERM);
        }
        for c in cands {
            env.retire(c, false).await;
        }
        out.insert(imp, res);
    }
    Ok(out)
}

fn is_leading(c: &Cand) -> bool {
    c.events()
        .iter()
        .rev()
        .find(|e| e.event == "started_leading" || e.event == "stopped_leading")
        .is_some_and(|e| e.event == "started_leading")
}

/// Waits for the first `started_leading` after `after` (monotonic ns) among `cands`.
async fn wait_any_leading(
    cands: &[Cand],
    after: i64,
    timeout: Duration,
) -> anyhow::Result<(usize, CandidateEvent)> {
    let deadline = Instant::now() + timeout;
    loop {
        let mut best: Option<(usize, CandidateEvent)> = None;
        for (i, c) in cands.iter().enumerate() {
            if let Some(ev) = c.find(|e| e.event == "started_leading" && e.mono_ns >= after)
                && best.as_ref().is_none_or(|(_, b)| ev.mono_ns < b.mono_ns)
            {
                best = Some((i, ev));
            }
        }
        if let Some(b) = best {
            return Ok(b);
        }
        if Instant::now() > deadline {
            bail!("no candidate started leading within {timeout:?}");
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}
