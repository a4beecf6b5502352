//! The state of a run ([`World`]): the control plane, the replica slots, what happened so far; and
//! the run's phases in order (setup, faults, settling, checking).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use anyhow::Context;
use jiff::Timestamp;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::rbac::v1::ClusterRoleBinding;
use kube::Client;
use kube::api::{Api, ApiResource, DynamicObject, PostParams};
use serde_json::json;
use testenv::ControlPlane;

use super::inject::Pause;
use super::leadership::{Observed, observe};
use super::replica::Slot;
use super::workload::churn;
use super::{Census, Config, FaultRecord, Group, REPLICAS, ReplicaRecord, Report, XR_GROUP};
use crate::relay::Relay;

pub(super) struct World<'a> {
    pub(super) cp: &'a mut ControlPlane,
    pub(super) config: &'a Config,
    pub(super) client: Client,
    pub(super) ns: String,
    pub(super) slots: Vec<Slot>,
    pub(super) history: Vec<ReplicaRecord>,
    pub(super) problems: Vec<String>,
    pub(super) faults: Vec<FaultRecord>,
    pub(super) observed: Arc<Mutex<Observed>>,
    pub(super) skew_forward: bool,
    /// SIGSTOP faults injected with the fence off (every other one catches writes in flight).
    pub(super) freezes_fence_off: usize,
    /// Whether the schedule reached [`Config::fence_after`](super::Config) (the fence installed unless
    /// sabotaged).
    pub(super) fence_due: bool,
    pub(super) pauses: Vec<Pause>,
    /// When the server-side fence was seen in force, if it was installed.
    pub(super) fence_from: Option<Timestamp>,
    /// The resources at the end of the run.
    pub(super) census: Census,
    pub(super) t0: Instant,
    /// provider-nop-go's build, when [`Config::go_provider`](super::Config) asks for it.
    pub(super) go_provider: Option<PathBuf>,
}

pub(super) fn dynamic(
    client: &Client,
    group: &str,
    version: &str,
    kind: &str,
    plural: &str,
) -> Api<DynamicObject> {
    let ar = ApiResource {
        group: group.into(),
        version: version.into(),
        api_version: format!("{group}/{version}"),
        kind: kind.into(),
        plural: plural.into(),
    };
    Api::all_with(client.clone(), &ar)
}

/// Lets every ServiceAccount of `ns` (the replicas' slots) do anything: RBAC is not what the schedule
/// is about, the Lease (and, when installed, the fence) decides.
async fn grant_service_accounts(client: &Client, ns: &str) -> anyhow::Result<()> {
    let crb: ClusterRoleBinding = serde_json::from_value(json!({
        "metadata": { "name": format!("e2e-faults-{ns}") },
        "roleRef": { "apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "cluster-admin" },
        "subjects": [{ "kind": "Group", "apiGroup": "rbac.authorization.k8s.io", "name": format!("system:serviceaccounts:{ns}") }],
    }))?;
    Api::<ClusterRoleBinding>::all(client.clone())
        .create(&PostParams::default(), &crb)
        .await
        .context("granting the replicas' ServiceAccounts cluster-admin")?;
    Ok(())
}

impl<'a> World<'a> {
    pub(super) async fn new(
        cp: &'a mut ControlPlane,
        config: &'a Config,
        go_provider: Option<PathBuf>,
    ) -> anyhow::Result<World<'a>> {
        let cluster = cp.cluster().clone();
        let client = cluster.client().await?;
        let upstream: SocketAddr = ([127, 0, 0, 1], cp.state().apiserver_port).into();
        let mut slots = Vec::new();
        for group in Group::ALL {
            for index in 0..REPLICAS {
                let relay = Relay::start(upstream).await?;
                slots.push(Slot {
                    group,
                    index,
                    relay,
                    generation: 0,
                    next: false,
                    go: None,
                    replica: None,
                });
            }
        }
        for peer in config.go_peers() {
            slots.push(Slot {
                group: Group::Nop,
                index: peer.index(),
                relay: Relay::start(upstream).await?,
                generation: 0,
                next: false,
                go: Some(peer),
                replica: None,
            });
        }
        if config.sabotage == Some(super::Sabotage::HoldDeliversNothing) {
            for s in &slots {
                s.relay.discard_held();
            }
        }
        let ns = cluster.namespace("faults").await?;
        grant_service_accounts(&client, &ns).await?;
        Ok(World {
            cp,
            config,
            client,
            ns,
            slots,
            history: Vec::new(),
            problems: Vec::new(),
            faults: Vec::new(),
            observed: Arc::default(),
            skew_forward: true,
            freezes_fence_off: 0,
            fence_due: false,
            pauses: Vec::new(),
            fence_from: None,
            census: Census::default(),
            t0: Instant::now(),
            go_provider,
        })
    }

    pub(super) fn say(&self, msg: &str) {
        if self.config.verbose {
            eprintln!("[faults {:>6.1}s] {msg}", self.t0.elapsed().as_secs_f64());
        }
    }

    pub(super) fn nops(&self) -> Api<DynamicObject> {
        dynamic(
            &self.client,
            "nop.crossplane.io",
            "v1alpha1",
            "NopResource",
            "nopresources",
        )
    }

    pub(super) fn xrs(&self) -> Api<DynamicObject> {
        dynamic(&self.client, XR_GROUP, "v1", "XFault", "xfaults")
    }

    pub(super) fn leases(&self) -> Api<Lease> {
        Api::namespaced(self.client.clone(), &self.ns)
    }

    pub(super) async fn run(&mut self, started: Instant) -> anyhow::Result<Report> {
        self.t0 = started;
        self.setup().await?;
        let setup = started.elapsed();
        self.say(&format!("set up and converged in {:.1}s", setup.as_secs_f64()));

        let observer = tokio::spawn(observe(self.leases(), self.observed.clone()));
        let churn = tokio::spawn(churn(
            self.nops(),
            self.xrs(),
            self.config.nop_resources,
            self.config.xrs,
        ));
        let schedule_start = Instant::now();
        let faults_from = Timestamp::now();
        let mut outcome = self.schedule(schedule_start, faults_from).await;
        if outcome.is_ok() {
            outcome = self.retire_go().await;
        }
        churn.abort();
        let _ = churn.await;
        let faults_until = Timestamp::now();
        let schedule = schedule_start.elapsed();
        let live_changes = self.live_changes();
        observer.abort();
        let _ = observer.await;
        outcome?;

        let settle_start = Instant::now();
        self.settle().await?;
        let mut report = self.check(faults_from, faults_until).await?;
        report.live_changes = live_changes;
        report.setup = setup;
        report.schedule = schedule;
        report.settle = settle_start.elapsed();
        Ok(report)
    }
}
