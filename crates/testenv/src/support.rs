//! Helpers that integration tests across the workspace share: the shared cluster (failing, never
//! skipping, when it is missing), installing CRDs, polling until something holds, and controller
//! binaries run as replica processes.
//!
//! Tests use `anyhow`, so [`eventually`] takes closures returning `anyhow::Result<bool>`.

use std::{
    future::Future,
    path::{Path, PathBuf},
    process::Command,
    time::Duration,
};

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::{
    Api, Client,
    api::{Patch, PatchParams},
};

use crate::{Cluster, Error, Result};

/// Where the process logs of the calling integration test crate's test `test` go:
/// `<CARGO_TARGET_TMPDIR>/provider-logs/<test>`. A macro, because only the test crate's own build knows
/// `CARGO_TARGET_TMPDIR`.
#[macro_export]
macro_rules! log_dir {
    ($test:expr) => {
        ::std::path::PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
            .join("provider-logs")
            .join($test)
    };
}

/// The shared test bed. A missing one fails the test with instructions; it never skips.
///
/// # Panics
/// When the test bed is missing: that is the point.
pub fn cluster() -> Cluster {
    match Cluster::shared() {
        Ok(c) => c,
        Err(e) => panic!("{e}"),
    }
}

/// Polls `f` every 100 ms until it returns `Ok(true)`; errors count as "not yet" and the last one is
/// reported on time-out.
pub async fn eventually<F, Fut>(what: &str, timeout: Duration, mut f: F) -> Result<()>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = anyhow::Result<bool>>,
{
    let deadline = tokio::time::Instant::now() + timeout;
    let mut last_err = None;
    loop {
        match f().await {
            Ok(true) => return Ok(()),
            Ok(false) => {}
            Err(e) => last_err = Some(e),
        }
        if tokio::time::Instant::now() > deadline {
            return Err(Error::Timeout {
                what: format!("{what} (last error: {last_err:?})"),
                seconds: timeout.as_secs(),
            });
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Applies CRDs as admin (server-side apply) and waits until each is Established.
pub async fn install_crds(client: &Client, crds: &[CustomResourceDefinition]) -> Result<()> {
    let api: Api<CustomResourceDefinition> = Api::all(client.clone());
    for crd in crds {
        let name = crd.metadata.name.clone().unwrap_or_default();
        api.patch(
            &name,
            &PatchParams::apply("crossplane-rs-tests").force(),
            &Patch::Apply(crd),
        )
        .await
        .map_err(Error::kube(format!("applying CRD {name}")))?;
    }
    for crd in crds {
        let name = crd.metadata.name.clone().unwrap_or_default();
        eventually(
            &format!("CRD {name} established"),
            Duration::from_secs(30),
            || {
                let (api, name) = (api.clone(), name.clone());
                async move {
                    let crd = api.get(&name).await?;
                    Ok(crd
                        .status
                        .and_then(|s| s.conditions)
                        .unwrap_or_default()
                        .iter()
                        .any(|c| c.type_ == "Established" && c.status == "True"))
                }
            },
        )
        .await?;
    }
    Ok(())
}

/// A controller binary run as one replica, killed when dropped.
#[derive(Debug)]
pub struct Process {
    /// The process.
    pub process: crate::process::Process,
    /// Its identity (`POD_NAME`).
    pub identity: String,
    /// Its log file (stdout and stderr).
    pub log: PathBuf,
}

impl Process {
    /// Starts `binary` with `args` as replica `identity`, logging to `<dir>/<identity>.log`.
    pub fn start(binary: impl AsRef<Path>, dir: &Path, identity: &str, args: &[String]) -> Result<Self> {
        let log = dir.join(format!("{identity}.log"));
        let mut cmd = Command::new(binary.as_ref());
        cmd.args(args)
            .env_remove("KUBECONFIG")
            .env_remove("POD_NAMESPACE")
            .env("POD_NAME", identity);
        let process = crate::process::Process::spawn(
            &format!("replica {identity}"),
            cmd,
            &log,
            crate::process::Output::Log,
        )?;
        Ok(Self {
            process,
            identity: identity.to_owned(),
            log,
        })
    }

    /// The process id.
    pub fn pid(&self) -> u32 {
        self.process.pid()
    }

    /// The log so far.
    pub fn log_text(&self) -> String {
        self.process.log_text()
    }

    /// Whether it is still running.
    pub fn is_running(&mut self) -> bool {
        self.process.is_running()
    }

    /// Sends SIGSTOP: the replica freezes, its sockets stay open and unanswered.
    pub fn pause(&mut self) -> Result<()> {
        self.process.pause()
    }

    /// Sends SIGCONT after [`Process::pause`].
    pub fn resume(&mut self) -> Result<()> {
        self.process.resume()
    }

    /// Kills it at once (SIGKILL) and reaps it.
    pub fn kill(&mut self) {
        self.process.kill();
    }
}

/// The common flags of a controller replica in a test: the admin kubeconfig, its own Lease in `ns`, no
/// admin listeners, and only resources labelled `test=<ns>`.
pub fn replica_args(cluster: &Cluster, ns: &str, lease: &str, identity: &str) -> Vec<String> {
    [
        "--kubeconfig",
        &cluster.kubeconfig().display().to_string(),
        "--leader-election",
        "--leader-election-namespace",
        ns,
        "--leader-election-id",
        lease,
        "--leader-election-identity",
        identity,
        "--metrics-bind-address",
        "0",
        "--health-probe-bind-address",
        "0",
        "--label-selector",
        &format!("test={ns}"),
    ]
    .iter()
    .map(|s| (*s).to_owned())
    .collect()
}

/// Short Lease timings for replica tests (6 s / 4 s / 1 s), as flags to append to [`replica_args`].
pub fn fast_lease_args() -> Vec<String> {
    [
        "--lease-duration",
        "6s",
        "--renew-deadline",
        "4s",
        "--retry-period",
        "1s",
    ]
    .map(String::from)
    .to_vec()
}

/// The holder of Lease `ns/name`, if it exists and is held (an empty holder is a released Lease).
pub async fn lease_holder(client: &Client, ns: &str, name: &str) -> anyhow::Result<Option<String>> {
    let leases: Api<k8s_openapi::api::coordination::v1::Lease> = Api::namespaced(client.clone(), ns);
    Ok(leases
        .get_opt(name)
        .await?
        .and_then(|l| l.spec)
        .and_then(|s| s.holder_identity)
        .filter(|h| !h.is_empty()))
}

/// Waits until `identity` holds Lease `ns/name`.
pub async fn wait_holder(
    client: &Client,
    ns: &str,
    name: &str,
    identity: &str,
    timeout: Duration,
) -> anyhow::Result<()> {
    Ok(
        eventually(&format!("{identity} holds {ns}/{name}"), timeout, || async move {
            Ok(lease_holder(client, ns, name).await?.as_deref() == Some(identity))
        })
        .await?,
    )
}

/// Checks the writes of a two-replica failover in the audit log: replica `a` led until it was killed at
/// `killed_at` (reaped by `dead_at`), then `b` took over. `writes` are the writes to the objects the
/// replicas manage, and `agent` the binary's user-agent prefix (`provider-nop/`). Fails unless `a` wrote
/// before the kill and never after it, `b` never wrote before the kill and did after it, and no other
/// replica of the binary wrote. Returns a one-line summary of the counts.
pub fn assert_failover_writes(
    writes: &[&crate::AuditEvent],
    agent: &str,
    (ua_a, ua_b): (&str, &str),
    killed_at: jiff::Timestamp,
    dead_at: jiff::Timestamp,
) -> anyhow::Result<String> {
    let count = |ua: &str, keep: &dyn Fn(&crate::AuditEvent) -> bool| {
        writes.iter().filter(|e| e.user_agent == ua && keep(e)).count()
    };
    let by_a = count(ua_a, &|_| true);
    let a_after_kill = count(ua_a, &|e| e.received > dead_at);
    let by_b = count(ua_b, &|_| true);
    let b_before_kill = count(ua_b, &|e| e.received < killed_at);
    let summary = format!(
        "writes: leader a {by_a} (after kill {a_after_kill}), standby-then-leader b {by_b} (before kill {b_before_kill})"
    );
    anyhow::ensure!(by_a > 0, "the first leader wrote nothing ({summary})");
    anyhow::ensure!(
        b_before_kill == 0,
        "the standby wrote {b_before_kill} times while a led ({summary})"
    );
    anyhow::ensure!(
        a_after_kill == 0,
        "the killed leader wrote {a_after_kill} times after the kill ({summary})"
    );
    anyhow::ensure!(by_b > 0, "the new leader wrote nothing ({summary})");
    let others = writes
        .iter()
        .filter(|e| e.user_agent.starts_with(agent) && e.user_agent != ua_a && e.user_agent != ua_b)
        .count();
    anyhow::ensure!(others == 0, "{others} writes from other {agent} replicas");
    Ok(summary)
}
