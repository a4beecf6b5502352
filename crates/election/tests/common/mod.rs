//! Shared helpers for the election integration tests: Rust candidates run in this process, clients
//! with a user agent naming the candidate, Lease readers, and the audit-log safety check.
#![allow(dead_code)]

use std::{
    collections::BTreeMap,
    path::Path,
    sync::{Arc, Mutex},
    time::Duration,
};

use anyhow::{Context, bail};
use election::{ElectorBuilder, Leadership, LockKind, Term};
use k8s_openapi::api::{coordination::v1::Lease, core::v1::ConfigMap};
use kube::{
    Api, Client, Config,
    config::{KubeConfigOptions, Kubeconfig},
};
use testenv::{AuditEvent, Cluster};
use tokio::{
    sync::{oneshot, watch},
    task::JoinHandle,
};

/// Short timings shared with `testenv::CandidateOptions::new`: 4 s / 3 s / 500 ms.
#[derive(Clone, Copy, Debug)]
pub struct Timings {
    pub lease: Duration,
    pub renew: Duration,
    pub retry: Duration,
}

pub const FAST: Timings = Timings {
    lease: Duration::from_secs(4),
    renew: Duration::from_secs(3),
    retry: Duration::from_millis(500),
};

/// The shared test bed and a fresh namespace.
pub async fn bed(prefix: &str) -> anyhow::Result<(Cluster, String)> {
    let cluster = Cluster::shared().context("the election tests need the test bed")?;
    let ns = cluster.namespace(prefix).await?;
    Ok((cluster, ns))
}

/// A client from `kubeconfig` whose user agent is `election-test/<version> (<identity>)`, so the audit
/// log tells candidates apart.
pub async fn client_from(kubeconfig: &Path, identity: &str) -> anyhow::Result<Client> {
    let kc = Kubeconfig::read_from(kubeconfig)?;
    let mut config = Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default()).await?;
    let agent = format!("election-test/{} ({identity})", env!("CARGO_PKG_VERSION"));
    config
        .headers
        .push((http::header::USER_AGENT, http::HeaderValue::from_str(&agent)?));
    Ok(Client::try_from(config)?)
}

/// An admin client for `identity`.
pub async fn client(cluster: &Cluster, identity: &str) -> anyhow::Result<Client> {
    client_from(cluster.kubeconfig(), identity).await
}

/// `CLOCK_MONOTONIC` now, comparable with the Go candidates' `mono_ns`.
pub fn mono() -> i64 {
    testenv::monotonic_ns()
}

/// A Rust candidate running in this process.
pub struct RustCandidate {
    pub identity: String,
    pub rx: watch::Receiver<Leadership>,
    stop: Option<oneshot::Sender<()>>,
    task: Option<JoinHandle<Result<(), election::Error>>>,
    monitor: JoinHandle<()>,
    /// (monotonic ns, leading) at every published change.
    pub history: Arc<Mutex<Vec<(i64, bool)>>>,
}

impl RustCandidate {
    /// Starts a candidate with `timings`, customised by `f`.
    pub async fn spawn_with(
        cluster: &Cluster,
        ns: &str,
        name: &str,
        identity: &str,
        timings: Timings,
        f: impl FnOnce(ElectorBuilder) -> ElectorBuilder,
    ) -> anyhow::Result<Self> {
        let client = client(cluster, identity).await?;
        Self::spawn_client(client, ns, name, identity, timings, f)
    }

    /// Starts a candidate with `timings` and defaults otherwise (Lease lock, release on cancel).
    pub async fn spawn(
        cluster: &Cluster,
        ns: &str,
        name: &str,
        identity: &str,
        timings: Timings,
    ) -> anyhow::Result<Self> {
        Self::spawn_with(cluster, ns, name, identity, timings, |b| b).await
    }

    /// Starts a candidate using `kind` as its lock.
    pub async fn spawn_kind(
        cluster: &Cluster,
        ns: &str,
        name: &str,
        identity: &str,
        kind: LockKind,
    ) -> anyhow::Result<Self> {
        Self::spawn_with(cluster, ns, name, identity, FAST, |b| b.lock_kind(kind)).await
    }

