//! The metrics registry and controller-runtime-compatible reconcile metrics.
//!
//! One [`prometheus::Registry`] holds everything `/metrics` serves: the elector's
//! `leader_election_master_status`, process metrics (`process_*`, with [`crate::metrics::process`]), and the reconcile metrics below, with
//! controller-runtime's names, labels and buckets so existing dashboards and alerts keep working.

pub mod process;
pub mod rest;

use std::any::{Any, TypeId};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use prometheus::{HistogramOpts, HistogramVec, IntCounterVec, IntGaugeVec, Opts, Registry};

/// controller-runtime's buckets for `controller_runtime_reconcile_time_seconds`.
const RECONCILE_BUCKETS: &[f64] = &[
    0.005, 0.01, 0.025, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0, 1.25,
    1.5, 1.75, 2.0, 2.5, 3.0, 3.5, 4.0, 4.5, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0, 15.0, 20.0, 25.0, 30.0, 40.0,
    50.0, 60.0,
];

pub use crate::controller::workqueue::WorkqueueMetrics;
pub use crate::metrics::rest::{RestClientLayer, RestClientMetrics};

/// A metric could not be registered (a name clash).
#[derive(Debug, thiserror::Error)]
#[error("cannot register metrics: {0}")]
pub struct MetricsError(#[from] prometheus::Error);

/// The manager's metrics: the registry and the reconcile helper. Cheap to clone.
#[derive(Clone)]
pub struct Metrics {
    registry: Registry,
    reconcile: ReconcileMetrics,
    workqueue: WorkqueueMetrics,
    rest_client: RestClientMetrics,
    shared: Arc<Mutex<HashMap<TypeId, Box<dyn Any + Send + Sync>>>>,
}

impl Metrics {
    /// A registry with process metrics and the reconcile metrics registered.
    pub fn new() -> Result<Self, MetricsError> {
        let registry = Registry::new();
        #[cfg(target_os = "linux")]
        registry.register(Box::new(
            prometheus::process_collector::ProcessCollector::for_self(),
        ))?;
        #[cfg(target_os = "linux")]
        registry.register(Box::new(crate::metrics::process::ProcessExtras::new()?))?;
        let workqueue = WorkqueueMetrics::new(&registry)?;
        let mut reconcile = ReconcileMetrics::new(&registry)?;
        reconcile.workqueue = Some(workqueue.clone());
        let rest_client = RestClientMetrics::new(&registry)?;
        Ok(Self {
            registry,
            reconcile,
            workqueue,
            rest_client,
            shared: Arc::default(),
        })
    }

    /// controller-runtime's `workqueue_*` metrics (see [`WorkqueueMetrics`]).
    pub fn workqueue(&self) -> &WorkqueueMetrics {
        &self.workqueue
    }

    /// client-go's `rest_client_requests_total` (see [`RestClientMetrics`]).
    pub fn rest_client(&self) -> &RestClientMetrics {
        &self.rest_client
    }

    /// One instance of `T` per registry: the first call builds it with `init` (which registers its
    /// collectors in the registry), later calls return a clone of it. For metrics several components of
    /// a process share, e.g. one set of per-kind gauges for all of a provider's controllers.
    pub fn shared<T, F>(&self, init: F) -> Result<T, MetricsError>
    where
        T: Clone + Send + Sync + 'static,
        F: FnOnce(&Registry) -> Result<T, MetricsError>,
    {
        let mut shared = self.shared.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(existing) = shared.get(&TypeId::of::<T>()).and_then(|b| b.downcast_ref::<T>()) {
            return Ok(existing.clone());
        }
        let value = init(&self.registry)?;
        shared.insert(TypeId::of::<T>(), Box::new(value.clone()));
        Ok(value)
    }

    /// The registry `/metrics` serves; register your own collectors here.
    pub fn registry(&self) -> &Registry {
        &self.registry
    }

    /// The reconcile metrics.
    pub fn reconcile(&self) -> &ReconcileMetrics {
        &self.reconcile
    }

    /// The Prometheus text exposition of everything registered.
    pub fn render(&self) -> String {
        let families = self.registry.gather();
        prometheus::TextEncoder::new()
            .encode_to_string(&families)
            .unwrap_or_else(|e| {
                tracing::warn!(error = %e, "cannot encode metrics");
                String::new()
            })
    }
}

/// The outcome of one reconcile, as controller-runtime labels it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReconcileResult {
    /// Done, no requeue.
    Success,
    /// Failed (also counts in `controller_runtime_reconcile_errors_total`).
    Error,
    /// Done, requeue with back-off.
    Requeue,
    /// Done, requeue after a set time.
    RequeueAfter,
}

