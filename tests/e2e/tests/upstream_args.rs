//! Drop-in: each provider binary runs as a process with what upstream's package manager gives a
//! provider Deployment (the core's counterpart is `crates/crossplane/tests/upstream_args.rs`).
//!
//! Crossplane's package manager (`internal/controller/pkg/runtime/runtime_provider.go`) passes no args and
//! sets `POD_NAMESPACE`, `PROVIDER_NAME`, `REVISION_NAME`, `REVISION_UID`, the TLS directories
//! (`TLS_SERVER_CERTS_DIR`, `TLS_CLIENT_CERTS_DIR`, `WEBHOOK_TLS_CERT_DIR`), and no `POD_NAME`. A
//! DeploymentRuntimeConfig for standby replicas adds `--leader-election` (and often `--debug`). Each provider
//! runs both ways, against the test bed, and must turn Ready on its probe port, lead (its Lease in
//! `POD_NAMESPACE`, held by it, when elected), and serve `/metrics`. Not upstream's: the listeners' ports
//! come from `METRICS_BIND_ADDRESS`/`HEALTH_PROBE_BIND_ADDRESS` (upstream's env vars, since every test runs
//! on one host), the TLS server directory is one the test fills with a certificate (the package manager
//! mounts its TLS Secret at `/tls/server`; provider-kubernetes serves its conversion webhook from it), the admin kubeconfig stands in for the in-cluster service account, and a hidden label
//! selector keeps each provider off the other tests' objects.

mod common;

use std::process::Stdio;
use std::time::Duration;

use anyhow::{Context, bail, ensure};
use common::{Binary, binaries};
use k8s_openapi::api::coordination::v1::Lease;
use kube::Api;

/// How long a provider may take to turn Ready and lead on a loaded 2-core machine.
const WITHIN: Duration = Duration::from_secs(60);

use testenv::{free_port, http_get as get};

/// What the package manager mounts at `/tls/server` (its TLS server Secret): `tls.crt`, `tls.key` and
/// `ca.crt`, here written to a directory of the test's, since the test runs on the host.
fn tls_server_dir(ns: &str) -> anyhow::Result<std::path::PathBuf> {
    let cert = webhook::ServingCert::self_signed("test-ca", &["localhost".to_owned()])?;
    let dir = std::path::PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("tls-server-{ns}"));
    std::fs::create_dir_all(&dir)?;
    std::fs::write(dir.join("tls.crt"), &cert.cert_pem)?;
    std::fs::write(dir.join("tls.key"), &cert.key_pem)?;
    std::fs::write(dir.join("ca.crt"), cert.ca_pem.unwrap_or_default())?;
    Ok(dir)
}

/// The environment the package manager gives a provider's container; `tls` stands for `/tls/server`.
fn package_manager_env(provider: &str, ns: &str, tls: &std::path::Path) -> Vec<(&'static str, String)> {
    let tls = tls.display().to_string();
    vec![
        ("POD_NAMESPACE", ns.to_owned()),
        ("PROVIDER_NAME", format!("crossplane-contrib-{provider}")),
        (
            "REVISION_NAME",
            format!("crossplane-contrib-{provider}-0123456789ab"),
        ),
        ("REVISION_UID", "6f1e4b0a-3c2d-4e5f-8a9b-0c1d2e3f4a5b".to_owned()),
        ("TLS_SERVER_CERTS_DIR", tls.clone()),
        ("TLS_CLIENT_CERTS_DIR", "/tls/client".to_owned()),
        // The kubelet expands `$(TLS_SERVER_CERTS_DIR)` before the process sees it.
        ("WEBHOOK_TLS_CERT_DIR", tls),
    ]
}

/// The Lease name a provider elects on.
fn lease_name(b: &Binary) -> String {
    format!("crossplane-leader-election-{}", b.name)
}

/// The value of `leader_election_master_status{name="<lease>"}` in a scrape.
fn master_status(metrics: &str, lease: &str) -> Option<f64> {
    let prefix = format!("leader_election_master_status{{name=\"{lease}\"}} ");
    metrics
        .lines()
        .find_map(|l| l.strip_prefix(&prefix))
        .and_then(|v| v.trim().parse().ok())
}

