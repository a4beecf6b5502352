//! Helpers shared by the bad-input suite and the checker's self-test: the five binaries, replica
//! processes with their logs, Lease and NopResource helpers, and the audit-log filter for provider-nop's
//! controller writes.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Secret;
use kube::Client;
use kube::api::{Api, ApiResource, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use nix::sys::signal::Signal;
use serde_json::{Value, json};
use testenv::support::Process;
use testenv::{AuditEvent, Cluster};

/// Lease timings of every replica in these suites: a 2 s margin.
pub const LEASE: Duration = Duration::from_secs(6);
/// The timing flags.
pub const TIMINGS: [&str; 6] = [
    "--lease-duration",
    "6s",
    "--renew-deadline",
    "4s",
    "--retry-period",
    "1s",
];

/// One of the binaries that ship, as its Deployment runs it.
#[derive(Debug, Clone)]
pub struct Binary {
    /// The name it goes by: its Deployment's (and its clap name).
    pub name: &'static str,
    /// The executable: this package's build of the binary's `main` (`src/bin/e2e-<image>.rs`).
    pub path: PathBuf,
    /// The subcommand, if any.
    pub subcommand: &'static [&'static str],
    /// The flag that limits what it watches to a test's objects.
    pub selector_flag: &'static str,
    /// A provider (else the core's image).
    provider: bool,
}

/// Every deployed binary, in deploy order, from the one description of them
/// (`release::binaries::deployed`): crossplane (core), crossplane-rbac-manager and each provider.
pub fn binaries() -> Vec<Binary> {
    // Cargo builds this package's binaries next to the test executables' `deps/` directory.
    let dir = std::env::current_exe()
        .ok()
        .and_then(|exe| exe.parent()?.parent().map(Path::to_path_buf))
        .unwrap_or_default();
    release::binaries::deployed()
        .into_iter()
        .map(|d| Binary {
            name: d.name,
            path: dir.join(format!("e2e-{}", d.image)),
            subcommand: d.args,
            selector_flag: if d.provider {
                "--label-selector"
            } else {
                "--watch-label-selector"
            },
            provider: d.provider,
        })
        .collect()
}

/// provider-nop.
pub fn nop() -> Binary {
    binaries()
        .into_iter()
        .find(|b| b.name == "provider-nop")
        .expect("provider-nop is deployed")
}

impl Binary {
    /// A short name for identities and Lease names: a provider's name without `provider-`, the core's
    /// binaries' without `crossplane-` (`core` for the core itself).
    pub fn short(&self) -> &'static str {
        if self.provider {
            self.name.strip_prefix("provider-").unwrap_or(self.name)
        } else if self.name == "crossplane" {
            "core"
        } else {
            self.name.strip_prefix("crossplane-").unwrap_or(self.name)
        }
    }

    /// Runs it to completion with `args` after the subcommand (no cluster needed): exit status and
    /// stderr.
    pub fn run(&self, args: &[&str]) -> anyhow::Result<(ExitStatus, String)> {
        let out = Command::new(&self.path)
            .args(self.subcommand)
            .args(args)
            .env_remove("KUBECONFIG")
            .env_remove("POD_NAMESPACE")
            .env_remove("POD_NAME")
            .env_remove("LEADER_ELECTION")
            .output()
            .with_context(|| format!("running {}", self.name))?;
        Ok((out.status, String::from_utf8_lossy(&out.stderr).into_owned()))
    }

    /// The flags of a replica in namespace `ns` using `kubeconfig`: its Lease `lease` in `ns` if
    /// `elected`, no admin listeners, only objects labelled `test=<ns>`, short timings.
    pub fn replica_args(&self, kubeconfig: &Path, ns: &str, lease: &str, elected: bool) -> Vec<String> {
        let mut args: Vec<String> = self.subcommand.iter().map(|s| (*s).to_owned()).collect();
        args.extend(
            [
                "--kubeconfig",
                &kubeconfig.display().to_string(),
                "--leader-election-namespace",
                ns,
                "--leader-election-id",
                lease,
                "--metrics-bind-address",
                "0",
                "--health-probe-bind-address",
                "0",
                "--graceful-shutdown-timeout",
                "10s",
                self.selector_flag,
                &format!("test={ns}"),
            ]
            .map(String::from),
        );
        args.extend(TIMINGS.map(String::from));
        if elected {
            args.push("--leader-election".into());
        }
        args
    }

    /// Starts a replica `identity` with `args` (from [`Binary::replica_args`]), logging under `test`.
    pub fn start(&self, test: &str, identity: &str, args: &[String]) -> anyhow::Result<Replica> {
        let dir = log_dir(test);
        let process = Process::start(&self.path, &dir, identity, args)?;
        Ok(Replica {
            process,
            name: self.name,
        })
    }
}

/// Where process logs of a test go.
pub fn log_dir(test: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join("e2e-logs")
        .join(test)
}

/// A running replica process (SIGKILLed when dropped).
#[derive(Debug)]
pub struct Replica {
    /// The process.
    pub process: Process,
    /// Which binary.
    pub name: &'static str,
}

