//! controller-runtime's `workqueue_*` metrics, as far as kube-runtime lets them be observed.
//!
//! controller-runtime's work queue reports seven series per controller, labelled `name` and
//! `controller` (both the controller's name). kube-runtime's scheduler has no hooks, so
//! [`ControllerBuilder`](crate::controller::ControllerBuilder) observes the queue from the reconcile
//! wrapper, where an item leaves the queue for a worker:
//!
//! | series | here |
//! |---|---|
//! | `workqueue_work_duration_seconds` | exact: the time a worker spends on an item |
//! | `workqueue_unfinished_work_seconds` | exact: the summed age of the reconciles in progress, at scrape time |
//! | `workqueue_longest_running_processor_seconds` | exact: the age of the oldest reconcile in progress |
//! | `workqueue_retries_total` | failures requeued with backoff (controller-runtime's `AddRateLimited`) |
//! | `workqueue_adds_total` | **approximate**: items handed to a worker. kube-runtime merges triggers for an item that is already queued before they can be seen, so this counts at most as many as controller-runtime does |
//! | `workqueue_depth` | — not exported: the scheduler's queue is private |
//! | `workqueue_queue_duration_seconds` | — not exported: when an item entered the queue is not visible |
//!
//! The same count of reconciles in progress also gives controller-runtime's
//! `controller_runtime_active_workers{controller}`.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use prometheus::core::{Collector, Desc};
use prometheus::proto::MetricFamily;
use prometheus::{GaugeVec, HistogramOpts, HistogramVec, IntCounterVec, IntGaugeVec, Opts, Registry};

use crate::metrics::MetricsError;

/// controller-runtime's buckets for the work queue histograms: `ExponentialBuckets(10e-9, 10, 12)`.
fn buckets() -> Vec<f64> {
    prometheus::exponential_buckets(10e-9, 10.0, 12).unwrap_or_default()
}

const LABELS: &[&str] = &["name", "controller"];

/// The `workqueue_*` series of every controller of a process (see the module docs). Cheap to clone.
#[derive(Clone)]
pub struct WorkqueueMetrics {
    adds: IntCounterVec,
    retries: IntCounterVec,
    work: HistogramVec,
    in_flight: Arc<InFlight>,
}

/// Reconciles in progress, per controller; turned into the two gauges at scrape time.
struct InFlight {
    next: AtomicU64,
    started: Mutex<HashMap<String, HashMap<u64, Instant>>>,
    unfinished: GaugeVec,
    longest: GaugeVec,
    active: IntGaugeVec,
}

impl Collector for InFlight {
    fn desc(&self) -> Vec<&Desc> {
        let mut d = self.unfinished.desc();
        d.extend(self.longest.desc());
        d.extend(self.active.desc());
        d
    }

    fn collect(&self) -> Vec<MetricFamily> {
        let now = Instant::now();
        {
            let started = self.started.lock().unwrap_or_else(|p| p.into_inner());
            for (name, items) in started.iter() {
                let ages = items.values().map(|t| now.duration_since(*t).as_secs_f64());
                let (sum, max) = ages.fold((0.0, 0.0_f64), |(s, m), a| (s + a, m.max(a)));
                self.unfinished.with_label_values(&[name, name]).set(sum);
                self.longest.with_label_values(&[name, name]).set(max);
                let workers = i64::try_from(items.len()).unwrap_or(i64::MAX);
                self.active.with_label_values(&[name]).set(workers);
            }
        }
        let mut families = self.unfinished.collect();
        families.extend(self.longest.collect());
        families.extend(self.active.collect());
        families
    }
}

impl WorkqueueMetrics {
    /// Creates the series and registers them in `registry`.
    pub fn new(registry: &Registry) -> Result<Self, MetricsError> {
        let adds = IntCounterVec::new(
            Opts::new(
                "workqueue_adds_total",
                "Total number of adds handled by workqueue",
            ),
            LABELS,
        )?;
        let retries = IntCounterVec::new(
            Opts::new(
                "workqueue_retries_total",
                "Total number of retries handled by workqueue",
            ),
            LABELS,
        )?;
        let work = HistogramVec::new(
            HistogramOpts::new(
                "workqueue_work_duration_seconds",
                "How long in seconds processing an item from workqueue takes.",
            )
            .buckets(buckets()),
            LABELS,
        )?;
        let unfinished = GaugeVec::new(
            Opts::new(
                "workqueue_unfinished_work_seconds",
                "How many seconds of work has been done that is in progress and hasn't been observed by \
                 work_duration. Large values indicate stuck threads. One can deduce the number of stuck \
                 threads by observing the rate at which this increases.",
            ),
            LABELS,
        )?;
        let longest = GaugeVec::new(
            Opts::new(
                "workqueue_longest_running_processor_seconds",
                "How many seconds has the longest running processor for workqueue been running.",
            ),
            LABELS,
        )?;
        let active = IntGaugeVec::new(
            Opts::new(
                "controller_runtime_active_workers",
                "Number of currently used workers per controller",
            ),
            &["controller"],
        )?;
        let in_flight = Arc::new(InFlight {
            next: AtomicU64::new(0),
            started: Mutex::default(),
            unfinished,
            longest,
            active,
        });
        registry.register(Box::new(adds.clone()))?;
        registry.register(Box::new(retries.clone()))?;
        registry.register(Box::new(work.clone()))?;
        registry.register(Box::new(InFlightCollector(in_flight.clone())))?;
        Ok(Self {
            adds,
            retries,
            work,
            in_flight,
        })
    }

