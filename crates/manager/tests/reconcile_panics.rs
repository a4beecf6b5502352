//! A panicking reconcile, on the real control plane: [`ControllerBuilder`] recovers it as
//! controller-runtime does by default, counts it in `controller_runtime_reconcile_panics_total` (and as a
//! `result="error"` reconcile and a work queue retry), and retries the object with backoff; the next
//! reconcile succeeds. A reconcile past the builder's timeout counts in
//! `controller_runtime_reconcile_timeouts_total` the same way.

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use anyhow::{Result, ensure};
use common::metric;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{ObjectMeta, PostParams};
use kube::runtime::{Controller, controller::Action, watcher};
use kube::{Api, ResourceExt};
use manager::Metrics;
use manager::controller::{ControllerBuilder, ReconcileError};
use tokio_util::sync::CancellationToken;

#[derive(Debug, thiserror::Error)]
#[error("never")]
struct Never;

impl ReconcileError for Never {
    fn is_not_leader(&self) -> bool {
        false
    }
}

/// What the reconcile does on its first call for the object.
#[derive(Clone, Copy)]
enum FirstCall {
    Panic,
    Hang,
}

struct Ctx {
    calls: AtomicUsize,
    first: FirstCall,
}

async fn reconcile(cm: Arc<ConfigMap>, ctx: Arc<Ctx>) -> Result<Action, Never> {
    if ctx.calls.fetch_add(1, Ordering::SeqCst) == 0 {
        match ctx.first {
            FirstCall::Panic => panic!("reconcile of {} panicked on purpose", cm.name_any()),
            FirstCall::Hang => std::future::pending::<()>().await,
        }
    }
    Ok(Action::await_change())
}

/// Runs a ConfigMap controller over namespace `ns` whose first reconcile does `first`; waits until the
/// object was reconciled twice; returns the scrape.
async fn run(prefix: &str, first: FirstCall, timeout: Option<Duration>) -> Result<(String, String)> {
    let cluster = testenv::Cluster::shared()?;
    let client = cluster.client().await?;
    let ns = cluster.namespace(prefix).await?;
    let metrics = Metrics::new()?;
    let name = format!("panics/{ns}");
    let api: Api<ConfigMap> = Api::namespaced(client, &ns);
    let ctx = Arc::new(Ctx {
        calls: AtomicUsize::new(0),
        first,
    });
    let token = CancellationToken::new();
    let mut builder = ControllerBuilder::new(
        name.clone(),
        Controller::new(api.clone(), watcher::Config::default()),
    )
    .metrics(metrics.reconcile());
    if let Some(limit) = timeout {
        builder = builder.timeout(limit);
    }
    let running = tokio::spawn({
        let (token, ctx) = (token.clone(), ctx.clone());
        async move { builder.run(&token, reconcile, ctx).await }
    });
    let cm = ConfigMap {
        metadata: ObjectMeta {
            name: Some("target".into()),
            ..ObjectMeta::default()
        },
        ..ConfigMap::default()
    };
    api.create(&PostParams::default(), &cm).await?;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    while ctx.calls.load(Ordering::SeqCst) < 2 {
        ensure!(
            tokio::time::Instant::now() < deadline && !running.is_finished(),
            "the object was not reconciled again after its first reconcile failed ({} calls)",
            ctx.calls.load(Ordering::SeqCst)
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // The second reconcile's outcome is recorded once it returns.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    let text = loop {
        let text = metrics.render();
        let done = metric(
            &text,
            "controller_runtime_reconcile_total",
            &[("controller", &name), ("result", "success")],
        );
        if done == Some(1.0) || tokio::time::Instant::now() > deadline {
            break text;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    token.cancel();
    tokio::time::timeout(Duration::from_secs(10), running).await??;
    Ok((name, text))
}

fn assert_counted(text: &str, name: &str, counter: &str) -> Result<()> {
    let c = [("controller", name)];
    for (series, labels, want) in [
        (counter, c.to_vec(), 1.0),
        (
            "controller_runtime_reconcile_total",
            vec![("controller", name), ("result", "error")],
            1.0,
        ),
        (
            "controller_runtime_reconcile_total",
            vec![("controller", name), ("result", "success")],
            1.0,
        ),
        ("controller_runtime_reconcile_errors_total", c.to_vec(), 1.0),
        (
            "workqueue_retries_total",
            vec![("name", name), ("controller", name)],
            1.0,
        ),
        (
            "controller_runtime_terminal_reconcile_errors_total",
            c.to_vec(),
            0.0,
        ),
    ] {
        let got = metric(text, series, &labels);
        ensure!(
            got == Some(want),
            "{series}{labels:?} = {got:?}, want {want}:\n{text}"
        );
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_panicking_reconcile_is_recovered_counted_and_retried() -> Result<()> {
    let (name, text) = run("mgr-panic", FirstCall::Panic, None).await?;
    assert_counted(&text, &name, "controller_runtime_reconcile_panics_total")?;
    let timeouts = metric(
        &text,
        "controller_runtime_reconcile_timeouts_total",
        &[("controller", &name)],
    );
    ensure!(timeouts == Some(0.0), "timeouts {timeouts:?}:\n{text}");
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reconcile_past_the_timeout_is_cut_counted_and_retried() -> Result<()> {
    let (name, text) = run("mgr-timeout", FirstCall::Hang, Some(Duration::from_millis(300))).await?;
    assert_counted(&text, &name, "controller_runtime_reconcile_timeouts_total")?;
    let panics = metric(
        &text,
        "controller_runtime_reconcile_panics_total",
        &[("controller", &name)],
    );
    ensure!(panics == Some(0.0), "panics {panics:?}:\n{text}");
    Ok(())
}