impl Replica {
    /// Its identity.
    pub fn identity(&self) -> &str {
        &self.process.identity
    }

    /// Its log so far, without colour codes.
    pub fn log(&self) -> String {
        strip_ansi(&self.process.log_text())
    }

    /// Whether it is still running.
    pub fn running(&mut self) -> bool {
        self.process.is_running()
    }

    /// Fails if its log shows a panic.
    pub fn assert_no_panic(&self) -> anyhow::Result<()> {
        let log = self.log();
        if log.contains("panicked") {
            bail!("{} {} panicked:\n{log}", self.name, self.identity());
        }
        Ok(())
    }

    /// How many log lines contain `text`.
    pub fn count(&self, text: &str) -> usize {
        self.log().lines().filter(|l| l.contains(text)).count()
    }

    /// Waits until its log contains `text`.
    pub async fn wait_log(&self, text: &str, timeout: Duration) -> anyhow::Result<()> {
        let deadline = Instant::now() + timeout;
        while !self.log().contains(text) {
            if Instant::now() > deadline {
                bail!(
                    "{} {}: no {text:?} in the log after {timeout:?}:\n{}",
                    self.name,
                    self.identity(),
                    self.log()
                );
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        Ok(())
    }

    /// SIGTERM, then waits for the exit; fails if it takes longer than `timeout`.
    pub async fn terminate(&mut self, timeout: Duration) -> anyhow::Result<(ExitStatus, Duration)> {
        let started = Instant::now();
        self.process.process.signal(Signal::SIGTERM).context("SIGTERM")?;
        loop {
            if let Some(status) = self.process.process.try_exit() {
                return Ok((status, started.elapsed()));
            }
            if started.elapsed() > timeout {
                bail!(
                    "{} {} did not exit within {timeout:?} of SIGTERM:\n{}",
                    self.name,
                    self.identity(),
                    self.log()
                );
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

/// Removes ANSI colour codes.
pub fn strip_ansi(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            for c in chars.by_ref() {
                if c.is_ascii_alphabetic() {
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// Installs the CRDs of every binary (idempotent).
pub async fn install_all_crds(client: &Client) -> anyhow::Result<()> {
    let mut crds = crossplane::crds();
    crds.extend(provider_nop::crds());
    crds.extend(provider_kubernetes::crds());
    crds.extend(provider_sql::crds());
    testenv::support::install_crds(client, &crds).await?;
    Ok(())
}

/// The Lease's spec as raw JSON (`Null` when missing). Raw, because a typed Lease cannot hold every
/// time the apiserver stores: k8s-openapi's `MicroTime` (jiff) refuses `9999-12-31T23:59:59.999999Z`.
pub async fn lease_spec(client: &Client, ns: &str, lease: &str) -> anyhow::Result<Value> {
    let ar = ApiResource::erase::<Lease>(&());
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), ns, &ar);
    Ok(api
        .get_opt(lease)
        .await?
        .map(|l| l.data["spec"].clone())
        .unwrap_or(Value::Null))
}

/// The Lease's holder, `None` when missing or released.
pub async fn holder(client: &Client, ns: &str, lease: &str) -> anyhow::Result<Option<String>> {
    Ok(lease_spec(client, ns, lease).await?["holderIdentity"]
        .as_str()
        .filter(|h| !h.is_empty())
        .map(str::to_owned))
}

/// Waits until `identity` holds the Lease; returns how long that took.
pub async fn wait_holder(
    client: &Client,
    ns: &str,
    lease: &str,
    identity: &str,
    timeout: Duration,
) -> anyhow::Result<Duration> {
    let started = Instant::now();
    loop {
        if holder(client, ns, lease).await?.as_deref() == Some(identity) {
            return Ok(started.elapsed());
        }
        if started.elapsed() > timeout {
            bail!("{identity} did not take the Lease {ns}/{lease} within {timeout:?}");
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Creates a Lease with a raw spec (`None`: no spec at all).
pub async fn put_lease(client: &Client, ns: &str, name: &str, spec: Option<Value>) -> anyhow::Result<()> {
    let ar = ApiResource::erase::<Lease>(&());
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), ns, &ar);
    let mut obj = json!({
        "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
        "metadata": {"name": name, "namespace": ns},
    });
    if let Some(spec) = spec {
        obj["spec"] = spec;
    }
    api.create(&PostParams::default(), &serde_json::from_value(obj)?)
        .await?;
    Ok(())
}

/// Runs `kubectl` as admin; fails on a non-zero exit.
pub fn kubectl(cluster: &Cluster, args: &[&str]) -> anyhow::Result<String> {
    Ok(testenv::kubectl::run(cluster.kubeconfig(), args)?)
}

/// The NopResource API.
pub fn nops(client: &Client) -> Api<DynamicObject> {
    Api::all_with(
        client.clone(),
        &ApiResource::erase::<provider_nop::types::NopResource>(&()),
    )
}

/// Name of the `i`th NopResource of namespace `ns` (they are cluster-scoped).
pub fn nop_name(ns: &str, i: usize) -> String {
    format!("{ns}-{i:02}")
}

/// Creates `n` NopResources labelled `test=<ns>`, Ready after 1 s, each writing the connection secret
/// `conn-<i>` in `ns` with the detail `value`.
pub async fn create_nops(client: &Client, ns: &str, n: usize) -> anyhow::Result<()> {
    let api = nops(client);
    for i in 0..n {
        let r = json!({
            "apiVersion": "nop.crossplane.io/v1alpha1",
            "kind": "NopResource",
            "metadata": { "name": nop_name(ns, i), "labels": { "test": ns } },
            "spec": {
                "forProvider": {
                    "conditionAfter": [{ "time": "1s", "conditionType": "Ready", "conditionStatus": "True" }],
                    "connectionDetails": [{ "name": "value", "value": "v0" }],
                },
                "writeConnectionSecretToRef": { "name": format!("conn-{i:02}"), "namespace": ns },
            },
        });
        api.create(&PostParams::default(), &serde_json::from_value(r)?)
            .await?;
    }
    Ok(())
}

/// Sets the connection detail `value` of NopResource `i`.
pub async fn set_nop_value(client: &Client, ns: &str, i: usize, value: &str) -> anyhow::Result<()> {
    let patch =
        json!({"spec": {"forProvider": {"connectionDetails": [{ "name": "value", "value": value }]}}});
    nops(client)
        .patch(&nop_name(ns, i), &PatchParams::default(), &Patch::Merge(&patch))
        .await?;
    Ok(())
}

/// The `value` in NopResource `i`'s connection secret.
pub async fn secret_value(client: &Client, ns: &str, i: usize) -> anyhow::Result<Option<String>> {
    let secret = Api::<Secret>::namespaced(client.clone(), ns)
        .get_opt(&format!("conn-{i:02}"))
        .await?;
    Ok(secret
        .and_then(|s| s.data)
        .and_then(|d| d.get("value").cloned())
        .map(|b| String::from_utf8_lossy(&b.0).into_owned()))
}

/// Waits until NopResource `i`'s secret carries `value`.
pub async fn wait_secret_value(
    client: &Client,
    ns: &str,
    i: usize,
    value: &str,
    timeout: Duration,
) -> anyhow::Result<()> {
    let started = Instant::now();
    while secret_value(client, ns, i).await?.as_deref() != Some(value) {
        if started.elapsed() > timeout {
            bail!(
                "the secret of {} never showed {value:?} within {timeout:?}",
                nop_name(ns, i)
            );
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    Ok(())
}

/// Waits until every NopResource of `ns` is Ready.
pub async fn wait_all_ready(client: &Client, ns: &str, n: usize, timeout: Duration) -> anyhow::Result<()> {
    let api = nops(client);
    let lp = ListParams::default().labels(&format!("test={ns}"));
    let started = Instant::now();
    loop {
        let ready = api
            .list(&lp)
            .await?
            .items
            .iter()
            .filter(|r| {
                r.data["status"]["conditions"]
                    .as_array()
                    .is_some_and(|cs| cs.iter().any(|c| c["type"] == "Ready" && c["status"] == "True"))
            })
            .count();
        if ready == n {
            return Ok(());
        }
        if started.elapsed() > timeout {
            bail!("{ready}/{n} NopResources of {ns} Ready after {timeout:?}");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// provider-nop's controller writes for the objects of test namespace `ns`: its NopResources (and
/// their status), the connection secrets and the events in `ns` — except the elector's own events on
/// the Lease `lease`, which are not controller work.
pub fn nop_controller_write(ns: &str, lease: &str) -> impl Fn(&AuditEvent) -> bool + use<> {
    let ns = ns.to_owned();
    let lease = lease.to_owned();
    move |e: &AuditEvent| {
        e.user_agent.starts_with("provider-nop/")
            && ((e.resource == "nopresources" && e.name.starts_with(&ns))
                || (e.namespace == ns
                    && (e.resource == "secrets" || (e.resource == "events" && !e.name.starts_with(&lease)))))
    }
}

/// The audit log's events up to now: makes a request of its own and reads the log until that request is
/// in it (the apiserver writes the log asynchronously).
pub async fn audit_now(cluster: &Cluster) -> anyhow::Result<Vec<AuditEvent>> {
    let client = cluster.client().await?;
    let marker = format!("e2e-audit-marker-{}", std::process::id());
    let sent = jiff::Timestamp::now();
    let _ = Api::<Lease>::namespaced(client, "default").get_opt(&marker).await;
    let started = Instant::now();
    loop {
        let events = cluster.audit().read()?.events;
        if events
            .iter()
            .rev()
            .any(|e| e.name == marker && e.received >= sent - jiff::SignedDuration::from_secs(1))
        {
            return Ok(events);
        }
        if started.elapsed() > Duration::from_secs(10) {
            bail!("the audit log did not catch up within 10 s");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
