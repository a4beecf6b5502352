//! Issue 14's metric-name diff: provider-nop runs a NopResource through its life on the real control
//! plane, `/metrics` is scraped, and the metric families are compared with upstream's list
//! (`fixtures/upstream-metrics.txt`). The test prints which upstream names crossplane-rs has and lacks,
//! and fails on any name the fixture marks `claimed` that is missing; it also checks the labels of the
//! crossplane-runtime series and the controller name. The diff's figures are written where `cargo xtask metrics-names` collects them for
//! `docs/metrics-names.md` and `docs/metrics-names.json`.

mod common;

use std::collections::BTreeSet;
use std::time::Duration;
use testenv::free_port;

use anyhow::{Context, Result, anyhow, bail, ensure};
use common::ready_and_synced;
use kube::api::{DeleteParams, PostParams};
use kube::{Api, CustomResourceExt};
use provider_nop::types::NopResource;
use testenv::log_dir;
use testenv::support::{Process, cluster, eventually, install_crds, replica_args};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

const BIN: &str = env!("CARGO_BIN_EXE_provider-nop");
const GVK: &str = "nop.crossplane.io/v1alpha1, Kind=NopResource";
const CONTROLLER: &str = "managed/nopresource.nop.crossplane.io";

/// One line of the fixture.
struct Upstream {
    name: String,
    status: String,
    note: String,
}

fn upstream() -> Result<Vec<Upstream>> {
    include_str!("fixtures/upstream-metrics.txt")
        .lines()
        .filter(|l| !l.trim().is_empty() && !l.starts_with('#'))
        .map(|l| {
            let mut f = l.split('\t');
            let name = f.next().unwrap_or_default().to_owned();
            let status = f
                .next()
                .ok_or_else(|| anyhow!("fixture line without status: {l:?}"))?;
            ensure!(
                ["claimed", "lacking", "n/a"].contains(&status),
                "unknown status {status:?} in {l:?}"
            );
            Ok(Upstream {
                name,
                status: status.to_owned(),
                note: f.next().unwrap_or_default().to_owned(),
            })
        })
        .collect()
}

/// The metric family names of a Prometheus text exposition (its `# TYPE` lines).
fn families(text: &str) -> BTreeSet<String> {
    text.lines()
        .filter_map(|l| l.strip_prefix("# TYPE "))
        .filter_map(|l| l.split(' ').next())
        .map(str::to_owned)
        .collect()
}

/// The value of the sample `name{labels}` whose labels include all of `labels`.
fn sample(text: &str, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
    text.lines().filter(|l| !l.starts_with('#')).find_map(|l| {
        let (series, value) = l.rsplit_once(' ')?;
        let (n, rest) = series.split_once('{').unwrap_or((series, ""));
        let all = labels.iter().all(|(k, v)| rest.contains(&format!("{k}=\"{v}\"")));
        (n == name && all).then(|| value.parse().ok()).flatten()
    })
}

async fn scrape(port: u16) -> Result<String> {
    let mut s = TcpStream::connect(("127.0.0.1", port)).await?;
    s.write_all(b"GET /metrics HTTP/1.1\r\nHost: test\r\nConnection: close\r\n\r\n")
        .await?;
    let mut buf = String::new();
    s.read_to_string(&mut buf).await?;
    let (head, body) = buf.split_once("\r\n\r\n").context("no HTTP body")?;
    ensure!(head.starts_with("HTTP/1.1 200"), "/metrics answered {head}");
    Ok(body.to_owned())
}

