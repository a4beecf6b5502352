//! Issue 12: every Deployment in deploy/ runs as Pods from its own image, on a real node.
//!
//! A test bed with a node (kube-scheduler, the kubelet, containerd with runc and the CNI plugins; see
//! `testenv::node`) starts next to the shared control plane; the images from `cargo xtask image --debug
//! --pause` are imported into its containerd, and `kubectl apply -k` applies deploy/ and deploy/fencing/
//! through an overlay that only names the imported images. Then:
//! - every Deployment has 2 Pods, Running and Ready, with 0 container restarts;
//! - every Lease has one holder, the name of one of its Deployment's running Pods (the identity comes
//!   from the downward API's POD_NAME), and the holders' tokens are pod-bound (the fence admits them);
//! - the fence refused nothing (no 403 for any ServiceAccount of crossplane-system);
//! - deleting the leader's Pod (the kubelet sends SIGTERM, the replica releases its Lease) hands the
//!   Lease over to the other Pod, and the time it took is printed;
//! - the seed's scenario: while NopResources keep changing, the Deployment controller rolls
//!   provider-nop from build A to build B (`--next`, reporting `<version>+next`) after an overlay that
//!   changes only the image tag; the audit-log checker (tests/e2e/src/checker.rs) finds no two holders
//!   at once, no write outside its writer's term, one version per term and B in the last; every
//!   NopResource ends Ready and Synced.
//!
//! - a live migration between implementations on one Lease (`e2e::node::migration`): provider-nop's
//!   image switches to the Go peer on crossplane-runtime, back to ours and to the peer again while
//!   NopResources change; one writer per term across implementations, none outside its term, both
//!   implementations acted, every NopResource converged.
//!
//! - `cargo xtask demo --ci` runs on a node of its own with these images (and function-go's package),
//!   installs provider-nop and function-go by package from the test bed's registry, composes an XR
//!   through the function, deletes the leader's Pod, upgrades provider-nop to v2 and reports the
//!   handovers it measured, with no refusal (403).
//!
//! If the node cannot start, the test fails with the reason; it never skips.

use std::{
    path::{Path, PathBuf},
    process::Command,
    time::{Duration, Instant},
};
use testenv::kubectl::run as kubectl;

use anyhow::{Context, Result, ensure};
use e2e::checker::{self, Lock};
use k8s_openapi::api::{apps::v1::Deployment, core::v1::Pod};
use kube::{
    Api,
    api::{DynamicObject, ListParams, PostParams},
};
use testenv::workload;

const NAMESPACE: &str = "crossplane-system";
/// How long the Deployments get to have 2 Ready Pods each, on a loaded 2-core machine.
const READY_TIMEOUT: Duration = Duration::from_secs(240);
/// How long a deleted leader's Lease may take to reach the other Pod.
const HANDOVER_TIMEOUT: Duration = Duration::from_secs(60);

/// `cargo xtask image --debug --pause` into `out`; the archive paths.
fn build_images(out: &Path) -> Result<Vec<PathBuf>> {
    let start = Instant::now();
    let xtask = Command::new(env!("CARGO_BIN_EXE_xtask"))
        .args([
            "image",
            "--debug",
            "--pause",
            "--next",
            "--function",
            "--compression",
            "1",
            "--out",
        ])
        .arg(out)
        .output()
        .context("running cargo xtask image --debug --pause --next --function")?;
    let log = String::from_utf8_lossy(&xtask.stderr);
    ensure!(
        xtask.status.success(),
        "cargo xtask image --debug --pause failed:\n{log}"
    );
    eprintln!(
        "[node] images built and packed in {:.1}s",
        start.elapsed().as_secs_f64()
    );
    Ok(release::image::BINARIES
        .iter()
        .map(|b| out.join(format!("{}.oci.tar", b.name)))
        .collect())
}

