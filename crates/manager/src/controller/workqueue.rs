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
//! | `workqueue_depth{name,controller,priority=""}` | for controllers that report their queue ([`WorkqueueMetrics::track_queue`]): the items whose time has come and that no worker holds, at scrape time |
//! | `workqueue_queue_duration_seconds` | the same controllers: observed when an item leaves the queue, from when it entered (or became due, for a requeue after a delay) |
//!
//! kube-runtime's scheduler is private, so a controller that reports its queue tells these metrics what
//! it puts in: every trigger ([`WorkqueueMetrics::add`]), every requeue with its delay
//! ([`WorkqueueMetrics::add_after`]), and every item the scheduler let go without a reconcile
//! ([`WorkqueueMetrics::dropped`], kube-runtime's `ObjectNotFound`). The model follows client-go's queue
//! and kube-runtime's scheduler: one entry per object; a trigger for an object that waits for a later
//! requeue makes it due now; an object that is being worked on is not in the queue, and re-enters it when
//! its worker is done. The managed-resource controllers (`managed/<kind>.<group>`) report their queue;
//! controllers built with `Controller::new` do not (kube-runtime builds their triggers inside), and
//! export no depth or queue duration rather than a wrong one.
//!
//! The same count of reconciles in progress also gives controller-runtime's
//! `controller_runtime_active_workers{controller}`.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

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
    queue_duration: HistogramVec,
    state: Arc<State>,
}

/// One controller's queue as these metrics know it: the objects waiting and the items being worked on.
/// Pure bookkeeping on given instants, so the rules can be tested without waiting.
#[derive(Default)]
struct Queue {
    /// The controller reports its queue ([`WorkqueueMetrics::track_queue`]).
    tracked: bool,
    /// Objects waiting, by key, with the instant they entered (or will enter) the ready queue.
    pending: HashMap<String, Instant>,
    /// Reconciles in progress: id → (object key if known, start).
    working: HashMap<u64, (Option<String>, Instant)>,
}

impl Queue {
    /// `key` is due at `due`; an object already waiting keeps the earlier of the two instants (as
    /// kube-runtime's scheduler keeps the earlier request, and client-go's queue ignores a second add).
    fn add(&mut self, key: &str, due: Instant) {
        self.pending
            .entry(key.to_owned())
            .and_modify(|d| *d = (*d).min(due))
            .or_insert(due);
    }

    /// `key` left the queue at `now`: how long it was in the ready queue, if it was waiting.
    fn take(&mut self, key: &str, now: Instant) -> Option<Duration> {
        self.pending
            .remove(key)
            .map(|due| now.saturating_duration_since(due))
    }

    /// The worker of `key` finished at `now`: an object added meanwhile enters the queue only now (client-go
    /// re-queues a dirty item at `Done`; kube-runtime holds it while it runs).
    fn done(&mut self, key: &str, now: Instant) {
        if let Some(due) = self.pending.get_mut(key) {
            *due = (*due).max(now);
        }
    }

    /// Objects whose time has come and that no worker holds.
    fn depth(&self, now: Instant) -> usize {
        let held: HashSet<&str> = self.working.values().filter_map(|(k, _)| k.as_deref()).collect();
        self.pending
            .iter()
            .filter(|(k, due)| **due <= now && !held.contains(k.as_str()))
            .count()
    }
}

/// Every controller's [`Queue`] and the gauges computed from them at scrape time.
struct State {
    next: AtomicU64,
    queues: Mutex<HashMap<String, Queue>>,
    depth: IntGaugeVec,
    unfinished: GaugeVec,
    longest: GaugeVec,
    active: IntGaugeVec,
}

impl State {
    fn queues(&self) -> MutexGuard<'_, HashMap<String, Queue>> {
        self.queues.lock().unwrap_or_else(|p| p.into_inner())
    }
}

impl Collector for State {
    fn desc(&self) -> Vec<&Desc> {
        let mut d = self.depth.desc();
        d.extend(self.unfinished.desc());
        d.extend(self.longest.desc());
        d.extend(self.active.desc());
        d
    }

