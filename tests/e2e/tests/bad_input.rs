//! The bad-input suite across the binaries (issue 8), against the real control plane, with the binaries
//! as processes. For each case: no panic (the log is searched for `panicked`), one clear error that
//! says what is wrong and what to do, and a sane state.
//!
//! | Case | Binaries | Sane state |
//! |---|---|---|
//! | invalid flags | all five | exit 2 with the flag and a usage hint; a bad kubeconfig or a busy port exits 1 |
//! | apiserver unreachable at start | all five | stands by, one error per request path; leads once it is reachable; SIGTERM exits 0 at once |
//! | Forbidden (a service account without Lease rights) | all five | stands by with the RBAC rule to add; leads once granted; its controllers, still forbidden, say what to grant, and SIGTERM exits 0 at once |
//! | malformed Lease records (holder null, `""`, missing; no spec; duration 2³¹−1; times in the year 9999 and 1 with transitions at 2³¹−1) | provider-nop | released records are taken at once; the huge duration is clamped, with a warning, until the holder is released by hand; the odd times expire a lease duration after they were seen |
//! | the Lease deleted under the leader | provider-nop ×2 | re-created at once by the leader, whose term goes on; no write outside a term |
//! | the Lease taken over with `kubectl patch` | provider-nop ×2 | the leader stops within a second (writes under way when the patch lands are its last), the intruder's record is respected until it expires, then a replica takes over and work goes on; the checker flags only the kubectl write |
//!
//! What the apiserver refuses on a Lease (a zero or negative duration, garbage times) never reaches a
//! binary; `crates/election/tests/bad_input.rs` shows the refusals and runs those records, and a
//! garbage ConfigMap lock annotation (ConfigMap and migration locks, which no binary uses), through the
//! election library.

mod common;

use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{Context, ensure};
use common::{Binary, Replica, binaries, nop};
use e2e::checker::{self, Lock};
use e2e::relay::Relay;
use jiff::Timestamp;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::rbac::v1::{PolicyRule, Role, RoleBinding, RoleRef, Subject};
use kube::Api;
use kube::api::{ObjectMeta, PostParams};
use serde_json::{Value, json};

const NOP_LEASE: &str = "crossplane-leader-election-provider-nop";

/// Invalid flags: exit code 2 and a message naming the flag; an unusable kubeconfig or a busy port:
/// exit code 1 and a message naming the file or the address. No cluster involved.
#[tokio::test]
async fn invalid_flags_exit_2_naming_the_flag() -> anyhow::Result<()> {
    let busy = std::net::TcpListener::bind("127.0.0.1:0")?;
    let busy_addr = busy.local_addr()?.to_string();
    let dir = common::log_dir("bad-flags");
    std::fs::create_dir_all(&dir)?;
    let garbage = dir.join("garbage.kubeconfig");
    std::fs::write(&garbage, "garbage: [")?;
    let garbage = garbage.display().to_string();
    let admin = testenv::support::cluster().kubeconfig().display().to_string();
    let off = ["--metrics-bind-address", "0", "--health-probe-bind-address", "0"];
    let cases: Vec<(Vec<&str>, i32, Vec<&str>)> = vec![
        (
            vec!["--no-such-flag"],
            2,
            vec!["unexpected argument '--no-such-flag'", "Usage:"],
        ),
        (
            vec!["--lease-duration", "banana"],
            2,
            vec!["invalid value 'banana' for '--lease-duration", "examples: 15s"],
        ),
        (
            vec!["--on-lost-leadership", "maybe"],
            2,
            vec!["invalid value 'maybe'", "possible values: standby, exit"],
        ),
        (
            vec!["--metrics-bind-address", "nonsense"],
            2,
            vec!["invalid bind address \"nonsense\"", "expected host:port"],
        ),
        (
            vec!["--log-level", "=[bad"],
            2,
            vec!["invalid value for --log-level"],
        ),
        (
            vec!["--leader-election"],
            2,
            vec!["--leader-election-namespace", "POD_NAMESPACE"],
        ),
        (
            vec![
                "--leader-election",
                "--leader-election-namespace",
                "x",
                "--lease-duration",
                "2s",
                "--renew-deadline",
                "5s",
            ],
            2,
            vec![
                "invalid value for --renew-deadline",
                "must be greater than --renew-deadline",
            ],
        ),
        (
            vec![
                "--leader-election",
                "--leader-election-namespace",
                "x",
                "--retry-period",
                "0s",
            ],
            2,
            vec!["invalid value for --retry-period", "greater than zero"],
        ),
        (
            [vec!["--kubeconfig", "/nonexistent/kubeconfig"], off.to_vec()].concat(),
            1,
            vec!["cannot read kubeconfig /nonexistent/kubeconfig", "No such file"],
        ),
        (
            [vec!["--kubeconfig", &garbage], off.to_vec()].concat(),
            1,
            vec!["cannot read kubeconfig", "garbage.kubeconfig"],
        ),
        (
            vec![
                "--kubeconfig",
                &admin,
                "--health-probe-bind-address",
                "0",
                "--metrics-bind-address",
                &busy_addr,
            ],
            1,
            vec!["cannot listen on", "--metrics-bind-address", "in use"],
        ),
    ];
    let started = Instant::now();
    for bin in binaries() {
        for (args, code, wanted) in &cases {
            let (status, stderr) = bin.run(args)?;
            let what = format!("{} {args:?}", bin.name);
            ensure!(!stderr.contains("panicked"), "{what} panicked:\n{stderr}");
            ensure!(
                status.code() == Some(*code),
                "{what}: exit {status}, wanted {code}:\n{stderr}"
            );
            for w in wanted {
                ensure!(stderr.contains(w), "{what}: no {w:?} in:\n{stderr}");
            }
            ensure!(
                stderr.lines().filter(|l| l.contains("error")).count() == 1,
                "{what}: one error, not several:\n{stderr}"
            );
        }
    }
    println!(
        "{} invalid invocations in {:.1}s",
        binaries().len() * cases.len(),
        started.elapsed().as_secs_f64()
    );
    drop(busy);
    Ok(())
}

