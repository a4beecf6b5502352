//! [`ManagedController`]: runs the managed reconciler for one kind as a gated runnable of the manager.
//!
//! Each term gets a fresh watch and work queue (kube's `Controller`) over the kind, with:
//! - crossplane-runtime's `DesiredStateChanged` predicate: a change of generation, labels, annotations
//!   (other than `external-create-pending`/`-failed`) or deletion timestamp triggers a reconcile; a
//!   status-only write does not;
//! - `max_concurrent` workers, the shared global rate limiter, per-item failure backoff and the poll
//!   interval with jitter;
//! - a reconcile of everything every `sync_interval`;
//! - graceful shutdown when the term ends: no new reconciles, in-flight ones finish (their writes are
//!   fenced), then the runnable returns so the manager can release the Lease.

use std::collections::BTreeMap;
use std::hash::{Hash, Hasher};
use std::marker::PhantomData;
use std::sync::Arc;
use std::time::Duration;

use apis::meta::{ANNOTATION_EXTERNAL_CREATE_FAILED, ANNOTATION_EXTERNAL_CREATE_PENDING};
use futures::{StreamExt, TryStreamExt};
use kube::runtime::controller::Config;
use kube::runtime::reflector;
use kube::runtime::{Controller, PredicateConfig, WatchStreamExt, watcher};
use kube::{Api, Resource, ResourceExt};
use manager::controller::event::Recorder;
use manager::controller::{ControllerBuilder, Requeue, key};
use manager::{Manager, Metrics, TermContext};

use crate::external::ExternalConnector;
use crate::metrics::ManagedMetrics;
use crate::options::Options;
use crate::reconciler::{self, Shared};
use crate::resource::Managed;
use manager::controller::backoff::Backoff;

/// The controller failed outside any single reconcile.
#[derive(Debug, thiserror::Error)]
pub enum ControllerError {
    /// A reconcile returned an error (never expected: errors are handled per item).
    #[error("reconcile failed: {0}")]
    Reconcile(String),
    /// The managed-resource metrics could not be registered (a name clash in the registry).
    #[error("{0}")]
    Metrics(String),
}

/// The managed reconciler for kind `K`, driven by connector `C`.
pub struct ManagedController<K, C> {
    connector: Arc<C>,
    options: Options,
    name: String,
    _kind: PhantomData<fn() -> K>,
}

impl<K, C> Clone for ManagedController<K, C> {
    fn clone(&self) -> Self {
        Self {
            connector: self.connector.clone(),
            options: self.options.clone(),
            name: self.name.clone(),
            _kind: PhantomData,
        }
    }
}

/// `managed/<lowercase kind>.<group>`, crossplane-runtime's controller name.
pub fn controller_name<K: Resource<DynamicType = ()>>() -> String {
    format!("managed/{}.{}", K::kind(&()).to_lowercase(), K::group(&()))
}

/// crossplane-runtime's `DesiredStateChanged` as a hash: generation, labels, annotations other than the
/// create-pending and create-failed ones, and the deletion timestamp.
pub fn desired_state_hash<K: Resource>(obj: &K) -> Option<u64> {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    let meta = obj.meta();
    meta.generation.hash(&mut h);
    meta.labels.hash(&mut h);
    let annotations: BTreeMap<&String, &String> = meta
        .annotations
        .iter()
        .flatten()
        .filter(|(k, _)| {
            k.as_str() != ANNOTATION_EXTERNAL_CREATE_PENDING
                && k.as_str() != ANNOTATION_EXTERNAL_CREATE_FAILED
        })
        .collect();
    annotations.hash(&mut h);
    meta.deletion_timestamp
        .as_ref()
        .map(|t| t.0.as_second())
        .hash(&mut h);
    Some(h.finish())
}

