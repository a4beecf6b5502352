//! Must show 3: standbys do not poll. With lease 60 s, renew 50 s and retry 10 s, a standby takes over
//! within 2 s of the leader's release — far below the retry period — and over 60 s the audit log shows
//! that it made no request but its watch and its keep-warm `GET /version` (every 80 s).
//!
//! And the keep-warm's point: a standby's acquiring write goes out on a connection it kept ready, where
//! without it the write opens a new TCP connection and TLS session inside the handover (its positive
//! control). A TCP relay in front of the apiserver counts the standby's connections.

mod common;

use std::sync::{
    Arc,
    atomic::{AtomicUsize, Ordering},
};
use std::time::Duration;

use anyhow::Context;
use common::{RustCandidate, Timings};
use election::Leadership;
use testenv::{CandidateOptions, GoCandidate};

const NAME: &str = "standby";
const SLOW: Timings = Timings {
    lease: Duration::from_secs(60),
    renew: Duration::from_secs(50),
    retry: Duration::from_secs(10),
};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn standby_watches_and_takes_over_a_release_at_once() -> anyhow::Result<()> {
    let (cluster, ns) = common::bed("election-standby").await?;
    let mut opts = CandidateOptions::new(&ns, NAME, "go-leader");
    opts.lease_duration = SLOW.lease;
    opts.renew_deadline = SLOW.renew;
    opts.retry_period = SLOW.retry;
    let go = GoCandidate::spawn(&cluster, &opts)?;
    go.wait_for("started_leading", Duration::from_secs(20), |e| {
        e.event == "started_leading"
    })
    .await?;

    let mut standby = RustCandidate::spawn(&cluster, &ns, NAME, "rust-standby", SLOW).await?;
    tokio::time::timeout(
        Duration::from_secs(10),
        standby
            .rx
            .wait_for(|l| matches!(l, Leadership::Following { leader: Some(x) } if x == "go-leader")),
    )
    .await??;
    tokio::time::sleep(Duration::from_secs(1)).await;

    // 60 s of steady state: the leader renews six times; the standby only watches.
    let from = jiff::Timestamp::now();
    tokio::time::sleep(Duration::from_secs(60)).await;
    let to = jiff::Timestamp::now();
    assert!(!standby.is_leading());
    let all = cluster.audit().read_all_stages()?.events;
    let by_standby: Vec<_> = all
        .iter()
        .filter(|e| e.agent_identity() == Some("rust-standby") && e.received >= from && e.received <= to)
        .collect();
    // Besides its watch, a standby sends only its keep-warm `GET /version`, once per KEEP_WARM (80 s):
    // at most one falls in a 60 s window. It never reads or writes the Lease.
    let keep_warm = |e: &&&testenv::AuditEvent| e.verb == "get" && e.request_uri == "/version";
    let not_watch: Vec<_> = by_standby
        .iter()
        .filter(|e| e.verb != "watch" && !keep_warm(e))
        .map(|e| (&e.verb, &e.request_uri))
        .collect();
    assert!(
        not_watch.is_empty(),
        "the standby made requests other than its watch and its keep-warm request: {not_watch:?}"
    );
    let warmups = by_standby
        .iter()
        .filter(keep_warm)
        .filter(|e| e.stage == "ResponseComplete")
        .count();
    eprintln!("in 60 s of steady state the standby sent {warmups} keep-warm request(s) besides its watch");
    assert!(
        warmups <= 1,
        "{warmups} keep-warm requests in 60 s (one per 80 s expected)"
    );
    let renewals = all
        .iter()
        .filter(|e| {
            e.agent_identity() == Some("go-leader")
                && e.verb == "update"
                && e.stage == "ResponseComplete"
                && e.received >= from
                && e.received <= to
        })
        .count();
    assert!(renewals >= 5, "the leader renewed only {renewals} times in 60 s");
    // The standby's watch is open: it started before the window and has not completed.
    let watch_started = all.iter().any(|e| {
        e.agent_identity() == Some("rust-standby")
            && e.verb == "watch"
            && e.resource == "leases"
            && e.stage == "ResponseStarted"
            && e.received < from
    });
    assert!(watch_started, "no watch by the standby in the audit log");

    // The leader releases; the standby takes over within 2 s, well inside one 10 s retry period.
    go.terminate()?;
    standby.wait_leading(Duration::from_secs(10)).await?;
    let writes = common::lock_writes(&cluster, "leases", &ns, NAME)?;
    let release = writes
        .iter()
        .find(|w| w.agent_identity() == Some("go-leader") && w.lock_holder().as_deref() == Some(""))
        .context("no release by the leader")?;
    let acquire = writes
        .iter()
        .find(|w| {
            w.agent_identity() == Some("rust-standby") && w.lock_holder().as_deref() == Some("rust-standby")
        })
        .context("no acquire by the standby")?;
    let gap = acquire.received.duration_since(release.stage_time);
    eprintln!("the standby's acquire reached the apiserver {gap:?} after the release completed");
    assert!(
        gap < jiff::SignedDuration::from_secs(2),
        "the standby took over {gap:?} after the release"
    );
    standby.stop().await?;
    Ok(())
}

