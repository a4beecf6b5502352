//! The driver loop: faults one after another, round-robin over the kinds and the groups, until enough
//! leadership changes have happened (seen live and in the audit log) or the time limit is up.

use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use jiff::Timestamp;

use super::world::World;
use super::{Fault, FaultRecord, Group, Sabotage};
use crate::checker::{self, Lock};

impl World<'_> {
    /// Leadership changes since `from` as the audit log shows them (the measure the report and the
    /// tests use), counted the same way as in [`Self::check`].
    fn audit_changes(&self, from: Timestamp) -> anyhow::Result<usize> {
        let events = self
            .cp
            .cluster()
            .audit()
            .read_containing(r#""resource":"leases""#)?
            .events;
        let mut n = 0;
        for g in Group::ALL {
            let terms = checker::terms(&events, &Lock::lease(&self.ns, g.lease()));
            n += terms
                .windows(2)
                .filter(|p| p[0].holder != p[1].holder && p[1].start >= from)
                .count();
        }
        Ok(n)
    }

    /// Whether the schedule has made enough changes: seen live, and confirmed by the audit log (which
    /// can count fewer, e.g. when a change happened while the apiserver was restarting).
    fn enough_changes(&self, from: Timestamp) -> anyhow::Result<bool> {
        let min = self.config.min_changes;
        Ok(self.live_changes() >= min && self.audit_changes(from)? >= min)
    }

    pub(super) async fn schedule(&mut self, start: Instant, from: Timestamp) -> anyhow::Result<()> {
        let mut step = 0usize;
        while !self.enough_changes(from)? {
            if start.elapsed() > self.config.time_limit {
                bail!(
                    "only {} leadership changes after {:?} of faults (wanted {})",
                    self.live_changes(),
                    self.config.time_limit,
                    self.config.min_changes
                );
            }
            if !self.fence_due && self.config.fence_after.is_some_and(|n| self.live_changes() >= n) {
                self.fence_due = true;
                if self.config.sabotage == Some(Sabotage::NoFence) {
                    self.say("sabotage: the server-side fence is not installed");
                } else {
                    self.install_fence().await.context("installing the fence")?;
                }
                for peer in self.config.go_peers() {
                    if self.config.sabotage.is_some_and(|s| s.keeps_out(peer)) {
                        self.say(&format!("sabotage: {peer} does not join"));
                        continue;
                    }
                    self.join_go(peer)
                        .await
                        .with_context(|| format!("adding {peer}"))?;
                    // Its first fault, while it leads and writes: frozen beyond its lease, as a frozen
                    // Go leader is what only the fence can stop.
                    self.run_fault(peer.version(), Fault::Stop, Some(Group::Nop))
                        .await?;
                }
            }
            let fault = Fault::ALL[step % Fault::ALL.len()];
            let group = Group::ALL[(step + step / Fault::ALL.len()) % Group::ALL.len()];
            let group = (!fault.is_global()).then_some(group);
            self.run_fault(&step.to_string(), fault, group).await?;
            step += 1;
        }
        Ok(())
    }

    /// Injects one fault, records it, and lets restarted replicas settle before the next.
    async fn run_fault(&mut self, label: &str, fault: Fault, group: Option<Group>) -> anyhow::Result<()> {
        let begin = Timestamp::now();
        let detail = self
            .inject(fault, group)
            .await
            .with_context(|| format!("fault {label} ({fault} on {group:?})"))?;
        self.check_processes().await;
        self.faults.push(FaultRecord {
            fault,
            group,
            start: begin,
            end: Timestamp::now(),
            detail: detail.clone(),
        });
        let who = group.map_or_else(|| "control plane".to_owned(), |g| g.to_string());
        self.say(&format!(
            "#{label:<3} {fault:<18} {who:<13} {detail} [{} changes]",
            self.live_changes()
        ));
        // Let restarted replicas start watching before the next fault.
        tokio::time::sleep(Duration::from_millis(500)).await;
        Ok(())
    }
}
