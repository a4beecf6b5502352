//! Injecting one fault: on one group's leader (kill, SIGTERM, SIGSTOP, relay cut, clock skew, rolling
//! update) or on the whole control plane (apiserver restart, etcd pause), and recovering from it.

use std::fmt::Write as _;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use jiff::Timestamp;
use nix::sys::signal::Signal;

use super::world::World;
use super::{CLOCK_OFFSET, CURRENT_VERSION, Fault, Group, NEXT_VERSION, REPLICAS, TAKEOVER_TIMEOUT};

/// How long a leader's requests are in flight in its relay before SIGSTOP, when the freeze catches writes
/// in flight; what is in flight when it freezes is delivered after the takeover.
const IN_FLIGHT_DELAY: Duration = Duration::from_millis(400);
/// How long held requests get to reach the apiserver and be answered before SIGCONT.
const DELIVERY_WAIT: Duration = Duration::from_secs(2);
/// How long the apiserver gets to exit after SIGTERM in an apiserver restart.
const APISERVER_STOP_GRACE: Duration = Duration::from_secs(3);

/// A leader frozen by the schedule: who, when it was frozen, and when it ran again (once its successor
/// led); with `in_flight`, what its relay held at the freeze was delivered before it ran again.
pub(super) struct Pause {
    pub(super) identity: String,
    pub(super) stopped: Timestamp,
    pub(super) resumed: Timestamp,
    pub(super) in_flight: bool,
    /// Requests its relay held at the freeze and delivered late (0 without `in_flight`).
    pub(super) delivered_late: usize,
}