/// A TCP relay on loopback in front of the apiserver that counts the connections made through it and
/// those still open.
struct Relay {
    port: u16,
    made: Arc<AtomicUsize>,
    open: tokio::sync::watch::Receiver<usize>,
    task: tokio::task::JoinHandle<()>,
}

impl Relay {
    async fn start(apiserver: String) -> anyhow::Result<Self> {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let port = listener.local_addr()?.port();
        let made = Arc::new(AtomicUsize::new(0));
        let (open_tx, open) = tokio::sync::watch::channel(0usize);
        let counted = made.clone();
        let task = tokio::spawn(async move {
            while let Ok((mut inbound, _)) = listener.accept().await {
                counted.fetch_add(1, Ordering::SeqCst);
                open_tx.send_modify(|n| *n += 1);
                let apiserver = apiserver.clone();
                let open_tx = open_tx.clone();
                tokio::spawn(async move {
                    if let Ok(mut outbound) = tokio::net::TcpStream::connect(&apiserver).await {
                        let _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound).await;
                    }
                    open_tx.send_modify(|n| *n -= 1);
                });
            }
        });
        Ok(Self {
            port,
            made,
            open,
            task,
        })
    }

    fn made(&self) -> usize {
        self.made.load(Ordering::SeqCst)
    }
}