/// Writes a copy of the admin kubeconfig (JSON) whose server is `127.0.0.1:<port>`.
fn kubeconfig_for_port(admin: &Path, port: u16, path: &Path) -> anyhow::Result<()> {
    let mut doc: Value = serde_json::from_str(&std::fs::read_to_string(admin)?)?;
    for c in doc["clusters"]
        .as_array_mut()
        .context("the admin kubeconfig has no clusters")?
    {
        c["cluster"]["server"] = json!(format!("https://127.0.0.1:{port}"));
    }
    std::fs::write(path, serde_json::to_string(&doc)?)?;
    Ok(())
}

/// The apiserver unreachable at start (a relay in front of it that refuses connections): every binary
/// stands by with one clear error per request path (the Lease get, the Lease watch) however long it
/// lasts, leads once the apiserver is reachable, and exits 0 at once on SIGTERM.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn apiserver_unreachable_at_start() -> anyhow::Result<()> {
    let cluster = testenv::support::cluster();
    let client = cluster.client().await?;
    common::install_all_crds(&client).await?;
    let ns = cluster.namespace("bad-unreachable").await?;
    let upstream = cluster
        .server
        .trim_start_matches("https://")
        .parse()
        .context("the apiserver's address")?;
    let relay = Relay::start(upstream).await?;
    relay.cut().await?;
    let kubeconfig = common::log_dir("bad-unreachable").join(format!("{ns}.kubeconfig"));
    std::fs::create_dir_all(common::log_dir("bad-unreachable"))?;
    kubeconfig_for_port(cluster.kubeconfig(), relay.port(), &kubeconfig)?;

    let mut replicas: Vec<Replica> = Vec::new();
    for bin in binaries() {
        let lease = format!("lease-{}", bin.short());
        let args = bin.replica_args(&kubeconfig, &ns, &lease, true);
        replicas.push(bin.start("bad-unreachable", &format!("{ns}-{}", bin.short()), &args)?);
    }
    let unreachable = "cannot reach the Kubernetes API server";
    for r in &replicas {
        r.wait_log(unreachable, Duration::from_secs(20)).await?;
    }
    // Several retry periods of refused connections.
    tokio::time::sleep(Duration::from_secs(4)).await;
    for r in &mut replicas {
        r.assert_no_panic()?;
        ensure!(r.running(), "{} exited:\n{}", r.name, r.log());
        let log = r.log();
        let errors: Vec<&str> = log
            .lines()
            .filter(|l| l.contains(" ERROR ") || l.contains(" WARN "))
            .collect();
        ensure!(
            errors.len() <= 2 && errors.iter().all(|l| l.contains(unreachable)),
            "{}: one error per request path, each saying the apiserver is unreachable:\n{log}",
            r.name
        );
        for line in &errors {
            ensure!(
                line.contains("Connection refused") && line.contains("check the server address"),
                "{}: the error says why and what to check: {line}",
                r.name
            );
        }
    }
    let reachable = Instant::now();
    relay.restore().await?;
    for r in &replicas {
        let lease = format!(
            "lease-{}",
            binaries()
                .iter()
                .find(|b| b.name == r.name)
                .map_or("", Binary::short)
        );
        common::wait_holder(&client, &ns, &lease, r.identity(), Duration::from_secs(40)).await?;
    }
    println!(
        "all five lead {:.1}s after the apiserver became reachable",
        reachable.elapsed().as_secs_f64()
    );
    for r in &mut replicas {
        let (status, took) = r.terminate(Duration::from_secs(5)).await?;
        ensure!(status.success(), "{}: {status}\n{}", r.name, r.log());
        println!("{} stopped in {} ms", r.name, took.as_millis());
        r.assert_no_panic()?;
    }
    Ok(())
}

