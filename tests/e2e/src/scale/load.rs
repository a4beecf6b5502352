//! The work a core is measured on, after its idle figures: `n` XRDs until Established, or `n` XRs
//! composing through a function until Ready; the leader's and the standby's CPU and memory, and the
//! apiserver's CPU, over the window from the first create until a watch has seen all done.

use std::{
    collections::{BTreeMap, HashSet},
    future::Future,
    path::Path,
    time::{Duration, Instant},
};

use anyhow::Context;
use kube::{Api, api::DynamicObject};
use serde::Serialize;

use super::{
    core::{Core, Usage},
    function, procstat,
    tally::{self, Tally},
    xrds, xrs,
};

/// What the core is given.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Work {
    /// XRDs, each of a group and kind of its own, until Established.
    Xrds,
    /// XRs of one kind, each composing 3 ConfigMaps through one function, until Ready.
    Xrs,
}

impl Work {
    /// What it counts: "XRDs" or "XRs".
    pub fn noun(self) -> &'static str {
        match self {
            Work::Xrds => "XRDs",
            Work::Xrs => "XRs",
        }
    }
}

/// The core under measure.
pub struct Target<'a> {
    /// Which core.
    pub core: Core,
    /// Its cluster's client.
    pub client: &'a kube::Client,
    /// The core's namespace.
    pub ns: &'a str,
    /// The leader's and the standby's process ids.
    pub pids: [u32; 2],
    /// kube-apiserver's and etcd's process ids.
    pub apiserver: &'a [u32],
    /// Where logs go.
    pub logs: &'a Path,
    /// The cluster, for its audit log.
    pub cluster: &'a testenv::Cluster,
}

/// What one window measured.
pub struct Measured {
    /// From the first create until the last create returned.
    pub create_seconds: f64,
    /// From the first create until all were done.
    pub done_seconds: f64,
    /// The watch's count, errors and re-lists.
    pub tally: Tally,
    /// The leader over the window.
    pub leader: Usage,
    /// The standby over the window.
    pub standby: Usage,
    /// kube-apiserver's and etcd's CPU seconds over the window.
    pub apiserver_cpu_seconds: f64,
    /// The core's requests over the window, by verb, Leases apart (from the audit log).
    pub requests: BTreeMap<String, usize>,
}

/// The requests of the core's replicas (user agent `crossplane/...`, both cores send it) received
/// between `from` and `until`, by verb, Leases apart; each request once.
fn requests(
    cluster: &testenv::Cluster,
    from: jiff::Timestamp,
    until: jiff::Timestamp,
) -> anyhow::Result<BTreeMap<String, usize>> {
    let mut by_verb = BTreeMap::new();
    let mut seen = HashSet::new();
    for e in cluster.audit().read()?.events {
        let ours = e.user_agent.starts_with("crossplane/") && e.resource != "leases";
        if ours && e.received >= from && e.received <= until && seen.insert(e.audit_id.clone()) {
            *by_verb.entry(e.verb.clone()).or_insert(0) += 1;
        }
    }
    Ok(by_verb)
}

/// CPU seconds of each of `pids`.
fn cpu(pids: &[u32]) -> anyhow::Result<Vec<f64>> {
    pids.iter().map(|&p| procstat::cpu_seconds(p)).collect()
}

