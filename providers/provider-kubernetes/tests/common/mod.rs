//! Helpers for provider process tests: CRDs, the provider process, waiting.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use anyhow::{Context, Result, bail};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Patch, PatchParams};
use kube::{Api, Client};
use testenv::Cluster;

/// The shared test bed; a missing one fails with instructions, never skips.
pub fn cluster() -> Cluster {
    match Cluster::shared() {
        Ok(c) => c,
        Err(e) => panic!("{e}"),
    }
}

/// Applies CRDs as admin and waits until each is Established.
pub async fn install_crds(client: &Client, crds: &[CustomResourceDefinition]) -> Result<()> {
    let api: Api<CustomResourceDefinition> = Api::all(client.clone());
    for crd in crds {
        let name = crd.metadata.name.clone().context("crd without name")?;
        api.patch(
            &name,
            &PatchParams::apply("crossplane-rs-tests").force(),
            &Patch::Apply(crd),
        )
        .await
        .with_context(|| format!("applying CRD {name}"))?;
    }
    for crd in crds {
        let name = crd.metadata.name.clone().context("crd without name")?;
        eventually(
            &format!("CRD {name} established"),
            Duration::from_secs(30),
            || {
                let api = api.clone();
                let name = name.clone();
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

/// Polls `f` every 100 ms until it returns true.
pub async fn eventually<F, Fut>(what: &str, timeout: Duration, mut f: F) -> Result<()>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<bool>>,
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
            bail!("timed out after {timeout:?} waiting for {what} (last error: {last_err:?})");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// A provider process, killed when dropped.
pub struct Process {
    pub child: Child,
    pub identity: String,
    pub log: PathBuf,
}

impl Process {
    /// Starts `binary` with `args`, logging to `<dir>/<identity>.log`.
    pub fn start(binary: &str, dir: &Path, identity: &str, args: &[String]) -> Result<Self> {
        std::fs::create_dir_all(dir)?;
        let log = dir.join(format!("{identity}.log"));
        let out = std::fs::File::create(&log)?;
        let err = out.try_clone()?;
        let child = Command::new(binary)
            .args(args)
            .env_remove("KUBECONFIG")
            .env_remove("POD_NAMESPACE")
            .env("POD_NAME", identity)
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
            .spawn()
            .with_context(|| format!("starting {binary}"))?;
        Ok(Self {
            child,
            identity: identity.to_owned(),
            log,
        })
    }

    /// The process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The log so far.
    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Kills it at once (SIGKILL) and reaps it.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        self.kill();
    }
}

/// Where process logs of a test go.
pub fn log_dir(test: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join("provider-logs")
        .join(test)
}

/// The common flags of a provider replica in a test: admin kubeconfig, its own Lease in `ns`, no admin
/// listeners, only resources labelled `test=<ns>`.
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
