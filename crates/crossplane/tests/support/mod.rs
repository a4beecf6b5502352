//! Shared helpers of the core's integration tests: CRD installation, the `crossplane` process, waiting.

#![allow(dead_code)]

pub mod function_process;

use std::future::Future;
use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use apis::apiextensions::{Composition, CompositionRevision};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{DynamicObject, Patch, PatchParams};
use kube::core::ApiResource;
use kube::{Api, Client, CustomResourceExt};
use serde_json::Value;

/// A unique lowercase id for this test's names.
pub fn unique() -> String {
    let n: u64 = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or_default();
    format!("t{:x}{:x}", n & 0xffffff, std::process::id() & 0xfff)
}

/// Installs the Crossplane CRDs (Function and FunctionRevision, the three Usage kinds and the three ops.crossplane.io kinds too) and provider-nop's NopResource CRD, and waits until they are served.
pub async fn install_crds(client: &Client) -> anyhow::Result<()> {
    let api: Api<CustomResourceDefinition> = Api::all(client.clone());
    let crds = [
        apis::apiextensions::xrd::crd(),
        Composition::crd(),
        CompositionRevision::crd(),
        apis::apiextensions::environment::crd(),
        apis::pkg::function_crd(),
        apis::pkg::function_revision_crd(),
        provider_nop::types::NopResource::crd(),
        apis::protection::Usage::crd(),
        apis::protection::ClusterUsage::crd(),
        apis::apiextensions::usage::crd(),
        apis::ops::Operation::crd(),
        apis::ops::CronOperation::crd(),
        apis::ops::WatchOperation::crd(),
    ];
    let pp = PatchParams::apply("crossplane-rs-tests").force();
    for crd in &crds {
        let name = crd.metadata.name.clone().context("crd name")?;
        api.patch(&name, &pp, &Patch::Apply(crd)).await?;
    }
    for crd in &crds {
        let name = crd.metadata.name.clone().context("crd name")?;
        let api = api.clone();
        wait_for(
            &format!("CRD {name} established"),
            Duration::from_secs(30),
            || {
                let api = api.clone();
                let name = name.clone();
                async move { Ok(api.get(&name).await.ok().filter(crd_established)) }
            },
        )
        .await?;
    }
    Ok(())
}

/// Whether a CRD is Established.
pub fn crd_established(crd: &CustomResourceDefinition) -> bool {
    crd.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Established" && c.status == "True"))
}

/// Polls `f` every 250 ms until it returns `Some`, or fails after `timeout`.
pub async fn wait_for<T, F, Fut>(what: &str, timeout: Duration, mut f: F) -> anyhow::Result<T>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = anyhow::Result<Option<T>>>,
{
    let start = Instant::now();
    loop {
        if let Some(v) = f().await? {
            return Ok(v);
        }
        if start.elapsed() > timeout {
            bail!("timed out after {timeout:?} waiting for {what}");
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// A running `crossplane` process, killed on drop.
pub struct Process {
    process: testenv::process::Process,
    /// Its log file.
    pub log: std::path::PathBuf,
}

impl Process {
    /// Starts `crossplane <args...>` with the admin kubeconfig, admin listeners off.
    pub fn start(kubeconfig: &Path, args: &[&str], name: &str) -> anyhow::Result<Process> {
        Self::start_env(kubeconfig, args, name, &[])
    }

    /// Like [`Process::start`], with extra environment variables (e.g. `POD_NAME`).
    pub fn start_env(
        kubeconfig: &Path,
        args: &[&str],
        name: &str,
        env: &[(&str, &str)],
    ) -> anyhow::Result<Process> {
        let log = std::env::temp_dir().join(format!("crossplane-{name}.log"));
        let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_crossplane"));
        cmd.args(args)
            .arg("--kubeconfig")
            .arg(kubeconfig)
            .args(["--metrics-bind-address", "0", "--health-probe-bind-address", "0"])
            .env("RUST_LOG", "info,crossplane=debug")
            .env_remove("LEADER_ELECTION")
            .envs(env.iter().copied());
        let process = testenv::process::Process::spawn(
            &format!("crossplane {name}"),
            cmd,
            &log,
            testenv::process::Output::Log,
        )?;
        Ok(Process { process, log })
    }

    /// Kills it (SIGKILL).
    pub fn kill(&mut self) {
        self.process.kill();
    }

    /// Stops it as Kubernetes stops a pod: SIGTERM, then SIGKILL if it has not exited within `grace`.
    /// Whether it exited by itself.
    pub fn stop(&mut self, grace: std::time::Duration) -> bool {
        self.process.stop(grace).is_some()
    }

    /// Whether it is still running.
    pub fn is_running(&mut self) -> bool {
        self.process.is_running()
    }
}

/// The condition `type_` of an object, as JSON.
pub fn condition(obj: &Value, type_: &str) -> Option<Value> {
    obj.pointer("/status/conditions")?
        .as_array()?
        .iter()
        .find(|c| c["type"] == type_)
        .cloned()
}

/// An object as JSON.
pub fn json<T: serde::Serialize>(obj: &T) -> Value {
    serde_json::to_value(obj).unwrap_or(Value::Null)
}

/// The dynamic API of a cluster-scoped kind.
pub fn dynamic(client: &Client, group: &str, version: &str, kind: &str, plural: &str) -> Api<DynamicObject> {
    let ar = ApiResource {
        group: group.into(),
        version: version.into(),
        api_version: format!("{group}/{version}"),
        kind: kind.into(),
        plural: plural.into(),
    };
    Api::all_with(client.clone(), &ar)
}

/// The dynamic API of CompositeResourceDefinitions (`apiextensions.crossplane.io/v2`).
pub fn xrd_api(client: &Client) -> Api<DynamicObject> {
    dynamic(
        client,
        "apiextensions.crossplane.io",
        "v2",
        "CompositeResourceDefinition",
        "compositeresourcedefinitions",
    )
}

/// Creates (server-side applies) an object from JSON with the dynamic API.
pub async fn apply(api: &Api<DynamicObject>, obj: Value) -> anyhow::Result<DynamicObject> {
    let o: DynamicObject = serde_json::from_value(obj)?;
    let name = o.metadata.name.clone().context("name")?;
    Ok(api
        .patch(
            &name,
            &PatchParams::apply("crossplane-rs-tests").force(),
            &Patch::Apply(&o),
        )
        .await?)
}
