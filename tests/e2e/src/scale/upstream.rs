//! Upstream's core (`crossplane core start`, built by [`testenv::peers::ensure_built`]) as local
//! processes: `core init` first, with upstream's own CRDs, then replicas run as if in a Pod
//! ([`testenv::peers::in_pod_command`]), which is how upstream's core learns its Lease namespace and
//! identity.

use std::{
    path::{Path, PathBuf},
    process::{Command, Stdio},
    time::{Duration, Instant},
};

use anyhow::{Context, ensure};
use k8s_openapi::api::core::v1::Secret;
use kube::Api;
use testenv::{
    peers::Peers,
    process::{Output, Process},
};

/// How long `core init` may keep failing.
const INIT_DEADLINE: Duration = Duration::from_secs(180);

/// Runs `crossplane core init` until it succeeds (as an init container is: a first run can fail on a
/// CRD it has just created that discovery does not serve yet), then writes the client certificates it
/// made to `<dir>/tls-client` for `core start`; returns that directory.
pub async fn init(
    peers: &Peers,
    client: &kube::Client,
    kubeconfig: &Path,
    ns: &str,
    dir: &Path,
) -> anyhow::Result<PathBuf> {
    let deadline = Instant::now() + INIT_DEADLINE;
    for attempt in 1.. {
        let log = dir.join(format!("core-init-{attempt}.log"));
        let mut cmd = Command::new(&peers.crossplane);
        cmd.args(["core", "init", "--enable-webhooks=false", "--namespace", ns])
            // kong spells these flags `--cr-ds-path` and `--tlsca-secret-name`; the variables are plain.
            .env("CRDS_PATH", &peers.crossplane_crds)
            .env("TLS_CA_SECRET_NAME", "crossplane-root-ca")
            .env("TLS_CLIENT_SECRET_NAME", "crossplane-tls-client")
            .env("KUBECONFIG", kubeconfig)
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log)?);
        let mut run = Process::spawn("crossplane core init", cmd, &log, Output::AsConfigured)?;
        let code = run.wait_exit_async(Duration::from_secs(120)).await?.code();
        if code == Some(0) {
            break;
        }
        let text = std::fs::read_to_string(&log).unwrap_or_default();
        let last = text.lines().last().unwrap_or_default();
        ensure!(
            Instant::now() < deadline,
            "upstream's `crossplane core init` still fails after {attempt} runs (exit {code:?}): {last}"
        );
        eprintln!("[scale] upstream core init run {attempt} exited {code:?}: {last}; running it again");
    }
    let secret: Secret = Api::namespaced(client.clone(), ns)
        .get("crossplane-tls-client")
        .await
        .context("reading the client certificates upstream's `core init` made")?;
    let tls = dir.join("tls-client");
    std::fs::create_dir_all(&tls)?;
    for key in ["ca.crt", "tls.crt", "tls.key"] {
        let value = secret
            .data
            .as_ref()
            .and_then(|d| d.get(key))
            .with_context(|| format!("upstream's `core init` made a client Secret without {key}"))?;
        std::fs::write(tls.join(key), &value.0)?;
    }
    Ok(tls)
}

/// `crossplane core start` of upstream's core at its defaults but webhooks off and package runtime
/// External (as ours), as if in a Pod of
/// `ns` on host `hostname`, its health probes on `health`.
pub fn start(
    peers: &Peers,
    kubeconfig: &Path,
    ns: &str,
    hostname: &str,
    dir: &Path,
    health: u16,
) -> anyhow::Result<Command> {
    let mut cmd = testenv::peers::in_pod_command(&peers.crossplane, ns, hostname);
    cmd.args([
        "core",
        "start",
        "--leader-election",
        "--enable-webhooks=false",
        "--package-runtime=External",
        "--namespace",
        ns,
    ])
    .arg("--xpkg-cache-dir")
    .arg(dir.join(format!("xpkg-{hostname}")))
    .arg("--tls-client-certs-dir")
    .arg(dir.join("tls-client"))
    .args(["--health-probe-port", &health.to_string()])
    .args(["--metrics-port", &testenv::free_port()?.to_string()])
    .args(["--webhook-port", &testenv::free_port()?.to_string()])
    .env("KUBECONFIG", kubeconfig)
    .env("POD_NAMESPACE", ns);
    Ok(cmd)
}