/// Runs `b` with the package manager's environment and `args`, and checks it turns Ready, leads and
/// serves `/metrics`; with `elected`, also that its Lease in `ns` is held by it.
async fn run_like_upstream(b: Binary, ns: String, args: &[&str], elected: bool) -> anyhow::Result<()> {
    let cluster = testenv::support::cluster();
    let client = cluster.client().await?;
    let (metrics, probe) = (free_port()?, free_port()?);
    let shape = if args.is_empty() { "no-args" } else { "drc-args" };
    let dir = common::log_dir("upstream-args");
    std::fs::create_dir_all(&dir)?;
    let log = dir.join(format!("{}-{shape}-{ns}.log", b.name));
    let out = std::fs::File::create(&log)?;
    let mut child = tokio::process::Command::new(&b.path)
        .args(args)
        // Isolation from the other tests on the shared apiserver (hidden; not an upstream flag).
        .args([b.selector_flag, &format!("test={ns}")])
        .env_remove("POD_NAME")
        .env_remove("LEADER_ELECTION")
        .env_remove("RUST_LOG")
        .env("KUBECONFIG", cluster.kubeconfig())
        .envs(package_manager_env(b.name, &ns, &tls_server_dir(&ns)?))
        .env("METRICS_BIND_ADDRESS", format!("127.0.0.1:{metrics}"))
        .env("HEALTH_PROBE_BIND_ADDRESS", format!("127.0.0.1:{probe}"))
        .stdin(Stdio::null())
        .stdout(out.try_clone()?)
        .stderr(out)
        .kill_on_drop(true)
        .spawn()
        .with_context(|| format!("starting {}", b.name))?;
    let text = || std::fs::read_to_string(&log).unwrap_or_default();
    let what = format!("{} {args:?}", b.name);

    let started = tokio::time::Instant::now();
    let deadline = started + WITHIN;
    let lease = lease_name(&b);
    let leases: Api<Lease> = Api::namespaced(client, &ns);
    loop {
        if let Ok(Some(status)) = child.try_wait() {
            bail!("{what} exited {status}:\n{}", text());
        }
        let ready = get(probe, "/readyz").await.is_some_and(|(code, _)| code == 200);
        let scrape = get(metrics, "/metrics").await.filter(|(code, _)| *code == 200);
        // Elected: its own gauge says it leads. Election off: it leads without a Lease, as controller-runtime's
        // manager does, and says it started its controllers.
        let leading = if elected {
            scrape
                .as_ref()
                .and_then(|(_, body)| master_status(body, &lease))
                .is_some_and(|v| v == 1.0)
        } else {
            text().contains("leader election is off") && text().contains("leader work started")
        };
        let reconciles = scrape
            .as_ref()
            .is_some_and(|(_, body)| body.contains("controller_runtime_reconcile_total{"));
        let holder = if elected {
            leases
                .get_opt(&lease)
                .await
                .ok()
                .flatten()
                .and_then(|l| l.spec)
                .and_then(|s| s.holder_identity)
        } else {
            None
        };
        let lease_ok = if elected {
            holder.as_ref().is_some_and(|h| !h.is_empty())
        } else {
            true
        };
        if ready && leading && reconciles && lease_ok {
            if let Some(h) = &holder {
                ensure!(
                    text().contains(h.as_str()),
                    "{what}: the Lease {lease} in {ns} is held by {h}, which its log never names:\n{}",
                    text()
                );
            }
            break;
        }
        let last = format!(
            "ready {ready}, /metrics {}, leading {leading}, controllers {reconciles}, Lease holder {holder:?}",
            scrape.is_some()
        );
        if tokio::time::Instant::now() > deadline {
            bail!(
                "{what}: not Ready and leading within {WITHIN:?} ({last}):\n{}",
                text()
            );
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    child.start_kill()?;
    let _ = child.wait().await;
    let text = text();
    ensure!(!text.contains("panicked"), "{what} panicked:\n{text}");
    if args.contains(&"--debug") {
        ensure!(
            text.contains("DEBUG"),
            "{what}: --debug logged nothing at debug level:\n{text}"
        );
    }
    eprintln!(
        "{what}: Ready, leading and serving /metrics after {:.1}s",
        started.elapsed().as_secs_f64()
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn providers_run_as_the_package_manager_runs_them() -> anyhow::Result<()> {
    let cluster = testenv::support::cluster();
    let client = cluster.client().await?;
    let crds: Vec<_> = [
        provider_nop::crds(),
        provider_kubernetes::crds(),
        provider_sql::crds(),
    ]
    .concat();
    testenv::support::install_crds(&client, &crds).await?;
    let all = binaries();
    let providers: Vec<Binary> = all
        .iter()
        .filter(|b| b.name.starts_with("provider-"))
        .cloned()
        .collect();
    ensure!(providers.len() == 3, "expected three providers in {all:?}");
    let mut runs = tokio::task::JoinSet::new();
    for b in providers {
        // The package manager's own shape: no args, election off (upstream's default).
        let ns = cluster.namespace(&format!("{}-plain", b.short())).await?;
        let plain = b.clone();
        runs.spawn(async move { run_like_upstream(plain, ns, &[], false).await });
        // A DeploymentRuntimeConfig for standby replicas.
        let ns = cluster.namespace(&format!("{}-drc", b.short())).await?;
        runs.spawn(async move { run_like_upstream(b, ns, &["--debug", "--leader-election"], true).await });
    }
    let mut failures = Vec::new();
    while let Some(joined) = runs.join_next().await {
        if let Err(e) = joined.context("a provider run panicked")? {
            failures.push(format!("{e:#}"));
        }
    }
    ensure!(failures.is_empty(), "{}", failures.join("\n\n"));
    Ok(())
}