/// A Role and RoleBinding granting the service account `sa` what the elector needs in `ns`.
async fn grant_lease_rights(client: &kube::Client, ns: &str, sa: &str) -> anyhow::Result<()> {
    let role = Role {
        metadata: ObjectMeta {
            name: Some("elector".into()),
            ..Default::default()
        },
        rules: Some(vec![
            PolicyRule {
                api_groups: Some(vec!["coordination.k8s.io".into()]),
                resources: Some(vec!["leases".into()]),
                verbs: ["get", "list", "watch", "create", "update"]
                    .map(String::from)
                    .to_vec(),
                ..Default::default()
            },
            PolicyRule {
                api_groups: Some(vec![String::new(), "events.k8s.io".into()]),
                resources: Some(vec!["events".into()]),
                verbs: ["create", "patch"].map(String::from).to_vec(),
                ..Default::default()
            },
        ]),
    };
    let _ = Api::<Role>::namespaced(client.clone(), ns)
        .create(&PostParams::default(), &role)
        .await;
    let binding = RoleBinding {
        metadata: ObjectMeta {
            name: Some(format!("elector-{sa}")),
            ..Default::default()
        },
        role_ref: RoleRef {
            api_group: Some("rbac.authorization.k8s.io".into()),
            kind: "Role".into(),
            name: "elector".into(),
        },
        subjects: Some(vec![Subject {
            kind: "ServiceAccount".into(),
            name: sa.into(),
            namespace: Some(ns.into()),
            ..Default::default()
        }]),
    };
    Api::<RoleBinding>::namespaced(client.clone(), ns)
        .create(&PostParams::default(), &binding)
        .await?;
    Ok(())
}

