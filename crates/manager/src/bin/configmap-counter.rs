//! `configmap-counter`: the smallest complete user of the `manager` crate, and the binary its process tests
//! run as several replicas.
//!
//! - An **always**-runnable cache (a reflector over the namespace's ConfigMaps) runs on every replica, so
//!   standbys are warm; it marks `/readyz` ready once its initial list is in.
//! - A **gated** controller counts the ConfigMaps (all but its own outputs) and server-side-applies the
//!   count into the ConfigMap `configmap-count` through the fencing client, on every change and every
//!   `--resync-period`. The ConfigMap also names the writer and the term, so tests can see who wrote.
//! - Once its cache is ready, the controller starts a **child** runnable in the same term (the way the
//!   core starts one controller per XRD): a heartbeat that writes `configmap-count-heartbeat` every
//!   `--resync-period`. It stops with the term.
//!
//! Every flag of [`manager::Args`] applies; the Lease defaults to `configmap-counter-leader-election`.

use std::collections::BTreeMap;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use clap::{CommandFactory, FromArgMatches, Parser};
use futures::StreamExt;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{ObjectMeta, Patch, PatchParams};
use kube::runtime::reflector::{self, Store};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, ResourceExt};
use manager::{
    AlwaysContext, BinaryInfo, BoxError, Defaults, Manager, ReconcileMetrics, ReconcileResult, TermContext,
    UsageError,
};
use tokio::sync::Notify;

/// The ConfigMap the count is written to.
const OUTPUT: &str = "configmap-count";
/// The ConfigMap the child runnable writes.
const HEARTBEAT: &str = "configmap-count-heartbeat";
/// The controller's name in metrics and logs, and the field manager of its writes.
const CONTROLLER: &str = "configmap-counter";

const DEFAULTS: Defaults = Defaults::new("configmap-counter-leader-election");

/// Counts the ConfigMaps in a namespace into the ConfigMap `configmap-count`, while leading.
#[derive(Debug, Parser)]
#[command(name = "configmap-counter", version)]
struct Cli {
    #[command(flatten)]
    manager: manager::Args,

    /// Namespace whose ConfigMaps are counted. Defaults to the Lease namespace (or POD_NAMESPACE).
    #[arg(long, env = "WATCH_NAMESPACE")]
    namespace: Option<String>,

    /// How often the count is rewritten even when nothing changed.
    #[arg(long, value_parser = manager::duration::parse_duration, default_value = "1s", value_name = "DURATION")]
    resync_period: Duration,
}

fn main() -> ExitCode {
    let matches = DEFAULTS.apply_to(Cli::command()).get_matches();
    let cli = Cli::from_arg_matches(&matches).unwrap_or_else(|e| e.exit());
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(run(cli)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            if let manager::Error::Usage(usage) = &e {
                usage.exit();
            }
            eprintln!("error: {e}");
            ExitCode::from(u8::try_from(e.exit_code()).unwrap_or(1))
        }
    }
}

async fn run(cli: Cli) -> Result<(), manager::Error> {
    let settings = cli.manager.resolve(&DEFAULTS)?;
    manager::config::logging::init(settings.log_format, &settings.log_level)?;
    let namespace = cli
        .namespace
        .or_else(|| settings.election.as_ref().map(|e| e.namespace.clone()))
        .or_else(|| std::env::var("POD_NAMESPACE").ok())
        .filter(|ns| !ns.trim().is_empty())
        .ok_or_else(|| UsageError {
            flag: "namespace",
            message: "no namespace to count in: set --namespace, WATCH_NAMESPACE or POD_NAMESPACE".to_owned(),
        })?;

    let binary = BinaryInfo {
        name: env!("CARGO_BIN_NAME"),
        version: env!("CARGO_PKG_VERSION"),
    };
    let mut mgr = Manager::new(settings, binary).await?;
    for (addr, endpoints) in mgr.admin_addrs() {
        tracing::info!(%addr, ?endpoints, "admin endpoint bound");
    }

    let (store, writer) = reflector::store::<ConfigMap>();
    let changed = Arc::new(Notify::new());

    let cache_ns = namespace.clone();
    let cache_changed = changed.clone();
    mgr.add_always("configmap-cache", move |ctx: AlwaysContext| async move {
        let api: Api<ConfigMap> = Api::namespaced(ctx.client().clone(), &cache_ns);
        let events = watcher(api, watcher::Config::default())
            .default_backoff()
            .reflect(writer);
        futures::pin_mut!(events);
        loop {
            let event = tokio::select! {
                () = ctx.cancelled() => return Ok::<(), BoxError>(()),
                event = events.next() => event,
            };
            match event {
                Some(Ok(watcher::Event::InitDone)) => {
                    ctx.mark_ready();
                    cache_changed.notify_one();
                }
                Some(Ok(watcher::Event::Apply(_) | watcher::Event::Delete(_))) => cache_changed.notify_one(),
                Some(Ok(_)) => {}
                Some(Err(e)) => tracing::warn!(error = %e, "configmap watch failed; retrying"),
                None => return Err("the configmap watch ended".into()),
            }
        }
    });

    let reconcile = mgr.metrics().reconcile().clone();
    reconcile.register_controller(CONTROLLER);
    let resync = cli.resync_period;
    mgr.add_gated(CONTROLLER, move |ctx: TermContext| {
        count_while_leading(
            ctx,
            namespace.clone(),
            store.clone(),
            changed.clone(),
            reconcile.clone(),
            resync,
        )
    });

    mgr.run().await
}

