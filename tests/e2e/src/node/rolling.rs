//! The seed's scenario on the node, for provider-nop and the core: while NopResources and XRs (an XRD
//! and a Composition composing a NopResource with the built-in function-patch-and-transform) keep
//! changing, the Deployment controller rolls provider-nop and crossplane (the core; the RBAC manager runs
//! from the same image and rolls with it) from build A to build B (the second builds, reporting
//! `<version>+next`), applied as an overlay that changes only the image tags. The audit-log checker of
//! the fault schedule (tests/e2e/src/checker.rs) gives, per Deployment, the writes checked, the
//! violations (two holders at once, a write outside its writer's term) and the version in each term.

use std::{
    collections::BTreeMap,
    path::Path,
    sync::{
        Arc,
        atomic::{AtomicBool, Ordering},
    },
    time::{Duration, Instant},
};

use crate::checker::{self, Lock};
use anyhow::{Context, ensure};
use jiff::Timestamp;
use k8s_openapi::api::core::v1::Pod;
use kube::{
    Api,
    api::{ApiResource, DynamicObject, GroupVersionKind, ListParams, Patch, PatchParams, PostParams},
};
use serde_json::json;
use testenv::workload;

use super::{NAMESPACE, READY_TIMEOUT};
use release::image;

/// The Deployments rolled: provider-nop, and the two that run the crossplane image.
pub const ROLLED: [&str; 3] = ["provider-nop", "crossplane", "crossplane-rbac-manager"];
/// The images that change tag.
const IMAGES: [&str; 2] = ["provider-nop", "crossplane"];
const NOPS: usize = 8;
const XRS: usize = 4;
const XR_GROUP: &str = "node.crossplane-rs.io";

/// One rolled Deployment, as the audit log shows it.
pub struct Checked {
    pub app: String,
    /// Its replicas' writes checked against their terms (all but Leases and Events).
    pub writes: usize,
    /// What the checker found (two holders at once, writes outside their writer's term).
    pub violations: Vec<String>,
    /// Writes judged inside their term that arrived while another writer's Lease write was in flight.
    pub during_foreign_lock_write: usize,
    /// Each term live from the rollout's start on, in order: its holder and the versions that wrote.
    pub terms: Vec<(String, String)>,
}

/// What the rollout showed.
pub struct Rollout {
    pub seconds: f64,
    pub changes: u64,
    pub nops: usize,
    pub xrs: usize,
    /// NopResources Ready and Synced, and XRs Ready whose composed NopResource has their last `spec.n`.
    pub nops_ready: usize,
    pub xrs_ready: usize,
    pub checked: Vec<Checked>,
}

fn xr_api(client: &kube::Client) -> Api<DynamicObject> {
    let gvk = GroupVersionKind::gvk(XR_GROUP, "v1", "XRoll");
    Api::all_with(client.clone(), &ApiResource::from_gvk(&gvk))
}

fn condition(obj: &DynamicObject, kind: &str) -> bool {
    obj.data["status"]["conditions"]
        .as_array()
        .is_some_and(|cs| cs.iter().any(|c| c["type"] == kind && c["status"] == "True"))
}

/// The XRD and the Composition, applied with kubectl.
fn apply_xrd(kubeconfig: &Path, dir: &Path) -> anyhow::Result<()> {
    let list = json!({"apiVersion": "v1", "kind": "List", "items": [
        {"apiVersion": "apiextensions.crossplane.io/v2", "kind": "CompositeResourceDefinition",
         "metadata": {"name": format!("xrolls.{XR_GROUP}")},
         "spec": {"group": XR_GROUP, "scope": "Cluster", "names": {"kind": "XRoll", "plural": "xrolls"},
                  "versions": [{"name": "v1", "referenceable": true, "served": true, "schema": {"openAPIV3Schema": {
                      "type": "object", "properties": {"spec": {"type": "object", "properties": {"n": {"type": "integer"}}}}}}}]}},
        {"apiVersion": "apiextensions.crossplane.io/v1", "kind": "Composition",
         "metadata": {"name": "xrolls"},
         "spec": {"compositeTypeRef": {"apiVersion": format!("{XR_GROUP}/v1"), "kind": "XRoll"}, "mode": "Pipeline",
                  "pipeline": [{"step": "pt", "functionRef": {"name": "function-patch-and-transform"},
                    "input": {"apiVersion": "pt.fn.crossplane.io/v1beta1", "kind": "Resources", "resources": [{
                      "name": "nop",
                      "base": {"apiVersion": "nop.crossplane.io/v1alpha1", "kind": "NopResource",
                               "spec": {"forProvider": {
                                   "conditionAfter": [{"time": "0s", "conditionType": "Ready", "conditionStatus": "True"}]}}},
                      "patches": [{"type": "FromCompositeFieldPath", "fromFieldPath": "spec.n",
                                   "toFieldPath": "spec.forProvider.fields.n"}]}]}}]}},
    ]});
    let file = dir.join("xroll.json");
    std::fs::write(&file, list.to_string())?;
    testenv::kubectl::run(kubeconfig, &["apply", "-f", &file.display().to_string()])
        .context("applying the XRD and Composition")?;
    Ok(())
}

