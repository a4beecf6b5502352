//! client-go's candidate in provider-nop's pool: it joins once the server-side fence is in force and
//! leaves before the run settles, so that part of the run mixes a Go and a Rust elector on one Lease
//! under the same faults. Its writes are judged like any replica's: by the pod its token is bound to,
//! against its own terms. client-go checks nothing before a write, so a frozen client-go leader's late
//! writes are stopped only by the fence, and each must come back refused.

use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::Api;

use super::replica::CLIENT_GO_WORK;
use super::world::World;
use super::{Group, TAKEOVER_TIMEOUT};

/// How long client-go's candidate gets to take the Lease once it joined (the schedule makes room for
/// it by SIGTERMing our leader).
const JOIN_TIMEOUT: Duration = Duration::from_secs(30);

impl World<'_> {
    fn client_go_slot(&self) -> anyhow::Result<usize> {
        self.slots
            .iter()
            .position(|s| s.client_go)
            .context("the schedule has no client-go slot")
    }

    /// Starts client-go's candidate and hands it the Lease once, so that its part of the run starts with
    /// it leading rather than waiting for a fault: our provider-nop replicas are stopped with SIGTERM,
    /// standbys first and the leader last (which releases the Lease), and started again once client-go
    /// leads. (Left to race, our standbys win every released Lease: they watch it, while client-go polls
    /// once per retry period.)
    pub(super) async fn join_client_go(&mut self) -> anyhow::Result<()> {
        let slot = self.client_go_slot()?;
        self.spawn(slot, None).await?;
        let go = self.replica(slot)?.identity.clone();
        let leader = self.wait_leader(Group::Nop, None, TAKEOVER_TIMEOUT).await?;
        let leader_slot = self.slot_of(&leader).context("the leader's slot")?;
        let mut ours: Vec<usize> = (0..self.slots.len())
            .filter(|&i| {
                let s = &self.slots[i];
                s.group == Group::Nop && !s.client_go && s.replica.is_some() && i != leader_slot
            })
            .collect();
        ours.push(leader_slot);
        for &i in &ours {
            self.terminate(i, "SIGTERM (schedule: make room for client-go)")
                .await?;
        }
        let took = self.wait_leader(Group::Nop, Some(&leader), JOIN_TIMEOUT).await;
        for &i in &ours {
            self.spawn(i, None).await?;
        }
        let took = took?;
        if took != go {
            bail!("client-go's candidate {go} did not take the released Lease; {took} did");
        }
        // It leads; wait until its work has written, so that a fault now catches it writing.
        let cms: Api<ConfigMap> = Api::namespaced(self.client.clone(), &self.ns);
        let deadline = Instant::now() + JOIN_TIMEOUT;
        loop {
            let cm = cms.get_opt(CLIENT_GO_WORK).await.ok().flatten();
            if cm
                .and_then(|c| c.data)
                .is_some_and(|d| d.get("writer") == Some(&go))
            {
                break;
            }
            if Instant::now() > deadline {
                bail!("client-go's candidate {go} leads but wrote nothing within {JOIN_TIMEOUT:?}");
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        self.say(&format!(
            "client-go's candidate {go} joined provider-nop's pool, leads and writes"
        ));
        Ok(())
    }

    /// Stops client-go's candidate (SIGTERM: it releases the Lease and must exit 0), so that our
    /// replicas finish the work before the run settles.
    pub(super) async fn retire_client_go(&mut self) -> anyhow::Result<()> {
        let Ok(slot) = self.client_go_slot() else {
            return Ok(());
        };
        if self.slots[slot].replica.is_some() {
            self.terminate(slot, "end of client-go's part of the run").await?;
        }
        Ok(())
    }
}