    /// Starts a candidate on an existing client.
    pub fn spawn_client(
        client: Client,
        ns: &str,
        name: &str,
        identity: &str,
        timings: Timings,
        f: impl FnOnce(ElectorBuilder) -> ElectorBuilder,
    ) -> anyhow::Result<Self> {
        let builder = ElectorBuilder::new(client, ns, name, identity)
            .timings(election::Timings::new(
                timings.lease,
                timings.renew,
                timings.retry,
            ))
            .labels(BTreeMap::from([(
                "app.kubernetes.io/name".into(),
                "election-test".into(),
            )]));
        let elector = f(builder).build()?;
        let rx = elector.leadership();
        let history = Arc::new(Mutex::new(vec![(mono(), false)]));
        let monitor = {
            let mut rx = rx.clone();
            let history = history.clone();
            tokio::spawn(async move {
                while rx.changed().await.is_ok() {
                    let now = rx.borrow_and_update().clone();
                    record(&history, &now);
                }
                record(&history, &Leadership::Following { leader: None });
            })
        };
        let (stop, stopped) = oneshot::channel::<()>();
        let task = tokio::spawn(elector.run(async move {
            let _ = stopped.await;
        }));
        Ok(Self {
            identity: identity.into(),
            rx,
            stop: Some(stop),
            task: Some(task),
            monitor,
            history,
        })
    }

    /// Whether `run` is still running.
    pub fn is_running(&self) -> bool {
        self.task.as_ref().is_some_and(|t| !t.is_finished())
    }

    /// Whether it leads now.
    pub fn is_leading(&self) -> bool {
        self.rx.borrow().is_leading()
    }

    /// The current term, if leading.
    pub fn term(&self) -> Option<Term> {
        self.rx.borrow().term().cloned()
    }

    /// Waits until it leads and returns the term.
    pub async fn wait_leading(&mut self, timeout: Duration) -> anyhow::Result<Term> {
        let got = tokio::time::timeout(timeout, self.rx.wait_for(Leadership::is_leading))
            .await
            .with_context(|| format!("{} did not become leader within {timeout:?}", self.identity))??
            .clone();
        // What this wait saw, even if the state has moved on since.
        record(&self.history, &got);
        got.term().cloned().context("leading without a term")
    }

    /// Waits until it follows.
    pub async fn wait_following(&mut self, timeout: Duration) -> anyhow::Result<()> {
        tokio::time::timeout(timeout, self.rx.wait_for(|l| !l.is_leading()))
            .await
            .with_context(|| format!("{} did not stop leading within {timeout:?}", self.identity))??;
        Ok(())
    }

    /// Resolves its shutdown (releasing when leading) and waits for `run` to return.
    pub async fn stop(&mut self) -> anyhow::Result<()> {
        self.catch_up();
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(task) = self.task.take() {
            tokio::time::timeout(Duration::from_secs(30), task)
                .await
                .context("run did not return")???;
        }
        // Let the monitor record the end.
        tokio::time::sleep(Duration::from_millis(20)).await;
        Ok(())
    }

    /// Ends the candidate abruptly: its task is aborted, so it neither releases nor sends anything
    /// again. For the lock this is the same as SIGKILL of a process.
    pub fn crash(&mut self) {
        self.catch_up();
        if let Some(task) = self.task.take() {
            task.abort();
        }
        self.stop.take();
    }

    /// Records the current state in the history. The monitor task sees only the latest value when it
    /// runs, so on a loaded machine a whole term can pass it by; every method that observes or ends the
    /// candidate calls this. A closed channel means the elector is gone: it no longer leads, whatever
    /// it last said.
    fn catch_up(&self) {
        let now = if self.rx.has_changed().is_err() {
            Leadership::Following { leader: None }
        } else {
            self.rx.borrow().clone()
        };
        record(&self.history, &now);
    }

    /// Its leading intervals `[start, end)` in monotonic ns; an open interval ends at `now`.
    pub fn intervals(&self) -> Vec<(i64, i64)> {
        self.catch_up();
        let h = self.history.lock().map(|h| h.clone()).unwrap_or_default();
        intervals(&h, mono())
    }
}

impl Drop for RustCandidate {
    fn drop(&mut self) {
        if let Some(task) = self.task.take() {
            task.abort();
        }
        self.monitor.abort();
    }
}