    fn collect(&self) -> Vec<MetricFamily> {
        let now = Instant::now();
        for (name, queue) in self.queues().iter() {
            let ages = queue
                .working
                .values()
                .map(|(_, t)| now.duration_since(*t).as_secs_f64());
            let (sum, max) = ages.fold((0.0, 0.0_f64), |(s, m), a| (s + a, m.max(a)));
            self.unfinished.with_label_values(&[name, name]).set(sum);
            self.longest.with_label_values(&[name, name]).set(max);
            let workers = i64::try_from(queue.working.len()).unwrap_or(i64::MAX);
            self.active.with_label_values(&[name]).set(workers);
            if queue.tracked {
                let depth = i64::try_from(queue.depth(now)).unwrap_or(i64::MAX);
                self.depth.with_label_values(&[name, name, ""]).set(depth);
            }
        }
        let mut families = self.depth.collect();
        families.extend(self.unfinished.collect());
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
        let queue_duration = HistogramVec::new(
            HistogramOpts::new(
                "workqueue_queue_duration_seconds",
                "How long in seconds an item stays in workqueue before being requested",
            )
            .buckets(buckets()),
            LABELS,
        )?;
        let depth = IntGaugeVec::new(
            Opts::new(
                "workqueue_depth",
                "Current depth of workqueue by workqueue and priority",
            ),
            &["name", "controller", "priority"],
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
        let state = Arc::new(State {
            next: AtomicU64::new(0),
            queues: Mutex::default(),
            depth,
            unfinished,
            longest,
            active,
        });
        registry.register(Box::new(adds.clone()))?;
        registry.register(Box::new(retries.clone()))?;
        registry.register(Box::new(work.clone()))?;
        registry.register(Box::new(queue_duration.clone()))?;
        registry.register(Box::new(StateCollector(state.clone())))?;
        Ok(Self {
            adds,
            retries,
            work,
            queue_duration,
            state,
        })
    }

    /// Exposes a controller's series at zero before its first item, as controller-runtime does.
    pub fn register_controller(&self, name: &str) {
        self.adds.with_label_values(&[name, name]);
        self.retries.with_label_values(&[name, name]);
        self.state.queues().entry(name.to_owned()).or_default();
    }

    /// Controller `name` reports what enters its queue ([`Self::add`], [`Self::add_after`],
    /// [`Self::dropped`]), so its `workqueue_depth` and `workqueue_queue_duration_seconds` are exported.
    pub fn track_queue(&self, name: &str) {
        self.register_controller(name);
        self.queue_duration.with_label_values(&[name, name]);
        self.state.queues().entry(name.to_owned()).or_default().tracked = true;
    }

    /// Object `key` entered the queue of controller `name` (a trigger: it is due now).
    pub fn add(&self, name: &str, key: &str) {
        self.add_after(name, key, Duration::ZERO);
    }

    /// Object `key` was requeued in controller `name` to run after `delay`.
    pub fn add_after(&self, name: &str, key: &str, delay: Duration) {
        let due = Instant::now() + delay;
        if let Some(q) = self.state.queues().get_mut(name).filter(|q| q.tracked) {
            q.add(key, due);
        }
    }

    /// Object `key` left the queue of controller `name` without a reconcile (it no longer exists).
    pub fn dropped(&self, name: &str, key: &str) {
        let waited = self
            .state
            .queues()
            .get_mut(name)
            .and_then(|q| q.take(key, Instant::now()));
        if let Some(waited) = waited {
            self.queue_duration
                .with_label_values(&[name, name])
                .observe(waited.as_secs_f64());
        }
    }

    /// Forgets what waits in the queue of controller `name` (its run ended: the next term starts afresh).
    pub fn clear_queue(&self, name: &str) {
        if let Some(q) = self.state.queues().get_mut(name) {
            q.pending.clear();
        }
    }

    /// An item of controller `name` went to a worker; the work ends when the returned guard drops.
    pub fn start(&self, name: &str) -> WorkGuard {
        self.start_with(name, None)
    }

    /// Object `key` of controller `name` left the queue for a worker (its queue duration is observed if
    /// the controller reports its queue); the work ends when the returned guard drops.
    pub fn start_item(&self, name: &str, key: &str) -> WorkGuard {
        self.start_with(name, Some(key.to_owned()))
    }

    fn start_with(&self, name: &str, key: Option<String>) -> WorkGuard {
        self.adds.with_label_values(&[name, name]).inc();
        let id = self.state.next.fetch_add(1, Ordering::Relaxed);
        let started = Instant::now();
        let waited = {
            let mut queues = self.state.queues();
            let queue = queues.entry(name.to_owned()).or_default();
            let waited = key.as_deref().and_then(|k| queue.take(k, started));
            queue.working.insert(id, (key, started));
            waited
        };
        if let Some(waited) = waited {
            self.queue_duration
                .with_label_values(&[name, name])
                .observe(waited.as_secs_f64());
        }
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

/// Registers [`State`] (the registry wants a boxed collector it owns).
struct StateCollector(Arc<State>);

impl Collector for StateCollector {
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
        let now = Instant::now();
        if let Some(queue) = self.metrics.state.queues().get_mut(&self.name)
            && let Some((Some(key), _)) = queue.working.remove(&self.id)
        {
            queue.done(&key, now);
        }
        self.metrics
            .work
            .with_label_values(&[&self.name, &self.name])
            .observe(now.duration_since(self.started).as_secs_f64());
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

    #[test]
    fn queue_follows_client_go_rules() {
        let t0 = Instant::now();
        let s = Duration::from_secs;
        let mut q = Queue::default();
        // A trigger: due now, in the queue.
        q.add("a", t0);
        // A requeue after 10 s: waiting, not in the queue yet.
        q.add("b", t0 + s(10));
        assert_eq!(q.depth(t0), 1);
        assert_eq!(q.depth(t0 + s(10)), 2);
        // A second trigger for a queued object changes nothing; one for a waiting object makes it due now.
        q.add("a", t0 + s(1));
        q.add("b", t0 + s(2));
        assert_eq!(q.depth(t0 + s(2)), 2);
        // Taking an object reports how long it was in the ready queue.
        assert_eq!(q.take("a", t0 + s(3)), Some(s(3)));
        assert_eq!(q.take("b", t0 + s(3)), Some(s(1)));
        assert_eq!(q.take("b", t0 + s(3)), None);
        assert_eq!(q.depth(t0 + s(3)), 0);
        // Added while a worker holds it: not in the queue until the worker is done.
        q.working.insert(1, (Some("a".into()), t0 + s(3)));
        q.add("a", t0 + s(4));
        assert_eq!(q.depth(t0 + s(5)), 0);
        q.working.remove(&1);
        q.done("a", t0 + s(6));
        assert_eq!(q.depth(t0 + s(6)), 1);
        assert_eq!(q.take("a", t0 + s(8)), Some(s(2)));
    }

    #[test]
    fn depth_and_queue_duration_of_a_tracked_controller() {
        let registry = Registry::new();
        let m = WorkqueueMetrics::new(&registry).expect("metrics");
        m.register_controller("untracked");
        m.track_queue("q");
        let depth = |text: &str| {
            text.lines()
                .find(|l| l.starts_with(r#"workqueue_depth{controller="q",name="q",priority=""}"#))
                .and_then(|l| l.rsplit(' ').next())
                .and_then(|v| v.parse::<i64>().ok())
        };
        assert_eq!(depth(&render(&registry)), Some(0));
        m.add("q", "ns/a");
        m.add("q", "ns/b");
        m.add("q", "ns/a");
        m.add_after("q", "ns/c", Duration::from_secs(3600));
        m.add("untracked", "x");
        let text = render(&registry);
        assert_eq!(depth(&text), Some(2), "{text}");
        assert!(
            !text.contains(r#"workqueue_depth{controller="untracked""#),
            "{text}"
        );
        let guard = m.start_item("q", "ns/a");
        assert_eq!(depth(&render(&registry)), Some(1));
        m.dropped("q", "ns/b");
        let text = render(&registry);
        assert_eq!(depth(&text), Some(0), "{text}");
        assert!(
            text.contains(r#"workqueue_queue_duration_seconds_count{controller="q",name="q"} 2"#),
            "{text}"
        );
        // Requeued while it runs: back in the queue when its worker is done.
        m.add("q", "ns/a");
        assert_eq!(depth(&render(&registry)), Some(0));
        drop(guard);
        assert_eq!(depth(&render(&registry)), Some(1));
        m.clear_queue("q");
        assert_eq!(depth(&render(&registry)), Some(0));
    }
}