/// The overlay ([`e2e::node::write_overlay`]): deploy/ and deploy/fencing/, with each image named by the
/// reference it was imported under; with `next`, provider-nop at its second build's tag.
fn write_overlay(dir: &Path, next: bool) -> Result<PathBuf> {
    let dir = dir.join("overlay");
    if next {
        e2e::node::overlay_with_next(&dir, &["provider-nop"])
    } else {
        e2e::node::write_overlay(&dir)
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_deployment_runs_as_pods_on_a_real_node() -> Result<()> {
    let shared = testenv::Cluster::shared().context("the node test needs `cargo xtask test`")?;
    let work = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("node-test");
    if work.exists() {
        std::fs::remove_dir_all(&work)?;
    }
    let archives = build_images(&work.join("images"))?;
    let pause = work.join("images").join("pause.oci.tar");

    let start = Instant::now();
    let dir = shared.dir.join("node");
    if dir.exists() {
        std::fs::remove_dir_all(&dir).with_context(|| format!("removing {}", dir.display()))?;
    }
    let mut bed = testenv::NodeTestBed::start(&dir, &shared.harness, &pause)
        .await
        .context("starting a test bed with a node (containerd, kubelet, kube-scheduler)")?;
    eprintln!("[node] node Ready in {:.1}s", start.elapsed().as_secs_f64());
    let result = run(&mut bed, &archives, &work).await;
    if result.is_err() {
        let logs = bed.node().dir().to_path_buf();
        eprintln!("[node] logs under {}", logs.display());
    }
    bed.stop().context("stopping the node test bed")?;
    result?;
    demo_on_the_node(&work.join("images")).await
}

/// `cargo xtask demo --ci` with the images built above: it runs on a node (not the local processes),
/// and reports a graceful handover and no refusal.
async fn demo_on_the_node(images: &Path) -> Result<()> {
    let start = Instant::now();
    let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_xtask"))
        .args(["demo", "--ci", "--images"])
        .arg(images)
        .env_remove(testenv::ENV_TESTBED)
        .env_remove("KUBECONFIG")
        .kill_on_drop(true)
        .output()
        .await
        .context("running cargo xtask demo --ci")?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    eprintln!(
        "{stdout}\n--- stderr ---\n{stderr}\n(the node demo took {:.1}s)",
        start.elapsed().as_secs_f64()
    );
    ensure!(out.status.success(), "the node demo failed: {}", out.status);
    ensure!(
        !stderr.contains("no node:"),
        "the demo fell back to local processes on a machine that runs a node"
    );
    let result: std::collections::BTreeMap<&str, &str> = stdout
        .lines()
        .find_map(|l| l.strip_prefix("RESULT "))
        .context("no RESULT line")?
        .split_whitespace()
        .filter_map(|kv| kv.split_once('='))
        .collect();
    ensure!(
        result.get("mode") == Some(&"node"),
        "the demo did not run on the node: {result:?}"
    );
    let graceful: f64 = result
        .get("graceful_handover_ms")
        .context("RESULT lacks graceful_handover_ms")?
        .parse()?;
    // A released Lease is taken at the standby's next retry; generous for a loaded 2-core machine.
    ensure!(
        graceful < 15_000.0,
        "a released Lease is taken over within seconds, not after {graceful} ms"
    );
    ensure!(
        result.get("denied") == Some(&"0"),
        "requests of crossplane-system's ServiceAccounts were refused in the demo: {result:?}"
    );
    // Installed by package: the Provider and the Function Healthy, an XR composed through the function,
    // and the upgrade to v2 handed over to the second build, which then acted.
    for key in [
        "provider_healthy_s",
        "function_healthy_s",
        "xr_ready_s",
        "upgrade_gap_ms",
    ] {
        let v: f64 = result
            .get(key)
            .with_context(|| format!("RESULT lacks {key}"))?
            .parse()
            .with_context(|| format!("RESULT's {key} is not a number: {result:?}"))?;
        ensure!(v.is_finite() && v >= 0.0, "RESULT's {key} is {v}: {result:?}");
    }
    ensure!(
        result
            .get("upgraded_version")
            .is_some_and(|v| v.split(',').all(|v| v.ends_with("+next"))),
        "after the upgrade to v2, the writes of the new term should carry v2's version (<version>+next): \
         {result:?}"
    );
    ensure!(
        stdout.contains("provider-nop-") && stdout.contains("Running"),
        "the demo did not show the Pods"
    );
    Ok(())
}

async fn run(bed: &mut testenv::NodeTestBed, archives: &[PathBuf], work: &Path) -> Result<()> {
    let cluster = bed.cluster().clone();
    let start = Instant::now();
    for archive in archives {
        bed.node().import(archive)?;
    }
    bed.node()
        .import(&work.join("images").join("provider-nop-next.oci.tar"))?;
    bed.node()
        .import(&e2e::node::migration::build_peer_image(&work.join("images"))?)?;
    eprintln!(
        "[node] {} images imported in {:.1}s",
        archives.len(),
        start.elapsed().as_secs_f64()
    );

    let overlay = write_overlay(work, false)?;
    kubectl(
        cluster.kubeconfig(),
        &["apply", "--server-side", "-k", &overlay.display().to_string()],
    )?;
    let applied = Instant::now();

    let client = cluster.client().await?;
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), NAMESPACE);
    let names: Vec<String> = deployments
        .list(&ListParams::default())
        .await?
        .items
        .into_iter()
        .filter_map(|d| d.metadata.name)
        .collect();
    ensure!(names.len() == 5, "deploy/ should hold 5 Deployments: {names:?}");
    let pods = workload::wait_deployments(&client, NAMESPACE, &names, 2, READY_TIMEOUT).await?;
    eprintln!(
        "[node] {} Deployments with 2 Ready Pods each, {:.1}s after kubectl apply",
        names.len(),
        applied.elapsed().as_secs_f64()
    );

    // One leader per Lease, whose identity is its own Pod's name, from the downward API.
    let leaders = workload::wait_one_leader_each(&client, NAMESPACE, &pods, HANDOVER_TIMEOUT).await?;
    for (app, (lease, holder)) in &leaders {
        eprintln!("[node] {app}: Lease {lease} held by {holder}");
    }
    for (app, ps) in &pods {
        for p in ps {
            let env = p
                .spec
                .as_ref()
                .map(|s| &s.containers[0])
                .and_then(|c| c.env.as_ref());
            let from_downward_api = env.is_some_and(|env| {
                env.iter().any(|e| {
                    e.name == "POD_NAME"
                        && e.value_from
                            .as_ref()
                            .and_then(|v| v.field_ref.as_ref())
                            .is_some_and(|f| f.field_path == "metadata.name")
                })
            });
            ensure!(
                from_downward_api,
                "{app}: POD_NAME does not come from the downward API"
            );
            ensure!(
                workload::restarts(p) == 0,
                "{app}: Pod {} restarted",
                workload::name(p)
            );
        }
    }

    // The leader of provider-nop goes: its Pod is deleted, the kubelet sends SIGTERM, the replica
    // releases the Lease and the other Pod takes it.
    let (lease, _) = leaders
        .get("provider-nop")
        .context("no Lease held by a provider-nop Pod")?;
    let handover = workload::delete_leader(&client, NAMESPACE, lease, HANDOVER_TIMEOUT).await?;
    eprintln!(
        "[node] deleted the leader's Pod {}; {} took Lease {lease} after {:.0} ms",
        handover.deleted,
        handover.new_holder,
        handover.elapsed.as_secs_f64() * 1000.0
    );
    // The standby usually takes it; the Deployment's replacement Pod may win the race for the
    // released Lease when it starts before the standby's next retry. Either way a provider-nop Pod.
    ensure!(
        handover.new_holder.starts_with("provider-nop-")
            && workload::holder_pod(&handover.new_holder) != handover.deleted,
        "the Lease went to {}, not to another provider-nop Pod",
        handover.new_holder
    );
    // The Deployment replaces the Pod; everything is back to 2 Ready Pods with no restart.
    let pods = workload::wait_deployments(&client, NAMESPACE, &names, 2, READY_TIMEOUT).await?;
    for (app, ps) in &pods {
        for p in ps {
            ensure!(
                workload::restarts(p) == 0,
                "{app}: Pod {} restarted",
                workload::name(p)
            );
        }
    }

    // The apiserver reaches the kubelet at the node's address: logs and the kubelet's stats.
    let leader = &handover.new_holder;
    let logs = kubectl(
        cluster.kubeconfig(),
        &["logs", "-n", NAMESPACE, workload::holder_pod(leader), "--tail=5"],
    )?;
    ensure!(!logs.trim().is_empty(), "no logs from {leader}");
    let memory = workload::pod_memory(&client, testenv::node::NODE_NAME).await?;
    ensure!(
        memory.contains_key(workload::holder_pod(leader)),
        "the kubelet's stats lack {leader}: {memory:?}"
    );

    // The fence refused nothing: every replica has a pod-bound token and writes only while it holds
    // its Lease.
    let prefix = format!("system:serviceaccount:{NAMESPACE}:");
    let refused: Vec<_> = cluster
        .audit()
        .read()?
        .events
        .into_iter()
        .filter(|e| e.user.starts_with(&prefix) && e.code == 403)
        .collect();
    ensure!(
        refused.is_empty(),
        "{} requests of crossplane-system's ServiceAccounts refused (403), e.g. {:?}",
        refused.len(),
        refused.first()
    );
    eprintln!("[node] fence refusals: 0");

    rolling_update(&cluster, work).await?;

    let migration = e2e::node::migration::run(&client, &cluster, lease).await?;
    eprintln!("[node] {}", migration.summary());
    migration.check()
}

