//! Issue 4's "Must show" list, on the real control plane, with `configmap-counter` replicas as processes.
//!
//! Run with `cargo xtask test -- -p manager` (or export `CROSSPLANE_RS_TESTBED` for a running test bed).
//! `MANAGER_TEST_ECHO=1` echoes every replica's log.
#![allow(clippy::unwrap_used)]

mod common;

use std::time::Duration;

use anyhow::{Result, bail, ensure};
use common::*;
use nix::sys::signal::Signal;
use testenv::Cluster;
use tokio::time::Instant;

const SEC: Duration = Duration::from_secs(1);

async fn setup(prefix: &str) -> Result<(Cluster, kube::Client, String)> {
    let cluster = Cluster::shared()?;
    let client = cluster.client().await?;
    let ns = cluster.namespace(prefix).await?;
    Ok((cluster, client, ns))
}

fn lease_of(ns: &str) -> String {
    format!("{ns}-lease")
}

/// With election off everything runs; the user agent names binary, version and identity; SIGTERM stops
/// the child runnable and the controller before exiting 0.
#[tokio::test]
async fn election_off_runs_everything_and_names_itself() -> Result<()> {
    let (cluster, client, ns) = setup("mgr-off").await?;
    let mut opts = Opts::new(cluster.kubeconfig(), &ns, &lease_of(&ns), "solo-0");
    opts.election = false;
    let mut solo = Replica::spawn(&opts)?;
    wait_config_map(&client, &ns, "configmap-count", "writer", 20 * SEC, |w| {
        w == "solo-0"
    })
    .await?;
    wait_config_map(
        &client,
        &ns,
        "configmap-count-heartbeat",
        "writer",
        5 * SEC,
        |w| w == "solo-0",
    )
    .await?;

    let probes = solo.admin_addr("Probes").await?;
    assert_eq!(http_get(&probes, "/healthz").await?.0, 200);
    assert_eq!(http_get(&probes, "/readyz").await?.0, 200);

    solo.signal(Signal::SIGTERM)?;
    let status = solo.wait_exit(15 * SEC).await?;
    assert_eq!(status.code(), Some(0), "{}", solo.dump());
    let child_stopped = solo.wait_for("child runnable stopped", SEC).await?;
    let work_stopped = solo.wait_for("leader work stopped for shutdown", SEC).await?;
    assert!(child_stopped.at <= work_stopped.at);

    let writes = audited_writes(&cluster, &ns, "configmap-count")?;
    ensure!(!writes.is_empty(), "no audited writes");
    assert!(writes.iter().all(|(who, _, _)| who == "solo-0"), "{writes:?}");
    Ok(())
}

