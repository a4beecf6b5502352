//! Watching workloads on a test bed's node: Deployments' Pods becoming Ready, the Leases their replicas
//! hold, a leader's Pod deleted and its Lease handed over, and each Pod's memory from the kubelet's
//! stats.

use std::{
    collections::BTreeMap,
    time::{Duration, Instant},
};

use futures::{FutureExt, StreamExt};
use k8s_openapi::api::{coordination::v1::Lease, core::v1::Pod};
use kube::{
    Api, Client,
    api::{DeleteParams, ListParams, WatchEvent, WatchParams},
};

use crate::{Error, Result};

/// Whether `pod` is Running and Ready, and not being deleted.
pub fn is_ready(pod: &Pod) -> bool {
    let status = pod.status.as_ref();
    status.and_then(|s| s.phase.as_deref()) == Some("Running")
        && pod.metadata.deletion_timestamp.is_none()
        && status
            .and_then(|s| s.conditions.as_ref())
            .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

/// The restarts of all of `pod`'s containers.
pub fn restarts(pod: &Pod) -> i32 {
    pod.status
        .as_ref()
        .and_then(|s| s.container_statuses.as_ref())
        .map(|cs| cs.iter().map(|c| c.restart_count).sum())
        .unwrap_or(0)
}

/// The name of `pod`.
pub fn name(pod: &Pod) -> &str {
    pod.metadata.name.as_deref().unwrap_or("")
}

/// The value of the `app.kubernetes.io/name` label: the Deployment a Pod belongs to.
pub fn app(pod: &Pod) -> String {
    pod.metadata
        .labels
        .as_ref()
        .and_then(|l| l.get("app.kubernetes.io/name").cloned())
        .unwrap_or_default()
}

/// The runtime's ID of `pod`'s first container (`containerd://<id>` in its status), while it runs.
pub fn container_id(pod: &Pod) -> Option<String> {
    let id = pod
        .status
        .as_ref()?
        .container_statuses
        .as_ref()?
        .first()?
        .container_id
        .clone()?;
    Some(id.split_once("://").map(|(_, id)| id.to_string()).unwrap_or(id))
}

/// The Pod name in a Lease holder identity (`<pod>` or `<pod>_<suffix>`).
pub fn holder_pod(identity: &str) -> &str {
    identity.split('_').next().unwrap_or(identity)
}

/// One line per Pod: phase, readiness, restarts and the first container's state.
fn describe(pods: &BTreeMap<String, Vec<Pod>>) -> String {
    let mut lines = Vec::new();
    for (app, ps) in pods {
        for p in ps {
            let s = p.status.as_ref();
            let state = s
                .and_then(|s| s.container_statuses.as_ref())
                .and_then(|cs| cs.first())
                .and_then(|c| c.state.as_ref())
                .map(|st| format!("{st:?}"))
                .unwrap_or_default();
            lines.push(format!(
                "{app}: {} phase={} ready={} restarts={} {state}",
                name(p),
                s.and_then(|s| s.phase.as_deref()).unwrap_or("?"),
                is_ready(p),
                restarts(p),
            ));
        }
    }
    lines.join("\n")
}

/// Waits until each Deployment in `deployments` has exactly `replicas` Pods, all Running and Ready
/// (Pods are told apart by their `app.kubernetes.io/name` label); returns the Pods by Deployment.
pub async fn wait_deployments(
    client: &Client,
    namespace: &str,
    deployments: &[String],
    replicas: usize,
    timeout: Duration,
) -> Result<BTreeMap<String, Vec<Pod>>> {
    let pods: Api<Pod> = Api::namespaced(client.clone(), namespace);
    let start = Instant::now();
    loop {
        let mut by_app: BTreeMap<String, Vec<Pod>> = BTreeMap::new();
        for p in pods
            .list(&ListParams::default())
            .await
            .map_err(Error::kube("listing Pods"))?
            .items
        {
            by_app.entry(app(&p)).or_default().push(p);
        }
        let done = deployments.iter().all(|d| {
            by_app
                .get(d)
                .is_some_and(|ps| ps.len() == replicas && ps.iter().all(is_ready))
        });
        if done {
            return Ok(by_app);
        }
        if start.elapsed() > timeout {
            return Err(Error::Unexpected(format!(
                "the Deployments {deployments:?} did not each have {replicas} Ready Pods within {}s:\n{}",
                timeout.as_secs(),
                describe(&by_app)
            )));
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// Every Lease in `namespace` with its holder identity (empty when released).
pub async fn lease_holders(client: &Client, namespace: &str) -> Result<BTreeMap<String, String>> {
    let api: Api<Lease> = Api::namespaced(client.clone(), namespace);
    Ok(api
        .list(&ListParams::default())
        .await
        .map_err(Error::kube("listing Leases"))?
        .items
        .into_iter()
        .map(|l| {
            let holder = l.spec.and_then(|s| s.holder_identity).unwrap_or_default();
            (l.metadata.name.unwrap_or_default(), holder)
        })
        .collect())
}

/// Waits until every Deployment of `pods` holds exactly one Lease in `namespace` (its holder names
/// one of the Deployment's Pods); returns the Lease of each Deployment with its holder.
pub async fn wait_one_leader_each(
    client: &Client,
    namespace: &str,
    pods: &BTreeMap<String, Vec<Pod>>,
    timeout: Duration,
) -> Result<BTreeMap<String, (String, String)>> {
    let start = Instant::now();
    loop {
        let holders = lease_holders(client, namespace).await?;
        let mut held: BTreeMap<String, Vec<(String, String)>> = BTreeMap::new();
        for (lease, holder) in &holders {
            for (app, ps) in pods {
                if ps.iter().any(|p| name(p) == holder_pod(holder)) {
                    held.entry(app.clone())
                        .or_default()
                        .push((lease.clone(), holder.clone()));
                }
            }
        }
        if pods.keys().all(|a| held.get(a).is_some_and(|l| l.len() == 1)) {
            return Ok(held
                .into_iter()
                .filter_map(|(app, mut l)| l.pop().map(|x| (app, x)))
                .collect());
        }
        if start.elapsed() > timeout {
            return Err(Error::Unexpected(format!(
                "not one Lease held per Deployment within {}s: Leases {holders:?}",
                timeout.as_secs()
            )));
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// A leader's Pod deleted and its Lease taken by another Pod.
#[derive(Debug, Clone)]
pub struct Handover {
    /// The deleted Pod.
    pub deleted: String,
    /// The new holder identity.
    pub new_holder: String,
    /// From the delete request to the first watch event of the Lease with the new holder.
    pub elapsed: Duration,
}

/// Deletes the Pod that holds `lease` (with its grace period: the kubelet sends SIGTERM) and waits
/// until another Pod holds the Lease: [`LeaderDeletion::prepare`], then [`LeaderDeletion::delete`] at
/// once.
pub async fn delete_leader(
    client: &Client,
    namespace: &str,
    lease: &str,
    timeout: Duration,
) -> Result<Handover> {
    LeaderDeletion::prepare(client, namespace, lease, timeout)
        .await?
        .delete()
        .await
}

/// The holder identity of Lease `l` (empty when released).
fn lease_holder(l: &Lease) -> String {
    l.spec
        .as_ref()
        .and_then(|s| s.holder_identity.clone())
        .unwrap_or_default()
}

/// The holder a watch event of a Lease names: `Some("")` when it was released or deleted, `None` for
/// a bookmark; `Err` says why the watch failed.
fn holder_in(event: kube::Result<WatchEvent<Lease>>) -> std::result::Result<Option<String>, String> {
    match event {
        Ok(WatchEvent::Added(l) | WatchEvent::Modified(l)) => Ok(Some(lease_holder(&l))),
        Ok(WatchEvent::Deleted(_)) => Ok(Some(String::new())),
        Ok(WatchEvent::Bookmark(_)) => Ok(None),
        Ok(WatchEvent::Error(e)) => Err(format!("the watch failed: {}", e.message)),
        Err(e) => Err(format!("the watch failed: {e}")),
    }
}

/// The deletion of a Lease holder's Pod, made ready: the Lease watched from the version read, so that
/// the time is that of the first event naming another holder, not of a poll; and a connection ready
/// for the delete beside the watch's. Everything the client does before the delete is done here, so a
/// caller that times the handover can leave this work out of its window.
pub struct LeaderDeletion {
    pods: Api<Pod>,
    namespace: String,
    lease: String,
    leader: String,
    leader_pod: String,
    events: futures::stream::BoxStream<'static, kube::Result<WatchEvent<Lease>>>,
    timeout: Duration,
}

impl LeaderDeletion {
    /// Reads `lease` in `namespace`, watches it from that version, and reads its holder's Pod: kube's
    /// client speaks HTTP/1.1, so with the watch holding one connection, that read opens a second one,
    /// which stays idle in the pool for the delete (the apiserver closes one idle for 90 s).
    pub async fn prepare(client: &Client, namespace: &str, lease: &str, timeout: Duration) -> Result<Self> {
        let leases: Api<Lease> = Api::namespaced(client.clone(), namespace);
        let pods: Api<Pod> = Api::namespaced(client.clone(), namespace);
        let current = leases.get(lease).await.map_err(Error::kube("reading a Lease"))?;
        let leader = lease_holder(&current);
        let leader_pod = holder_pod(&leader).to_string();
        if leader_pod.is_empty() {
            return Err(Error::Unexpected(format!(
                "Lease {namespace}/{lease} has no holder"
            )));
        }
        let version = current.metadata.resource_version.clone().unwrap_or_default();
        let params = WatchParams::default()
            .fields(&format!("metadata.name={lease}"))
            .timeout(u32::try_from(timeout.as_secs().saturating_add(60)).unwrap_or(u32::MAX));
        let events = leases
            .watch(&params, &version)
            .await
            .map_err(Error::kube("watching a Lease"))?
            .boxed();
        pods.get(&leader_pod)
            .await
            .map_err(Error::kube("reading the leader's Pod"))?;
        Ok(Self {
            pods,
            namespace: namespace.to_owned(),
            lease: lease.to_owned(),
            leader,
            leader_pod,
            events,
            timeout,
        })
    }

    /// The Pod to be deleted: the Lease's holder when it was read.
    pub fn leader_pod(&self) -> &str {
        &self.leader_pod
    }

    /// Deletes the holder's Pod, and waits until the watch sees another Pod hold the Lease. Fails if,
    /// since [`LeaderDeletion::prepare`], the Lease changed hands or the watch ended.
    pub async fn delete(mut self) -> Result<Handover> {
        let (namespace, lease, leader_pod) = (&self.namespace, &self.lease, &self.leader_pod);
        // What the watch delivered since: the holder's renewals only, or the Pod is not the leader.
        while let Some(event) = self.events.next().now_or_never() {
            let moved = match event.map(holder_in) {
                None => Some("the watch ended".to_owned()),
                Some(Err(why)) => Some(why),
                Some(Ok(Some(now))) if now.is_empty() => Some("it was released or deleted".to_owned()),
                Some(Ok(Some(now))) if holder_pod(&now) != leader_pod => {
                    Some(format!("it is held by {now:?} now"))
                }
                Some(Ok(_)) => None,
            };
            if let Some(why) = moved {
                return Err(Error::Unexpected(format!(
                    "Lease {namespace}/{lease} changed before its holder {leader_pod} was deleted: {why}"
                )));
            }
        }
        let start = Instant::now();
        self.pods
            .delete(leader_pod, &DeleteParams::default())
            .await
            .map_err(Error::kube("deleting the leader's Pod"))?;
        let mut now = self.leader.clone();
        let events = &mut self.events;
        let taken = tokio::time::timeout(self.timeout, async {
            while let Some(event) = events.next().await {
                let seen = holder_in(event)
                    .map_err(|why| Error::Unexpected(format!("Lease {namespace}/{lease}: {why}")))?;
                if let Some(holder) = seen {
                    now = holder;
                    if !now.is_empty() && holder_pod(&now) != leader_pod {
                        return Ok(Some(now.clone()));
                    }
                }
            }
            Ok(None)
        })
        .await;
        match taken {
            Ok(Ok(Some(new_holder))) => Ok(Handover {
                deleted: leader_pod.clone(),
                new_holder,
                elapsed: start.elapsed(),
            }),
            Ok(Err(e)) => Err(e),
            Ok(Ok(None)) => Err(Error::Unexpected(format!(
                "the watch of Lease {namespace}/{lease} ended before another Pod held it (holder {now:?})"
            ))),
            Err(_) => Err(Error::Timeout {
                what: format!("Lease {lease} to leave the deleted Pod {leader_pod} (holder now {now:?})"),
                seconds: self.timeout.as_secs(),
            }),
        }
    }
}

/// Waits until `lease` names a holder whose Pod is not `pod`; returns that holder and how long it took.
pub async fn wait_holder_other_than(
    client: &Client,
    namespace: &str,
    lease: &str,
    pod: &str,
    timeout: Duration,
) -> Result<(String, Duration)> {
    let leases: Api<Lease> = Api::namespaced(client.clone(), namespace);
    let start = Instant::now();
    loop {
        let now = leases
            .get(lease)
            .await
            .map_err(Error::kube("reading a Lease"))?
            .spec
            .and_then(|s| s.holder_identity)
            .unwrap_or_default();
        if !now.is_empty() && holder_pod(&now) != pod {
            return Ok((now, start.elapsed()));
        }
        if start.elapsed() > timeout {
            return Err(Error::Timeout {
                what: format!("Lease {lease} to leave {pod} (holder now {now:?})"),
                seconds: timeout.as_secs(),
            });
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Each Pod's working set and RSS in bytes on `node`, from the kubelet's stats summary (through the
/// apiserver's node proxy), by Pod name.
pub async fn pod_memory(client: &Client, node: &str) -> Result<BTreeMap<String, (u64, u64)>> {
    let request = http::Request::get(format!("/api/v1/nodes/{node}/proxy/stats/summary"))
        .body(Vec::new())
        .map_err(|e| Error::Unexpected(format!("building a stats request: {e}")))?;
    let summary: serde_json::Value = client
        .request(request)
        .await
        .map_err(Error::kube("reading the kubelet's stats summary"))?;
    let mut out = BTreeMap::new();
    for pod in summary["pods"].as_array().into_iter().flatten() {
        let Some(name) = pod["podRef"]["name"].as_str() else {
            continue;
        };
        let sum = |field: &str| -> u64 {
            pod["containers"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|c| c["memory"][field].as_u64())
                .sum()
        };
        out.insert(name.to_string(), (sum("workingSetBytes"), sum("rssBytes")));
    }
    Ok(out)
}

/// An image of `deploy/` renamed in an overlay: the name `deploy/` uses, and the reference it was
/// imported under.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImageOverride {
    /// The name in `deploy/`, e.g. `crossplane-rs/provider-nop`.
    pub name: String,
    /// The imported name, e.g. `docker.io/crossplane-rs/provider-nop`.
    pub new_name: String,
    /// The imported tag.
    pub new_tag: String,
}

/// Writes `dir/kustomization.yaml`: `deploy/` and `deploy/fencing/` of this repository with `images`
/// renamed, and nothing else changed. Returns `dir`.
pub fn write_overlay(dir: &std::path::Path, images: &[ImageOverride]) -> Result<std::path::PathBuf> {
    use std::fmt::Write as _;
    let io = |context| Error::io(context, dir);
    let (overlay, deploy) = overlay_dir(dir)?;
    let mut text = format!(
        "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n- {deploy}\n- {deploy}/fencing\nimages:\n",
    );
    for i in images {
        let _ = writeln!(
            text,
            "- name: {}\n  newName: {}\n  newTag: \"{}\"",
            i.name, i.new_name, i.new_tag
        );
    }
    std::fs::write(overlay.join("kustomization.yaml"), text).map_err(io("writing the overlay"))?;
    Ok(overlay)
}

/// Creates the overlay directory `dir` and returns it (canonical) with the path of the repository's
/// `deploy/` relative to it, as kustomize takes only relative paths.
pub fn overlay_dir(dir: &std::path::Path) -> Result<(std::path::PathBuf, String)> {
    let io = |context| Error::io(context, dir);
    std::fs::create_dir_all(dir).map_err(io("creating the overlay directory"))?;
    let root = crate::harness::repo_root()
        .canonicalize()
        .map_err(io("resolving the repository root"))?;
    // Up to / from the overlay, then down to the repository.
    let overlay = dir
        .canonicalize()
        .map_err(io("resolving the overlay directory"))?;
    let up = "../".repeat(overlay.components().count().saturating_sub(1));
    let deploy = format!(
        "{up}{}",
        root.join("deploy").display().to_string().trim_start_matches('/')
    );
    Ok((overlay, deploy))
}

/// provider-nop's cluster-scoped NopResources, untyped (the test bed does not depend on provider-nop).
pub fn nop_api(client: &Client) -> Api<kube::api::DynamicObject> {
    let gvk = kube::api::GroupVersionKind::gvk("nop.crossplane.io", "v1alpha1", "NopResource");
    Api::all_with(client.clone(), &kube::api::ApiResource::from_gvk(&gvk))
}

/// A NopResource `name` that provider-nop makes Ready at once, with `fields.integerField` 0 (the field
/// the workloads change).
pub fn ready_nop(name: &str) -> kube::api::DynamicObject {
    let mut obj = kube::api::DynamicObject::new(
        name,
        &kube::api::ApiResource::from_gvk(&kube::api::GroupVersionKind::gvk(
            "nop.crossplane.io",
            "v1alpha1",
            "NopResource",
        )),
    );
    obj.data = serde_json::json!({"spec": {"forProvider": {
        "fields": {"integerField": 0},
        "conditionAfter": [{"time": "0s", "conditionType": "Ready", "conditionStatus": "True"}],
    }}});
    obj
}
