//! The CronOperation reconciler (upstream's `internal/controller/ops/cronoperation`): creates an
//! Operation from the template whenever the schedule says so, and keeps its history.
//!
//! Each reconcile lists the CronOperation's Operations (label `ops.crossplane.io/cronoperation`) and
//! records when the latest was created (`lastScheduleTime`) and succeeded (`lastSuccessfulTime`) and
//! which still run; deletes those beyond the history limits ([`super::lifecycle::garbage`]); then asks
//! the schedule whether a run is due ([`super::schedule::decide`]). A due run honours
//! `concurrencyPolicy` (`Allow`, `Forbid`: skip while one runs, `Replace`: delete the running ones) and
//! creates `<name>-<scheduled unix time>`; the reconcile comes back at the next scheduled time. The
//! Operations are owned, so their progress updates the status at once.
//!
//! An unparsable schedule sets `Scheduling=False` (`ScheduleInvalid`) and `Synced=False` with why in
//! words, and waits for the spec to change. A paused CronOperation (`crossplane.io/paused: "true"`)
//! schedules nothing (`SchedulePaused`, `ReconcilePaused`).

use std::sync::Arc;
use std::time::Duration;

use apis::condition::{self, Condition};
use apis::ops::{self, ConcurrencyPolicy, CronOperation, CronOperationStatus, Operation, conditions};
use jiff::Timestamp;
use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::api::{DeleteParams, ListParams, PostParams};
use kube::runtime::controller::Action;
use kube::runtime::{Controller, watcher};
use kube::{Api, ResourceExt};
use manager::controller::ControllerBuilder;
use manager::controller::event::{EventType, Recorder};
use manager::{BoxError, TermContext};

use super::lifecycle;
use super::schedule::{self, Due, Schedule};
use crate::error::{Error, is_not_found};

/// The controller's name.
pub const CONTROLLER: &str = "cronoperation";

struct Ctx {
    client: kube::Client,
    events: Recorder,
}

/// Runs the CronOperation controller until the term ends.
pub async fn run(ctx: TermContext, options: super::Options) -> Result<(), BoxError> {
    let client = ctx.client().clone();
    let mut wc = watcher::Config::default();
    if let Some(s) = &options.selector {
        wc = wc.labels(s);
    }
    let controller = Controller::new(Api::<CronOperation>::all(client.clone()), wc.clone())
        .owns(Api::<Operation>::all(client.clone()), wc);
    let shared = Arc::new(Ctx {
        client,
        events: Recorder::new(CONTROLLER, ctx.term().identity.clone()),
    });
    ControllerBuilder::new(CONTROLLER, controller)
        .metrics(&options.metrics)
        .run(ctx.token(), reconcile, shared)
        .await;
    Ok(())
}

/// Whether `obj` carries `crossplane.io/paused: "true"`.
pub(crate) fn paused<K: kube::Resource>(obj: &K) -> bool {
    obj.annotations()
        .get(apis::meta::ANNOTATION_PAUSED)
        .map(String::as_str)
        == Some("true")
}

async fn write(ctx: &Ctx, co: &CronOperation, status: CronOperationStatus) -> Result<(), Error> {
    let mut next = co.clone();
    next.status = Some(status);
    Api::<CronOperation>::all(ctx.client.clone())
        .replace_status(&co.name_any(), &PostParams::default(), &next)
        .await?;
    Ok(())
}

fn until(t: Timestamp) -> Duration {
    let d = t.duration_since(Timestamp::now());
    // A little past the scheduled second, so the run is due when the reconcile comes back.
    Duration::try_from(d).unwrap_or_default() + Duration::from_millis(200)
}

/// Lists the Operations labelled for the creator `name` under `label`.
pub(crate) async fn operations(
    client: &kube::Client,
    label: &str,
    name: &str,
) -> Result<Vec<Operation>, Error> {
    let api: Api<Operation> = Api::all(client.clone());
    Ok(api
        .list(&ListParams::default().labels(&format!("{label}={name}")))
        .await?
        .items)
}

/// Deletes Operation `name`; one already gone is fine.
pub(crate) async fn delete_operation(client: &kube::Client, name: &str) -> Result<(), Error> {
    match Api::<Operation>::all(client.clone())
        .delete(name, &DeleteParams::background())
        .await
    {
        Ok(_) => Ok(()),
        Err(e) if is_not_found(&e) => Ok(()),
        Err(e) => Err(e.into()),
    }
}