impl ReconcileResult {
    const ALL: [Self; 4] = [Self::Success, Self::Error, Self::Requeue, Self::RequeueAfter];

    /// The `result` label value.
    pub fn label(self) -> &'static str {
        match self {
            Self::Success => "success",
            Self::Error => "error",
            Self::Requeue => "requeue",
            Self::RequeueAfter => "requeue_after",
        }
    }
}

/// `controller_runtime_reconcile_total{controller,result}`, `controller_runtime_reconcile_errors_total
/// {controller}`, `controller_runtime_reconcile_time_seconds{controller}` and
/// `controller_runtime_max_concurrent_reconciles{controller}` (set by controllers with a limit), and the
/// rare outcomes `controller_runtime_{reconcile_panics,reconcile_timeouts,terminal_reconcile_errors}_total
/// {controller}` (counted by [`ControllerBuilder`](crate::controller::ControllerBuilder)).
#[derive(Clone)]
pub struct ReconcileMetrics {
    total: IntCounterVec,
    errors: IntCounterVec,
    panics: IntCounterVec,
    timeouts: IntCounterVec,
    terminal: IntCounterVec,
    time: HistogramVec,
    max_concurrent: IntGaugeVec,
    /// The work queue series of the same registry, when made by [`Metrics::new`]: a
    /// [`ControllerBuilder`](crate::controller::ControllerBuilder) given these reconcile metrics records
    /// its work queue too.
    workqueue: Option<WorkqueueMetrics>,
}

impl std::fmt::Debug for ReconcileMetrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReconcileMetrics").finish_non_exhaustive()
    }
}

impl ReconcileMetrics {
    /// Creates the metrics and registers them in `registry`.
    pub fn new(registry: &Registry) -> Result<Self, MetricsError> {
        let total = IntCounterVec::new(
            Opts::new(
                "controller_runtime_reconcile_total",
                "Total number of reconciliations per controller",
            ),
            &["controller", "result"],
        )?;
        let errors = IntCounterVec::new(
            Opts::new(
                "controller_runtime_reconcile_errors_total",
                "Total number of reconciliation errors per controller",
            ),
            &["controller"],
        )?;
        let counter = |name: &str, help: &str| IntCounterVec::new(Opts::new(name, help), &["controller"]);
        let panics = counter(
            "controller_runtime_reconcile_panics_total",
            "Total number of reconciliation panics per controller",
        )?;
        let timeouts = counter(
            "controller_runtime_reconcile_timeouts_total",
            "Total number of reconciliation timeouts per controller",
        )?;
        let terminal = counter(
            "controller_runtime_terminal_reconcile_errors_total",
            "Total number of terminal reconciliation errors per controller",
        )?;
        let time = HistogramVec::new(
            HistogramOpts::new(
                "controller_runtime_reconcile_time_seconds",
                "Length of time per reconciliation per controller",
            )
            .buckets(RECONCILE_BUCKETS.to_vec()),
            &["controller"],
        )?;
        let max_concurrent = IntGaugeVec::new(
            Opts::new(
                "controller_runtime_max_concurrent_reconciles",
                "Maximum number of concurrent reconciles per controller",
            ),
            &["controller"],
        )?;
        registry.register(Box::new(max_concurrent.clone()))?;
        registry.register(Box::new(total.clone()))?;
        registry.register(Box::new(errors.clone()))?;
        registry.register(Box::new(time.clone()))?;
        registry.register(Box::new(panics.clone()))?;
        registry.register(Box::new(timeouts.clone()))?;
        registry.register(Box::new(terminal.clone()))?;
        Ok(Self {
            total,
            errors,
            panics,
            timeouts,
            terminal,
            time,
            max_concurrent,
            workqueue: None,
        })
    }

