//! The WatchOperation reconciler (upstream's `internal/controller/ops/watchoperation`): keeps one watch
//! task per WatchOperation ([`super::watched`]) and the WatchOperation's status.
//!
//! Each reconcile keeps the finalizer `ops.crossplane.io/watch-operation` (removed, after the watch is
//! stopped, when the WatchOperation is deleted); lists its Operations (label
//! `ops.crossplane.io/watchoperation`) for `lastScheduleTime`, `lastSuccessfulTime` and the running ones;
//! counts the resources the watch matches (`watchingResources`); deletes Operations beyond the history
//! limits; and starts the watch (again, when the spec's watch changed). Then `Watching=True`
//! (`WatchActive`) and `Synced=True`. The Operations are owned, so each one created or finished updates
//! the status at once. A kind the cluster does not serve sets `Watching=False` (`WatchFailed`) with why
//! in words and is tried again. Paused (`crossplane.io/paused: "true"`): no watch (`WatchPaused`).
//!
//! The watch tasks belong to the term: they end with it, and [`run`] awaits them.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use apis::condition::{self, Condition};
use apis::ops::{self, Operation, WatchOperation, WatchOperationStatus, WatchSpec, conditions};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::api::{ListParams, Patch, PatchParams, PostParams};
use kube::runtime::controller::Action;
use kube::runtime::{Controller, watcher};
use kube::{Api, ResourceExt};
use manager::controller::ControllerBuilder;
use manager::{BoxError, TermContext};
use serde_json::json;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use super::cron::{delete_operation, operations, paused};
use super::lifecycle;
use crate::composite::discovery::Discovery;
use crate::error::Error;

/// The controller's name.
pub const CONTROLLER: &str = "watchoperation";
/// How soon a watch that could not start is tried again.
const RETRY_WATCH: Duration = Duration::from_secs(30);

struct Running {
    spec: WatchSpec,
    token: CancellationToken,
    task: JoinHandle<()>,
}

struct Ctx {
    client: kube::Client,
    discovery: Discovery,
    term: CancellationToken,
    watches: Mutex<HashMap<String, Running>>,
}

