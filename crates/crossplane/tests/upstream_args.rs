//! Drop-in: the `crossplane` binary runs with what upstream's Helm chart gives its containers. The init
//! containers' `core init` and `rbac init` exit 0 with the CRDs established; `core start` and `rbac start`
//! run with the chart's environment (`LEADER_ELECTION`, `POD_NAMESPACE`, `METRICS_PORT`,
//! `HEALTH_PROBE_PORT`, `ENABLE_WEBHOOKS=false`, the TLS variables, ...) and common extra args, lead, and
//! serve /readyz and /metrics on the chart's ports. Ignored flags are logged; a removed one is refused
//! with exit code 2.

mod support;

use std::process::Stdio;
use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;
use kube::Api;
use support::*;

const BIN: &str = env!("CARGO_BIN_EXE_crossplane");

use testenv::{free_port, http_get as get};

/// The chart's environment for the core container (`cluster/charts/crossplane/templates/deployment.yaml`).
fn chart_env(ns: &str, metrics: u16, probe: u16) -> Vec<(String, String)> {
    [
        ("POD_NAMESPACE", ns.to_owned()),
        ("POD_SERVICE_ACCOUNT", "crossplane".to_owned()),
        ("LEADER_ELECTION", "true".to_owned()),
        ("ENABLE_WEBHOOKS", "false".to_owned()),
        ("WEBHOOK_PORT", "9443".to_owned()),
        ("METRICS_PORT", metrics.to_string()),
        ("HEALTH_PROBE_PORT", probe.to_string()),
        ("TLS_SERVER_SECRET_NAME", "crossplane-tls-server".to_owned()),
        ("TLS_SERVER_CERTS_DIR", "/tls/server".to_owned()),
        ("TLS_CLIENT_SECRET_NAME", "crossplane-tls-client".to_owned()),
        ("TLS_CLIENT_CERTS_DIR", "/tls/client".to_owned()),
        ("GOMAXPROCS", "2".to_owned()),
        ("GOMEMLIMIT", "1073741824".to_owned()),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v))
    .collect()
}