impl World<'_> {
    pub(super) async fn inject(&mut self, fault: Fault, group: Option<Group>) -> anyhow::Result<String> {
        let t = self.config.timings;
        let beyond_lease = t.lease + Duration::from_secs(1);
        let Some(group) = group else {
            return self.global(fault, beyond_lease).await;
        };
        let leader = self.wait_leader(group, None, TAKEOVER_TIMEOUT).await?;
        let slot = self.slot_of(&leader).context("the leader's slot")?;
        match fault {
            Fault::Kill => {
                self.kill(slot, "SIGKILL (schedule)")?;
                let next = self.wait_leader(group, Some(&leader), TAKEOVER_TIMEOUT).await?;
                self.spawn(slot, None).await?;
                Ok(format!("{leader} -> {next}"))
            }
            Fault::Term => {
                self.terminate(slot, "SIGTERM (schedule)").await?;
                let next = self.wait_leader(group, Some(&leader), TAKEOVER_TIMEOUT).await?;
                self.spawn(slot, None).await?;
                Ok(format!("{leader} -> {next}"))
            }
            Fault::Stop => {
                // The freeze can also catch writes in flight: the leader's relay delays what it sends
                // (so requests, writes among them, are on the wire for a while), then holds it and the
                // leader is stopped; what was in flight is delivered after the takeover while the
                // process is still stopped (so it cannot cancel it). With the server-side fence in
                // force every such freeze does so, and each late write must be refused. Without the
                // fence that is the gap no client-side check closes: every other freeze of the
                // fence-off part (the first one included, and each one until one delivered something
                // late) catches writes in flight too, and the report
                // shows what became of each (409, or admitted), next to the self-fencing figure.
                let in_flight = if self.fence_from.is_some() {
                    true
                } else {
                    self.freezes_fence_off += 1;
                    // Until one such freeze delivered something late, every freeze catches writes in
                    // flight, so that the run cannot end without the case it is there to show.
                    let delivered = self.pauses.iter().any(|p| p.in_flight && p.delivered_late > 0);
                    self.freezes_fence_off % 2 == 1 || !delivered
                };
                let late_before = self.slots[slot].relay.delivered_late();
                if in_flight {
                    self.slots[slot].relay.delay(IN_FLIGHT_DELAY);
                    tokio::time::sleep(IN_FLIGHT_DELAY * 4).await;
                    self.slots[slot].relay.hold(true);
                }
                let stopped = Timestamp::now();
                self.replica(slot)?.signal(Signal::SIGSTOP)?;
                tokio::time::sleep(beyond_lease).await;
                let next = self.wait_leader(group, Some(&leader), TAKEOVER_TIMEOUT).await;
                if in_flight {
                    self.slots[slot].relay.delay(Duration::ZERO);
                    self.slots[slot].relay.hold(false);
                    tokio::time::sleep(DELIVERY_WAIT).await;
                }
                let delivered_late = self.slots[slot].relay.delivered_late() - late_before;
                let resumed = Timestamp::now();
                self.replica(slot)?.signal(Signal::SIGCONT)?;
                self.pauses.push(Pause {
                    identity: leader.clone(),
                    stopped,
                    resumed,
                    in_flight,
                    delivered_late,
                });
                let next = next?;
                let held = if in_flight {
                    format!(
                        " (what it had in flight, up to {IN_FLIGHT_DELAY:?} of requests, delivered late: \
                         {delivered_late} chunks held)"
                    )
                } else {
                    String::new()
                };
                Ok(format!("{leader} stopped {beyond_lease:?}{held} -> {next}"))
            }
            Fault::RelayCut => {
                let cut = self.slots[slot].relay.cut().await?;
                tokio::time::sleep(beyond_lease).await;
                let next = self.wait_leader(group, Some(&leader), TAKEOVER_TIMEOUT).await;
                self.slots[slot].relay.restore().await?;
                let next = next?;
                Ok(format!(
                    "{leader} cut off {beyond_lease:?} ({cut} connections) -> {next}"
                ))
            }
            Fault::ClockSkew => self.clock_skew(group, &leader).await,
            Fault::RollingUpdate => self.rolling_update(group, &leader).await,
            Fault::ApiserverRestart | Fault::EtcdPause => unreachable!("global faults have no group"),
        }
    }

    async fn global(&mut self, fault: Fault, beyond_lease: Duration) -> anyhow::Result<String> {
        let mut before = Vec::new();
        for g in Group::ALL {
            before.push(self.wait_leader(g, None, TAKEOVER_TIMEOUT).await?);
        }
        let begin = Instant::now();
        match fault {
            Fault::ApiserverRestart => {
                // SIGTERM; it stops serving at once, but then waits for long-running requests for up
                // to the test bed's 15 s stop grace. Give it 3 s before SIGKILL, then start it again.
                self.cp.apiserver().stop(APISERVER_STOP_GRACE)?;
                self.cp.restart_apiserver().await?;
            }
            Fault::EtcdPause => {
                self.cp.etcd().pause()?;
                tokio::time::sleep(beyond_lease).await;
                self.cp.etcd().resume()?;
            }
            _ => bail!("{fault} is not a fault of the control plane"),
        }
        let outage = begin.elapsed();
        let mut out = format!("{:.1}s:", outage.as_secs_f64());
        for (g, old) in Group::ALL.into_iter().zip(before) {
            let now = self.wait_leader(g, None, TAKEOVER_TIMEOUT).await?;
            let _ = write!(out, " {old} -> {now}");
        }
        Ok(out)
    }

    async fn clock_skew(&mut self, group: Group, leader: &str) -> anyhow::Result<String> {
        // The skewed replica is one of ours (a Go peer would ignore libfaketime: see `replica::spawn`),
        // the one after the leader's slot, counted among our three.
        let leader_slot = self.slot_of(leader).context("the leader's slot")?;
        let slot = self
            .slots
            .iter()
            .position(|s| {
                s.group == group
                    && s.go.is_none()
                    && s.index == (self.slots[leader_slot].index + 1) % REPLICAS
            })
            .context("a standby slot of ours")?;
        let offset = format!("{}{CLOCK_OFFSET}", if self.skew_forward { '+' } else { '-' });
        self.skew_forward = !self.skew_forward;
        self.terminate(slot, "SIGTERM (schedule: restart with a skewed clock)")
            .await?;
        self.spawn(slot, Some(offset.clone())).await?;
        let skewed = self.replica(slot)?.identity.clone();
        tokio::time::sleep(Duration::from_millis(1500)).await;
        let mut chain = vec![leader.to_owned()];
        let mut current = leader.to_owned();
        for _ in 0..4 {
            if current == skewed {
                break;
            }
            let s = self.slot_of(&current).context("the leader's slot")?;
            // The skewed replica must be the only candidate for the released Lease, or the race for it
            // decides (lost four times in a row once in a CI rehearsal): the group's other standbys
            // stop first (cleanly; a standby holds nothing), and all come back after the handover.
            let others: Vec<usize> = (0..self.slots.len())
                .filter(|&i| {
                    self.slots[i].group == group && i != s && i != slot && self.slots[i].replica.is_some()
                })
                .collect();
            for &i in &others {
                self.terminate(
                    i,
                    "SIGTERM (schedule: leave the skewed replica the only candidate)",
                )
                .await?;
            }
            self.terminate(s, "SIGTERM (schedule: hand over to the skewed replica)")
                .await?;
            let next = self.wait_leader(group, Some(&current), TAKEOVER_TIMEOUT).await;
            for i in others.into_iter().chain([s]) {
                self.spawn(i, None).await?;
            }
            current = next?;
            chain.push(current.clone());
        }
        if current != skewed {
            bail!("the replica with FAKETIME={offset} ({skewed}) never took the lease: {chain:?}");
        }
        // Let it lead (and renew) with its skewed clock for a while.
        tokio::time::sleep(self.config.timings.lease).await;
        Ok(format!("{skewed} FAKETIME={offset}: {}", chain.join(" -> ")))
    }

    async fn rolling_update(&mut self, group: Group, leader: &str) -> anyhow::Result<String> {
        let leader_slot = self.slot_of(leader).context("the leader's slot")?;
        if let Some(peer) = self.slots[leader_slot].go {
            // Hand the Lease back to our replicas first: the update rolls our builds, not a Go peer's.
            self.terminate(
                leader_slot,
                &format!("SIGTERM (schedule: rolling update, {peer} leads)"),
            )
            .await?;
            let next = self.wait_leader(group, Some(leader), TAKEOVER_TIMEOUT).await?;
            self.spawn(leader_slot, None).await?;
            return Box::pin(self.rolling_update(group, &next)).await;
        }
        let target = !self.slots[leader_slot].next;
        let version = if target { NEXT_VERSION } else { CURRENT_VERSION };
        // A Go peer is not ours to update; it stays as it is while the others roll.
        let mut order: Vec<usize> = (0..self.slots.len())
            .filter(|&i| self.slots[i].group == group && i != leader_slot)
            .filter(|&i| self.slots[i].go.is_none() && self.slots[i].replica.is_some())
            .collect();
        order.push(leader_slot);
        let mut replaced = Vec::new();
        for i in order {
            let old = self.replica(i)?.identity.clone();
            self.terminate(i, "SIGTERM (schedule: rolling update)").await?;
            if i == leader_slot {
                let next = self.wait_leader(group, Some(&old), TAKEOVER_TIMEOUT).await?;
                replaced.push(format!("leader {old} -> {next}"));
            }
            self.slots[i].next = target;
            self.spawn(i, None).await?;
            let new = self.replica(i)?.identity.clone();
            if i != leader_slot {
                replaced.push(format!("{old}=>{new}"));
                // Old and new builds run side by side while the new one starts.
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
        }
        Ok(format!("to {version}: {}", replaced.join(", ")))
    }
}
