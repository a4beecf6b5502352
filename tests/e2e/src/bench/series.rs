//! Handover series: graceful (SIGTERM) or crash (SIGKILL) handovers between a leader and a standby.

use std::time::Duration;

use anyhow::Context;
use nix::sys::signal::Signal;
use testenv::monotonic_ns as mono;

use super::candidate::{Cand, Env};
use super::plan::{Imp, Timings};

/// A handover series: one leader and one standby; each repetition ends the leader (SIGTERM or SIGKILL),
/// times the standby's takeover, and starts a fresh standby in the old one's slot. Latencies in ms.
pub(super) async fn series(
    env: &Env,
    imp: Imp,
    t: Timings,
    reps: usize,
    crash: bool,
) -> anyhow::Result<Vec<f64>> {
    let kind = if crash { "crash" } else { "graceful" };
    let ns = env
        .cluster
        .namespace(&format!("bench-{}-{kind}-{}", imp.short(), t.tag()))
        .await?;
    let lease = "bench";
    let row = |slot: usize| format!("{} {kind} {} #{}", imp.name(), t.label(), slot + 1);
    let id = |slot: usize, generation: usize| {
        format!(
            "{}-{kind}-{}-{}-{generation}",
            imp.short(),
            t.tag(),
            ["a", "b"][slot]
        )
    };
    let take = t.lease * 2 + Duration::from_secs(30);
    let mut leader_slot = 0;
    let mut leader = Cand::spawn(env, imp, &ns, lease, &id(0, 0), &row(0), t)?;
    leader.wait_leading(take).await?;
    let mut standby = Cand::spawn(env, imp, &ns, lease, &id(1, 0), &row(1), t)?;
    standby.settle(&leader.identity).await;
    let mut out = Vec::new();
    for rep in 0..reps {
        // Desynchronise the end from the renew cycle: 1 to 2 retry periods after settling.
        let phase = (mono().rem_euclid(1000)) as f64 / 1000.0;
        tokio::time::sleep(t.retry.mul_f64(1.0 + phase)).await;
        let sent = mono();
        leader.signal(if crash { Signal::SIGKILL } else { Signal::SIGTERM })?;
        leader.ended = Some(sent);
        let ev = standby
            .wait_leading(take)
            .await
            .with_context(|| format!("{kind} repetition {rep}"))?;
        let ms = (ev.mono_ns - sent) as f64 / 1e6;
        eprintln!("[bench] {} {kind} {} #{rep}: {ms:.1} ms", imp.name(), t.label());
        out.push(ms);
        env.retire(leader, crash).await;
        leader = standby;
        let slot = leader_slot;
        leader_slot = 1 - leader_slot;
        standby = Cand::spawn(env, imp, &ns, lease, &id(slot, rep + 1), &row(slot), t)?;
        standby.settle(&leader.identity).await;
    }
    env.retire(standby, false).await;
    env.retire(leader, false).await;
    Ok(out)
}
