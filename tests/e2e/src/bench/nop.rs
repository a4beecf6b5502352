//! provider-nop (Rust only) bringing NopResources to Ready, and its RSS.

use std::{
    process::Stdio,
    time::{Duration, Instant},
};

use anyhow::{Context, bail};
use kube::{
    Api, CustomResourceExt,
    api::{ApiResource, DeleteParams, DynamicObject, ListParams, Patch, PatchParams, PostParams},
};
use nix::{
    sys::signal::{Signal, kill},
    unistd::Pid,
};
use tokio::process::Command;

use super::candidate::{Env, rss_kib};

/// provider-nop bringing NopResources to Ready.
#[derive(Clone, Debug, Default)]
pub(super) struct NopResult {
    pub(super) count: usize,
    pub(super) create_secs: f64,
    pub(super) ready_secs: f64,
    pub(super) idle_rss: u64,
    pub(super) loaded_rss: u64,
}

pub(super) async fn nop(env: &Env, nop_bin: &std::path::Path, count: usize) -> anyhow::Result<NopResult> {
    use provider_nop::types::NopResource;
    let client = env.cluster.client().await?;
    let crd = NopResource::crd();
    let crds: Api<
        k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition,
    > = Api::all(client.clone());
    let crd_name = crd.metadata.name.clone().context("CRD without a name")?;
    crds.patch(
        &crd_name,
        &PatchParams::apply("xtask-bench").force(),
        &Patch::Apply(&crd),
    )
    .await?;
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let c = crds.get(&crd_name).await?;
        let established = c
            .status
            .and_then(|s| s.conditions)
            .unwrap_or_default()
            .iter()
            .any(|c| c.type_ == "Established" && c.status == "True");
        if established {
            break;
        }
        if Instant::now() > deadline {
            bail!("CRD {crd_name} not Established");
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let ns = env.cluster.namespace("bench-nop").await?;
    let identity = format!("{ns}-nop");
    let log = std::fs::File::create(env.logs.join("provider-nop.log"))?;
    let mut child = Command::new(nop_bin)
        .args([
            "--kubeconfig",
            &env.cluster.kubeconfig().display().to_string(),
            "--leader-election",
            "--leader-election-namespace",
            &ns,
            "--leader-election-id",
            "crossplane-leader-election-provider-nop",
            "--leader-election-identity",
            &identity,
            "--metrics-bind-address",
            "0",
            "--health-probe-bind-address",
            "0",
            "--label-selector",
            &format!("bench={ns}"),
            "--poll",
            "60s",
            "--max-reconcile-rate",
            "50",
        ])
        .env_remove("KUBECONFIG")
        .env_remove("POD_NAMESPACE")
        .env("POD_NAME", &identity)
        .stdin(Stdio::null())
        .stdout(log.try_clone()?)
        .stderr(log)
        .kill_on_drop(true)
        .spawn()
        .context("starting provider-nop")?;
    let pid = child.id().context("provider-nop has no pid")?;
    let leases: Api<k8s_openapi::api::coordination::v1::Lease> = Api::namespaced(client.clone(), &ns);
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let holder = leases
            .get_opt("crossplane-leader-election-provider-nop")
            .await?
            .and_then(|l| l.spec)
            .and_then(|s| s.holder_identity);
        if holder.as_deref() == Some(identity.as_str()) {
            break;
        }
        if Instant::now() > deadline {
            bail!(
                "provider-nop did not lead within 60 s (log {})",
                env.logs.join("provider-nop.log").display()
            );
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    tokio::time::sleep(Duration::from_secs(10)).await;
    let idle_rss = rss_kib(pid).context("provider-nop's idle RSS")?;

    let ar = ApiResource::erase::<NopResource>(&());
    let api: Api<DynamicObject> = Api::all_with(client.clone(), &ar);
    let started = Instant::now();
    let mut set = tokio::task::JoinSet::new();
    let per = count.div_ceil(16);
    for w in 0..16 {
        let api = api.clone();
        let ns = ns.clone();
        set.spawn(async move {
            for i in (w * per)..((w + 1) * per).min(count) {
                let obj: DynamicObject = serde_json::from_value(serde_json::json!({
                    "apiVersion": "nop.crossplane.io/v1alpha1",
                    "kind": "NopResource",
                    "metadata": { "name": format!("{ns}-{i:04}"), "labels": { "bench": ns } },
                    "spec": { "forProvider": { "conditionAfter": [
                        { "time": "0s", "conditionType": "Ready", "conditionStatus": "True" }
                    ] } },
                }))?;
                api.create(&PostParams::default(), &obj).await?;
            }
            anyhow::Ok(())
        });
    }
    while let Some(r) = set.join_next().await {
        r??;
    }
    let create_secs = started.elapsed().as_secs_f64();
    let selector = ListParams::default().labels(&format!("bench={ns}"));
    let deadline = Instant::now() + Duration::from_secs(900);
    loop {
        let ready = api
            .list(&selector)
            .await?
            .items
            .iter()
            .filter(|r| {
                r.data
                    .pointer("/status/conditions")
                    .and_then(|c| c.as_array())
                    .is_some_and(|cs| {
                        cs.iter().any(|c| {
                            c.get("type").and_then(|t| t.as_str()) == Some("Ready")
                                && c.get("status").and_then(|s| s.as_str()) == Some("True")
                        })
                    })
            })
            .count();
        if ready >= count {
            break;
        }
        if Instant::now() > deadline {
            bail!("only {ready}/{count} NopResources Ready after 15 minutes");
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    let ready_secs = started.elapsed().as_secs_f64();
    eprintln!("[bench] provider-nop: {count} NopResources Ready in {ready_secs:.1} s");
    tokio::time::sleep(Duration::from_secs(5)).await;
    let loaded_rss = rss_kib(pid).context("provider-nop's RSS with its resources")?;
    // Clean up through the provider so the finalizers come off, then stop it.
    let _ = api.delete_collection(&DeleteParams::default(), &selector).await;
    let deadline = Instant::now() + Duration::from_secs(120);
    while Instant::now() < deadline && !api.list(&selector).await?.items.is_empty() {
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let _ = kill(Pid::from_raw(i32::try_from(pid)?), Signal::SIGTERM);
    if tokio::time::timeout(Duration::from_secs(20), child.wait())
        .await
        .is_err()
    {
        let _ = child.kill().await;
    }
    Ok(NopResult {
        count,
        create_secs,
        ready_secs,
        idle_rss,
        loaded_rss,
    })
}