impl<K, C> ManagedController<K, C>
where
    K: Managed,
    C: ExternalConnector<K>,
{
    /// A controller for `K` with `connector` and `options`.
    pub fn new(connector: C, options: Options) -> Self {
        Self {
            connector: Arc::new(connector),
            options,
            name: controller_name::<K>(),
            _kind: PhantomData,
        }
    }

    /// The controller's name, `managed/<kind>.<group>`.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Registers the controller with `mgr` as a gated runnable.
    pub fn register(self, mgr: &mut Manager) {
        let metrics = mgr.metrics().clone();
        metrics.reconcile().register_controller(&self.name);
        metrics
            .reconcile()
            .set_max_concurrent(&self.name, self.options.max_concurrent.max(1));
        metrics.workqueue().track_queue(&self.name);
        let name = self.name.clone();
        mgr.add_gated(name, move |ctx: TermContext| {
            let this = self.clone();
            let metrics = metrics.clone();
            async move { this.run(ctx, metrics).await }
        });
    }

    /// Runs the controller for one term, until the term ends, recording its reconciles, its work queue
    /// and its kind's managed-resource metrics in `metrics`: while the kind's CRD
    /// (`<plural>.<group>`) is established ([`crate::gate`]).
    pub async fn run(self, ctx: TermContext, metrics: Metrics) -> Result<(), ControllerError> {
        let crd = format!("{}.{}", K::plural(&()), K::group(&()));
        let name = self.name.clone();
        let client = ctx.client().clone();
        let token = ctx.token().clone();
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        crate::gate::while_established(client, &crd, &name, &token, move |stop| {
            let (this, ctx, metrics, tx) = (self.clone(), ctx.clone(), metrics.clone(), tx.clone());
            async move {
                if let Err(e) = this.run_until(ctx, metrics, stop).await {
                    let _ = tx.send(e);
                }
            }
        })
        .await;
        match rx.try_recv() {
            Ok(e) => Err(e),
            Err(_) => Ok(()),
        }
    }

    /// Runs the controller until `token` is cancelled.
    async fn run_until(
        self,
        ctx: TermContext,
        metrics: Metrics,
        token: tokio_util::sync::CancellationToken,
    ) -> Result<(), ControllerError> {
        let opts = self.options.clone();
        let mr_metrics = ManagedMetrics::of(&metrics).map_err(|e| ControllerError::Metrics(e.to_string()))?;
        mr_metrics.register_kind::<K>();
        let shared = Arc::new(Shared {
            connector: self.connector.clone(),
            options: opts.clone(),
            client: ctx.client().clone(),
            fence: ctx.fence().clone(),
            recorder: Recorder::new(self.name.clone(), ctx.term().identity.clone()),
            mr_metrics: mr_metrics.clone(),
        });
        let api: Api<K> = Api::all(ctx.client().clone());
        let (reader, writer) = reflector::store();
        let mut wc = watcher::Config::default().any_semantic();
        if let Some(selector) = &opts.label_selector {
            wc = wc.labels(selector);
        }
        // What enters kube-runtime's queue is reported to the work queue metrics here (triggers, resyncs)
        // and by the controller builder (requeues), since the queue itself is private.
        let wq = metrics.workqueue().clone();
        let queue_name = self.name.clone();
        // The cache keeps no managedFields: the reconciler never reads them, they are often the larger
        // part of an object, and an update without them leaves the server's as they are.
        let trigger = watcher(api, wc)
            .default_backoff()
            .modify(|obj: &mut K| obj.managed_fields_mut().clear())
            .reflect(writer)
            .applied_objects()
            .predicate_filter(desired_state_hash, PredicateConfig::default())
            .inspect_ok(move |obj: &K| wq.add(&queue_name, &key(obj)));
        let mut controller = Controller::for_stream(trigger, reader.clone())
            .with_config(Config::default().concurrency(opts.max_concurrent.max(1)));
        if let Some(every) = opts.sync_interval.filter(|d| !d.is_zero()) {
            let (wq, queue_name, all) = (metrics.workqueue().clone(), self.name.clone(), reader.clone());
            let resync = ticks(every).inspect(move |()| {
                for obj in all.state() {
                    wq.add(&queue_name, &key(obj.as_ref()));
                }
            });
            controller = controller.reconcile_all_on(resync);
        }
        tracing::info!(controller = %self.name, "starting");
        // Reconciles report their own failures (events, conditions) and decide their own requeue: the
        // builder's outcome mode times them, keeps the backoff and requeues.
        let state = record_state::<K>(reader.clone(), mr_metrics, opts.poll_state_metric);
        let run = ControllerBuilder::new(self.name.clone(), controller)
            .backoff(Backoff::new(opts.backoff.0, opts.backoff.1))
            .metrics(metrics.reconcile())
            .workqueue(metrics.workqueue())
            .run_requeues(&token, reconcile_one::<K, C>, shared);
        tokio::select! {
            _ = run => {}
            () = state => {}
        }
        tracing::info!(controller = %self.name, "stopped");
        Ok(())
    }
}

/// Sets the `crossplane_managed_resource_{exists,ready,synced}` gauges of `K` from the controller's
/// cache every `every` (upstream's `--poll-state-metric`), once the cache has synced. Never returns.
async fn record_state<K: Managed>(reader: reflector::Store<K>, metrics: ManagedMetrics, every: Duration) {
    if reader.wait_until_ready().await.is_err() {
        return std::future::pending().await;
    }
    let mut tick = tokio::time::interval(every.max(Duration::from_millis(100)));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        let all = reader.state();
        metrics.record_state::<K>(all.iter().map(AsRef::as_ref));
    }
}

/// A stream that yields every `every`, starting one period from now.
fn ticks(every: Duration) -> impl futures::Stream<Item = ()> + Send + 'static {
    futures::stream::unfold((), move |()| async move {
        tokio::time::sleep(every).await;
        Some(((), ()))
    })
}

/// One reconcile, unless the rate limiter holds the object back or the term has ended.
async fn reconcile_one<K, C>(obj: Arc<K>, shared: Arc<Shared<C>>) -> Requeue
where
    K: Managed,
    C: ExternalConnector<K>,
{
    if let Some(limiter) = &shared.options.rate_limiter
        && let Some(wait) = limiter.when(&key(obj.as_ref()))
    {
        return Requeue::Skipped(Some(wait));
    }
    if shared.fence.check().is_err() {
        return Requeue::Skipped(None);
    }
    tracing::trace!(resource = %obj.name_any(), "reconciling");
    reconciler::reconcile(&shared, (*obj).clone()).await
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::ConfigMap;

    #[test]
    fn predicate_ignores_status_and_pending_annotations() {
        let mut cm = ConfigMap::default();
        cm.metadata.generation = Some(1);
        let h0 = desired_state_hash(&cm);
        cm.metadata.resource_version = Some("2".into());
        assert_eq!(desired_state_hash(&cm), h0);
        cm.annotations_mut()
            .insert(ANNOTATION_EXTERNAL_CREATE_PENDING.into(), "x".into());
        assert_eq!(desired_state_hash(&cm), h0);
        cm.annotations_mut()
            .insert("crossplane.io/paused".into(), "true".into());
        assert_ne!(desired_state_hash(&cm), h0);
        let h1 = desired_state_hash(&cm);
        cm.metadata.generation = Some(2);
        assert_ne!(desired_state_hash(&cm), h1);
    }

    #[test]
    fn names_like_crossplane_runtime() {
        assert_eq!(controller_name::<ConfigMap>(), "managed/configmap.");
    }
}