fn command(kubeconfig: &std::path::Path, log: &std::path::Path) -> anyhow::Result<tokio::process::Command> {
    let out = std::fs::File::create(log)?;
    let mut cmd = tokio::process::Command::new(BIN);
    cmd.env("KUBECONFIG", kubeconfig)
        .env_remove("LEADER_ELECTION")
        .env_remove("RUST_LOG")
        .stdin(Stdio::null())
        .stdout(out.try_clone()?)
        .stderr(out)
        .kill_on_drop(true);
    Ok(cmd)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn init_containers_of_the_chart_exit_zero() -> anyhow::Result<()> {
    let cluster = testenv::Cluster::shared()?;
    let dir = std::env::temp_dir();
    // The chart passes `--activation` once per `provider.defaultActivations` entry (default `*`); the
    // patterns here match no MRD, so the policy cannot disturb other tests on the shared apiserver.
    let activations = ["*.init-a.example.org", "*.init-b.example.org"];
    for sub in ["core", "rbac"] {
        let log = dir.join(format!("crossplane-{sub}-init-{}.log", unique()));
        let extra: Vec<&str> = if sub == "core" {
            activations.iter().flat_map(|a| ["--activation", a]).collect()
        } else {
            Vec::new()
        };
        let status = tokio::time::timeout(
            Duration::from_secs(120),
            command(cluster.kubeconfig(), &log)?
                .args([sub, "init"])
                .args(&extra)
                .envs([
                    ("POD_NAMESPACE", "crossplane-system"),
                    ("ENABLE_WEBHOOKS", "false"),
                ])
                .envs([("TLS_CA_SECRET_NAME", "crossplane-root-ca")])
                .status(),
        )
        .await??;
        let text = std::fs::read_to_string(&log)?;
        anyhow::ensure!(status.success(), "{sub} init exited {status}:\n{text}");
        anyhow::ensure!(
            text.contains("initialization has been completed"),
            "{sub} init did not say it completed:\n{text}"
        );
    }
    // `core init` applied the core's CRDs; each is established.
    let client = cluster.client().await?;
    let crds: Api<
        k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition,
    > = Api::all(client);
    for crd in crossplane::crds() {
        let name = crd.metadata.name.unwrap_or_default();
        let got = crds.get(&name).await?;
        anyhow::ensure!(crd_established(&got), "{name} is not established after core init");
    }
    // And created the DeploymentRuntimeConfig `default` that packages run with, as upstream's does.
    let drcs: Api<apis::pkg::DeploymentRuntimeConfig> = Api::all(cluster.client().await?);
    let drc = drcs.get(apis::pkg::DEFAULT_RUNTIME_CONFIG).await?;
    anyhow::ensure!(
        drc.spec == Default::default(),
        "the default DeploymentRuntimeConfig is empty"
    );
    // And, given `--activation`, the ManagedResourceActivationPolicy `default` with those patterns.
    let mraps: Api<apis::apiextensions::activation::ManagedResourceActivationPolicy> =
        Api::all(cluster.client().await?);
    let mrap = mraps.get("default").await?;
    anyhow::ensure!(
        mrap.spec.activate == activations,
        "the default policy activates {:?}",
        mrap.spec.activate
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn core_start_runs_with_the_charts_environment_and_common_args() -> anyhow::Result<()> {
    let cluster = testenv::Cluster::shared()?;
    let client = cluster.client().await?;
    install_crds(&client).await?;
    let ns = cluster.namespace("upstream-args").await?;
    let id = unique();
    let (metrics, probe) = (free_port()?, free_port()?);
    let log = std::env::temp_dir().join(format!("crossplane-upstream-args-{id}.log"));
    let pod = format!("crossplane-{id}");
    let mut core = command(cluster.kubeconfig(), &log)?
        .args(["--debug", "core", "start"])
        // Extra args found in users' values files.
        .args(["--enable-usages=false", "--max-reconcile-rate", "50", "-s", "30m"])
        .args(["--poll-interval", "1m", "--enable-realtime-compositions"])
        // Isolation from the other tests on the shared apiserver (not an upstream flag).
        .args(["--watch-label-selector", &format!("crossplane-rs.io/test={id}")])
        .envs(chart_env(&ns, metrics, probe))
        .env("POD_NAME", &pod)
        .spawn()?;

    let ready = wait_for(
        "/readyz on HEALTH_PROBE_PORT",
        Duration::from_secs(60),
        || async move { Ok(get(probe, "/readyz").await.filter(|(code, _)| *code == 200)) },
    )
    .await;
    let text = || std::fs::read_to_string(&log).unwrap_or_default();
    anyhow::ensure!(
        ready.is_ok(),
        "core start never became ready: {ready:?}\n{}",
        text()
    );
    let leases: Api<Lease> = Api::namespaced(client.clone(), &ns);
    let holder = wait_for("the core to lead", Duration::from_secs(60), || {
        let leases = leases.clone();
        async move {
            let lease = leases.get_opt("crossplane-leader-election-core").await?;
            Ok(lease
                .and_then(|l| l.spec)
                .and_then(|s| s.holder_identity)
                .filter(|h| !h.is_empty()))
        }
    })
    .await?;
    anyhow::ensure!(
        holder.starts_with(&pod),
        "the Lease is held by {holder}, not {pod}"
    );
    let (code, body) = get(metrics, "/metrics")
        .await
        .ok_or_else(|| anyhow::anyhow!("nothing serves /metrics on METRICS_PORT {metrics}"))?;
    anyhow::ensure!(
        code == 200 && body.contains("leader_election_master_status"),
        "/metrics on METRICS_PORT answered {code}"
    );
    core.start_kill()?;
    let _ = core.wait().await;
    let text = text();
    // --enable-usages and --enable-webhooks are applied: the chart's ENABLE_WEBHOOKS=false turns the
    // usage controllers and their webhook off.
    anyhow::ensure!(
        text.contains("usages are off"),
        "ENABLE_WEBHOOKS=false did not turn usages off:\n{text}"
    );
    for flag in ["max-concurrent-reconciles", "sync-interval"] {
        anyhow::ensure!(
            text.contains(flag) && text.contains("ignored"),
            "--{flag} was not logged as ignored:\n{text}"
        );
    }
    anyhow::ensure!(
        text.contains("DEBUG"),
        "--debug logged nothing at debug level:\n{text}"
    );
    Ok(())
}

#[tokio::test]
async fn removed_and_malformed_flags_are_usage_errors() -> anyhow::Result<()> {
    let cases: &[(&[&str], &str)] = &[
        (
            &["core", "start", "--registry", "index.docker.io"],
            "no longer supported",
        ),
        (
            &["core", "start", "--enable-external-secret-stores"],
            "external secret stores",
        ),
        (
            &["rbac", "start", "--registry=xpkg.upbound.io"],
            "no longer supported",
        ),
        (&["core", "start", "--enable-usages=maybe"], "enable-usages"),
        (&["core", "start", "--metrics-port", "http"], "metrics-port"),
    ];
    for (args, says) in cases {
        let out = tokio::process::Command::new(BIN)
            .args(*args)
            .env_remove("LEADER_ELECTION")
            .output()
            .await?;
        let stderr = String::from_utf8_lossy(&out.stderr);
        anyhow::ensure!(
            out.status.code() == Some(2),
            "{args:?} exited {:?}, want 2: {stderr}",
            out.status.code()
        );
        anyhow::ensure!(stderr.contains(says), "{args:?} said {stderr:?}, want {says:?}");
    }
    let version = tokio::process::Command::new(BIN).arg("-v").output().await?;
    anyhow::ensure!(
        version.status.success()
            && String::from_utf8_lossy(&version.stdout).contains(env!("CARGO_PKG_VERSION")),
        "-v does not print the version"
    );
    Ok(())
}