/// The gated controller: one term's worth of counting.
async fn count_while_leading(
    ctx: TermContext,
    namespace: String,
    store: Store<ConfigMap>,
    changed: Arc<Notify>,
    metrics: ReconcileMetrics,
    resync: Duration,
) -> Result<(), BoxError> {
    tokio::select! {
        () = ctx.cancelled() => return Ok(()),
        ready = store.wait_until_ready() => ready?,
    }
    let ns = namespace.clone();
    ctx.spawn_child(HEARTBEAT, move |child| heartbeat(child, ns, resync))?;
    let api = ctx.namespaced::<ConfigMap>(&namespace);
    let params = PatchParams::apply(CONTROLLER).force();
    let transitions = ctx.term().transitions.map(|t| t.to_string()).unwrap_or_default();
    loop {
        let started = std::time::Instant::now();
        let count = store
            .state()
            .iter()
            .filter(|cm| !is_output(&cm.name_any()))
            .count();
        let data = [
            ("count", count.to_string()),
            ("writer", ctx.term().identity.clone()),
            ("transitions", transitions.clone()),
        ];
        match api
            .patch(OUTPUT, &params, &Patch::Apply(&config_map(OUTPUT, data)))
            .await
        {
            Ok(_) => {
                metrics.observe(CONTROLLER, ReconcileResult::Success, started.elapsed());
                tracing::debug!(count, "count written");
            }
            Err(e) if manager::fence::is_not_leader(&e) => {
                metrics.observe(CONTROLLER, ReconcileResult::Error, started.elapsed());
                tracing::info!(error = %e, "write refused; waiting for the manager to stop this term");
                ctx.cancelled().await;
                return Ok(());
            }
            Err(e) => {
                metrics.observe(CONTROLLER, ReconcileResult::Error, started.elapsed());
                tracing::warn!(error = %e, "cannot write the count; retrying");
            }
        }
        tokio::select! {
            () = ctx.cancelled() => return Ok(()),
            () = changed.notified() => {}
            () = tokio::time::sleep(resync) => {}
        }
    }
}

/// The child runnable: a heartbeat written while the term lasts.
async fn heartbeat(ctx: TermContext, namespace: String, period: Duration) -> Result<(), BoxError> {
    tracing::info!(child = HEARTBEAT, "child runnable started");
    let api = ctx.namespaced::<ConfigMap>(&namespace);
    let params = PatchParams::apply(HEARTBEAT).force();
    let mut beat: u64 = 0;
    loop {
        beat += 1;
        let data = [
            ("beat", beat.to_string()),
            ("writer", ctx.term().identity.clone()),
        ];
        match api
            .patch(HEARTBEAT, &params, &Patch::Apply(&config_map(HEARTBEAT, data)))
            .await
        {
            Ok(_) => {}
            Err(e) if manager::fence::is_not_leader(&e) => break,
            Err(e) => tracing::warn!(error = %e, "cannot write the heartbeat; retrying"),
        }
        tokio::select! {
            () = ctx.cancelled() => break,
            () = tokio::time::sleep(period) => {}
        }
    }
    ctx.cancelled().await;
    tracing::info!(child = HEARTBEAT, beats = beat, "child runnable stopped");
    Ok(())
}

/// Whether a ConfigMap is one this binary writes (and so not counted).
fn is_output(name: &str) -> bool {
    name == OUTPUT || name == HEARTBEAT
}

/// A ConfigMap named `name` holding `data`, for server-side apply.
fn config_map<const N: usize>(name: &str, data: [(&str, String); N]) -> ConfigMap {
    ConfigMap {
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            ..ObjectMeta::default()
        },
        data: Some(
            data.into_iter()
                .map(|(k, v)| (k.to_owned(), v))
                .collect::<BTreeMap<_, _>>(),
        ),
        ..ConfigMap::default()
    }
}
