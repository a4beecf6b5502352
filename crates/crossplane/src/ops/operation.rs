//! The Operation reconciler (upstream's `internal/controller/ops/operation`): runs an Operation's
//! pipeline once and records the outcome.
//!
//! 1. A deleted or complete Operation (`Succeeded` True or False) is left alone: it runs once.
//! 2. At `status.failures >= spec.retryLimit` it is marked `Succeeded=False` ("failure limit of N
//!    reached") with `Synced=True`, and never runs again ([`super::retry`]).
//! 3. A failed run waits its backoff before the next ([`super::retry::backoff`]).
//! 4. `Succeeded=Unknown` (`PipelineRunning`) is written with the resourceVersion read, so a stale copy
//!    never runs.
//! 5. Every Function must be able to run operations (`ValidPipeline`): a Function run from the
//!    development annotations can; one run from a package must declare the `operation` capability.
//! 6. The pipeline runs ([`super::pipeline`]); the desired resources are applied with server-side apply
//!    (field manager `ops.crossplane.io/operation/<uid>`, forcing ownership), and recorded in
//!    `status.appliedResourceRefs`; step outputs go to `status.pipeline`.
//! 7. `Succeeded=True` (`PipelineSuccess`) and `Synced=True`.
//!
//! A failure in 5 or 6 counts in `status.failures` and sets `Synced=False` with what failed in words;
//! results become Events on the Operation.

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use apis::condition::{self, Condition};
use apis::ops::{AppliedResourceRef, Operation, OperationStatus, PipelineStepStatus, conditions};
use apis::pkg::{ANNOTATION_RUNTIME, Function, FunctionRevision, LABEL_PACKAGE, RUNTIME_DEVELOPMENT};
use k8s_openapi::api::core::v1::ObjectReference;
use kube::api::{ListParams, Patch, PatchParams, PostParams};
use kube::core::DynamicObject;
use kube::runtime::controller::Action;
use kube::runtime::{Controller, watcher};
use kube::{Api, ResourceExt};
use manager::controller::ControllerBuilder;
use manager::controller::event::{EventType, Recorder};
use manager::{BoxError, TermContext};
use serde_json::Value;
use tokio::time::Instant;

use super::pipeline;
use super::retry::{self, Retry};
use crate::composite::discovery::Discovery;
use crate::composite::functions::{ClusterIo, Functions};
use crate::error::Error;

/// The controller's name.
pub const CONTROLLER: &str = "operation";
/// The prefix of the field manager that applies an Operation's resources (upstream's).
pub const FIELD_OWNER_PREFIX: &str = "ops.crossplane.io/operation/";
/// How long one run may take (upstream's timeout).
const TIMEOUT: Duration = Duration::from_secs(120);

struct Ctx {
    client: kube::Client,
    functions: Arc<Functions>,
    discovery: Discovery,
    events: Recorder,
    /// When each Operation (by uid) may run again after a failed run.
    not_before: Mutex<HashMap<String, Instant>>,
}

/// Runs the Operation controller until the term ends.
pub async fn run(ctx: TermContext, options: super::Options) -> Result<(), BoxError> {
    let client = ctx.client().clone();
    let api: Api<Operation> = Api::all(client.clone());
    let mut wc = watcher::Config::default();
    if let Some(s) = &options.selector {
        wc = wc.labels(s);
    }
    let shared = Arc::new(Ctx {
        client,
        functions: options.functions.clone(),
        discovery: Discovery::default(),
        events: Recorder::new(CONTROLLER, ctx.term().identity.clone()),
        not_before: Mutex::new(HashMap::new()),
    });
    ControllerBuilder::new(CONTROLLER, Controller::new(api, wc))
        .metrics(&options.metrics)
        .timeout(TIMEOUT + Duration::from_secs(10))
        .run(ctx.token(), reconcile, shared)
        .await;
    Ok(())
}

fn reference(op: &Operation) -> ObjectReference {
    ObjectReference {
        api_version: Some(apis::ops::API_VERSION.into()),
        kind: Some("Operation".into()),
        name: Some(op.name_any()),
        uid: op.uid(),
        resource_version: op.resource_version(),
        ..Default::default()
    }
}