/// Appends a leadership state to a `(time, leading)` history when it differs from the last entry. A
/// term starts when its acquire request was sent (not when the change was seen), so the interval is
/// never shorter than the real one.
fn record(history: &Mutex<Vec<(i64, bool)>>, now: &Leadership) {
    let Ok(mut h) = history.lock() else { return };
    let leading = now.is_leading();
    if h.last().map(|(_, l)| *l) == Some(leading) {
        return;
    }
    let at = match now.term() {
        Some(term) => {
            let ago = i64::try_from(term.started().elapsed().as_nanos()).unwrap_or(i64::MAX);
            let at = mono().saturating_sub(ago);
            // Never before the previous entry.
            h.last().map_or(at, |(t, _)| at.max(*t))
        }
        None => mono(),
    };
    h.push((at, leading));
}

/// Leading intervals from a `(time, leading)` history.
pub fn intervals(history: &[(i64, bool)], now: i64) -> Vec<(i64, i64)> {
    let mut out = Vec::new();
    let mut start = None;
    for (t, leading) in history {
        match (leading, start) {
            (true, None) => start = Some(*t),
            (false, Some(s)) => {
                out.push((s, *t));
                start = None;
            }
            _ => {}
        }
    }
    if let Some(s) = start {
        out.push((s, now));
    }
    out
}

/// Leading intervals of a client-go candidate, from its events.
pub fn go_intervals(go: &testenv::GoCandidate) -> Vec<(i64, i64)> {
    let history: Vec<(i64, bool)> = go
        .events()
        .iter()
        .filter_map(|e| match e.event.as_str() {
            "started_leading" => Some((e.mono_ns, true)),
            // On SIGTERM client-go cancels the leader context first ("signal"), then releases, then
            // reports stopped_leading: leader work ends at the signal.
            "signal" | "stopped_leading" | "exited" => Some((e.mono_ns, false)),
            _ => None,
        })
        .collect();
    intervals(&history, mono())
}

/// Fails if any two of the named interval sets overlap.
pub fn assert_exclusive(sets: &[(&str, Vec<(i64, i64)>)]) -> anyhow::Result<()> {
    for (i, (a, ia)) in sets.iter().enumerate() {
        for (b, ib) in &sets[i + 1..] {
            for (s1, e1) in ia {
                for (s2, e2) in ib {
                    if s1 < e2 && s2 < e1 {
                        bail!(
                            "{a} led [{s1}, {e1}) and {b} led [{s2}, {e2}) at the same time (monotonic ns)"
                        );
                    }
                }
            }
        }
    }
    Ok(())
}

/// The Lease as JSON exactly as served, if it exists.
pub async fn lease_json(client: &Client, ns: &str, name: &str) -> anyhow::Result<Option<serde_json::Value>> {
    let ar = kube::api::ApiResource::erase::<Lease>(&());
    let api: Api<kube::api::DynamicObject> = Api::namespaced_with(client.clone(), ns, &ar);
    Ok(api.get_opt(name).await?.map(serde_json::to_value).transpose()?)
}

/// The Lease, if it exists.
pub async fn lease(client: &Client, ns: &str, name: &str) -> anyhow::Result<Option<Lease>> {
    Ok(Api::<Lease>::namespaced(client.clone(), ns).get_opt(name).await?)
}

/// The holder of the Lease (`""` when released or missing).
pub async fn holder(client: &Client, ns: &str, name: &str) -> anyhow::Result<String> {
    Ok(lease(client, ns, name)
        .await?
        .and_then(|l| l.spec)
        .and_then(|s| s.holder_identity)
        .unwrap_or_default())
}

/// The ConfigMap, if it exists.
pub async fn configmap(client: &Client, ns: &str, name: &str) -> anyhow::Result<Option<ConfigMap>> {
    Ok(Api::<ConfigMap>::namespaced(client.clone(), ns)
        .get_opt(name)
        .await?)
}