/// Must show 1, 2 and 6: only the leader writes (by the audit log), SIGTERM releases and exits 0, a
/// standby leads within 2 s and the work goes on; the child runnable stops with the term.
#[tokio::test]
async fn only_the_leader_writes_and_sigterm_hands_over() -> Result<()> {
    let (cluster, client, ns) = setup("mgr-ha").await?;
    let lease = lease_of(&ns);
    let mut replicas = Vec::new();
    for i in 0..3 {
        replicas.push(Replica::spawn(&Opts::new(
            cluster.kubeconfig(),
            &ns,
            &lease,
            &format!("r{i}"),
        ))?);
    }
    let refs: Vec<&Replica> = replicas.iter().collect();
    let first = wait_for_leader(&refs, 30 * SEC).await?;
    let first_id = replicas[first].identity.clone();
    wait_config_map(&client, &ns, "configmap-count", "writer", 10 * SEC, |w| {
        w == first_id
    })
    .await?;
    tokio::time::sleep(2 * SEC).await;

    // SIGTERM the leader: it stops its work, releases, exits 0.
    let t_term = Instant::now();
    replicas[first].signal(Signal::SIGTERM)?;
    let status = replicas[first].wait_exit(15 * SEC).await?;
    let t_exit = Instant::now();
    assert_eq!(status.code(), Some(0), "{}", replicas[first].dump());
    let child = replicas[first].wait_for("child runnable stopped", SEC).await?;
    let stopped = replicas[first]
        .wait_for("leader work stopped for shutdown", SEC)
        .await?;
    assert!(child.at <= stopped.at, "the child stops with the term");
    let elector = replicas[first].wait_for("leader elector stopped", SEC).await?;
    assert!(
        stopped.at <= elector.at,
        "leader work stops before the elector releases"
    );

    // A standby leads within 2 s and the work goes on.
    let rest: Vec<&Replica> = replicas
        .iter()
        .enumerate()
        .filter(|(i, _)| *i != first)
        .map(|(_, r)| r)
        .collect();
    let second = wait_for_leader(&rest, 5 * SEC).await?;
    let started = rest[second].wait_for("leader work started", SEC).await?;
    let handover = started.at.saturating_duration_since(t_term);
    eprintln!(
        "handover: the leader exited {:?} after SIGTERM; a standby started leader work {handover:?} after SIGTERM",
        t_exit - t_term
    );
    ensure!(
        started.at <= t_exit + 2 * SEC,
        "the standby took {handover:?} to lead"
    );
    let second_id = rest[second].identity.clone();
    wait_config_map(&client, &ns, "configmap-count", "writer", 5 * SEC, |w| {
        w == second_id
    })
    .await?;
    tokio::time::sleep(SEC).await;

    // The audit log: every write to the output was made by a replica whose leader work was running.
    let writes = audited_writes(&cluster, &ns, "configmap-count")?;
    ensure!(writes.len() >= 5, "too few writes: {writes:?}");
    let tolerance = jiff::SignedDuration::from_millis(200);
    for (who, at, code) in &writes {
        let Some(r) = replicas.iter().find(|r| &r.identity == who) else {
            bail!("write by a stranger {who}")
        };
        let inside = r.work_intervals().iter().any(|(from, to)| {
            *at >= *from && to.is_none_or(|to| *at <= to.checked_add(tolerance).unwrap_or(to))
        });
        ensure!(
            inside,
            "{who} wrote at {at} (code {code}) outside its terms {:?}",
            r.work_intervals()
        );
    }
    let writers: std::collections::BTreeSet<&str> = writes.iter().map(|(w, _, _)| w.as_str()).collect();
    assert_eq!(writers.len(), 2, "{writers:?}");
    Ok(())
}