/// Forbidden: every binary, run as a service account without RBAC, stands by and names the Lease rule
/// to add, once per verb. Granted the Lease rule, it leads; its controllers, still forbidden, say what
/// to grant, and SIGTERM stops it at once (before: kube-runtime waited for a cache sync that never came,
/// and the stop took `--graceful-shutdown-timeout`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forbidden_stands_by_naming_the_rbac_rule() -> anyhow::Result<()> {
    let cluster = testenv::support::cluster();
    let client = cluster.client().await?;
    common::install_all_crds(&client).await?;
    let ns = cluster.namespace("bad-forbidden").await?;
    let mut replicas: Vec<(Replica, String, String)> = Vec::new();
    for bin in binaries() {
        let sa = bin.short().to_string();
        let kubeconfig = cluster.service_account_kubeconfig(&ns, &sa).await?;
        let lease = format!("lease-{}", bin.short());
        let args = bin.replica_args(&kubeconfig, &ns, &lease, true);
        let r = bin.start("bad-forbidden", &format!("{ns}-{}", bin.short()), &args)?;
        replicas.push((r, sa, lease));
    }
    let rule = r#"with the rule {apiGroups: ["coordination.k8s.io"], resources: ["leases"], verbs: ["get", "list", "watch", "create", "update"]} and bind it to this process's service account"#;
    for (r, _, _) in &replicas {
        for verb in ["get", "list"] {
            r.wait_log(
                &format!("forbidden to {verb} leases in namespace {ns}"),
                Duration::from_secs(20),
            )
            .await?;
        }
    }
    let window = jiff::Timestamp::now();
    tokio::time::sleep(Duration::from_secs(4)).await;
    // Positive control for "one line per verb": in the window every replica kept asking for its Lease
    // (and kept being refused), so the silence is deduplication, not a replica that gave up.
    let events = common::audit_now(&cluster).await?;
    for (r, sa, _) in &replicas {
        let user = format!("system:serviceaccount:{ns}:{sa}");
        let refused = events
            .iter()
            .filter(|e| e.user == user && e.resource == "leases" && e.code == 403 && e.received >= window)
            .count();
        ensure!(
            refused >= 1,
            "{} made no Lease request in the 4 s window, so its quiet log shows nothing:\n{}",
            r.name,
            r.log()
        );
    }
    for (r, _, lease) in &mut replicas {
        r.assert_no_panic()?;
        ensure!(r.running(), "{} exited:\n{}", r.name, r.log());
        ensure!(common::holder(&client, &ns, lease).await?.is_none());
        let log = r.log();
        for verb in ["get", "list"] {
            let lines: Vec<&str> = log
                .lines()
                .filter(|l| l.contains(&format!("forbidden to {verb} leases")))
                .collect();
            ensure!(
                lines.len() == 1 && lines[0].contains(rule) && lines[0].contains(" ERROR "),
                "{}: one error for {verb}, naming the rule:\n{log}",
                r.name
            );
        }
    }
    let granted = Instant::now();
    for (_, sa, _) in &replicas {
        grant_lease_rights(&client, &ns, sa).await?;
    }
    for (r, _, lease) in &replicas {
        common::wait_holder(&client, &ns, lease, r.identity(), Duration::from_secs(40)).await?;
    }
    println!(
        "all five lead {:.1}s after the Lease rule was granted",
        granted.elapsed().as_secs_f64()
    );
    let grant = "cannot list or watch a resource this controller needs: forbidden; grant this process's service account list and watch";
    for (r, _, _) in &mut replicas {
        r.wait_log(grant, Duration::from_secs(20)).await?;
        let (status, took) = r.terminate(Duration::from_secs(5)).await?;
        ensure!(status.success(), "{}: {status}\n{}", r.name, r.log());
        println!("{} stopped in {} ms", r.name, took.as_millis());
        r.assert_no_panic()?;
    }
    Ok(())
}