/// Writes `status` over the Operation's, with the resourceVersion of `op`, and returns the new copy.
async fn write(ctx: &Ctx, op: &Operation, status: &OperationStatus) -> Result<Operation, Error> {
    let mut next = op.clone();
    next.status = Some(status.clone());
    let api: Api<Operation> = Api::all(ctx.client.clone());
    Ok(api
        .replace_status(&op.name_any(), &PostParams::default(), &next)
        .await?)
}

fn set(status: &mut OperationStatus, new: impl IntoIterator<Item = Condition>) {
    condition::set(&mut status.conditions, new);
}

async fn reconcile(op: Arc<Operation>, ctx: Arc<Ctx>) -> Result<Action, Error> {
    if op.metadata.deletion_timestamp.is_some() || op.is_complete() {
        return Ok(Action::await_change());
    }
    let uid = op.uid().unwrap_or_default();
    let mut status = op.status.clone().unwrap_or_default();
    let limit = op.spec.retry_limit();
    if let Retry::GiveUp { limit } = retry::decide(status.failures, limit) {
        set(
            &mut status,
            [
                Condition::reconcile_success(),
                conditions::failed(retry::limit_message(limit)),
            ],
        );
        write(&ctx, &op, &status).await?;
        forget(&ctx, &uid);
        return Ok(Action::await_change());
    }
    if status.failures > 0 {
        let wait = lock(&ctx.not_before)
            .get(&uid)
            .map(|at| at.saturating_duration_since(Instant::now()))
            .filter(|d| !d.is_zero());
        if let Some(wait) = wait {
            return Ok(Action::requeue(wait));
        }
    }
    // Written with the resourceVersion read: a stale copy is refused (409) and retried with the fresh one.
    set(&mut status, [conditions::running()]);
    let op = write(&ctx, &op, &status).await?;
    match tokio::time::timeout(TIMEOUT, attempt(&ctx, &op, &mut status)).await {
        Ok(Ok(events)) => {
            set(
                &mut status,
                [Condition::reconcile_success(), conditions::complete()],
            );
            write(&ctx, &op, &status).await?;
            forget(&ctx, &uid);
            publish(&ctx, &op, &events).await;
            Ok(Action::await_change())
        }
        Ok(Err(Failure::Kube(e))) if e.is_not_leader() => Err(e),
        Ok(Err(failure)) => fail(&ctx, &op, status, failure).await,
        Err(_) => {
            let message = format!("the pipeline did not finish within {} seconds", TIMEOUT.as_secs());
            fail(
                &ctx,
                &op,
                status,
                Failure::Pipeline {
                    message,
                    events: Vec::new(),
                },
            )
            .await
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

fn forget(ctx: &Ctx, uid: &str) {
    lock(&ctx.not_before).remove(uid);
}

/// Why a run failed.
enum Failure {
    /// A Function may not run operations.
    Capabilities(String),
    /// The pipeline failed (events of earlier results still worth reporting).
    Pipeline {
        message: String,
        events: Vec<pipeline::Event>,
    },
    /// Applying a desired resource failed.
    Apply(String),
    /// A request failed.
    Kube(Error),
}

/// Records a failed run: one more failure, `Synced=False` with why, an Event, and the backoff.
async fn fail(
    ctx: &Ctx,
    op: &Operation,
    mut status: OperationStatus,
    failure: Failure,
) -> Result<Action, Error> {
    status.failures += 1;
    let (message, events) = match failure {
        Failure::Capabilities(m) => {
            set(&mut status, [conditions::missing_capabilities(m.clone())]);
            (format!("function capability check failed: {m}"), Vec::new())
        }
        Failure::Pipeline { message, events } => (message, events),
        Failure::Apply(m) => (m, Vec::new()),
        Failure::Kube(e) => (e.to_string(), Vec::new()),
    };
    set(&mut status, [Condition::reconcile_error(&message)]);
    write(ctx, op, &status).await?;
    let wait = retry::backoff(status.failures);
    lock(&ctx.not_before).insert(op.uid().unwrap_or_default(), Instant::now() + wait);
    publish(ctx, op, &events).await;
    ctx.events
        .publish(
            &ctx.client,
            &reference(op),
            EventType::Warning,
            "RunPipeline",
            &message,
        )
        .await;
    tracing::info!(operation = %op.name_any(), failures = status.failures, "operation run failed: {message}");
    Ok(Action::requeue(wait))
}

async fn publish(ctx: &Ctx, op: &Operation, events: &[pipeline::Event]) {
    let regarding = reference(op);
    for e in events {
        let t = if e.warning {
            EventType::Warning
        } else {
            EventType::Normal
        };
        ctx.events
            .publish(&ctx.client, &regarding, t, &e.reason, &e.message)
            .await;
    }
}

/// Checks, runs and applies; on success returns the results' events.
async fn attempt(
    ctx: &Ctx,
    op: &Operation,
    status: &mut OperationStatus,
) -> Result<Vec<pipeline::Event>, Failure> {
    let names: BTreeSet<&str> = op
        .spec
        .pipeline
        .iter()
        .map(|s| s.function_ref.name.as_str())
        .collect();
    for name in names {
        check_function(&ctx.client, name).await?;
    }
    set(status, [conditions::valid_pipeline()]);
    let io = ClusterIo {
        client: &ctx.client,
        discovery: &ctx.discovery,
        functions: &ctx.functions,
        caches: None,
    };
    let outcome = super::pipeline::run(&io, &op.spec.pipeline).await.map_err(|e| {
        let events = match &e {
            crate::composite::pipeline::PipelineError::Fatal { events, .. } => events.clone(),
            _ => Vec::new(),
        };
        Failure::Pipeline {
            message: e.to_string(),
            events,
        }
    })?;
    for (step, output) in outcome.outputs {
        match status.pipeline.iter_mut().find(|p| p.step == step) {
            Some(p) => p.output = Some(output),
            None => status.pipeline.push(PipelineStepStatus {
                step,
                output: Some(output),
            }),
        }
    }
    let manager = format!("{FIELD_OWNER_PREFIX}{}", op.uid().unwrap_or_default());
    for (name, resource) in &outcome.resources {
        let applied = apply(ctx, &manager, name, resource).await?;
        add_ref(&mut status.applied_resource_refs, applied);
    }
    Ok(outcome.events)
}

/// Whether Function `name` may run in an operation, in words when it may not.
async fn check_function(client: &kube::Client, name: &str) -> Result<(), Failure> {
    let functions: Api<Function> = Api::all(client.clone());
    let f = functions
        .get_opt(name)
        .await
        .map_err(|e| {
            Failure::Capabilities(format!(
                "cannot get Function {name:?}: {}",
                crate::error::explain(&e)
            ))
        })?
        .ok_or_else(|| {
            Failure::Capabilities(format!(
                "Function {name:?} not found: install it (pkg.crossplane.io/v1 Function)"
            ))
        })?;
    if f.annotations().get(ANNOTATION_RUNTIME).map(String::as_str) == Some(RUNTIME_DEVELOPMENT) {
        return Ok(());
    }
    let revisions: Api<FunctionRevision> = Api::all(client.clone());
    let list = revisions
        .list(&ListParams::default().labels(&format!("{LABEL_PACKAGE}={name}")))
        .await
        .map_err(|e| {
            Failure::Capabilities(format!(
                "cannot list the FunctionRevisions of Function {name:?}: {}",
                crate::error::explain(&e)
            ))
        })?;
    let active = list
        .items
        .iter()
        .find(|r| r.spec.desired_state == "Active")
        .ok_or_else(|| {
            Failure::Capabilities(format!(
                "Function {name:?} has no active FunctionRevision yet: wait for it to become healthy"
            ))
        })?;
    let capabilities = active
        .status
        .as_ref()
        .map(|s| s.revision.capabilities.clone())
        .unwrap_or_default();
    let norm = |s: &str| -> String {
        s.chars()
            .filter(char::is_ascii_alphanumeric)
            .map(|c| c.to_ascii_lowercase())
            .collect()
    };
    if capabilities
        .iter()
        .any(|c| norm(c) == apis::pkg::meta::CAPABILITY_OPERATION)
    {
        Ok(())
    } else {
        Err(Failure::Capabilities(format!(
            "Function {name:?} does not declare the {:?} capability (it declares {capabilities:?}): use a version of the function built for operations",
            apis::pkg::meta::CAPABILITY_OPERATION
        )))
    }
}

/// Server-side applies the desired resource `name` and returns its reference.
async fn apply(
    ctx: &Ctx,
    manager: &str,
    name: &str,
    resource: &Value,
) -> Result<AppliedResourceRef, Failure> {
    let s = |v: &Value, p: &str| {
        v.pointer(p)
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned()
    };
    let (api_version, kind) = (s(resource, "/apiVersion"), s(resource, "/kind"));
    let (obj_name, namespace) = (s(resource, "/metadata/name"), s(resource, "/metadata/namespace"));
    if api_version.is_empty() || kind.is_empty() || obj_name.is_empty() {
        return Err(Failure::Apply(format!(
            "cannot apply desired resource {name:?}: it needs an apiVersion, a kind and a metadata.name"
        )));
    }
    let k = ctx
        .discovery
        .resolve(&ctx.client, &api_version, &kind)
        .await
        .map_err(|e| Failure::Apply(format!("cannot apply desired resource {name:?}: {e}")))?;
    let api: Api<DynamicObject> = match (k.namespaced, namespace.is_empty()) {
        (true, false) => Api::namespaced_with(ctx.client.clone(), &namespace, &k.resource),
        (true, true) => {
            return Err(Failure::Apply(format!(
                "cannot apply desired resource {name:?}: {kind} is namespaced, so it needs a metadata.namespace"
            )));
        }
        (false, _) => Api::all_with(ctx.client.clone(), &k.resource),
    };
    api.patch(
        &obj_name,
        &PatchParams::apply(manager).force(),
        &Patch::Apply(resource),
    )
    .await
    .map_err(|e| {
        let e = Error::from(e);
        if e.is_not_leader() {
            Failure::Kube(e)
        } else {
            Failure::Apply(format!(
                "cannot apply desired resource {name:?} ({kind} {obj_name}): {e}"
            ))
        }
    })?;
    Ok(AppliedResourceRef {
        api_version,
        kind,
        namespace: (k.namespaced && !namespace.is_empty()).then_some(namespace),
        name: obj_name,
    })
}

/// Adds `r` to `refs` unless it is there, keeping them sorted as upstream does (by apiVersion, kind,
/// namespace and name written one after the other).
pub fn add_ref(refs: &mut Vec<AppliedResourceRef>, r: AppliedResourceRef) {
    if refs.contains(&r) {
        return;
    }
    refs.push(r);
    let key = |r: &AppliedResourceRef| {
        format!(
            "{}{}{}{}",
            r.api_version,
            r.kind,
            r.namespace.as_deref().unwrap_or(""),
            r.name
        )
    };
    refs.sort_by_key(key);
}

impl From<Error> for Failure {
    fn from(e: Error) -> Self {
        Failure::Kube(e)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn r(kind: &str, ns: Option<&str>, name: &str) -> AppliedResourceRef {
        AppliedResourceRef {
            api_version: "v1".into(),
            kind: kind.into(),
            namespace: ns.map(str::to_owned),
            name: name.into(),
        }
    }

    #[test]
    fn applied_refs_are_unique_and_sorted() {
        let mut refs = Vec::new();
        add_ref(
            &mut refs,
            r("ConfigMap", Some("default"), "multi-step-configmap-b"),
        );
        add_ref(
            &mut refs,
            r("ConfigMap", Some("default"), "multi-step-configmap-a"),
        );
        add_ref(
            &mut refs,
            r("ConfigMap", Some("default"), "multi-step-configmap-a"),
        );
        add_ref(&mut refs, r("ClusterRole", None, "z"));
        let names: Vec<&str> = refs.iter().map(|r| r.name.as_str()).collect();
        assert_eq!(names, ["z", "multi-step-configmap-a", "multi-step-configmap-b"]);
    }
}
