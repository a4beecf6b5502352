//! One reconcile of one managed resource, in crossplane-runtime's order (see the crate docs).
//!
//! Writes: metadata (finalizer, safe-create annotations, external name) as JSON merge patches, the ones
//! that must not race carrying `metadata.resourceVersion` as a precondition; status with a full
//! `replace_status`, only when it changed. Everything goes through the term's fenced client.

use std::sync::Arc;
use std::time::Duration;

use apis::Condition;
use apis::condition;
use apis::meta::{
    ANNOTATION_EXTERNAL_CREATE_FAILED, ANNOTATION_EXTERNAL_CREATE_PENDING,
    ANNOTATION_EXTERNAL_CREATE_SUCCEEDED, ANNOTATION_EXTERNAL_NAME,
};
use jiff::Timestamp;
use k8s_openapi::api::core::v1::ObjectReference;
use kube::ResourceExt;
use kube::api::{Patch, PatchParams, PostParams};
use manager::Fence;
use serde_json::{Value, json};

use crate::connection;
use crate::decision::{self, After, Before, Facts};
use crate::external::{ConnectionDetails, ExternalClient, ExternalConnector, ExternalError};
use crate::meta;
use crate::metrics::ManagedMetrics;
use crate::options::Options;
use crate::reason;
use crate::resource::Managed;
use manager::controller::backoff::jittered;
use manager::controller::event::{EventType, Recorder};

/// What the controller does after a reconcile (the controller builder's outcome mode).
pub use manager::controller::Requeue;

/// A write failed.
#[derive(Debug)]
enum WriteError {
    /// 409: someone else wrote first; requeue without an error condition.
    Conflict,
    /// The term ended; stop quietly.
    NotLeader,
    /// The resource is gone.
    Gone,
    /// Anything else.
    Other(String),
}

impl From<kube::Error> for WriteError {
    fn from(e: kube::Error) -> Self {
        match e {
            e if manager::fence::is_not_leader(&e) => Self::NotLeader,
            kube::Error::Api(s) if s.code == 409 => Self::Conflict,
            kube::Error::Api(s) if s.code == 404 => Self::Gone,
            e => Self::Other(e.to_string()),
        }
    }
}

/// Everything a controller's reconciles share within one term.
pub(crate) struct Shared<C> {
    pub connector: Arc<C>,
    pub options: Options,
    pub client: kube::Client,
    pub fence: Fence,
    pub recorder: Recorder,
    pub mr_metrics: ManagedMetrics,
}

/// Runs an external call with a timeout; the error says whether the term ended, and what failed.
async fn call<T>(
    timeout: Duration,
    what: &str,
    fut: impl std::future::Future<Output = Result<T, ExternalError>>,
) -> Result<T, (bool, String)> {
    match tokio::time::timeout(timeout, fut).await {
        Ok(Ok(v)) => Ok(v),
        Ok(Err(e)) => Err((e.is_not_leader(), format!("{what} failed: {e}"))),
        Err(_) => Err((false, format!("{what} failed: timed out"))),
    }
}

/// One reconcile in progress.
struct Run<'a, K: Managed, C> {
    shared: &'a Shared<C>,
    mr: K,
    original_status: Value,
}

fn status_of<K: Managed>(mr: &K) -> Value {
    serde_json::to_value(mr)
        .ok()
        .and_then(|mut v| v.get_mut("status").map(Value::take))
        .unwrap_or(Value::Null)
}

/// Reconciles `mr` once and says when to come back.
pub(crate) async fn reconcile<K, C>(shared: &Shared<C>, mr: K) -> Requeue
where
    K: Managed,
    C: ExternalConnector<K>,
{
    shared.mr_metrics.first_time_reconciled(&mr);
    let original_status = status_of(&mr);
    let mut run = Run {
        shared,
        mr,
        original_status,
    };
    run.reconcile().await
}

