//! Go peers in provider-nop's pool: client-go's bare candidate and provider-nop-go (our NopResource
//! provider on crossplane-runtime, with controller-runtime's leader election). Each joins once the
//! server-side fence is in force, is handed the Lease once, and leaves before the run settles, so that
//! part of the run mixes Go and Rust electors on one Lease under the same faults. Their writes are
//! judged like any replica's: by the pod the token is bound to, against the writer's own terms. Neither
//! checks its term before a write, so a frozen Go leader's late writes are stopped only by the fence,
//! and each must come back refused.

use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::Api;

use super::replica::CLIENT_GO_WORK;
use super::world::World;
use super::{Group, REPLICAS, TAKEOVER_TIMEOUT};

/// How long a Go peer gets to take the Lease once it joined (the schedule makes room for it by
/// SIGTERMing the pool's leader), and then to do its first work.
const JOIN_TIMEOUT: Duration = Duration::from_secs(30);

/// What provider-nop-go prints when controller-runtime gives up a lost Lease, just before it exits 1
/// (`main.go`: `<name>: <error>`; the error is controller-runtime's).
pub(super) const LOST_LEASE: &str = "provider-nop-go: leader election lost";

/// A Go peer that joins provider-nop's pool (see [`Config::client_go`](super::Config) and
/// [`Config::go_provider`](super::Config)).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum GoPeer {
    /// client-go's candidate (`harness lease-candidate`), updating a ConfigMap every 100 ms while it
    /// leads.
    ClientGo,
    /// provider-nop-go (`tests/peers/provider-nop-go`): NopResource work on crossplane-runtime's
    /// managed reconciler, controller-runtime's leader election at the schedule's timings.
    Provider,
}

impl GoPeer {
    /// Both, in the order they join.
    pub const ALL: [GoPeer; 2] = [GoPeer::ClientGo, GoPeer::Provider];

    /// Its name in the report.
    pub fn name(self) -> &'static str {
        match self {
            GoPeer::ClientGo => "client-go's candidate",
            GoPeer::Provider => "the Go provider (provider-nop-go)",
        }
    }

    /// What the schedule's records give as its version.
    pub fn version(self) -> &'static str {
        match self {
            GoPeer::ClientGo => "client-go",
            GoPeer::Provider => "provider-nop-go",
        }
    }

    /// Its slot's index in provider-nop's group (after our replicas'), so its ServiceAccount and
    /// identities are `nop-<index>` and `nop-<index>-<generation>`.
    pub(super) fn index(self) -> usize {
        match self {
            GoPeer::ClientGo => REPLICAS,
            GoPeer::Provider => REPLICAS + 1,
        }
    }
}

impl std::fmt::Display for GoPeer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.pad(self.name())
    }
}

impl World<'_> {
    fn go_slot(&self, peer: GoPeer) -> anyhow::Result<usize> {
        self.slots
            .iter()
            .position(|s| s.go == Some(peer))
            .with_context(|| format!("the schedule has no slot for {peer}"))
    }

    /// Starts the Go peer and hands it the Lease once, so that its part of the run starts with it
    /// leading rather than waiting for a fault: every other process of provider-nop's pool is stopped
    /// with SIGTERM, standbys first and the leader last (which releases the Lease), and started again
    /// once the peer leads. (Left to race, our standbys win every released Lease: they watch it, while
    /// client-go polls once per retry period.) Then it waits until the peer has done work as leader, so
    /// that a fault now catches it writing.
    pub(super) async fn join_go(&mut self, peer: GoPeer) -> anyhow::Result<()> {
        let slot = self.go_slot(peer)?;
        self.spawn(slot, None).await?;
        let go = self.replica(slot)?.identity.clone();
        let leader = self.wait_leader(Group::Nop, None, TAKEOVER_TIMEOUT).await?;
        if leader != go {
            let leader_slot = self.slot_of(&leader).context("the leader's slot")?;
            let mut others: Vec<usize> = (0..self.slots.len())
                .filter(|&i| {
                    let s = &self.slots[i];
                    s.group == Group::Nop && s.replica.is_some() && i != slot && i != leader_slot
                })
                .collect();
            others.push(leader_slot);
            let why = format!("SIGTERM (schedule: make room for {peer})");
            for &i in &others {
                self.terminate(i, &why).await?;
            }
            let took = self.wait_leader(Group::Nop, Some(&leader), JOIN_TIMEOUT).await;
            for &i in &others {
                self.spawn(i, None).await?;
            }
            let took = took?;
            if took != go {
                bail!("{peer} {go} did not take the released Lease; {took} did");
            }
        }
        let deadline = Instant::now() + JOIN_TIMEOUT;
        while !self.go_worked(peer, &go).await? {
            if Instant::now() > deadline {
                bail!("{peer} {go} leads but did no work within {JOIN_TIMEOUT:?}");
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        self.say(&format!(
            "{peer} {go} joined provider-nop's pool, leads and writes"
        ));
        Ok(())
    }

    /// Whether `identity` has done its work: client-go's candidate wrote its ConfigMap, the Go provider
    /// had a write to a NopResource admitted (the audit log).
    async fn go_worked(&self, peer: GoPeer, identity: &str) -> anyhow::Result<bool> {
        Ok(match peer {
            GoPeer::ClientGo => {
                let cms: Api<ConfigMap> = Api::namespaced(self.client.clone(), &self.ns);
                let cm = cms.get_opt(CLIENT_GO_WORK).await.ok().flatten();
                cm.and_then(|c| c.data)
                    .is_some_and(|d| d.get("writer").map(String::as_str) == Some(identity))
            }
            GoPeer::Provider => self
                .cp
                .cluster()
                .audit()
                .read_containing(&format!("({identity})"))?
                .events
                .iter()
                .any(|e| {
                    e.resource == "nopresources"
                        && e.is_write()
                        && (200..300).contains(&e.code)
                        && crate::checker::writer(e) == identity
                }),
        })
    }

    /// Stops the Go peers (SIGTERM: each releases the Lease and must exit 0), so that our replicas
    /// finish the work before the run settles.
    pub(super) async fn retire_go(&mut self) -> anyhow::Result<()> {
        for peer in GoPeer::ALL {
            let Ok(slot) = self.go_slot(peer) else {
                continue;
            };
            if self.slots[slot].replica.is_some() {
                self.terminate(slot, &format!("end of {peer}'s part of the run"))
                    .await?;
            }
        }
        Ok(())
    }
}
