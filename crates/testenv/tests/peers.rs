//! The Go peers run on the real test bed (issue 24, item 1): provider-nop-go (crossplane-runtime's managed
//! reconciler, controller-runtime's leader election at its defaults) and upstream's core (`crossplane core
//! start`, v2.3.4). Each runs as two replicas; the test waits for a Lease holder, for the work to be done,
//! sends SIGTERM to the leader and waits for the other replica to take over. It prints the leader's idle
//! RSS and the handover time.
//!
//! Every wait has a deadline; nothing sleeps a fixed time. Upstream's core installs CRDs of the same groups
//! as ours, so it gets a private control plane; provider-nop-go shares the test bed, in its own namespace,
//! reconciling only NopResources labelled with it.

use std::{
    path::{Path, PathBuf},
    time::{Duration, Instant},
};

use anyhow::{Context, Result, ensure};
use k8s_openapi::api::coordination::v1::Lease;
use kube::{
    Api, Client,
    api::{ApiResource, DeleteParams, DynamicObject, GroupVersionKind, Patch, PatchParams, PostParams},
};
use nix::sys::signal::Signal;
use testenv::{
    ControlPlane, free_port, http_get, kubectl,
    peers::{self, CORE_LEASE, PROVIDER_NOP_LEASE, Peers},
    process::{Output, Process},
    support::{Process as Replica, cluster, eventually},
};

fn built() -> Result<Peers> {
    let started = Instant::now();
    let peers = peers::ensure_built(&testenv::cargo::target_dir(), |line| eprintln!("{line}"))?;
    eprintln!("peers ready in {:.1?}", started.elapsed());
    Ok(peers)
}

fn log_dir(test: &str) -> PathBuf {
    testenv::log_dir!(test)
}

/// VmRSS of `pid` in KiB.
fn rss_kib(pid: u32) -> Result<u64> {
    let status =
        std::fs::read_to_string(format!("/proc/{pid}/status")).context("reading /proc/<pid>/status")?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .context("no VmRSS in /proc/<pid>/status")
}