impl<K, C> Run<'_, K, C>
where
    K: Managed,
    C: ExternalConnector<K>,
{
    fn generation(&self) -> Option<i64> {
        self.mr.meta().generation
    }

    fn set(&mut self, conditions: impl IntoIterator<Item = Condition>) {
        let generation = self.generation();
        let stamped: Vec<Condition> = conditions
            .into_iter()
            .map(|c| c.with_observed_generation(generation))
            .collect();
        condition::set(self.mr.conditions_mut(), stamped);
    }

    fn object_ref(&self) -> ObjectReference {
        self.mr.object_ref(&())
    }

    async fn event(&self, type_: EventType, reason: &str, message: &str) {
        let regarding = self.object_ref();
        self.shared
            .recorder
            .publish(&self.shared.client, &regarding, type_, reason, message)
            .await;
    }

    fn api(&self) -> kube::Api<K> {
        K::api(self.shared.client.clone(), self.mr.meta().namespace.as_deref())
    }

    fn name(&self) -> String {
        self.mr.name_any()
    }

    /// Adopts the server's resourceVersion (and generation) after a metadata write.
    fn adopt(&mut self, written: &K) {
        self.mr.meta_mut().resource_version = written.meta().resource_version.clone();
        self.mr.meta_mut().generation = written.meta().generation;
    }

    /// Merge-patches `metadata` fields; with `precondition`, only if the object is unchanged since read.
    async fn patch_metadata(&mut self, mut metadata: Value, precondition: bool) -> Result<(), WriteError> {
        if precondition {
            metadata["resourceVersion"] = json!(self.mr.meta().resource_version);
        }
        let patch = json!({ "metadata": metadata });
        let written = self
            .api()
            .patch(&self.name(), &PatchParams::default(), &Patch::Merge(&patch))
            .await?;
        self.adopt(&written);
        Ok(())
    }

    async fn write_finalizers(&mut self) -> Result<(), WriteError> {
        let finalizers = self.mr.meta().finalizers.clone().unwrap_or_default();
        self.patch_metadata(json!({ "finalizers": finalizers }), true)
            .await
    }

    /// Writes the given annotations as they are on the in-memory object.
    async fn write_annotations(&mut self, keys: &[&str], precondition: bool) -> Result<(), WriteError> {
        let annotations = self.mr.annotations();
        let values: serde_json::Map<String, Value> = keys
            .iter()
            .filter_map(|k| annotations.get(*k).map(|v| ((*k).to_owned(), json!(v))))
            .collect();
        self.patch_metadata(json!({ "annotations": values }), precondition)
            .await
    }

    /// Persists the status if it changed.
    async fn write_status(&mut self) -> Result<(), WriteError> {
        let generation = self.generation();
        self.mr.set_observed_generation(generation);
        if status_of(&self.mr) == self.original_status {
            return Ok(());
        }
        let written = self
            .api()
            .replace_status(&self.name(), &PostParams::default(), &self.mr)
            .await?;
        self.adopt(&written);
        self.original_status = status_of(&self.mr);
        Ok(())
    }

    /// Finishes a branch: writes the status and turns write failures into the right requeue.
    async fn finish(&mut self, requeue: Requeue) -> Requeue {
        match self.write_status().await {
            Ok(()) => requeue,
            Err(e) => {
                self.write_failed(e, "cannot update managed resource status")
                    .await
            }
        }
    }

    async fn write_failed(&mut self, e: WriteError, context: &str) -> Requeue {
        match e {
            WriteError::Conflict => {
                tracing::debug!(resource = %self.name(), context, "conflict; requeueing");
                Requeue::Backoff
            }
            WriteError::NotLeader | WriteError::Gone => Requeue::Never,
            WriteError::Other(msg) => {
                tracing::warn!(resource = %self.name(), error = %msg, context);
                let message = format!("{context}: {msg}");
                self.event(EventType::Warning, reason::CANNOT_UPDATE_MANAGED, &message)
                    .await;
                Requeue::Backoff
            }
        }
    }

    /// Records an error: `Synced=False/ReconcileError`, a warning event, and a backoff.
    async fn fail(&mut self, event_reason: &str, message: String, extra: Option<Condition>) -> Requeue {
        tracing::debug!(resource = %self.name(), reason = event_reason, error = %message, "reconcile failed");
        self.set(extra.into_iter().chain([Condition::reconcile_error(&message)]));
        self.event(EventType::Warning, event_reason, &message).await;
        self.finish(Requeue::Backoff).await
    }

    fn poll(&self, hint: Option<Duration>) -> Requeue {
        let opts = &self.shared.options;
        let base = meta::poll_interval(self.mr.meta()).unwrap_or(opts.poll_interval);
        let poll = jittered(base, opts.poll_jitter);
        Requeue::After(match hint {
            Some(h) if h < poll => h,
            _ => poll,
        })
    }

    /// Publishes the connection details, if the resource asks for a Secret. On failure records the
    /// error and returns when to come back.
    async fn publish(&mut self, details: &ConnectionDetails) -> Option<Requeue> {
        let target = self
            .mr
            .managed_spec()
            .connection_secret(self.mr.meta().namespace.as_deref())?;
        let e = connection::publish(&self.shared.client, &self.mr, &target, details)
            .await
            .err()?;
        let message = format!("cannot publish connection details: {e}");
        Some(self.fail(reason::CANNOT_PUBLISH, message, None).await)
    }

    async fn reconcile(&mut self) -> Requeue {
        let opts = self.shared.options.clone();
        let policies = self.mr.managed_spec().policies();
        match decision::before_connect(self.mr.meta(), &policies, opts.deterministic_external_name) {
            Before::Paused => {
                self.set([Condition::reconcile_paused()]);
                self.event(EventType::Normal, reason::PAUSED, "Reconciliation is paused either through the `spec.managementPolicies` or the pause annotation").await;
                return self.finish(Requeue::Never).await;
            }
            Before::InvalidPolicy => {
                let msg = format!(
                    "the managementPolicies {:?} are not a supported combination",
                    self.mr.managed_spec().management_policies()
                );
                self.set([Condition::reconcile_error(&msg)]);
                self.event(EventType::Warning, reason::INVALID_POLICY, &msg).await;
                return self.finish(Requeue::Never).await;
            }
            Before::Orphan => {
                if meta::remove_finalizer(self.mr.meta_mut())
                    && let Err(e) = self.write_finalizers().await
                {
                    return self.write_failed(e, "cannot remove finalizer").await;
                }
                self.shared.mr_metrics.deleted(&self.mr);
                return Requeue::Never;
            }
            Before::CreateIncomplete | Before::Proceed => {}
        }

        if opts.name_as_external_name && meta::external_name(self.mr.meta()).is_none() {
            let name = self.name();
            meta::set_external_name(self.mr.meta_mut(), &name);
            if let Err(e) = self.write_annotations(&[ANNOTATION_EXTERNAL_NAME], true).await {
                return self.write_failed(e, "cannot initialize managed resource").await;
            }
        }

        if decision::before_connect(self.mr.meta(), &policies, opts.deterministic_external_name)
            == Before::CreateIncomplete
        {
            self.set([
                Condition::creating(),
                Condition::reconcile_error(decision::CREATE_INCOMPLETE),
            ]);
            self.event(
                EventType::Warning,
                reason::CANNOT_INITIALIZE,
                decision::CREATE_INCOMPLETE,
            )
            .await;
            return self.finish(Requeue::Never).await;
        }

        if let Some(usage) = &opts.usage
            && let Err(e) = usage.track(&self.shared.client, &self.mr).await
        {
            if e.is_not_leader() {
                return Requeue::Never;
            }
            return self
                .fail(
                    reason::CANNOT_CONNECT,
                    format!("connect failed: cannot track ProviderConfig usage: {e}"),
                    None,
                )
                .await;
        }

        let connected = tokio::time::timeout(
            opts.timeout,
            self.shared
                .connector
                .connect(&self.shared.client, &self.shared.fence, &self.mr),
        )
        .await;
        let mut external = match connected {
            Ok(Ok(c)) => c,
            Ok(Err(e)) if e.is_not_leader() => return Requeue::Never,
            Ok(Err(e)) => {
                return self
                    .fail(reason::CANNOT_CONNECT, format!("connect failed: {e}"), None)
                    .await;
            }
            Err(_) => {
                return self
                    .fail(
                        reason::CANNOT_CONNECT,
                        "connect failed: timed out".to_owned(),
                        None,
                    )
                    .await;
            }
        };
        let requeue = self.connected(&mut external).await;
        if let Err(e) = external.disconnect().await {
            tracing::debug!(resource = %self.name(), error = %e, "disconnect failed");
        }
        requeue
    }

    async fn connected(&mut self, ext: &mut C::Client) -> Requeue {
        let opts = self.shared.options.clone();
        let policies = self.mr.managed_spec().policies();
        let observed = call(self.shared.options.timeout, "observe", ext.observe(&mut self.mr)).await;
        let obs = match observed {
            Ok(o) => o,
            Err((true, _)) => return Requeue::Never,
            Err((false, msg)) => return self.fail(reason::CANNOT_OBSERVE, msg, None).await,
        };
        let deleting = self.mr.meta().deletion_timestamp.is_some();
        let facts = Facts {
            deleting,
            created_recently: meta::create_succeeded_within(
                self.mr.meta(),
                Timestamp::now(),
                opts.creation_grace_period,
            ),
            other_finalizers: !meta::other_finalizers(self.mr.meta()).is_empty(),
        };
        let decision = decision::after_observe(&obs, &policies, facts);
        tracing::debug!(resource = %self.name(), ?decision, exists = obs.resource_exists, up_to_date = obs.resource_up_to_date, "observed");

        match decision {
            After::ObserveOnlyMissing => {
                self.set([Condition::reconcile_error(
                    "observe failed: external resource does not exist",
                )]);
                let poll = self.poll(None);
                return self.finish(poll).await;
            }
            After::CreationPending => {
                self.event(
                    EventType::Normal,
                    reason::PENDING,
                    "Waiting for external resource existence to be confirmed",
                )
                .await;
                return self.finish(Requeue::Backoff).await;
            }
            After::WaitForOtherFinalizers => {
                self.set([Condition::deleting()]);
                return self.finish(Requeue::After(Duration::from_secs(5))).await;
            }
            After::DeleteExternal => {
                return match call(self.shared.options.timeout, "delete", ext.delete(&mut self.mr)).await {
                    Ok(_) => {
                        self.set([Condition::deleting(), Condition::reconcile_success()]);
                        self.event(
                            EventType::Normal,
                            reason::DELETED,
                            "Successfully requested deletion of external resource",
                        )
                        .await;
                        self.finish(Requeue::Backoff).await
                    }
                    Err((true, _)) => Requeue::Never,
                    Err((false, msg)) => {
                        self.fail(reason::CANNOT_DELETE, msg, Some(Condition::deleting()))
                            .await
                    }
                };
            }
            After::RemoveFinalizer => {
                if meta::remove_finalizer(self.mr.meta_mut())
                    && let Err(e) = self.write_finalizers().await
                {
                    return self.write_failed(e, "cannot remove finalizer").await;
                }
                self.shared.mr_metrics.deleted(&self.mr);
                return Requeue::Never;
            }
            After::Create | After::Sync { .. } => {}
        }

        if let Some(requeue) = self.publish(&obs.connection_details).await {
            return requeue;
        }
        if meta::add_finalizer(self.mr.meta_mut())
            && let Err(e) = self.write_finalizers().await
        {
            return self.write_failed(e, "cannot add finalizer").await;
        }

        match decision {
            After::Create => self.create(ext).await,
            After::Sync {
                late_initialize,
                update,
            } => self.sync(ext, late_initialize, update, obs.poll_after).await,
            _ => Requeue::Never,
        }
    }

    async fn create(&mut self, ext: &mut C::Client) -> Requeue {
        meta::set_create_pending(self.mr.meta_mut(), Timestamp::now());
        // The precondition makes a stale read fail here rather than create twice.
        if let Err(e) = self
            .write_annotations(&[ANNOTATION_EXTERNAL_CREATE_PENDING], true)
            .await
        {
            return self.write_failed(e, "cannot record pending creation").await;
        }
        match call(self.shared.options.timeout, "create", ext.create(&mut self.mr)).await {
            Err((true, _)) => Requeue::Never,
            Err((false, msg)) => {
                meta::set_create_failed(self.mr.meta_mut(), Timestamp::now());
                if let Err(e) = self
                    .write_annotations(&[ANNOTATION_EXTERNAL_CREATE_FAILED], false)
                    .await
                {
                    tracing::warn!(resource = %self.name(), error = ?e, "cannot record failed creation");
                }
                self.fail(reason::CANNOT_CREATE, msg, Some(Condition::creating()))
                    .await
            }
            Ok(created) => {
                meta::set_create_succeeded(self.mr.meta_mut(), Timestamp::now());
                if let Err(e) = self
                    .write_annotations(
                        &[ANNOTATION_EXTERNAL_CREATE_SUCCEEDED, ANNOTATION_EXTERNAL_NAME],
                        false,
                    )
                    .await
                {
                    return self.write_failed(e, "cannot record successful creation").await;
                }
                if let Some(requeue) = self.publish(&created.connection_details).await {
                    return requeue;
                }
                self.set([Condition::creating(), Condition::reconcile_success()]);
                self.event(
                    EventType::Normal,
                    reason::CREATED,
                    "Successfully requested creation of external resource",
                )
                .await;
                self.finish(Requeue::Immediately).await
            }
        }
    }

    async fn sync(
        &mut self,
        ext: &mut C::Client,
        late_initialize: bool,
        update: bool,
        hint: Option<Duration>,
    ) -> Requeue {
        if late_initialize {
            let spec = serde_json::to_value(&self.mr)
                .ok()
                .and_then(|mut v| v.get_mut("spec").map(Value::take))
                .unwrap_or(Value::Null);
            let patch =
                json!({ "metadata": { "resourceVersion": self.mr.meta().resource_version }, "spec": spec });
            match self
                .api()
                .patch(&self.name(), &PatchParams::default(), &Patch::Merge(&patch))
                .await
            {
                Ok(written) => self.adopt(&written),
                Err(e) => {
                    return self
                        .write_failed(e.into(), "cannot update managed resource")
                        .await;
                }
            }
        }
        if !update {
            self.set([Condition::reconcile_success()]);
            self.shared.mr_metrics.up_to_date(&self.mr);
            let poll = self.poll(hint);
            return self.finish(poll).await;
        }
        match call(self.shared.options.timeout, "update", ext.update(&mut self.mr)).await {
            Err((true, _)) => Requeue::Never,
            Err((false, msg)) => self.fail(reason::CANNOT_UPDATE, msg, None).await,
            Ok(updated) => {
                if let Some(requeue) = self.publish(&updated.connection_details).await {
                    return requeue;
                }
                self.set([Condition::reconcile_success()]);
                self.shared.mr_metrics.drift(&self.mr);
                self.event(
                    EventType::Normal,
                    reason::UPDATED,
                    "Successfully requested update of external resource",
                )
                .await;
                let poll = self.poll(hint);
                self.finish(poll).await
            }
        }
    }
}

#[cfg(test)]
mod tests;