/// Malformed Lease records, written raw through the API, met by a provider-nop process each.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_lease_records() -> anyhow::Result<()> {
    let cluster = testenv::support::cluster();
    let client = cluster.client().await?;
    testenv::support::install_crds(&client, &provider_nop::crds()).await?;
    let ns = cluster.namespace("bad-lease").await?;
    let recent = Timestamp::now().strftime("%Y-%m-%dT%H:%M:%S.000000Z").to_string();
    let far_future = "9999-12-31T23:59:59.999999Z";
    let far_past = "0001-01-01T00:00:00.000000Z";
    // (case, spec, taken at once?)
    let cases: Vec<(&str, Option<Value>, bool)> = vec![
        (
            "holder-missing",
            Some(json!({"leaseDurationSeconds": 3600, "renewTime": recent})),
            true,
        ),
        (
            "holder-empty",
            Some(json!({"holderIdentity": "", "leaseDurationSeconds": 3600, "renewTime": recent})),
            true,
        ),
        (
            "holder-null",
            Some(json!({"holderIdentity": null, "leaseDurationSeconds": 3600, "renewTime": recent})),
            true,
        ),
        ("no-spec", None, true),
        (
            "times-9999",
            Some(
                json!({"holderIdentity": "ghost", "leaseDurationSeconds": 2, "acquireTime": far_future,
                        "renewTime": far_future, "leaseTransitions": i32::MAX}),
            ),
            false,
        ),
        (
            "times-0001",
            Some(
                json!({"holderIdentity": "ghost", "leaseDurationSeconds": 2, "acquireTime": far_past,
                        "renewTime": far_past}),
            ),
            false,
        ),
        (
            "duration-huge",
            Some(json!({"holderIdentity": "ghost", "leaseDurationSeconds": i32::MAX, "renewTime": recent})),
            false,
        ),
    ];
    let mut running = Vec::new();
    for (case, spec, _) in &cases {
        let lease = format!("lease-{case}");
        common::put_lease(&client, &ns, &lease, spec.clone()).await?;
        let args = nop().replica_args(cluster.kubeconfig(), &ns, &lease, true);
        let r = nop().start("bad-lease", &format!("{ns}-{case}"), &args)?;
        running.push((r, lease, Instant::now()));
    }
    for ((case, _, at_once), (r, lease, started)) in cases.iter().zip(&mut running) {
        if *case == "duration-huge" {
            continue;
        }
        common::wait_holder(&client, &ns, lease, r.identity(), Duration::from_secs(15)).await?;
        let took = started.elapsed();
        if *at_once {
            ensure!(
                took < Duration::from_secs(5),
                "{case}: a released record, taken after {took:?}"
            );
        } else {
            ensure!(
                took >= Duration::from_secs(2),
                "{case}: taken after {took:?}, before the 2 s lease expired"
            );
        }
        println!("{case}: led {:.1}s after start", took.as_secs_f64());
        if *case == "times-9999" {
            let spec = common::lease_spec(&client, &ns, lease).await?;
            ensure!(
                spec["leaseTransitions"] == json!(i32::MAX),
                "the transition count saturates: {spec}"
            );
        }
    }
    // The huge duration: clamped with a warning, standing by behind "ghost" until it is released by hand.
    let (huge, huge_lease, _) = running
        .iter_mut()
        .find(|(r, _, _)| r.identity().ends_with("duration-huge"))
        .context("the huge case")?;
    huge.wait_log("implausibly large; clamping it", Duration::from_secs(10))
        .await?;
    ensure!(common::holder(&client, &ns, huge_lease).await?.as_deref() == Some("ghost"));
    let released = Instant::now();
    common::kubectl(
        &cluster,
        &[
            "patch",
            "lease",
            huge_lease,
            "-n",
            &ns,
            "--type",
            "merge",
            "-p",
            r#"{"spec":{"holderIdentity":""}}"#,
        ],
    )?;
    let id = huge.identity().to_owned();
    common::wait_holder(&client, &ns, huge_lease, &id, Duration::from_secs(5)).await?;
    println!(
        "duration-huge: led {:.1}s after kubectl released it",
        released.elapsed().as_secs_f64()
    );
    for (r, _, _) in &mut running {
        r.assert_no_panic()?;
        ensure!(r.running(), "{} exited:\n{}", r.identity(), r.log());
        let (status, _) = r.terminate(Duration::from_secs(5)).await?;
        ensure!(status.success(), "{}: {status}", r.identity());
    }
    Ok(())
}

/// Two provider-nop replicas on a few NopResources, the first one leading.
struct Pair {
    cluster: testenv::Cluster,
    client: kube::Client,
    ns: String,
    a: Replica,
    b: Replica,
    started: Timestamp,
}

const PAIR_COUNT: usize = 4;

impl Pair {
    async fn start(name: &str) -> anyhow::Result<Pair> {
        let cluster = testenv::support::cluster();
        let client = cluster.client().await?;
        testenv::support::install_crds(&client, &provider_nop::crds()).await?;
        let ns = cluster.namespace(name).await?;
        let started = Timestamp::now();
        let a = nop().start(
            name,
            &format!("{ns}-a"),
            &nop().replica_args(cluster.kubeconfig(), &ns, NOP_LEASE, true),
        )?;
        common::wait_holder(&client, &ns, NOP_LEASE, a.identity(), Duration::from_secs(20)).await?;
        let b = nop().start(
            name,
            &format!("{ns}-b"),
            &nop().replica_args(cluster.kubeconfig(), &ns, NOP_LEASE, true),
        )?;
        common::create_nops(&client, &ns, PAIR_COUNT).await?;
        common::wait_all_ready(&client, &ns, PAIR_COUNT, Duration::from_secs(60)).await?;
        Ok(Pair {
            cluster,
            client,
            ns,
            a,
            b,
            started,
        })
    }