/// The RSS of `pid` once it has settled: sampled every 500 ms until the last 2 s of samples lie within
/// 1 MiB of each other, or 30 s have passed (then the last sample, marked unsettled).
async fn idle_rss(pid: u32) -> Result<(u64, bool)> {
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut samples = Vec::new();
    loop {
        samples.push(rss_kib(pid)?);
        if samples.len() >= 5 {
            let window = &samples[samples.len() - 5..];
            let (lo, hi) = (window.iter().min(), window.iter().max());
            if let (Some(lo), Some(hi)) = (lo, hi)
                && hi - lo < 1024
            {
                return Ok((*hi, true));
            }
        }
        if Instant::now() > deadline {
            return Ok((samples.last().copied().unwrap_or_default(), false));
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

fn mib(kib: u64) -> f64 {
    kib as f64 / 1024.0
}

/// The Lease's holder and acquire time, if it is held.
async fn holder(client: &Client, ns: &str, name: &str) -> Result<Option<(String, Option<jiff::Timestamp>)>> {
    let leases: Api<Lease> = Api::namespaced(client.clone(), ns);
    Ok(leases.get_opt(name).await?.and_then(|l| l.spec).and_then(|s| {
        let h = s.holder_identity.filter(|h| !h.is_empty())?;
        Some((h, s.acquire_time.map(|t| t.0)))
    }))
}

/// Waits until `pred` accepts the Lease's holder; returns the holder, its acquire time and when it was seen.
async fn wait_holder(
    client: &Client,
    ns: &str,
    name: &str,
    timeout: Duration,
    pred: impl Fn(&str) -> bool,
) -> Result<(String, Option<jiff::Timestamp>, Instant)> {
    let deadline = Instant::now() + timeout;
    loop {
        if let Some((h, acquired)) = holder(client, ns, name).await?
            && pred(&h)
        {
            return Ok((h, acquired, Instant::now()));
        }
        ensure!(
            Instant::now() < deadline,
            "timed out after {timeout:?} waiting for a holder of Lease {ns}/{name} (now {:?})",
            holder(client, ns, name).await?
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn nop_api(client: &Client) -> Api<DynamicObject> {
    let gvk = GroupVersionKind::gvk("nop.crossplane.io", "v1alpha1", "NopResource");
    Api::all_with(client.clone(), &ApiResource::from_gvk(&gvk))
}

fn condition(obj: &DynamicObject, type_: &str) -> Option<String> {
    obj.data["status"]["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == type_)
        .and_then(|c| c["status"].as_str())
        .map(String::from)
}

#[tokio::test]
async fn provider_nop_go_leads_reconciles_and_hands_over() -> Result<()> {
    let c = cluster();
    let peers = built()?;
    let client = c.client().await?;
    let ns = c.namespace("peer-nop").await?;

    // Our generated CRD; the Go side never installs its own.
    let crd = testenv::harness::repo_root().join("deploy/crds/nopresources.nop.crossplane.io.yaml");
    kubectl::apply(c.kubeconfig(), &crd)?;
    kubectl::run(
        c.kubeconfig(),
        &[
            "wait",
            "--for=condition=Established",
            "crd/nopresources.nop.crossplane.io",
            "--timeout=60s",
        ],
    )?;

    let dir = log_dir("provider_nop_go");
    let binary = peers.provider_nop.display().to_string();
    let started = Instant::now();
    let mut replicas = Vec::new();
    for id in ["nop-go-a", "nop-go-b"] {
        let args: Vec<String> = [
            "--kubeconfig",
            &c.kubeconfig().display().to_string(),
            "--leader-election",
            "--leader-election-namespace",
            &ns,
            "--metrics-bind-address",
            &format!("127.0.0.1:{}", free_port()?),
            "--health-probe-bind-address",
            &format!("127.0.0.1:{}", free_port()?),
            "--label-selector",
            &format!("test={ns}"),
            "--poll",
            "10s",
        ]
        .map(String::from)
        .to_vec();
        replicas.push(Replica::start(&binary, &dir, &format!("{ns}-{id}"), &args)?);
    }
    let ids: Vec<String> = replicas.iter().map(|p| p.identity.clone()).collect();
    let (leader_id, _, held) = wait_holder(&client, &ns, PROVIDER_NOP_LEASE, Duration::from_secs(60), |h| {
        ids.iter().any(|i| i == h)
    })
    .await
    .with_context(|| {
        format!(
            "no replica of provider-nop-go took the Lease; logs in {}",
            dir.display()
        )
    })?;
    let leader = ids.iter().position(|i| *i == leader_id).context("leader index")?;
    let standby = 1 - leader;
    eprintln!(
        "provider-nop-go: {leader_id} leads {ns}/{PROVIDER_NOP_LEASE}, {} ms after both replicas started",
        (held - started).as_millis()
    );

    let nops = nop_api(&client);
    let name = format!("{ns}-a");
    let nop: DynamicObject = serde_json::from_value(serde_json::json!({
        "apiVersion": "nop.crossplane.io/v1alpha1",
        "kind": "NopResource",
        "metadata": { "name": name, "labels": { "test": ns } },
        "spec": { "forProvider": {
            "conditionAfter": [{ "time": "0s", "conditionType": "Ready", "conditionStatus": "True" }],
            "fields": { "round": 1 },
        }},
    }))?;
    nops.create(&PostParams::default(), &nop).await?;
    eventually(
        &format!("NopResource {name} Ready=True and Synced=True"),
        Duration::from_secs(60),
        || {
            let nops = nops.clone();
            let name = name.clone();
            async move {
                let o = nops.get(&name).await?;
                Ok(condition(&o, "Ready").as_deref() == Some("True")
                    && condition(&o, "Synced").as_deref() == Some("True")
                    && o.data["status"]["atProvider"]["fields"]["round"] == 1)
            }
        },
    )
    .await?;

    let (rss, settled) = idle_rss(replicas[leader].pid()).await?;
    let standby_rss = rss_kib(replicas[standby].pid())?;
    eprintln!(
        "provider-nop-go: leader idle RSS {:.1} MiB{}, standby {:.1} MiB",
        mib(rss),
        if settled { "" } else { " (not settled in 30 s)" },
        mib(standby_rss)
    );

    // SIGTERM the leader; controller-runtime's default keeps the Lease until it expires (15 s).
    let sent_wall = jiff::Timestamp::now();
    let sent = Instant::now();
    replicas[leader].process.signal(Signal::SIGTERM)?;
    let (_, acquired, seen) = wait_holder(&client, &ns, PROVIDER_NOP_LEASE, Duration::from_secs(60), |h| {
        h == ids[standby]
    })
    .await?;
    let code = replicas[leader]
        .process
        .wait_exit_async(Duration::from_secs(30))
        .await?
        .code();
    eprintln!(
        "provider-nop-go: handover on SIGTERM {} ms (seen), {} (by acquireTime); old leader exited {code:?}",
        (seen - sent).as_millis(),
        acquired.map_or("-".into(), |a| format!(
            "{:.0} ms",
            a.duration_since(sent_wall).as_secs_f64() * 1e3
        )),
    );

    // The new leader reconciles: a change of spec reaches the status, and a deletion completes.
    nops.patch(
        &name,
        &PatchParams::default(),
        &Patch::Merge(serde_json::json!({ "spec": { "forProvider": { "fields": { "round": 2 } } } })),
    )
    .await?;
    eventually(
        "the new leader reconciles the change",
        Duration::from_secs(60),
        || {
            let nops = nops.clone();
            let name = name.clone();
            async move { Ok(nops.get(&name).await?.data["status"]["atProvider"]["fields"]["round"] == 2) }
        },
    )
    .await?;
    nops.delete(&name, &DeleteParams::default()).await?;
    eventually("the NopResource is deleted", Duration::from_secs(60), || {
        let nops = nops.clone();
        let name = name.clone();
        async move { Ok(nops.get_opt(&name).await?.is_none()) }
    })
    .await?;
    Ok(())
}

/// A peer process started with [`peers::in_pod_command`], killed when dropped.
struct Peer {
    process: Process,
    hostname: String,
    log: PathBuf,
    health: u16,
}

fn start_core(peers: &Peers, kubeconfig: &Path, ns: &str, hostname: &str, dir: &Path) -> Result<Peer> {
    let log = dir.join(format!("{hostname}.log"));
    let health = free_port()?;
    let mut cmd = peers::in_pod_command(&peers.crossplane, ns, hostname);
    cmd.args([
        "core",
        "start",
        "--leader-election",
        "--enable-webhooks=false",
        "--namespace",
        ns,
    ])
    .arg("--xpkg-cache-dir")
    .arg(dir.join(format!("xpkg-{hostname}")))
    .arg("--tls-client-certs-dir")
    .arg(dir.join("tls-client"))
    .args(["--health-probe-port", &health.to_string()])
    .args(["--metrics-port", &free_port()?.to_string()])
    .args(["--webhook-port", &free_port()?.to_string()])
    .env("KUBECONFIG", kubeconfig)
    .env("POD_NAMESPACE", ns);
    let process = Process::spawn(&format!("upstream core {hostname}"), cmd, &log, Output::Log)
        .context("starting upstream's core under unshare (needs root, as the test bed does)")?;
    Ok(Peer {
        process,
        hostname: hostname.to_owned(),
        log,
        health,
    })
}

#[tokio::test]
async fn upstream_core_leads_and_hands_over() -> Result<()> {
    let peers = built()?;
    // Upstream's CRDs share their groups with ours: they go on a control plane of their own.
    let cp = ControlPlane::private().await?;
    let c = cp.cluster();
    let client = c.client().await?;
    let ns = c.namespace("peer-core").await?;
    let dir = log_dir("upstream_core").join(&ns);
    std::fs::create_dir_all(&dir)?;

    // `core start` needs its CRDs and its client certificates: `core init` makes both.
    let init = testenv::upstream_core::init(&peers, &client, c.kubeconfig(), &ns, &dir).await?;
    eprintln!(
        "upstream core: core init took {:.1?} ({} runs)",
        init.took, init.runs
    );

    let cores_started = Instant::now();
    let mut cores = Vec::new();
    for host in ["core-a", "core-b"] {
        cores.push(start_core(&peers, c.kubeconfig(), &ns, host, &dir)?);
    }
    let hosts: Vec<String> = cores.iter().map(|p| format!("{}_", p.hostname)).collect();
    let (leader_id, _, held) = wait_holder(&client, &ns, CORE_LEASE, Duration::from_secs(120), |h| {
        hosts.iter().any(|p| h.starts_with(p.as_str()))
    })
    .await
    .with_context(|| {
        format!(
            "no replica of upstream's core took its Lease; logs in {}",
            dir.display()
        )
    })?;
    let leader = hosts
        .iter()
        .position(|p| leader_id.starts_with(p.as_str()))
        .context("leader index")?;
    let standby = 1 - leader;
    eprintln!(
        "upstream core: {leader_id} leads {ns}/{CORE_LEASE}, {} ms after `core start` of both replicas",
        (held - cores_started).as_millis()
    );
    for core in &cores {
        let port = core.health;
        let log = core.log.display().to_string();
        eventually(
            &format!("{} answers /readyz (log {log})", core.hostname),
            Duration::from_secs(60),
            || async move {
                Ok(http_get(port, "/readyz")
                    .await
                    .is_some_and(|(code, _)| code == 200))
            },
        )
        .await?;
    }

    let (rss, settled) = idle_rss(cores[leader].process.pid()).await?;
    let standby_rss = rss_kib(cores[standby].process.pid())?;
    eprintln!(
        "upstream core: leader idle RSS {:.1} MiB{}, standby {:.1} MiB",
        mib(rss),
        if settled { "" } else { " (not settled in 30 s)" },
        mib(standby_rss)
    );

    // SIGTERM the leader; upstream's core releases its Lease on cancel, and the standby retries every 2 s.
    let sent_wall = jiff::Timestamp::now();
    let sent = Instant::now();
    cores[leader].process.signal(Signal::SIGTERM)?;
    let next = hosts[standby].clone();
    let (new_id, acquired, seen) = wait_holder(&client, &ns, CORE_LEASE, Duration::from_secs(120), |h| {
        h.starts_with(next.as_str())
    })
    .await?;
    let code = cores[leader]
        .process
        .wait_exit_async(Duration::from_secs(60))
        .await?
        .code();
    eprintln!(
        "upstream core: handover on SIGTERM to {new_id} {} ms (seen), {} (by acquireTime); old leader exited {code:?}",
        (seen - sent).as_millis(),
        acquired.map_or("-".into(), |a| format!(
            "{:.0} ms",
            a.duration_since(sent_wall).as_secs_f64() * 1e3
        )),
    );
    Ok(())
}
