//! crossplane-runtime's managed-resource metrics, with its names, labels, help texts and buckets:
//!
//! - `crossplane_managed_resource_{exists,ready,synced}{gvk}`: gauges of how many resources of a kind
//!   exist, are `Ready=True` and `Synced=True` (crossplane-runtime's `statemetrics`). Upstream lists the
//!   kind every `--poll-state-metric` (5 s); here each term counts its controller's cache at that
//!   interval, so, as upstream (whose recorder needs leader election), only the leader reports them;
//! - `crossplane_managed_resource_first_time_to_reconcile_seconds`, `..._first_time_to_readiness_seconds`,
//!   `..._deletion_seconds` and `..._drift_seconds` `{gvk}` (crossplane-runtime's `MRMetricRecorder`),
//!   recorded by the reconciler at the same points as upstream's.
//!
//! `gvk` is Go's `schema.GroupVersionKind.String()`: `nop.crossplane.io/v1alpha1, Kind=NopResource`.
//! Upstream keys its first-observation and last-observation memory by name only; here by
//! `gvk` and namespace/name, so two kinds with a resource of the same name do not mix.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use apis::condition::{self, TYPE_READY, TYPE_SYNCED};
use apis::{Condition, ConditionStatus};
use jiff::Timestamp;
use kube::Resource;
use manager::Metrics;
use manager::metrics::MetricsError;
use prometheus::{GaugeVec, HistogramOpts, HistogramVec, Opts, Registry};

use crate::resource::Managed;

/// `k8s.io/component-base`'s `ExponentialBuckets(10e-9, 10, 10)`.
fn exponential() -> Vec<f64> {
    prometheus::exponential_buckets(10e-9, 10.0, 10).unwrap_or_default()
}

/// crossplane-runtime's buckets for readiness and deletion.
const LIFECYCLE_BUCKETS: &[f64] = &[
    1.0, 5.0, 10.0, 15.0, 30.0, 60.0, 120.0, 300.0, 600.0, 1800.0, 3600.0,
];

/// `group/version, Kind=kind`, as Go formats a GroupVersionKind.
pub fn gvk_label<K: Resource<DynamicType = ()>>() -> String {
    format!("{}/{}, Kind={}", K::group(&()), K::version(&()), K::kind(&()))
}

/// The managed-resource metrics of a process, shared by all its managed controllers. Cheap to clone.
#[derive(Clone)]
pub struct ManagedMetrics {
    exists: GaugeVec,
    ready: GaugeVec,
    synced: GaugeVec,
    first_reconcile: HistogramVec,
    first_ready: HistogramVec,
    deletion: HistogramVec,
    drift: HistogramVec,
    /// When each resource was first reconciled, until it first became ready.
    first_observation: Arc<Mutex<HashMap<String, Instant>>>,
    /// When each resource was last found up to date.
    last_observation: Arc<Mutex<HashMap<String, Instant>>>,
}

impl ManagedMetrics {
    /// The process's instance, registered in `metrics`' registry on first use.
    pub fn of(metrics: &Metrics) -> Result<Self, MetricsError> {
        metrics.shared(Self::new)
    }

    /// Creates the metrics and registers them in `registry`.
    pub fn new(registry: &Registry) -> Result<Self, MetricsError> {
        let gauge = |name: &str, help: &str| GaugeVec::new(Opts::new(name, help), &["gvk"]);
        let histogram = |name: &str, help: &str, buckets: Vec<f64>| {
            HistogramVec::new(HistogramOpts::new(name, help).buckets(buckets), &["gvk"])
        };
        let this = Self {
            exists: gauge(
                "crossplane_managed_resource_exists",
                "The number of managed resources that exist",
            )?,
            ready: gauge(
                "crossplane_managed_resource_ready",
                "The number of managed resources in Ready=True state",
            )?,
            synced: gauge(
                "crossplane_managed_resource_synced",
                "The number of managed resources in Synced=True state",
            )?,
            first_reconcile: histogram(
                "crossplane_managed_resource_first_time_to_reconcile_seconds",
                "The time it took for a managed resource to be detected by the controller",
                exponential(),
            )?,
            first_ready: histogram(
                "crossplane_managed_resource_first_time_to_readiness_seconds",
                "The time it took for a managed resource to become ready first time after creation",
                LIFECYCLE_BUCKETS.to_vec(),
            )?,
            deletion: histogram(
                "crossplane_managed_resource_deletion_seconds",
                "The time it took for a managed resource to be deleted",
                LIFECYCLE_BUCKETS.to_vec(),
            )?,
            drift: histogram(
                "crossplane_managed_resource_drift_seconds",
                "ALPHA: How long since the previous successful reconcile when a resource was found to be \
                 out of sync; excludes restart of the provider",
                exponential(),
            )?,
            first_observation: Arc::default(),
            last_observation: Arc::default(),
        };
        for c in [&this.exists, &this.ready, &this.synced] {
            registry.register(Box::new(c.clone()))?;
        }
        for h in [
            &this.first_reconcile,
            &this.first_ready,
            &this.deletion,
            &this.drift,
        ] {
            registry.register(Box::new(h.clone()))?;
        }
        Ok(this)
    }