/// How many XRs are Ready with their composed NopResource at their `spec.n`, and how many NopResources
/// (ours and the composed ones) are Ready and Synced.
async fn converged(client: &kube::Client) -> anyhow::Result<(usize, usize, usize)> {
    // Ours and the composed ones (named after their XR), not the NopResources of the faults before.
    let nops: Vec<DynamicObject> = workload::nop_api(client)
        .list(&ListParams::default())
        .await?
        .items
        .into_iter()
        .filter(|r| r.metadata.name.as_deref().is_some_and(|n| n.starts_with("roll-")))
        .collect();
    let xrs = xr_api(client).list(&ListParams::default()).await?.items;
    let nops_ready = nops
        .iter()
        .filter(|r| condition(r, "Ready") && condition(r, "Synced"))
        .count();
    let xrs_ready = xrs
        .iter()
        .filter(|xr| {
            let name = xr.metadata.name.as_deref().unwrap_or_default();
            let n = &xr.data["spec"]["n"];
            condition(xr, "Ready")
                && nops.iter().any(|r| {
                    r.metadata
                        .labels
                        .as_ref()
                        .and_then(|l| l.get("crossplane.io/composite"))
                        .is_some_and(|c| c == name)
                        && &r.data["spec"]["forProvider"]["fields"]["n"] == n
                })
        })
        .count();
    Ok((nops_ready, xrs_ready, nops.len()))
}