/// Must show 4: probes and metrics on the leader and on standbys.
#[tokio::test]
async fn probes_and_metrics_on_leader_and_standbys() -> Result<()> {
    let (cluster, client, ns) = setup("mgr-probes").await?;
    let lease = lease_of(&ns);
    let mut replicas = Vec::new();
    for i in 0..3 {
        replicas.push(Replica::spawn(&Opts::new(
            cluster.kubeconfig(),
            &ns,
            &lease,
            &format!("p{i}"),
        ))?);
    }
    let refs: Vec<&Replica> = replicas.iter().collect();
    let leader = wait_for_leader(&refs, 30 * SEC).await?;
    let leader_id = replicas[leader].identity.clone();
    wait_config_map(&client, &ns, "configmap-count", "writer", 10 * SEC, |w| {
        w == leader_id
    })
    .await?;

    let mut leading = 0;
    for (i, r) in replicas.iter().enumerate() {
        let probes = r.admin_addr("Probes").await?;
        let metrics = r.admin_addr("Metrics").await?;
        let deadline = Instant::now() + 10 * SEC;
        while http_get(&probes, "/readyz").await?.0 != 200 {
            ensure!(Instant::now() < deadline, "{} never turned ready", r.identity);
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        assert_eq!(http_get(&probes, "/healthz").await?.0, 200, "{}", r.identity);
        let (code, text) = http_get(&metrics, "/metrics").await?;
        assert_eq!(code, 200);
        let status = metric(&text, "leader_election_master_status", &[("name", &lease)]);
        assert!(
            status.is_some(),
            "{}: no leader_election_master_status in\n{text}",
            r.identity
        );
        if status == Some(1.0) {
            leading += 1;
            assert_eq!(i, leader);
            let ok = metric(
                &text,
                "controller_runtime_reconcile_total",
                &[("controller", "configmap-counter"), ("result", "success")],
            );
            assert!(ok.unwrap_or(0.0) > 0.0, "{text}");
            assert!(
                text.contains("controller_runtime_reconcile_time_seconds_bucket"),
                "{text}"
            );
        }
        assert!(
            metric(
                &text,
                "controller_runtime_reconcile_errors_total",
                &[("controller", "configmap-counter")]
            )
            .is_some()
        );
        assert!(text.contains("process_resident_memory_bytes"), "{text}");
        assert_eq!(http_get(&probes, "/nope").await?.0, 404);
    }
    assert_eq!(
        leading, 1,
        "leader_election_master_status is 1 on exactly one replica"
    );
    Ok(())
}

/// Start `a` with its Lease traffic through a relay, wait until it leads, then start `b` directly.
async fn cut_off_setup(
    prefix: &str,
    a_extra: &[&str],
) -> Result<(
    Cluster,
    kube::Client,
    String,
    Relay,
    Replica,
    Replica,
    tempdir::Dir,
)> {
    let (cluster, client, ns) = setup(prefix).await?;
    let lease = lease_of(&ns);
    let upstream = cluster.server.trim_start_matches("https://").to_owned();
    let relay = Relay::start(upstream).await?;
    let dir = tempdir::Dir::new(&ns)?;
    let relayed = relayed_kubeconfig(
        cluster.kubeconfig(),
        &cluster.server,
        &relay,
        &dir.0.join("relay.kubeconfig"),
    )?;
    let mut a_opts = Opts::new(cluster.kubeconfig(), &ns, &lease, "a");
    a_opts.lease_kubeconfig = Some(relayed);
    for x in a_extra {
        a_opts = a_opts.arg(x);
    }
    let a = Replica::spawn(&a_opts)?;
    a.wait_for("leader work started", 30 * SEC).await?;
    wait_config_map(&client, &ns, "configmap-count", "writer", 10 * SEC, |w| w == "a").await?;
    let b = Replica::spawn(&Opts::new(cluster.kubeconfig(), &ns, &lease, "b"))?;
    b.wait_for("leadership changed: this replica follows", 20 * SEC)
        .await?;
    Ok((cluster, client, ns, relay, a, b, dir))
}

/// Checks, after `a` was cut off, that its leader work stopped within the stop margin of its guard
/// deadline, that no write of `a` reached the apiserver after that deadline, and that `b`'s first write
/// came after `a`'s last.
async fn check_cut_off(cluster: &Cluster, ns: &str, a: &Replica, b: &Replica) -> Result<()> {
    let stop = a
        .wait_for("leader work stopped after the term ended", 10 * SEC)
        .await;
    let stop = match stop {
        Ok(l) => l,
        Err(_) => {
            a.wait_for("leader work took longer than the stop margin", SEC)
                .await?
        }
    };
    let deadline: jiff::Timestamp = stop
        .field("guard_deadline")
        .as_str()
        .unwrap_or_default()
        .parse()?;
    let stop_ms = stop.field("stop_ms").as_u64().unwrap_or(u64::MAX);
    let margin_ms = stop.field("margin_ms").as_u64().unwrap_or(0);
    eprintln!(
        "a: term ended ({}); work stopped in {stop_ms} ms; margin {margin_ms} ms; guard deadline {deadline}",
        stop.field("reason")
    );
    ensure!(
        stop_ms < margin_ms,
        "stopping took {stop_ms} ms, over the {margin_ms} ms margin"
    );

    b.wait_for("leader work started", 10 * SEC).await?;
    wait_config_map(
        &cluster.client().await?,
        ns,
        "configmap-count",
        "writer",
        10 * SEC,
        |w| w == "b",
    )
    .await?;
    let writes = audited_writes(cluster, ns, "configmap-count")?;
    let last_a = writes
        .iter()
        .filter(|(w, _, _)| w == "a")
        .map(|(_, t, _)| *t)
        .max();
    let first_b = writes
        .iter()
        .filter(|(w, _, _)| w == "b")
        .map(|(_, t, _)| *t)
        .min();
    let (Some(last_a), Some(first_b)) = (last_a, first_b) else {
        bail!("missing writes: {writes:?}")
    };
    eprintln!("a's last write received {last_a}; a's guard deadline {deadline}; b's first write {first_b}");
    // A write checked against the fence just before the deadline may land a few ms after it.
    let tolerance = jiff::SignedDuration::from_millis(100);
    ensure!(
        last_a <= deadline.checked_add(tolerance)?,
        "a wrote at {last_a}, after its guard deadline {deadline}"
    );
    ensure!(
        last_a < first_b,
        "a's last write {last_a} is not before b's first {first_b}"
    );
    Ok(())
}

/// Must show 3 (standby) and 6: cut the leader's Lease traffic off; its controller and child stop before
/// another may lead and write nothing after the guard deadline; healed, it rejoins and can lead again.
#[tokio::test]
async fn lost_leadership_then_standby_and_lead_again() -> Result<()> {
    let (cluster, client, ns, relay, a, mut b, _dir) = cut_off_setup("mgr-lost", &[]).await?;
    relay.cut();
    check_cut_off(&cluster, &ns, &a, &b).await?;
    a.wait_for("child runnable stopped", SEC).await?;
    a.wait_for("back to standby", 5 * SEC).await?;
    relay.heal();
    a.wait_for_nth("leadership changed: this replica follows", 1, 20 * SEC)
        .await?;

    b.signal(Signal::SIGTERM)?;
    assert_eq!(b.wait_exit(15 * SEC).await?.code(), Some(0), "{}", b.dump());
    a.wait_for_nth("leader work started", 1, 10 * SEC).await?;
    wait_config_map(&client, &ns, "configmap-count", "writer", 10 * SEC, |w| w == "a").await?;
    Ok(())
}

/// Must show 3 (exit): with `--on-lost-leadership=exit` the cut-off leader stops its work and exits non-zero.
#[tokio::test]
async fn lost_leadership_exit_mode_exits_non_zero() -> Result<()> {
    let (cluster, _client, ns, relay, mut a, b, _dir) =
        cut_off_setup("mgr-exit", &["--on-lost-leadership=exit"]).await?;
    relay.cut();
    check_cut_off(&cluster, &ns, &a, &b).await?;
    let status = a.wait_exit(15 * SEC).await?;
    assert_eq!(status.code(), Some(1), "{}", a.dump());
    a.wait_for("leader election lost", SEC).await?;
    Ok(())
}

/// Must show 5: bad flags and bad timings exit 2 naming the flag.
#[tokio::test]
async fn bad_input_exits_2_naming_the_flag() -> Result<()> {
    let cases: [(&[&str], &str); 5] = [
        (&["--no-such-flag"], "--no-such-flag"),
        (&["--lease-duration", "soon"], "--lease-duration"),
        (
            &["--lease-duration", "10s", "--renew-deadline", "10s"],
            "--renew-deadline",
        ),
        (
            &["--renew-deadline", "2s", "--retry-period", "2s"],
            "--retry-period",
        ),
        (
            &["-l", "--leader-election-namespace", ""],
            "--leader-election-namespace",
        ),
    ];
    for (args, flag) in cases {
        let out = tokio::process::Command::new(BIN)
            .env_remove("POD_NAMESPACE")
            .env_remove("POD_NAME")
            .env("KUBECONFIG", "/nonexistent")
            .args(args)
            .output()
            .await?;
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(flag), "{args:?}: {stderr}");
        assert!(!stderr.contains("panicked"), "{stderr}");
    }
    // LEADER_ELECTION=true turns election on: with no namespace known, that is a usage error.
    let out = tokio::process::Command::new(BIN)
        .env_remove("POD_NAMESPACE")
        .env("LEADER_ELECTION", "true")
        .env("KUBECONFIG", "/nonexistent")
        .output()
        .await?;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("--leader-election-namespace"), "{stderr}");
    Ok(())
}