impl Drop for Relay {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// An admin client for `identity` whose connections go through a new [`Relay`].
async fn relayed_client(cluster: &testenv::Cluster, identity: &str) -> anyhow::Result<(kube::Client, Relay)> {
    let kubeconfig = kube::config::Kubeconfig::read_from(cluster.kubeconfig())?;
    let mut config =
        kube::Config::from_custom_kubeconfig(kubeconfig, &kube::config::KubeConfigOptions::default()).await?;
    let host = config
        .cluster_url
        .host()
        .context("the test bed's server has no host")?
        .to_owned();
    let port = config
        .cluster_url
        .port_u16()
        .context("the test bed's server has no port")?;
    let relay = Relay::start(format!("{host}:{port}")).await?;
    // The same host (the serving certificate names it), the relay's port.
    config.cluster_url = format!("https://{host}:{}", relay.port).parse()?;
    let agent = format!("election-test/{} ({identity})", env!("CARGO_PKG_VERSION"));
    config
        .headers
        .push((http::header::USER_AGENT, http::HeaderValue::from_str(&agent)?));
    Ok((kube::Client::try_from(config)?, relay))
}

/// A leader and a standby on one Lease, the standby's connections through a [`Relay`].
struct Pair {
    name: String,
    standby_ns: String,
    keep_warm: Option<Duration>,
    leader: RustCandidate,
    standby: RustCandidate,
    relay: Relay,
}

impl Pair {
    /// Starts the leader, then the standby (keep-warm every `keep_warm`, or none), and waits until the
    /// standby follows the leader with its watch open, as the audit log shows. Then it sends one
    /// `GET /version` through the standby's own client, so that its pool holds an idle connection
    /// besides the watch's, whatever the order of its first requests was.
    async fn start(
        cluster: &testenv::Cluster,
        ns: &str,
        name: &str,
        keep_warm: Option<Duration>,
    ) -> anyhow::Result<Self> {
        let leader_id = format!("{name}-leader");
        let standby_id = format!("{name}-standby");
        let mut leader = RustCandidate::spawn(cluster, ns, name, &leader_id, common::FAST).await?;
        leader.wait_leading(Duration::from_secs(10)).await?;
        let (client, relay) = relayed_client(cluster, &standby_id).await?;
        let mut standby =
            RustCandidate::spawn_client(client.clone(), ns, name, &standby_id, common::FAST, |b| {
                b.keep_warm(keep_warm)
            })?;
        tokio::time::timeout(
            Duration::from_secs(10),
            standby
                .rx
                .wait_for(|l| matches!(l, Leadership::Following { leader: Some(x) } if *x == leader_id)),
        )
        .await
        .context("the standby did not see the leader")??;
        let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
        loop {
            let watching = cluster
                .audit()
                .read_all_stages_containing(&standby_id)?
                .events
                .iter()
                .any(|e| {
                    e.agent_identity() == Some(standby_id.as_str())
                        && e.verb == "watch"
                        && e.resource == "leases"
                        && e.stage == "ResponseStarted"
                });
            if watching {
                break;
            }
            anyhow::ensure!(
                tokio::time::Instant::now() < deadline,
                "{standby_id}: no open watch in the audit log after 30 s"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        client.apiserver_version().await?;
        Ok(Self {
            name: name.to_owned(),
            standby_ns: ns.to_owned(),
            keep_warm,
            leader,
            standby,
            relay,
        })
    }

    /// Stops the leader (which releases) and returns how many connections the standby opened from then
    /// until it led: that is, for its acquiring write.
    async fn hand_over(mut self, cluster: &testenv::Cluster) -> anyhow::Result<usize> {
        let before = self.relay.made();
        let open = *self.relay.open.borrow();
        self.leader.stop().await?;
        self.standby.wait_leading(Duration::from_secs(10)).await?;
        let opened = self.relay.made() - before;
        eprintln!(
            "{} (keep-warm {:?}): {open} connection(s) open while following, {opened} opened to acquire",
            self.name, self.keep_warm
        );
        self.report_gap(cluster)?;
        self.standby.stop().await?;
        Ok(opened)
    }
}

impl Pair {
    /// Prints, from the audit log, how long after the release was answered the standby's acquiring
    /// write arrived (shown, not judged: one sample).
    fn report_gap(&self, cluster: &testenv::Cluster) -> anyhow::Result<()> {
        let ns = &self.standby_ns;
        let writes = common::lock_writes(cluster, "leases", ns, &self.name)?;
        let standby = format!("{}-standby", self.name);
        let release = writes
            .iter()
            .rfind(|w| w.lock_holder().as_deref() == Some(""))
            .context("no release in the audit log")?;
        let acquire = writes
            .iter()
            .find(|w| w.lock_holder().as_deref() == Some(standby.as_str()))
            .context("no acquiring write in the audit log")?;
        eprintln!(
            "{}: the acquiring write arrived {:?} after the release was answered, and was answered {:?} later",
            self.name,
            acquire.received.duration_since(release.stage_time),
            acquire.stage_time.duration_since(acquire.received)
        );
        Ok(())
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_standby_acquires_on_the_connection_it_kept_ready() -> anyhow::Result<()> {
    let (cluster, ns) = common::bed("election-warm").await?;
    let warm = Pair::start(&cluster, &ns, "warm", Some(election::KEEP_WARM)).await?;
    // The positive control: the same standby without keep-warm.
    let mut cold = Pair::start(&cluster, &ns, "cold", None).await?;
    // The apiserver closes a connection idle for 90 s (its IdleTimeout): wait until it closed every idle
    // connection of the cold standby, so that only its watch's is open.
    let idle = Duration::from_secs(150);
    tokio::time::timeout(idle, cold.relay.open.wait_for(|n| *n <= 1))
        .await
        .context("the apiserver did not close the cold standby's idle connection within 150 s")??;
    // Ready in both pools: the warm standby's kept connection; none in the cold one's.
    let warm = warm.hand_over(&cluster).await?;
    let cold = cold.hand_over(&cluster).await?;
    assert_eq!(
        cold, 1,
        "without keep-warm the acquiring write should open a connection"
    );
    assert_eq!(
        warm, 0,
        "with keep-warm the acquiring write should reuse the kept connection"
    );
    Ok(())
}