/// Watches `watched` for objects that are `done`, runs `create`, and waits until `n` are done.
async fn window(
    t: &Target<'_>,
    watched: Api<DynamicObject>,
    done: fn(&DynamicObject) -> bool,
    n: usize,
    what: &str,
    create: impl Future<Output = anyhow::Result<()>>,
) -> anyhow::Result<Measured> {
    let (watch, mut rx) = tally::count(watched, done);
    let (cpu0, api0) = (cpu(&t.pids)?, cpu(t.apiserver)?);
    let (from, started) = (jiff::Timestamp::now(), Instant::now());
    create.await?;
    let create_seconds = started.elapsed().as_secs_f64();
    let waited = tally::wait(&mut rx, n, xrds::timeout(n), t.core.label(), what).await;
    let (done_seconds, until) = (started.elapsed().as_secs_f64(), jiff::Timestamp::now());
    watch.abort();
    waited?;
    let (cpu1, api1) = (cpu(&t.pids)?, cpu(t.apiserver)?);
    let usage = |i: usize| -> anyhow::Result<Usage> {
        Ok(Usage {
            cpu_seconds: cpu1[i] - cpu0[i],
            rss_mib: procstat::rss_mib(t.pids[i])?,
            peak_rss_mib: procstat::peak_rss_mib(t.pids[i])?,
        })
    };
    let tally = rx.borrow().clone();
    eprintln!(
        "[scale] {}: {n} {what} in {done_seconds:.1}s (watch: {} errors, {} re-lists)",
        t.core.label(),
        tally.errors,
        tally.restarts
    );
    Ok(Measured {
        create_seconds,
        done_seconds,
        tally,
        leader: usage(0)?,
        standby: usage(1)?,
        apiserver_cpu_seconds: api1.iter().sum::<f64>() - api0.iter().sum::<f64>(),
        requests: requests(t.cluster, from, until)?,
    })
}

/// `n` XRDs until Established.
pub async fn xrds(t: &Target<'_>, n: usize) -> anyhow::Result<Measured> {
    let api = xrds::api(t.client);
    window(t, api.clone(), xrds::established, n, "XRDs Established", async {
        xrds::create(&api, n).await
    })
    .await
}

/// Waits until the apiserver serves `api`'s kind in `ns` and has taken one write of it (a dry run,
/// which persists nothing): its first requests to a new CRD take seconds, which would otherwise count
/// against the core.
async fn served_kind(api: &Api<DynamicObject>, xr: &DynamicObject) -> anyhow::Result<()> {
    let deadline = Instant::now() + Duration::from_secs(60);
    let dry = kube::api::PostParams {
        dry_run: true,
        ..Default::default()
    };
    while let Err(e) = api.create(&dry, xr).await {
        if Instant::now() > deadline {
            anyhow::bail!("the XRs' kind does not take a write 60 s after its XRD was Established: {e}");
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    Ok(())
}

/// `n` XRs until Ready, after the function, its Function and revision, the XRs' XRD (Established)
/// and their Composition are in place.
pub async fn xrs(t: &Target<'_>, n: usize) -> anyhow::Result<Measured> {
    let served = function::serve(t.client, t.ns, t.logs).await?;
    function::install(t.client, &served.endpoint)
        .await
        .context("installing the function")?;
    xrs::install(t.client).await?;
    let (watch, mut rx) = tally::count(xrds::api(t.client), xrds::established);
    let waited = tally::wait(
        &mut rx,
        1,
        Duration::from_secs(120),
        t.core.label(),
        "XRDs Established",
    )
    .await;
    watch.abort();
    waited?;
    served_kind(&xrs::namespaced(t.client, t.ns), &xrs::xr(0)?).await?;
    let measured = window(t, xrs::api(t.client), xrs::ready, n, "XRs Ready", async {
        xrs::create(t.client, t.ns, n).await
    })
    .await?;
    drop(served);
    composed(t, n).await?;
    Ok(measured)
}

/// Checks that the function did compose: at least 3 ConfigMaps per XR carry the label
/// `crossplane.io/composite`, which both cores put on what they compose.
async fn composed(t: &Target<'_>, n: usize) -> anyhow::Result<()> {
    let cms: Api<k8s_openapi::api::core::v1::ConfigMap> = Api::namespaced(t.client.clone(), t.ns);
    let found = cms
        .list(&kube::api::ListParams::default().labels("crossplane.io/composite"))
        .await?
        .items
        .len();
    anyhow::ensure!(
        found >= 3 * n,
        "{} made {n} XRs Ready but composed only {found} ConfigMaps of {}",
        t.core.label(),
        3 * n
    );
    Ok(())
}