    /// The work queue metrics linked to these (see the field's docs), if any.
    pub fn workqueue(&self) -> Option<&WorkqueueMetrics> {
        self.workqueue.as_ref()
    }

    /// Exposes a controller's series at zero before its first reconcile, as controller-runtime does.
    pub fn register_controller(&self, controller: &str) {
        for r in ReconcileResult::ALL {
            self.total.with_label_values(&[controller, r.label()]);
        }
        self.errors.with_label_values(&[controller]);
        self.panics.with_label_values(&[controller]);
        self.timeouts.with_label_values(&[controller]);
        self.terminal.with_label_values(&[controller]);
    }

    /// A reconcile of `controller` panicked (and was recovered, as controller-runtime does by default).
    pub fn panicked(&self, controller: &str) {
        self.panics.with_label_values(&[controller]).inc();
    }

    /// A reconcile of `controller` ran past its controller's reconcile timeout.
    pub fn timed_out(&self, controller: &str) {
        self.timeouts.with_label_values(&[controller]).inc();
    }

    /// A reconcile of `controller` failed with an error that is not retried.
    pub fn terminal_error(&self, controller: &str) {
        self.terminal.with_label_values(&[controller]).inc();
    }

    /// Sets `controller_runtime_max_concurrent_reconciles{controller}`: how many reconciles of
    /// `controller` may run at once.
    pub fn set_max_concurrent(&self, controller: &str, max: u16) {
        self.max_concurrent
            .with_label_values(&[controller])
            .set(i64::from(max));
    }

    /// Records one reconcile.
    pub fn observe(&self, controller: &str, result: ReconcileResult, elapsed: Duration) {
        self.total.with_label_values(&[controller, result.label()]).inc();
        if result == ReconcileResult::Error {
            self.errors.with_label_values(&[controller]).inc();
        }
        self.time
            .with_label_values(&[controller])
            .observe(elapsed.as_secs_f64());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_controller_runtime_names() {
        let m = Metrics::new().expect("metrics");
        m.reconcile().register_controller("idle");
        m.reconcile()
            .observe("counter", ReconcileResult::Success, Duration::from_millis(3));
        m.reconcile()
            .observe("counter", ReconcileResult::Error, Duration::from_millis(30));
        m.reconcile()
            .observe("counter", ReconcileResult::RequeueAfter, Duration::from_millis(1));
        m.reconcile().set_max_concurrent("counter", 10);
        m.reconcile().panicked("counter");
        m.reconcile().timed_out("counter");
        m.reconcile().terminal_error("counter");
        let text = m.render();
        for line in [
            r#"controller_runtime_reconcile_total{controller="counter",result="success"} 1"#,
            r#"controller_runtime_reconcile_total{controller="counter",result="error"} 1"#,
            r#"controller_runtime_reconcile_total{controller="counter",result="requeue_after"} 1"#,
            r#"controller_runtime_reconcile_total{controller="idle",result="requeue"} 0"#,
            r#"controller_runtime_reconcile_errors_total{controller="counter"} 1"#,
            r#"controller_runtime_reconcile_time_seconds_count{controller="counter"} 3"#,
            r#"controller_runtime_reconcile_time_seconds_bucket{controller="counter",le="0.005"} 2"#,
            r#"controller_runtime_max_concurrent_reconciles{controller="counter"} 10"#,
            r#"controller_runtime_reconcile_panics_total{controller="counter"} 1"#,
            r#"controller_runtime_reconcile_timeouts_total{controller="counter"} 1"#,
            r#"controller_runtime_terminal_reconcile_errors_total{controller="counter"} 1"#,
            r#"controller_runtime_reconcile_panics_total{controller="idle"} 0"#,
            r#"controller_runtime_terminal_reconcile_errors_total{controller="idle"} 0"#,
        ] {
            assert!(text.contains(line), "missing {line} in\n{text}");
        }
        #[cfg(target_os = "linux")]
        assert!(text.contains("process_resident_memory_bytes"), "{text}");
    }
}
