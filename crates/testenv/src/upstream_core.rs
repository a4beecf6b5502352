//! Upstream's core as a peer: `crossplane core init`, run as its init container is, until it succeeds.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Secret;
use kube::Api;

use crate::peers::Peers;
use crate::process::{Output, Process};
use crate::{Error, Result};

/// How long `core init` may keep failing before it is a failure.
const INIT_DEADLINE: Duration = Duration::from_secs(180);

/// What [`init`] did.
#[derive(Debug)]
pub struct Init {
    /// The directory holding the client certificates `core init` made (`ca.crt`, `tls.crt`, `tls.key`),
    /// for `core start --tls-client-certs-dir`.
    pub tls_client: PathBuf,
    /// How many runs it took (a first run can fail on a CRD it has just created that discovery does not
    /// serve yet, "no matches for kind Lock"; an init container is run again, and so is this).
    pub runs: u32,
    /// How long it took, all runs together.
    pub took: Duration,
}

/// Runs upstream's `crossplane core init` (its own CRDs, webhooks off) in namespace `ns` until it
/// succeeds, each run logged to `<dir>/core-init-<run>.log`, then writes the client certificates it
/// made to `<dir>/tls-client`.
pub async fn init(
    peers: &Peers,
    client: &kube::Client,
    kubeconfig: &Path,
    ns: &str,
    dir: &Path,
) -> Result<Init> {
    let started = Instant::now();
    let mut runs = 0;
    loop {
        runs += 1;
        let log = dir.join(format!("core-init-{runs}.log"));
        let stderr = std::fs::File::create(&log).map_err(Error::io("creating core init's log", &log))?;
        let mut cmd = Command::new(&peers.crossplane);
        cmd.args(["core", "init", "--enable-webhooks=false", "--namespace", ns])
            // kong spells these flags `--cr-ds-path` and `--tlsca-secret-name`; the variables are plain.
            .env("CRDS_PATH", &peers.crossplane_crds)
            .env("TLS_CA_SECRET_NAME", "crossplane-root-ca")
            .env("TLS_CLIENT_SECRET_NAME", "crossplane-tls-client")
            .env("KUBECONFIG", kubeconfig)
            .stdout(Stdio::null())
            .stderr(stderr);
        let mut run = Process::spawn("crossplane core init", cmd, &log, Output::AsConfigured)?;
        let code = run.wait_exit_async(Duration::from_secs(120)).await?.code();
        if code == Some(0) {
            break;
        }
        let text = std::fs::read_to_string(&log).unwrap_or_default();
        let last = text.lines().last().unwrap_or_default();
        if started.elapsed() >= INIT_DEADLINE {
            return Err(Error::Component {
                component: "upstream's crossplane core init".into(),
                message: format!("still fails after {runs} runs (exit {code:?}): {last}"),
                log,
            });
        }
        eprintln!("[upstream core] core init run {runs} exited {code:?}: {last}; running it again");
    }
    let secret: Secret = Api::namespaced(client.clone(), ns)
        .get("crossplane-tls-client")
        .await
        .map_err(|source| Error::Kube {
            context: "reading the client certificates upstream's `core init` made".into(),
            source,
        })?;
    let tls_client = dir.join("tls-client");
    std::fs::create_dir_all(&tls_client).map_err(Error::io(
        "creating the client certificate directory",
        &tls_client,
    ))?;
    for key in ["ca.crt", "tls.crt", "tls.key"] {
        let value = secret.data.as_ref().and_then(|d| d.get(key)).ok_or_else(|| {
            Error::Unexpected(format!(
                "upstream's `core init` made a client Secret without {key}"
            ))
        })?;
        let path = tls_client.join(key);
        std::fs::write(&path, &value.0).map_err(Error::io("writing a client certificate", &path))?;
    }
    Ok(Init {
        tls_client,
        runs,
        took: started.elapsed(),
    })
}