/// Must show 5: without RBAC on leases a replica reports a clear error, keeps running (no crash loop, no
/// panic), stays live and ready, and still exits 0 on SIGTERM.
#[tokio::test]
async fn missing_lease_rbac_is_a_clear_error_without_a_crash() -> Result<()> {
    let (cluster, client, ns) = setup("mgr-rbac").await?;
    grant_configmaps_only(&client, &ns).await?;
    let kubeconfig = cluster.service_account_kubeconfig(&ns, "counter").await?;
    let mut r = Replica::spawn(&Opts::new(&kubeconfig, &ns, &lease_of(&ns), "norbac"))?;
    tokio::time::sleep(6 * SEC).await;
    assert!(r.try_exit().is_none(), "exited: {}", r.dump());
    let log = r.dump();
    assert!(log.to_lowercase().contains("forbidden"), "{log}");
    // One clear error, not one per retry: at most one for the lock request and one for the lock watch.
    let reported = log
        .lines()
        .filter(|l| {
            l.to_lowercase().contains("forbidden")
                && (l.contains(r#""level":"error""#) || l.contains(r#""level":"warn""#))
        })
        .count();
    assert!(
        (1..=2).contains(&reported),
        "{reported} forbidden reports:\n{log}"
    );
    assert!(
        log.contains("rule"),
        "the error names the RBAC rule to add: {log}"
    );
    assert!(!log.contains("panicked"), "{log}");
    assert!(r.find("leader work started").is_empty());
    let probes = r.admin_addr("Probes").await?;
    assert_eq!(http_get(&probes, "/healthz").await?.0, 200);
    assert_eq!(http_get(&probes, "/readyz").await?.0, 200);
    r.signal(Signal::SIGTERM)?;
    assert_eq!(r.wait_exit(15 * SEC).await?.code(), Some(0), "{}", r.dump());
    Ok(())
}

async fn grant_configmaps_only(client: &kube::Client, ns: &str) -> Result<()> {
    use k8s_openapi::api::rbac::v1::{PolicyRule, Role, RoleBinding, RoleRef, Subject};
    use kube::api::{ObjectMeta, PostParams};
    let meta = ObjectMeta {
        name: Some("configmaps".into()),
        namespace: Some(ns.into()),
        ..Default::default()
    };
    let role = Role {
        metadata: meta.clone(),
        rules: Some(vec![PolicyRule {
            api_groups: Some(vec![String::new()]),
            resources: Some(vec!["configmaps".into()]),
            verbs: ["get", "list", "watch", "create", "update", "patch"]
                .map(String::from)
                .to_vec(),
            ..Default::default()
        }]),
    };
    let binding = RoleBinding {
        metadata: meta,
        role_ref: RoleRef {
            api_group: Some("rbac.authorization.k8s.io".into()),
            kind: "Role".into(),
            name: "configmaps".into(),
        },
        subjects: Some(vec![Subject {
            kind: "ServiceAccount".into(),
            name: "counter".into(),
            namespace: Some(ns.into()),
            ..Default::default()
        }]),
    };
    kube::Api::<Role>::namespaced(client.clone(), ns)
        .create(&PostParams::default(), &role)
        .await?;
    kube::Api::<RoleBinding>::namespaced(client.clone(), ns)
        .create(&PostParams::default(), &binding)
        .await?;
    Ok(())
}

mod tempdir {
    /// A scratch directory under the target dir, removed on drop.
    pub struct Dir(pub std::path::PathBuf);

    impl Dir {
        pub fn new(name: &str) -> std::io::Result<Dir> {
            let dir = std::env::temp_dir().join(format!("manager-test-{name}"));
            std::fs::create_dir_all(&dir)?;
            Ok(Dir(dir))
        }
    }

    impl Drop for Dir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
}