    /// Exposes a controller's series at zero before its first item, as controller-runtime does.
    pub fn register_controller(&self, name: &str) {
        self.adds.with_label_values(&[name, name]);
        self.retries.with_label_values(&[name, name]);
        self.in_flight
            .started
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .entry(name.to_owned())
            .or_default();
    }

    /// An item of controller `name` went to a worker; the work ends when the returned guard drops.
    pub fn start(&self, name: &str) -> WorkGuard {
        self.adds.with_label_values(&[name, name]).inc();
        let id = self.in_flight.next.fetch_add(1, Ordering::Relaxed);
        let started = Instant::now();
        self.in_flight
            .started
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .entry(name.to_owned())
            .or_default()
            .insert(id, started);
        WorkGuard {
            metrics: self.clone(),
            name: name.to_owned(),
            id,
            started,
        }
    }

    /// An item of controller `name` failed and was requeued with backoff.
    pub fn retry(&self, name: &str) {
        self.retries.with_label_values(&[name, name]).inc();
    }
}

/// Registers [`InFlight`] (the registry wants a boxed collector it owns).
struct InFlightCollector(Arc<InFlight>);

impl Collector for InFlightCollector {
    fn desc(&self) -> Vec<&Desc> {
        self.0.desc()
    }

    fn collect(&self) -> Vec<MetricFamily> {
        self.0.collect()
    }
}

/// One item being worked on (see [`WorkqueueMetrics::start`]); records its work duration when dropped,
/// so a reconcile cut short by shutdown is accounted too.
pub struct WorkGuard {
    metrics: WorkqueueMetrics,
    name: String,
    id: u64,
    started: Instant,
}

impl Drop for WorkGuard {
    fn drop(&mut self) {
        if let Some(items) = self
            .metrics
            .in_flight
            .started
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get_mut(&self.name)
        {
            items.remove(&self.id);
        }
        self.metrics
            .work
            .with_label_values(&[&self.name, &self.name])
            .observe(self.started.elapsed().as_secs_f64());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn render(registry: &Registry) -> String {
        prometheus::TextEncoder::new()
            .encode_to_string(&registry.gather())
            .expect("encode")
    }

    #[test]
    fn tracks_work_in_progress_and_done() {
        let registry = Registry::new();
        let m = WorkqueueMetrics::new(&registry).expect("metrics");
        m.register_controller("idle");
        let guard = m.start("busy");
        std::thread::sleep(std::time::Duration::from_millis(5));
        let text = render(&registry);
        assert!(
            text.contains(r#"workqueue_adds_total{controller="busy",name="busy"} 1"#),
            "{text}"
        );
        assert!(
            text.contains(r#"workqueue_adds_total{controller="idle",name="idle"} 0"#),
            "{text}"
        );
        let longest = text
            .lines()
            .find(|l| l.starts_with(r#"workqueue_longest_running_processor_seconds{controller="busy""#))
            .and_then(|l| l.rsplit(' ').next())
            .and_then(|v| v.parse::<f64>().ok())
            .expect("longest running series");
        assert!(longest >= 0.005, "{text}");
        assert!(
            text.contains(r#"controller_runtime_active_workers{controller="busy"} 1"#),
            "{text}"
        );
        drop(guard);
        m.retry("busy");
        let text = render(&registry);
        assert!(
            text.contains(r#"workqueue_longest_running_processor_seconds{controller="busy",name="busy"} 0"#),
            "{text}"
        );
        assert!(
            text.contains(r#"workqueue_work_duration_seconds_count{controller="busy",name="busy"} 1"#),
            "{text}"
        );
        assert!(
            text.contains(r#"workqueue_retries_total{controller="busy",name="busy"} 1"#),
            "{text}"
        );
    }
}
