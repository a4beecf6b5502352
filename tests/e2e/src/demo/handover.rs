//! Handing provider-nop's Lease over (SIGTERM, then SIGKILL) and measuring it, then a change of the XR.

use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::coordination::v1::Lease;
use kube::Api;
use kube::api::{DynamicObject, Patch, PatchParams};
use kube::runtime::{WatchStreamExt, watcher};
use nix::sys::signal::Signal;
use serde_json::json;

use super::api::{composed, condition, holder, nop_resource, xr_resource};
use super::report::show;
use super::session::Demo;
use super::{KILLED, LEASE_DURATION, MANAGER, NS, XR, demo_deployments};

/// A measured handover.
#[derive(Debug, Clone)]
pub(super) struct Handover {
    pub(super) signal: Signal,
    pub(super) from: String,
    pub(super) to: String,
    pub(super) took: Duration,
    released: Option<Duration>,
}

impl Demo {
    pub(super) async fn handovers(&mut self) -> Result<()> {
        if !self.tty {
            self.print_view().await;
        }
        let graceful = self.handover(KILLED, Signal::SIGTERM).await?;
        self.note(format!(
            "graceful handover: SIGTERM to {} (leader) -> {} leads {} later{}",
            graceful.from,
            graceful.to,
            show(graceful.took),
            graceful
                .released
                .map(|r| format!(" (released after {})", show(r)))
                .unwrap_or_default()
        ));
        self.results.graceful = Some(graceful.clone());
        self.restart(&graceful.from).await?;
        // Let the restarted replica start watching the Lease before the next kill.
        self.pause(Duration::from_secs(3)).await;

        let crash = self.handover(KILLED, Signal::SIGKILL).await?;
        self.note(format!(
            "crash failover: SIGKILL to {} (leader) -> {} leads {} later (lease duration {}s)",
            crash.from,
            crash.to,
            show(crash.took),
            LEASE_DURATION.as_secs()
        ));
        self.results.crash = Some(crash.clone());
        self.restart(&crash.from).await?;

        // The new leader acts: a change of the XR reaches the NopResources through it.
        let xrs = Api::<DynamicObject>::all_with(self.client.clone(), &xr_resource());
        let changed = Instant::now();
        xrs.patch(
            XR,
            &PatchParams::apply(MANAGER).force(),
            &Patch::Apply(json!({"apiVersion": "demo.crossplane-rs.io/v1", "kind": "XApp",
                                 "metadata": {"name": XR}, "spec": {"size": "large"}})),
        )
        .await?;
        self.note("changed XApp/demo: size small -> large");
        self.wait(
            "the change to reach the NopResources",
            Duration::from_secs(60),
            |c| async move {
                let nops = composed(&c, &nop_resource()).await?;
                let done = nops.len() == 2
                    && nops.iter().all(|n| {
                        let fields = &n["spec"]["forProvider"]["fields"];
                        let changed = fields["instanceClass"] == "db.r6.xlarge" || fields["nodes"] == "3";
                        changed
                            && n["status"]["observedGeneration"] == n["metadata"]["generation"]
                            && condition(n, "Synced").as_deref() == Some("True")
                    });
                Ok(done.then_some(()))
            },
        )
        .await?;
        self.results.propagated = Some(changed.elapsed());
        self.note(format!(
            "the new provider-nop leader reconciled the change {} after it was made",
            show(changed.elapsed())
        ));
        Ok(())
    }

    /// Signals the current leader of `deployment`'s Lease and measures until the demo's watch sees another
    /// replica hold it.
    async fn handover(&mut self, deployment: &str, signal: Signal) -> Result<Handover> {
        let lease = demo_deployments()
            .into_iter()
            .find(|b| b.name == deployment)
            .map(|b| b.lease.lease_id)
            .context("unknown deployment")?;
        // Both replicas up, and one of them leads.
        let ids: Vec<String> = self
            .replicas
            .iter()
            .filter(|r| r.deployment == deployment)
            .map(|r| r.identity.clone())
            .collect();
        let from = self
            .wait("a leader among the replicas", Duration::from_secs(60), {
                let ids = ids.clone();
                move |c| {
                    let ids = ids.clone();
                    async move {
                        let h = holder(&c, lease).await?;
                        Ok(ids.contains(&h).then_some(h))
                    }
                }
            })
            .await?;
        let api: Api<Lease> = Api::namespaced(self.client.clone(), NS);
        let mut stream = watcher(
            api,
            watcher::Config::default().fields(&format!("metadata.name={lease}")),
        )
        .applied_objects()
        .boxed();
        // The watch is established once it has delivered the current record.
        tokio::time::timeout(Duration::from_secs(10), stream.try_next())
            .await
            .context("watching the Lease")??;
        let index = self
            .replicas
            .iter()
            .position(|r| r.identity == from)
            .context("the leader is not a demo replica")?;
        let start = Instant::now();
        self.replicas[index].signal(signal)?;
        let mut released = None;
        let timeout = LEASE_DURATION * 3;
        let to = loop {
            let next = tokio::time::timeout(timeout.saturating_sub(start.elapsed()), stream.try_next())
                .await
                .with_context(|| format!("no new holder of {lease} within {timeout:?}"))??;
            let Some(l) = next else {
                bail!("the watch of {lease} ended");
            };
            let h = l.spec.and_then(|s| s.holder_identity).unwrap_or_default();
            if h.is_empty() {
                released.get_or_insert(start.elapsed());
            } else if h != from {
                break h;
            }
        };
        let took = start.elapsed();
        Ok(Handover {
            signal,
            from,
            to,
            took,
            released,
        })
    }

    /// Waits for the replica to exit and starts it again, as its Deployment would.
    async fn restart(&mut self, identity: &str) -> Result<()> {
        let index = self
            .replicas
            .iter()
            .position(|r| r.identity == identity)
            .context("no such replica")?;
        if !self.replicas[index].exited(Duration::from_secs(30)).await {
            bail!("{identity} did not exit");
        }
        self.replicas[index].spawn()?;
        self.save_state()?;
        self.note(format!("restarted {identity}; it stands by"));
        Ok(())
    }
}