/// NopResources changed every few hundred milliseconds while the whole rollout runs.
const NOP_RESOURCES: usize = 8;

fn nop_ready(r: &DynamicObject) -> bool {
    let conditions = r.data["status"]["conditions"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    ["Ready", "Synced"].iter().all(|t| {
        conditions
            .iter()
            .any(|c| c["type"] == *t && c["status"] == "True")
    })
}

/// The seed's scenario on the node: while NopResources keep changing, the Deployment controller rolls
/// provider-nop from build A (`0.1.0`) to build B (`0.1.0+next`, image tag `0.1.0-next`), applied as an
/// image overlay and nothing else. The audit log must show no two holders at once, no write outside
/// its writer's term, and which version acted in each term; every NopResource ends Ready.
async fn rolling_update(cluster: &testenv::Cluster, work: &Path) -> Result<()> {
    let client = cluster.client().await?;
    let nops = workload::nop_api(&client);
    for i in 0..NOP_RESOURCES {
        let r = workload::ready_nop(&format!("rolling-{i}"));
        nops.create(&PostParams::default(), &r).await?;
    }
    let churn = e2e::churn::Churn::start(nops.clone(), "rolling", NOP_RESOURCES, Duration::from_millis(250));

    let started = Instant::now();
    let overlay = write_overlay(work, true)?;
    kubectl(
        cluster.kubeconfig(),
        &["apply", "--server-side", "-k", &overlay.display().to_string()],
    )?;
    let pods: Api<Pod> = Api::namespaced(client.clone(), NAMESPACE);
    let next_image = concat!(
        "docker.io/crossplane-rs/provider-nop:",
        env!("CARGO_PKG_VERSION"),
        "-next"
    );
    loop {
        let list = pods
            .list(&ListParams::default().labels("app.kubernetes.io/name=provider-nop"))
            .await?
            .items;
        let rolled = list.len() == 2
            && list.iter().all(|p| {
                workload::is_ready(p)
                    && p.spec
                        .as_ref()
                        .is_some_and(|s| s.containers[0].image.as_deref() == Some(next_image))
            });
        if rolled {
            break;
        }
        ensure!(
            started.elapsed() < READY_TIMEOUT,
            "provider-nop did not roll to {next_image} within {}s",
            READY_TIMEOUT.as_secs()
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    let rolled = started.elapsed();
    // B leads: the Lease names one of B's Pods.
    let lease = "crossplane-leader-election-provider-nop";
    let b_pods: Vec<String> = pods
        .list(&ListParams::default().labels("app.kubernetes.io/name=provider-nop"))
        .await?
        .items
        .iter()
        .map(|p| workload::name(p).to_string())
        .collect();
    loop {
        let holders = workload::lease_holders(&client, NAMESPACE).await?;
        let holder = holders.get(lease).cloned().unwrap_or_default();
        if b_pods.iter().any(|p| p == workload::holder_pod(&holder)) {
            break;
        }
        ensure!(
            started.elapsed() < READY_TIMEOUT,
            "no Pod of build B holds {lease}: {holder:?} (B's Pods: {b_pods:?})"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let changes = churn.stop().await?;

    // Nothing lost: every NopResource is Ready and Synced at its last generation under build B.
    let deadline = Instant::now() + HANDOVER_TIMEOUT;
    loop {
        let all = nops.list(&ListParams::default()).await?.items;
        let ready = all.iter().filter(|r| nop_ready(r)).count();
        if ready == NOP_RESOURCES {
            break;
        }
        ensure!(
            Instant::now() < deadline,
            "{ready} of {NOP_RESOURCES} NopResources Ready and Synced after the rollout"
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }

    let events = cluster.audit().read()?.events;
    let lock = Lock::lease(NAMESPACE, lease);
    let user = format!("system:serviceaccount:{NAMESPACE}:provider-nop");
    let is_write = |e: &testenv::AuditEvent| e.user == user && e.resource == "nopresources";
    let writes = events.iter().filter(|e| e.is_write() && is_write(e)).count();
    let mut violations = checker::check_lock(&events, &lock);
    violations.extend(checker::check_writes(&events, &lock, is_write));
    // Which version acted in each term: the versions in the user agents of the holder's writes.
    let versions_per_term = checker::versions_per_term(&events, &checker::terms(&events, &lock));
    eprintln!(
        "[node] rolling update A->B in {:.1}s, {changes} changes; {writes} writes of provider-nop checked, {} violations",
        rolled.as_secs_f64(),
        violations.len()
    );
    for (holder, versions) in &versions_per_term {
        eprintln!("[node]   term of {holder}: version {versions}");
    }
    ensure!(violations.is_empty(), "violations: {violations:#?}");
    ensure!(
        versions_per_term.iter().all(|(_, v)| !v.contains(',')),
        "a term with two versions: {versions_per_term:?}"
    );
    ensure!(
        versions_per_term
            .last()
            .is_some_and(|(_, v)| v.ends_with("+next")),
        "the last term is not build B's: {versions_per_term:?}"
    );
    ensure!(writes > 0, "no write of provider-nop to check");
    let prefix = format!("system:serviceaccount:{NAMESPACE}:");
    let refused = events
        .iter()
        .filter(|e| e.user.starts_with(&prefix) && e.code == 403)
        .count();
    ensure!(
        refused == 0,
        "the fence refused {refused} requests during the rolling update"
    );
    Ok(())
}