async fn reconcile(co: Arc<CronOperation>, ctx: Arc<Ctx>) -> Result<Action, Error> {
    if co.metadata.deletion_timestamp.is_some() {
        return Ok(Action::await_change());
    }
    let mut status = co.status.clone().unwrap_or_default();
    let set = |status: &mut CronOperationStatus, c: Vec<Condition>| {
        condition::set(&mut status.conditions, c);
    };
    if paused(&*co) {
        set(
            &mut status,
            vec![conditions::schedule_paused(), Condition::reconcile_paused()],
        );
        write(&ctx, &co, status).await?;
        return Ok(Action::await_change());
    }
    match schedule_once(&ctx, &co, &mut status).await {
        Ok(action) => {
            set(&mut status, vec![Condition::reconcile_success()]);
            write(&ctx, &co, status).await?;
            Ok(action)
        }
        Err(Stop::Invalid(e)) => {
            let message = e.to_string();
            set(
                &mut status,
                vec![
                    conditions::schedule_invalid(&message),
                    Condition::reconcile_error(&message),
                ],
            );
            write(&ctx, &co, status).await?;
            publish(&ctx, &co, "InvalidSchedule", &message).await;
            Ok(Action::await_change())
        }
        Err(Stop::Failed(e)) if e.is_not_leader() || e.is_conflict() => Err(e),
        Err(Stop::Failed(e)) => {
            let message = e.to_string();
            set(&mut status, vec![Condition::reconcile_error(&message)]);
            if let Err(w) = write(&ctx, &co, status).await {
                tracing::debug!(error = %w, "cannot record the CronOperation's error in its status");
            }
            publish(&ctx, &co, "ReconcileError", &message).await;
            Err(e)
        }
    }
}

async fn publish(ctx: &Ctx, co: &CronOperation, reason: &str, message: &str) {
    let regarding = ObjectReference {
        api_version: Some(ops::API_VERSION.into()),
        kind: Some("CronOperation".into()),
        name: Some(co.name_any()),
        uid: co.uid(),
        ..Default::default()
    };
    ctx.events
        .publish(&ctx.client, &regarding, EventType::Warning, reason, message)
        .await;
}

enum Stop {
    Invalid(schedule::ScheduleError),
    Failed(Error),
}

impl From<Error> for Stop {
    fn from(e: Error) -> Self {
        Stop::Failed(e)
    }
}

/// Everything but the status write: history, the schedule, and creating a due Operation.
async fn schedule_once(
    ctx: &Ctx,
    co: &CronOperation,
    status: &mut CronOperationStatus,
) -> Result<Action, Stop> {
    let name = co.name_any();
    let ops = operations(&ctx.client, ops::LABEL_CRON_OPERATION, &name).await?;
    if let Some(t) = lifecycle::latest_created(&ops) {
        status.last_schedule_time = Some(Time(t));
    }
    let created = co
        .metadata
        .creation_timestamp
        .as_ref()
        .map_or_else(Timestamp::now, |t| t.0);
    let last = status.last_schedule_time.as_ref().map_or(created, |t| t.0);
    if let Some(t) = lifecycle::latest_succeeded(&ops) {
        status.last_successful_time = Some(Time(t));
    }
    status.running_operation_refs = lifecycle::running_refs(&ops);
    let (keep_ok, keep_failed) =
        lifecycle::limits(co.spec.successful_history_limit, co.spec.failed_history_limit);
    for gone in lifecycle::garbage(keep_ok, keep_failed, &ops) {
        delete_operation(&ctx.client, &gone).await?;
    }
    let parsed = Schedule::parse(&co.spec.schedule).map_err(Stop::Invalid)?;
    condition::set(&mut status.conditions, [conditions::schedule_active()]);
    let due = schedule::decide(&parsed, last, Timestamp::now(), co.spec.starting_deadline_seconds)
        .map_err(Stop::Invalid)?;
    let (scheduled, next) = match due {
        Due::Wait(t) => return Ok(Action::requeue(until(t))),
        Due::Missed { scheduled, next } => {
            tracing::debug!(cronoperation = %name, %scheduled, "missed the starting deadline; waiting for the next run");
            return Ok(Action::requeue(until(next)));
        }
        Due::Run { scheduled, next } => (scheduled, next),
    };
    let running = lifecycle::running(&ops);
    if !running.is_empty() {
        match co.spec.concurrency_policy.unwrap_or_default() {
            ConcurrencyPolicy::Allow => {}
            ConcurrencyPolicy::Forbid => return Ok(Action::requeue(until(next))),
            ConcurrencyPolicy::Replace => {
                for r in &running {
                    delete_operation(&ctx.client, r).await?;
                }
            }
        }
    }
    let op = super::template::cron_operation(co, scheduled);
    match Api::<Operation>::all(ctx.client.clone())
        .create(&PostParams::default(), &op)
        .await
    {
        Ok(_) => {}
        // Created by an earlier reconcile whose status write did not land.
        Err(kube::Error::Api(s)) if s.code == 409 && s.reason == "AlreadyExists" => {}
        Err(e) if manager::fence::is_not_leader(&e) => return Err(Stop::Failed(e.into())),
        Err(e) => {
            return Err(Stop::Failed(Error::Message(format!(
                "cannot create scheduled Operation {:?}: {}",
                op.name_any(),
                crate::error::explain(&e)
            ))));
        }
    }
    status.last_schedule_time = Some(Time(Timestamp::now()));
    Ok(Action::requeue(until(next)))
}