impl Ctx {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Running>> {
        self.watches
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn stop(&self, name: &str) {
        if let Some(r) = self.lock().remove(name) {
            r.token.cancel();
        }
    }
}

/// Runs the WatchOperation controller until the term ends, then stops and awaits every watch.
pub async fn run(ctx: TermContext, options: super::Options) -> Result<(), BoxError> {
    let client = ctx.client().clone();
    let mut wc = watcher::Config::default();
    if let Some(s) = &options.selector {
        wc = wc.labels(s);
    }
    let controller = Controller::new(Api::<WatchOperation>::all(client.clone()), wc.clone())
        .owns(Api::<Operation>::all(client.clone()), wc);
    let shared = Arc::new(Ctx {
        client,
        discovery: Discovery::default(),
        term: ctx.token().clone(),
        watches: Mutex::new(HashMap::new()),
    });
    ControllerBuilder::new(CONTROLLER, controller)
        .metrics(&options.metrics)
        .run(ctx.token(), reconcile, shared.clone())
        .await;
    let tasks: Vec<Running> = shared.lock().drain().map(|(_, r)| r).collect();
    for r in tasks {
        r.token.cancel();
        if let Err(e) = r.task.await {
            tracing::debug!(error = %e, "a watch task ended abnormally");
        }
    }
    Ok(())
}

async fn write(ctx: &Ctx, wo: &WatchOperation, status: WatchOperationStatus) -> Result<(), Error> {
    let mut next = wo.clone();
    next.status = Some(status);
    Api::<WatchOperation>::all(ctx.client.clone())
        .replace_status(&wo.name_any(), &PostParams::default(), &next)
        .await?;
    Ok(())
}

/// Sets the WatchOperation's finalizers to `finalizers`, guarded by its resourceVersion.
async fn finalizers(
    ctx: &Ctx,
    wo: &WatchOperation,
    finalizers: Vec<String>,
) -> Result<WatchOperation, Error> {
    let patch = json!({"metadata": {"resourceVersion": wo.resource_version(), "finalizers": finalizers}});
    Ok(Api::<WatchOperation>::all(ctx.client.clone())
        .patch(&wo.name_any(), &PatchParams::default(), &Patch::Merge(&patch))
        .await?)
}

async fn reconcile(wo: Arc<WatchOperation>, ctx: Arc<Ctx>) -> Result<Action, Error> {
    let name = wo.name_any();
    let has_finalizer = wo
        .finalizers()
        .iter()
        .any(|f| f == ops::FINALIZER_WATCH_OPERATION);
    if wo.metadata.deletion_timestamp.is_some() {
        ctx.stop(&name);
        if has_finalizer {
            let rest = wo
                .finalizers()
                .iter()
                .filter(|f| *f != ops::FINALIZER_WATCH_OPERATION)
                .cloned()
                .collect();
            finalizers(&ctx, &wo, rest).await?;
        }
        return Ok(Action::await_change());
    }
    let wo = if has_finalizer {
        (*wo).clone()
    } else {
        let mut all = wo.finalizers().to_vec();
        all.push(ops::FINALIZER_WATCH_OPERATION.to_owned());
        finalizers(&ctx, &wo, all).await?
    };
    let mut status = wo.status.clone().unwrap_or_default();
    if paused(&wo) {
        ctx.stop(&name);
        condition::set(
            &mut status.conditions,
            [conditions::watch_paused(), Condition::reconcile_paused()],
        );
        write(&ctx, &wo, status).await?;
        return Ok(Action::await_change());
    }
    match observe_and_watch(&ctx, &wo, &mut status).await {
        Ok(()) => {
            condition::set(
                &mut status.conditions,
                [conditions::watch_active(), Condition::reconcile_success()],
            );
            write(&ctx, &wo, status).await?;
            Ok(Action::await_change())
        }
        Err(e) if e.is_not_leader() || e.is_conflict() => Err(e),
        Err(Error::Message(m)) => {
            condition::set(
                &mut status.conditions,
                [conditions::watch_failed(&m), Condition::reconcile_error(&m)],
            );
            write(&ctx, &wo, status).await?;
            Ok(Action::requeue(RETRY_WATCH))
        }
        Err(e) => {
            condition::set(&mut status.conditions, [Condition::reconcile_error(&e)]);
            if let Err(w) = write(&ctx, &wo, status).await {
                tracing::debug!(error = %w, "cannot record the WatchOperation's error in its status");
            }
            Err(e)
        }
    }
}

/// The status from the Operations and the watched kind, the history pruned, and the watch running.
/// A watch that cannot start is an [`Error::Message`] in words.
async fn observe_and_watch(
    ctx: &Ctx,
    wo: &WatchOperation,
    status: &mut WatchOperationStatus,
) -> Result<(), Error> {
    let name = wo.name_any();
    let ops = operations(&ctx.client, ops::LABEL_WATCH_OPERATION, &name).await?;
    if let Some(t) = lifecycle::latest_created(&ops) {
        status.last_schedule_time = Some(Time(t));
    }
    if let Some(t) = lifecycle::latest_succeeded(&ops) {
        status.last_successful_time = Some(Time(t));
    }
    status.running_operation_refs = lifecycle::running_refs(&ops);
    let (keep_ok, keep_failed) =
        lifecycle::limits(wo.spec.successful_history_limit, wo.spec.failed_history_limit);
    for gone in lifecycle::garbage(keep_ok, keep_failed, &ops) {
        delete_operation(&ctx.client, &gone).await?;
    }
    let spec = &wo.spec.watch;
    let kind = ctx
        .discovery
        .resolve(&ctx.client, &spec.api_version, &spec.kind)
        .await
        .map_err(|e| {
            Error::Message(format!(
                "cannot watch {} of apiVersion {}: {e}",
                spec.kind, spec.api_version
            ))
        })?;
    let api = super::watched::api(&ctx.client, &kind.resource, kind.namespaced, spec);
    let mut lp = ListParams::default();
    if let Some(s) = super::watched::label_selector(spec) {
        lp = lp.labels(&s);
    }
    match api.list_metadata(&lp).await {
        Ok(list) => status.watching_resources = i64::try_from(list.items.len()).unwrap_or(i64::MAX),
        Err(e) => {
            return Err(Error::Message(format!(
                "cannot list the {} resources to watch: {}",
                spec.kind,
                crate::error::explain(&e)
            )));
        }
    }
    let mut watches = ctx.lock();
    let current = watches
        .get(&name)
        .is_some_and(|r| r.spec == *spec && !r.task.is_finished());
    if !current {
        if let Some(old) = watches.remove(&name) {
            old.token.cancel();
        }
        let token = ctx.term.child_token();
        let task = tokio::spawn(super::watched::run(
            ctx.client.clone(),
            name.clone(),
            spec.clone(),
            api,
            token.clone(),
        ));
        watches.insert(
            name,
            Running {
                spec: spec.clone(),
                token,
                task,
            },
        );
    }
    Ok(())
}