    /// Keeps changing the NopResources' specs in the background (about five changes a second).
    fn churn(&self) -> tokio::task::JoinHandle<()> {
        let (client, ns) = (self.client.clone(), self.ns.clone());
        tokio::spawn(async move {
            for k in 0.. {
                let _ = common::set_nop_value(&client, &ns, k % PAIR_COUNT, &format!("churn-{k}")).await;
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        })
    }

    /// A change made now is carried out: work goes on.
    async fn work_goes_on(&self, value: &str) -> anyhow::Result<()> {
        for i in 0..PAIR_COUNT {
            common::set_nop_value(&self.client, &self.ns, i, value).await?;
        }
        for i in 0..PAIR_COUNT {
            common::wait_secret_value(&self.client, &self.ns, i, value, Duration::from_secs(30)).await?;
        }
        Ok(())
    }

    fn lease(&self) -> Api<Lease> {
        Api::namespaced(self.client.clone(), &self.ns)
    }

    /// The checker's findings on the Lease and on provider-nop's writes since the start.
    async fn check(
        &self,
    ) -> anyhow::Result<(
        Vec<checker::Violation>,
        Vec<checker::Violation>,
        Vec<testenv::AuditEvent>,
    )> {
        let events: Vec<_> = common::audit_now(&self.cluster)
            .await?
            .into_iter()
            .filter(|e| e.received >= self.started)
            .collect();
        let lock = Lock::lease(&self.ns, NOP_LEASE);
        let writes = checker::check_writes(&events, &lock, common::nop_controller_write(&self.ns, NOP_LEASE));
        Ok((checker::check_lock(&events, &lock), writes, events))
    }
}

/// The Lease deleted under the leader: the leader re-creates it at once and its term goes on (same
/// acquireTime and transitions), the standby does not take the deletion for a release, no write falls
/// outside a term, and work goes on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lease_deleted_under_the_leader() -> anyhow::Result<()> {
    let mut pair = Pair::start("bad-deleted").await?;
    let churn = pair.churn();
    let before = pair.lease().get(NOP_LEASE).await?.spec.context("spec")?;
    let deleted = Instant::now();
    common::kubectl(&pair.cluster, &["delete", "lease", NOP_LEASE, "-n", &pair.ns])?;
    let mut recreated = None;
    let mut holders = std::collections::BTreeSet::new();
    while deleted.elapsed() < common::LEASE + Duration::from_secs(2) {
        if let Some(l) = pair.lease().get_opt(NOP_LEASE).await? {
            recreated.get_or_insert(deleted.elapsed());
            let spec = l.spec.context("spec")?;
            holders.insert(spec.holder_identity.clone().unwrap_or_default());
            ensure!(
                spec.acquire_time == before.acquire_time,
                "the term goes on: {spec:?}"
            );
            ensure!(spec.lease_transitions == before.lease_transitions);
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let recreated = recreated.context("the Lease was never re-created")?;
    println!("re-created {} ms after the delete", recreated.as_millis());
    ensure!(
        recreated < Duration::from_secs(2),
        "re-created only after {recreated:?}"
    );
    ensure!(
        holders.len() == 1 && holders.contains(pair.a.identity()),
        "the leader keeps it: {holders:?}"
    );
    churn.abort();
    pair.work_goes_on("after-delete").await?;
    let (lock_violations, write_violations, _) = pair.check().await?;
    ensure!(
        lock_violations.is_empty() && write_violations.is_empty(),
        "{lock_violations:#?}\n{write_violations:#?}"
    );
    for r in [&mut pair.a, &mut pair.b] {
        r.assert_no_panic()?;
        ensure!(r.running(), "{} exited", r.identity());
    }
    Ok(())
}

/// The Lease taken over with `kubectl patch` (holderIdentity: intruder) while the leader is busy: the
/// leader stops acting within a second and writes nothing after the patch (fenced), logs that it stopped
/// leading, and stands by. Nobody takes the intruder's record before it expires; then a replica takes
/// over and work goes on. The checker flags exactly the kubectl write on the Lease, and no controller
/// write outside a term.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lease_taken_over_with_kubectl() -> anyhow::Result<()> {
    let mut pair = Pair::start("bad-takeover").await?;
    let churn = pair.churn();
    tokio::time::sleep(Duration::from_secs(1)).await;
    let patched = Instant::now();
    common::kubectl(
        &pair.cluster,
        &[
            "patch",
            "lease",
            NOP_LEASE,
            "-n",
            &pair.ns,
            "--type",
            "merge",
            "-p",
            r#"{"spec":{"holderIdentity":"intruder"}}"#,
        ],
    )?;
    pair.a.wait_log("stopped leading", Duration::from_secs(2)).await?;
    let stopped = patched.elapsed();
    println!(
        "the leader stopped {} ms after kubectl patch",
        stopped.as_millis()
    );
    // The intruder's record is respected until it expires (6 s after it was seen).
    let mut taken = None;
    while patched.elapsed() < common::LEASE + Duration::from_secs(8) {
        match common::holder(&pair.client, &pair.ns, NOP_LEASE)
            .await?
            .as_deref()
        {
            Some("intruder") => {}
            Some(_) => {
                taken = Some(patched.elapsed());
                break;
            }
            None => {}
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let taken = taken.context("nobody took over after the intruder's lease expired")?;
    println!("taken back {:.1}s after the patch", taken.as_secs_f64());
    ensure!(
        taken >= common::LEASE - Duration::from_secs(1),
        "the intruder's record was taken after only {taken:?}"
    );
    churn.abort();
    pair.work_goes_on("after-takeover").await?;

    // The kubectl write on the Lease is the one violation of the lock protocol: it took the Lease
    // without waiting for it to expire.
    // It is flagged twice: it names someone other than its writer, and it came before the leader's
    // lease expired.
    let (lock_violations, _, events) = pair.check().await?;
    let patch_time = lock_violations
        .first()
        .context("the kubectl write is not flagged")?
        .time;
    ensure!(
        lock_violations.iter().all(|v| v.time == patch_time
            && v.identity != pair.a.identity()
            && v.identity != pair.b.identity())
            && lock_violations
                .iter()
                .any(|v| v.reason.contains("names intruder as holder"))
            && lock_violations
                .iter()
                .any(|v| v.reason.contains("before the lease of")),
        "exactly the kubectl write: {lock_violations:#?}"
    );
    // The leader learns of it through its watch, so writes it had under way may land just after the
    // patch; it must stop within a second, and write nothing after that until its term would have
    // ended anyway. Leaving the kubectl write out, no controller write falls outside a term.
    let lock = Lock::lease(&pair.ns, NOP_LEASE);
    let is_write = common::nop_controller_write(&pair.ns, NOP_LEASE);
    let protocol: Vec<testenv::AuditEvent> = events
        .iter()
        .filter(|e| !(e.resource == "leases" && e.is_write() && e.user_agent.starts_with("kubectl")))
        .cloned()
        .collect();
    let write_violations = checker::check_writes(&protocol, &lock, &is_write);
    ensure!(
        write_violations.is_empty(),
        "controller writes outside a term: {write_violations:#?}"
    );
    let a = pair.a.identity().to_owned();
    let next_term = checker::terms(&events, &lock)
        .into_iter()
        .find(|t| t.start > patch_time && t.holder != "intruder")
        .context("the term after the intruder")?;
    let by_a = |from: Timestamp, to: Timestamp| -> Vec<Timestamp> {
        events
            .iter()
            .filter(|e| e.is_write() && is_write(e) && e.agent_identity() == Some(a.as_str()))
            .filter(|e| e.received >= from && e.received < to)
            .map(|e| e.received)
            .collect()
    };
    ensure!(
        !by_a(pair.started, patch_time).is_empty(),
        "the leader was not working before the patch"
    );
    let late = by_a(patch_time, next_term.start);
    let last = late
        .iter()
        .map(|t| t.duration_since(patch_time))
        .max()
        .unwrap_or_default();
    println!(
        "writes of the old leader after the patch: {} (the last {} ms after it); next term: {} at +{:.1}s",
        late.len(),
        last.as_millis(),
        next_term.holder,
        next_term.start.duration_since(patch_time).as_secs_f64()
    );
    ensure!(
        last < jiff::SignedDuration::from_secs(1),
        "the old leader kept writing {last:?} after the patch"
    );
    for r in [&mut pair.a, &mut pair.b] {
        r.assert_no_panic()?;
        ensure!(r.running(), "{} exited (it should stand by)", r.identity());
    }
    Ok(())
}