    /// Exposes the histograms of kind `K` at zero before their first observation, so dashboards and the
    /// name diff see them from the start (client_golang shows a histogram only once observed).
    pub fn register_kind<K: Managed>(&self) {
        let gvk = gvk_label::<K>();
        for h in [
            &self.first_reconcile,
            &self.first_ready,
            &self.deletion,
            &self.drift,
        ] {
            h.with_label_values(&[&gvk]);
        }
    }

    /// Sets the state gauges of kind `K` from `resources` (all of that kind).
    pub fn record_state<'a, K: Managed + 'a>(&self, resources: impl IntoIterator<Item = &'a K>) {
        let (mut exists, mut ready, mut synced) = (0u64, 0u64, 0u64);
        for r in resources {
            exists += 1;
            ready += u64::from(condition::is_true(r.conditions(), TYPE_READY));
            synced += u64::from(condition::is_true(r.conditions(), TYPE_SYNCED));
        }
        let gvk = gvk_label::<K>();
        self.exists.with_label_values(&[&gvk]).set(exists as f64);
        self.ready.with_label_values(&[&gvk]).set(ready as f64);
        self.synced.with_label_values(&[&gvk]).set(synced as f64);
    }

    /// At the start of a reconcile: a resource whose `Synced` condition is still unknown is seen for the
    /// first time; records how long after its creation.
    pub fn first_time_reconciled<K: Managed>(&self, mr: &K) {
        let synced_unknown = condition::get(mr.conditions(), TYPE_SYNCED)
            .is_none_or(|c: &Condition| c.status == ConditionStatus::Unknown);
        if !synced_unknown {
            return;
        }
        if let Some(age) = since(mr.meta().creation_timestamp.as_ref().map(|t| t.0)) {
            self.first_reconcile
                .with_label_values(&[&gvk_label::<K>()])
                .observe(age);
        }
        lock(&self.first_observation).insert(key(mr), Instant::now());
    }

    /// When a resource is found up to date: if it is `Ready=True` for the first time since this
    /// process first reconciled it, records how long after its creation; and remembers when it was last
    /// found up to date (for [`ManagedMetrics::drift`]).
    pub fn up_to_date<K: Managed>(&self, mr: &K) {
        let k = key(mr);
        if condition::is_true(mr.conditions(), TYPE_READY)
            && lock(&self.first_observation).remove(&k).is_some()
            && let Some(age) = since(mr.meta().creation_timestamp.as_ref().map(|t| t.0))
        {
            self.first_ready
                .with_label_values(&[&gvk_label::<K>()])
                .observe(age);
        }
        lock(&self.last_observation).insert(k, Instant::now());
    }

    /// After a successful update of a drifted resource: how long since it was last found up to date.
    pub fn drift<K: Managed>(&self, mr: &K) {
        let k = key(mr);
        let mut last = lock(&self.last_observation);
        if let Some(at) = last.get(&k) {
            self.drift
                .with_label_values(&[&gvk_label::<K>()])
                .observe(at.elapsed().as_secs_f64());
            last.insert(k, Instant::now());
        }
    }

    /// After the finalizer of a deleted resource is removed: how long since deletion was requested.
    pub fn deleted<K: Managed>(&self, mr: &K) {
        let k = key(mr);
        lock(&self.first_observation).remove(&k);
        lock(&self.last_observation).remove(&k);
        if let Some(age) = since(mr.meta().deletion_timestamp.as_ref().map(|t| t.0)) {
            self.deletion.with_label_values(&[&gvk_label::<K>()]).observe(age);
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

fn key<K: Managed>(mr: &K) -> String {
    let meta = mr.meta();
    format!(
        "{}|{}/{}",
        gvk_label::<K>(),
        meta.namespace.as_deref().unwrap_or_default(),
        meta.name.as_deref().unwrap_or_default()
    )
}

/// Seconds from `t` to now (0 if `t` is in the future: clock skew).
fn since(t: Option<Timestamp>) -> Option<f64> {
    let t = t?;
    let d = Timestamp::now().duration_since(t);
    Some(d.as_secs_f64().max(0.0))
}