/// Scrapes `/metrics` until `done` holds for it (30 s at most); returns that scrape.
async fn scrape_until(
    what: &str,
    port: u16,
    provider: &Process,
    done: impl Fn(&str) -> bool,
) -> Result<String> {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    let mut last = String::new();
    while tokio::time::Instant::now() < deadline {
        match scrape(port).await {
            Ok(text) if done(&text) => return Ok(text),
            Ok(text) => last = text,
            Err(e) => last = format!("(scrape failed: {e})"),
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    bail!(
        "{what}: not within 30 s; last scrape:\n{last}\nprovider log:\n{}",
        provider.log_text()
    )
}

#[tokio::test]
async fn metric_names_match_upstream() -> Result<()> {
    let c = cluster();
    let client = c.client().await?;
    install_crds(&client, &[NopResource::crd()]).await?;
    let ns = c.namespace("nop-metrics").await?;
    let port = free_port()?;
    let mut args = replica_args(&c, &ns, "crossplane-leader-election-provider-nop", "metrics-a");
    let at = args
        .iter()
        .position(|a| a == "--metrics-bind-address")
        .context("replica_args sets --metrics-bind-address")?;
    args[at + 1] = format!("127.0.0.1:{port}");
    args.extend(["--poll", "2s", "--max-reconcile-rate", "10"].map(String::from));
    let provider = Process::start(BIN, &log_dir!("nop-metrics"), &format!("{ns}-a"), &args)?;

    // A NopResource that becomes Ready after a second, then is deleted.
    let name = format!("{ns}-m");
    let manifest = serde_json::json!({
        "apiVersion": "nop.crossplane.io/v1alpha1",
        "kind": "NopResource",
        "metadata": { "name": name, "labels": { "test": ns } },
        "spec": { "forProvider": { "conditionAfter": [
            { "time": "1s", "conditionType": "Ready", "conditionStatus": "True" },
        ] } },
    });
    let api: Api<NopResource> = Api::all(client.clone());
    api.create(&PostParams::default(), &serde_json::from_value(manifest)?)
        .await?;
    eventually("NopResource Ready and Synced", Duration::from_secs(30), || {
        let api = api.clone();
        let name = name.clone();
        async move { Ok(api.get(&name).await.map(|r| ready_and_synced(&r))?) }
    })
    .await
    .with_context(|| provider.log_text())?;

    // The state gauges are counted every 5 s: wait until they show the resource.
    let gvk = [("gvk", GVK)];
    let ready = |text: &str| {
        sample(text, "crossplane_managed_resource_ready", &gvk) == Some(1.0)
            && sample(
                text,
                "crossplane_managed_resource_first_time_to_readiness_seconds_count",
                &gvk,
            ) == Some(1.0)
    };
    scrape_until("state gauges count the resource", port, &provider, ready).await?;

    api.delete(&name, &DeleteParams::default()).await?;
    let deleted =
        |text: &str| sample(text, "crossplane_managed_resource_deletion_seconds_count", &gvk) == Some(1.0);
    let text = scrape_until("deletion recorded", port, &provider, deleted).await?;

    // The diff.
    let ours = families(&text);
    let upstream = upstream()?;
    let mut lacking_claimed = Vec::new();
    let mut rows = Vec::new();
    for u in &upstream {
        let have = ours.contains(&u.name);
        println!(
            "  {} {:<62} {:<8} {}",
            if have { "have" } else { "LACK" },
            u.name,
            u.status,
            u.note
        );
        rows.push(serde_json::json!({
            "name": u.name, "served": have, "fixture": u.status, "note": u.note,
        }));
        if u.status == "claimed" && !have {
            lacking_claimed.push(u.name.clone());
        }
        if u.status == "lacking" && have {
            println!("    ^ present now: mark it claimed in fixtures/upstream-metrics.txt");
        }
    }
    let known: BTreeSet<&str> = upstream.iter().map(|u| u.name.as_str()).collect();
    let extra: Vec<&String> = ours.iter().filter(|n| !known.contains(n.as_str())).collect();
    println!("  ours only: {extra:?}");
    let count = |s: &str| upstream.iter().filter(|u| u.status == s).count();
    let have = upstream.iter().filter(|u| ours.contains(&u.name)).count();
    println!(
        "  {have} of {} upstream names served; claimed {}, lacking {}, n/a {}",
        upstream.len(),
        count("claimed"),
        count("lacking"),
        count("n/a")
    );
    // The figures, for `cargo xtask metrics-names` (docs/metrics-names.*): to $METRICS_NAMES_DIR, else
    // under the test's target tmp dir, so that the test run leaves the tree as it was.
    let dir = std::env::var_os("METRICS_NAMES_DIR").map_or_else(
        || std::path::PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("metrics-names"),
        std::path::PathBuf::from,
    );
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    let figures = serde_json::json!({
        "upstream_names": upstream.len(),
        "served": have,
        "claimed": count("claimed"),
        "lacking": count("lacking"),
        "not_applicable": count("n/a"),
        "served_only_by_us": extra,
        "names": rows,
    });
    let out = dir.join("metrics-names.json");
    std::fs::write(&out, serde_json::to_string_pretty(&figures)?)
        .with_context(|| format!("writing {}", out.display()))?;
    if !lacking_claimed.is_empty() {
        bail!("claimed upstream metrics missing from /metrics: {lacking_claimed:?}\n{text}");
    }

    // Labels as upstream's: gvk, controller names, the REST client's code/host/method.
    for name in [
        "crossplane_managed_resource_exists",
        "crossplane_managed_resource_synced",
        "crossplane_managed_resource_first_time_to_reconcile_seconds_count",
    ] {
        ensure!(
            sample(&text, name, &gvk).is_some(),
            "{name}{{gvk=\"{GVK}\"}} missing:\n{text}"
        );
    }
    let controller = [("controller", CONTROLLER)];
    ensure!(
        sample(
            &text,
            "controller_runtime_reconcile_total",
            &[("controller", CONTROLLER), ("result", "requeue_after")]
        )
        .is_some_and(|v| v >= 1.0),
        "no requeue_after reconcile of {CONTROLLER}:\n{text}"
    );
    let wq = [("name", CONTROLLER), ("controller", CONTROLLER)];
    ensure!(
        sample(&text, "workqueue_adds_total", &wq).is_some_and(|v| v >= 1.0)
            && sample(&text, "workqueue_work_duration_seconds_count", &wq).is_some_and(|v| v >= 1.0),
        "workqueue series of {CONTROLLER} missing:\n{text}"
    );
    // The NopResource entered the queue (created) and left it for a worker at least once.
    ensure!(
        sample(&text, "workqueue_queue_duration_seconds_count", &wq).is_some_and(|v| v >= 1.0)
            && sample(&text, "workqueue_depth", &wq).is_some(),
        "workqueue depth or queue duration of {CONTROLLER} missing:\n{text}"
    );
    for name in [
        "controller_runtime_reconcile_panics_total",
        "controller_runtime_reconcile_timeouts_total",
        "controller_runtime_terminal_reconcile_errors_total",
    ] {
        ensure!(
            sample(&text, name, &controller) == Some(0.0),
            "{name}{{controller=\"{CONTROLLER}\"}} is not 0:\n{text}"
        );
    }
    ensure!(
        sample(&text, "controller_runtime_reconcile_errors_total", &controller).is_some(),
        "errors series missing"
    );
    ensure!(
        text.lines().any(|l| l.starts_with("rest_client_requests_total{")
            && l.contains("code=\"200\"")
            && l.contains("method=\"GET\"")
            && l.contains("host=\"")),
        "rest_client_requests_total{{code=\"200\",method=\"GET\",host}} missing:\n{text}"
    );
    Ok(())
}