/// Polls the Lease every 50 ms until its holder satisfies `pred`; returns the holder.
pub async fn wait_holder(
    client: &Client,
    ns: &str,
    name: &str,
    timeout: Duration,
    pred: impl Fn(&str) -> bool,
) -> anyhow::Result<String> {
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        let h = holder(client, ns, name).await?;
        if pred(&h) {
            return Ok(h);
        }
        if tokio::time::Instant::now() >= deadline {
            bail!("timed out after {timeout:?} waiting for the holder of {ns}/{name}; it is {h:?}");
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Polls `f` every 50 ms until it returns true or `timeout` passes.
pub async fn eventually<F, Fut>(what: &str, timeout: Duration, mut f: F) -> anyhow::Result<()>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = anyhow::Result<bool>>,
{
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        if f().await? {
            return Ok(());
        }
        if tokio::time::Instant::now() >= deadline {
            bail!("timed out after {timeout:?} waiting for {what}");
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The successful writes to one lock object, in completion order.
pub fn lock_writes(
    cluster: &Cluster,
    resource: &str,
    ns: &str,
    name: &str,
) -> anyhow::Result<Vec<AuditEvent>> {
    let mut writes: Vec<AuditEvent> = cluster
        .audit()
        .read()?
        .events
        .into_iter()
        .filter(|e| {
            e.resource == resource
                && e.namespace == ns
                && (e.name == name || (e.verb == "create" && e.lock_holder().is_some() && e.name.is_empty()))
                && e.is_write()
                && (200..300).contains(&e.code)
        })
        .collect();
    writes.sort_by_key(|e| (e.stage_time, e.received));
    Ok(writes)
}

/// Checks, from the audit log, that every successful write of the Lease was made by a candidate while it
/// held the Lease: renewals and releases by the holder; takeovers of a released (or missing) Lease at
/// once; takeovers from another holder only after that holder's lease duration had passed since its
/// last write arrived. Returns the writes checked.
pub fn assert_writes_while_held(
    cluster: &Cluster,
    ns: &str,
    name: &str,
    tolerance: Duration,
) -> anyhow::Result<Vec<AuditEvent>> {
    let writes = lock_writes(cluster, "leases", ns, name)?;
    // The previous holder's last write: holder, lease duration, arrival, and the arrival of the first of its
    // writes with the same `renewTime` second (see below).
    let mut prev: Option<(String, i64, jiff::Timestamp, jiff::Timestamp)> = None;
    let mut prev_second: Option<String> = None;
    for w in &writes {
        if w.request_object.is_none() {
            bail!(
                "the audit log has no request body for a Lease write; the test bed's audit policy is too old \
                 (restart it with `cargo xtask test`)"
            );
        }
        let author = w.agent_identity().unwrap_or_default().to_string();
        let holder = w.lock_holder().unwrap_or_default();
        if !holder.is_empty() && holder != author {
            bail!(
                "{author} wrote the Lease naming {holder} as holder at {}",
                w.received
            );
        }
        if holder.is_empty()
            && let Some((prev_holder, ..)) = &prev
            && *prev_holder != author
        {
            bail!(
                "{author} released the Lease held by {prev_holder:?} at {}",
                w.received
            );
        }
        if let Some((prev_holder, prev_secs, prev_arrived, second_began)) = &prev
            && !prev_holder.is_empty()
            && *prev_holder != author
        {
            // client-go compares the records it reads as JSON with `renewTime` cut to whole seconds, so a
            // renewal within the same second as the one before looks like no change to it, and it counts
            // the lease from the first of them. That is client-go's behaviour, and why the leader's safety
            // margin (lease - renew deadline) must exceed a second when client-go candidates share a Lease.
            let base = if w.user_agent.starts_with("lease-candidate/") {
                *second_began
            } else {
                *prev_arrived
            };
            let earliest = base + jiff::SignedDuration::from_secs(*prev_secs)
                - jiff::SignedDuration::try_from(tolerance)?;
            if w.received < earliest {
                bail!(
                    "{author} wrote the Lease at {} while {prev_holder} still held it (its last write arrived \
                     {prev_arrived}, lease {prev_secs}s)",
                    w.received
                );
            }
        }
        // The lease runs from when the write took effect, which is between its arrival and its response:
        // a candidate can see the new record (and start counting) before the writer hears back, so the
        // earliest legitimate takeover is measured from the arrival.
        let second = w
            .request_object
            .as_ref()
            .and_then(|o| o.pointer("/spec/renewTime"))
            .and_then(|v| v.as_str())
            .map(|t| t.get(..19).unwrap_or(t).to_owned());
        let second_began = match &prev {
            Some((h, _, _, began)) if *h == holder && second.is_some() && second == prev_second => *began,
            _ => w.received,
        };
        prev = Some((
            holder,
            w.lock_duration_seconds().unwrap_or(0),
            w.received,
            second_began,
        ));
        prev_second = second;
    }
    Ok(writes)
}
