//! Leadership: who holds each Lease, waiting for a (new) leader, and counting changes of holder live.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::bail;
use k8s_openapi::api::coordination::v1::Lease;
use kube::api::Api;

use super::world::World;
use super::{Group, POLL};

/// Leadership as polled from the Leases, for deciding when enough changes happened.
#[derive(Default)]
pub(super) struct Observed {
    last: BTreeMap<Group, String>,
    changes: usize,
}

impl World<'_> {
    async fn holder(&self, group: Group) -> Option<String> {
        self.leases()
            .get_opt(group.lease())
            .await
            .ok()
            .flatten()
            .and_then(|l| l.spec?.holder_identity)
            .filter(|h| !h.is_empty())
    }

    /// Waits until a live replica of `group` other than `not` holds the Lease.
    pub(super) async fn wait_leader(
        &mut self,
        group: Group,
        not: Option<&str>,
        timeout: Duration,
    ) -> anyhow::Result<String> {
        let deadline = Instant::now() + timeout;
        let mut last = None;
        loop {
            self.check_processes().await;
            let h = self.holder(group).await;
            if let Some(h) = &h
                && Some(h.as_str()) != not
                && self.slot_of(h).is_some_and(|s| self.slots[s].group == group)
            {
                return Ok(h.clone());
            }
            last = h.or(last);
            if Instant::now() > deadline {
                bail!(
                    "no leader of {group} other than {not:?} within {timeout:?} (the Lease names {last:?})"
                );
            }
            tokio::time::sleep(POLL).await;
        }
    }

    pub(super) fn live_changes(&self) -> usize {
        self.observed.lock().map(|o| o.changes).unwrap_or(0)
    }
}

/// Polls both Leases and counts changes of holder (never a release: only who holds next).
pub(super) async fn observe(leases: Api<Lease>, observed: Arc<Mutex<Observed>>) {
    loop {
        for g in Group::ALL {
            let holder = leases
                .get_opt(g.lease())
                .await
                .ok()
                .flatten()
                .and_then(|l| l.spec?.holder_identity)
                .filter(|h| !h.is_empty());
            if let (Some(h), Ok(mut o)) = (holder, observed.lock()) {
                match o.last.insert(g, h.clone()) {
                    Some(prev) if prev != h => o.changes += 1,
                    _ => {}
                }
            }
        }
        tokio::time::sleep(POLL).await;
    }
}