async fn wait_converged(client: &kube::Client, timeout: Duration) -> anyhow::Result<(usize, usize)> {
    let start = Instant::now();
    loop {
        let (nops, xrs, all) = converged(client).await?;
        if nops == all && nops == NOPS + XRS && xrs == XRS {
            return Ok((nops, xrs));
        }
        ensure!(
            start.elapsed() < timeout,
            "{nops} of {all} NopResources Ready and Synced, {xrs} of {XRS} XRs Ready with their composed \
             NopResource up to date, after {}s",
            timeout.as_secs()
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// Whether every rolled Deployment has 2 Ready Pods of build B, one of which holds its Lease.
async fn rolled(client: &kube::Client, leases: &BTreeMap<String, String>) -> anyhow::Result<bool> {
    let pods: Api<Pod> = Api::namespaced(client.clone(), NAMESPACE);
    let holders = workload::lease_holders(client, NAMESPACE).await?;
    for app in ROLLED {
        let image_name = if app == "provider-nop" {
            "provider-nop"
        } else {
            "crossplane"
        };
        let next = release::registry::Registry::default().full_reference(image_name, image::NEXT_TAG);
        let list = pods
            .list(&ListParams::default().labels(&format!("app.kubernetes.io/name={app}")))
            .await?
            .items;
        let b = list.len() == 2
            && list.iter().all(|p| {
                workload::is_ready(p)
                    && p.spec
                        .as_ref()
                        .is_some_and(|s| s.containers[0].image.as_deref() == Some(next.as_str()))
            });
        let holder = leases
            .get(app)
            .and_then(|l| holders.get(l))
            .cloned()
            .unwrap_or_default();
        if !b
            || !list
                .iter()
                .any(|p| workload::name(p) == workload::holder_pod(&holder))
        {
            return Ok(false);
        }
    }
    Ok(true)
}

/// Runs the rollout; `leases` names each Deployment's Lease.
pub async fn run(
    client: &kube::Client,
    cluster: &testenv::Cluster,
    dir: &Path,
    leases: &BTreeMap<String, String>,
) -> anyhow::Result<Rollout> {
    apply_xrd(cluster.kubeconfig(), dir)?;
    let nops = workload::nop_api(client);
    for i in 0..NOPS {
        nops.create(&PostParams::default(), &workload::ready_nop(&format!("roll-{i}")))
            .await?;
    }
    // The XR kind is served once the core's leader has turned the XRD into a CRD.
    let xrs = xr_api(client);
    let start = Instant::now();
    for j in 0..XRS {
        let xr: DynamicObject = serde_json::from_value(json!({
            "apiVersion": format!("{XR_GROUP}/v1"), "kind": "XRoll",
            "metadata": {"name": format!("roll-xr-{j}")}, "spec": {"n": 0}}))?;
        loop {
            match xrs.create(&PostParams::default(), &xr).await {
                Ok(_) => break,
                Err(e) if start.elapsed() > Duration::from_secs(120) => {
                    return Err(anyhow::Error::new(e).context("creating XRs: the XR kind was never served"));
                }
                Err(_) => tokio::time::sleep(Duration::from_millis(250)).await,
            }
        }
    }
    wait_converged(client, READY_TIMEOUT).await?;
    eprintln!("[node] {NOPS} NopResources and {XRS} XRs Ready; rolling provider-nop and the core to B");

    let changing = Arc::new(AtomicBool::new(true));
    let changer = {
        let (nops, xrs, changing) = (nops.clone(), xrs.clone(), changing.clone());
        tokio::spawn(async move {
            let pp = PatchParams::default();
            let mut k = 0u64;
            while changing.load(Ordering::Relaxed) {
                k += 1;
                let patch = json!({ "spec": { "forProvider": { "fields": { "integerField": k } } } });
                nops.patch(&format!("roll-{}", k as usize % NOPS), &pp, &Patch::Merge(&patch))
                    .await?;
                if k.is_multiple_of(2) {
                    let patch = json!({"spec": {"n": k}});
                    xrs.patch(
                        &format!("roll-xr-{}", (k / 2) as usize % XRS),
                        &pp,
                        &Patch::Merge(&patch),
                    )
                    .await?;
                }
                tokio::time::sleep(Duration::from_millis(250)).await;
            }
            anyhow::Ok(k)
        })
    };
    let started_at = Timestamp::now();
    let started = Instant::now();
    let overlay = super::overlay_with_next(&dir.join("overlay-next"), &IMAGES)?;
    testenv::kubectl::apply(cluster.kubeconfig(), &overlay)?;
    let outcome = async {
        while !rolled(client, leases).await? {
            ensure!(
                started.elapsed() < READY_TIMEOUT,
                "{ROLLED:?} did not roll to build B (2 Ready Pods, one holding the Lease) within {}s",
                READY_TIMEOUT.as_secs()
            );
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
        anyhow::Ok(())
    }
    .await;
    let seconds = started.elapsed().as_secs_f64();
    changing.store(false, Ordering::Relaxed);
    let changes = changer.await??;
    outcome?;
    eprintln!("[node] rolled to B in {seconds:.1}s, {changes} changes");
    let (nops_ready, xrs_ready) = wait_converged(client, READY_TIMEOUT).await?;

    // The audit log: every Lease write (for the terms), and the other requests from the rollout on.
    let events: Vec<testenv::AuditEvent> = cluster
        .audit()
        .read()?
        .events
        .into_iter()
        .filter(|e| e.resource == "leases" || e.received >= started_at)
        .collect();
    let mut checked = Vec::new();
    for app in ROLLED {
        let lease = leases
            .get(app)
            .with_context(|| format!("no Lease known for {app}"))?
            .clone();
        let lock = Lock::lease(NAMESPACE, &lease);
        let user = format!("system:serviceaccount:{NAMESPACE}:{app}");
        let is_write = |e: &testenv::AuditEvent| {
            e.user == user && e.resource != "leases" && e.resource != "events" && e.received >= started_at
        };
        let writes = events.iter().filter(|e| e.is_write() && is_write(e)).count();
        let judged = super::judge(&events, &lock, started_at, is_write);
        let terms: Vec<_> = checker::terms(&events, &lock)
            .into_iter()
            .filter(|t| t.valid_until() >= started_at)
            .collect();
        let terms = checker::versions_per_term(&events, &terms);
        checked.push(Checked {
            app: app.to_string(),
            writes,
            violations: judged.violations,
            during_foreign_lock_write: judged.during_foreign_lock_write,
            terms,
        });
    }
    Ok(Rollout {
        seconds,
        changes,
        nops: NOPS + XRS,
        xrs: XRS,
        nops_ready,
        xrs_ready,
        checked,
    })
}

impl Rollout {
    /// docs/node.md's section.
    pub fn section(&self) -> Vec<String> {
        let mut out = vec![
            "## Rolling update A → B of provider-nop and the core".to_string(),
            String::new(),
            format!(
                "While {} NopResources and {} XRs (an XRD and a Composition composing one NopResource each \
                 with the built-in function-patch-and-transform) kept changing ({} changes, one every 250 ms, \
                 every second one an XR's `spec.n`), an overlay that changes only the image tags of \
                 provider-nop and crossplane to their second builds (`{}`, reporting `<version>+next`) was \
                 applied, and the Deployment controller rolled provider-nop, crossplane (the core) and \
                 crossplane-rbac-manager (the same image) to build B in {:.1} s (until every Deployment had 2 \
                 Ready Pods of B, one of them holding its Lease). At the end {} of {} NopResources were Ready \
                 and Synced and {} of {} XRs Ready, each composed NopResource carrying its XR's last `spec.n`.",
                self.nops - self.xrs,
                self.xrs,
                self.changes,
                image::NEXT_TAG,
                self.seconds,
                self.nops_ready,
                self.nops,
                self.xrs_ready,
                self.xrs,
            ),
            String::new(),
            "The audit log, checked as the fault schedule checks it (tests/e2e/src/checker.rs): the terms \
             from the Lease's writes; every write from the rollout's start on by the Deployment's \
             ServiceAccount (all resources but Leases and Events), judged against its writer's (the Pod its \
             token is bound to) terms; the versions in the user agents of each holder's writes in its term. \
             A term ends at its holder's own release when the apiserver received it, or at another writer's \
             Lease write when the apiserver answered it; the writes of the holder that arrived while such a \
             write was in flight are inside its term, and counted in their own column."
                .to_string(),
            String::new(),
            "| Deployment | Writes checked | Violations | Writes during another writer's Lease write | Version \
             in each term, in order (holder) |"
                .to_string(),
            "|---|---:|---:|---:|---|".to_string(),
        ];
        for c in &self.checked {
            let terms = c
                .terms
                .iter()
                .map(|(h, v)| {
                    format!(
                        "{} ({})",
                        if v.is_empty() { "no write" } else { v },
                        workload::holder_pod(h)
                    )
                })
                .collect::<Vec<_>>()
                .join(" → ");
            out.push(format!(
                "| {} | {} | {} | {} | {} |",
                c.app,
                c.writes,
                c.violations.len(),
                c.during_foreign_lock_write,
                terms
            ));
        }
        for c in &self.checked {
            for v in &c.violations {
                out.push(String::new());
                out.push(format!("Violation ({}): {v}", c.app));
            }
        }
        out
    }

    /// Fails unless the rollout was safe: no violation, one version per term, build B in the last term,
    /// everything Ready.
    pub fn check(&self) -> anyhow::Result<()> {
        for c in &self.checked {
            ensure!(
                c.violations.is_empty(),
                "{}: violations: {:#?}",
                c.app,
                c.violations
            );
            ensure!(
                c.terms.iter().all(|(_, v)| !v.contains(',')),
                "{}: a term with two versions: {:?}",
                c.app,
                c.terms
            );
            ensure!(
                c.terms.last().is_some_and(|(_, v)| v.ends_with("+next")),
                "{}: the last term is not build B's: {:?}",
                c.app,
                c.terms
            );
            ensure!(c.writes > 0, "{}: no write to check", c.app);
        }
        Ok(())
    }
}
