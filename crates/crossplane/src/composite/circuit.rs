//! The XR watch circuit breaker, as upstream's (`internal/circuit`): a composed resource that keeps
//! changing, because something fights the XR over it, would reconcile its XR in a tight loop. Each XR
//! gets a token bucket (`--circuit-breaker-burst` tokens, refilled at `--circuit-breaker-refill-rate` per
//! second); every watch event that would reconcile it takes a token. When the bucket is empty the
//! circuit opens for `--circuit-breaker-cooldown`: watch events are dropped, except one every
//! [`HALF_OPEN_INTERVAL`] (half open), and the XR's `Responsive` condition is False with reason
//! `WatchCircuitOpen`, naming the resource that sent most of the recent events. The XR's own polls and
//! changes are neither counted nor dropped (upstream counts the XR's own watch events too; here they come
//! through kube-runtime's controller, not a mapped watch), and a composed resource being deleted always
//! gets through. Once the cooldown has passed, the next event closes the circuit (`Responsive` True,
//! `WatchCircuitClosed`).

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use apis::condition::{Condition, ConditionStatus};

/// How often an event gets through while the circuit is open (upstream's half-open interval).
pub const HALF_OPEN_INTERVAL: Duration = Duration::from_secs(30);
/// The condition type.
pub const TYPE_RESPONSIVE: &str = "Responsive";
/// The reason while the circuit is open.
pub const REASON_OPEN: &str = "WatchCircuitOpen";
/// The reason while it is closed.
pub const REASON_CLOSED: &str = "WatchCircuitClosed";
/// How many recent event sources are kept to name the one that opened the circuit.
const RECENT: usize = 16;

/// The breaker's settings (the `--circuit-breaker-*` flags).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Settings {
    /// The bucket's capacity: the burst of events allowed (upstream's default 100).
    pub burst: f64,
    /// Tokens added per second (upstream's default 1).
    pub refill_per_second: f64,
    /// How long the circuit stays open (upstream's default 5 minutes).
    pub cooldown: Duration,
}

impl Settings {
    /// The settings from upstream's flags as given (`--circuit-breaker-burst`, `-refill-rate`,
    /// `-cooldown`), upstream's defaults for the others. The error is the flag and what is wrong with
    /// its value.
    pub fn from_flags(given: &[manager::config::compat::Given]) -> Result<Settings, (&'static str, String)> {
        let value = |name: &str| given.iter().find(|g| g.name == name).map(|g| g.value.as_str());
        let mut s = Settings::default();
        let positive = |name: &'static str, v: &str| {
            v.trim()
                .parse::<f64>()
                .ok()
                .filter(|f| f.is_finite() && *f > 0.0)
                .ok_or_else(|| (name, format!("{v:?} is not a positive number (e.g. 100.0)")))
        };
        if let Some(v) = value("circuit-breaker-burst") {
            s.burst = positive("circuit-breaker-burst", v)?;
        }
        if let Some(v) = value("circuit-breaker-refill-rate") {
            s.refill_per_second = positive("circuit-breaker-refill-rate", v)?;
        }
        if let Some(v) = value("circuit-breaker-cooldown") {
            s.cooldown = manager::duration::parse_duration(v)
                .map_err(|e| ("circuit-breaker-cooldown", e.to_string()))?;
        }
        Ok(s)
    }
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            burst: 100.0,
            refill_per_second: 1.0,
            cooldown: Duration::from_secs(300),
        }
    }
}

/// One XR's bucket.
#[derive(Debug)]
struct Bucket {
    tokens: f64,
    refilled: Instant,
    recent: Vec<String>,
    next: usize,
    opened: Option<Instant>,
    last_allowed: Instant,
    triggered_by: String,
}

/// The circuit of one XR, while open.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Open {
    /// The resource that sent most of the recent events (`Kind/name (namespace)`).
    pub triggered_by: String,
}

/// The breaker of one composite controller: a bucket per XR, keyed by `namespace/name`.
#[derive(Debug, Default)]
pub struct Breaker {
    settings: Settings,
    buckets: Mutex<HashMap<String, Bucket>>,
}

impl Breaker {
    /// A breaker with `settings`.
    pub fn new(settings: Settings) -> Self {
        Breaker {
            settings,
            buckets: Mutex::default(),
        }
    }

    /// Whether a watch event from `source` may reconcile the XR `target` now: always while the circuit
    /// is closed, once per [`HALF_OPEN_INTERVAL`] while it is open. Every event is counted.
    pub fn admit(&self, target: &str, source: &str, now: Instant) -> bool {
        let mut buckets = self
            .buckets
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let s = self.settings;
        let b = buckets.entry(target.to_owned()).or_insert_with(|| Bucket {
            tokens: s.burst,
            refilled: now,
            recent: vec![String::new(); RECENT],
            next: 0,
            opened: None,
            last_allowed: now,
            triggered_by: String::new(),
        });
        let half_open = b.opened.is_some() && now >= b.last_allowed + HALF_OPEN_INTERVAL;
        let admitted = b.opened.is_none() || half_open;
        let elapsed = now.saturating_duration_since(b.refilled).as_secs_f64();
        b.tokens = (b.tokens + s.refill_per_second * elapsed).min(s.burst);
        b.refilled = now;
        b.recent[b.next] = source.to_owned();
        b.next = (b.next + 1) % RECENT;
        if let Some(opened) = b.opened {
            if half_open {
                b.last_allowed = now;
            }
            if now.saturating_duration_since(opened) < s.cooldown {
                return admitted;
            }
            b.opened = None;
            b.recent.iter_mut().for_each(String::clear);
            b.next = 0;
        }
        if b.tokens >= 1.0 {
            b.tokens -= 1.0;
            return admitted;
        }
        b.opened = Some(now);
        b.last_allowed = now;
        b.triggered_by = most_frequent(&b.recent);
        admitted
    }

    /// The circuit of `target`, if it is open.
    pub fn open(&self, target: &str) -> Option<Open> {
        let buckets = self
            .buckets
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let b = buckets.get(target)?;
        b.opened.map(|_| Open {
            triggered_by: b.triggered_by.clone(),
        })
    }

    /// Forgets `target` (its XR is gone), so a new XR of that name starts with a full bucket.
    pub fn reset(&self, target: &str) {
        self.buckets
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .remove(target);
    }

    /// The XR's `Responsive` condition.
    pub fn condition(&self, target: &str) -> Condition {
        match self.open(target) {
            Some(o) => {
                Condition::new(TYPE_RESPONSIVE, ConditionStatus::False, REASON_OPEN).with_message(format!(
                    "Too many watch events from {}. Allowing events periodically.",
                    o.triggered_by
                ))
            }
            None => Condition::new(TYPE_RESPONSIVE, ConditionStatus::True, REASON_CLOSED),
        }
    }
}

/// The source seen most often in `recent` (the latest of equals), as upstream picks it.
fn most_frequent(recent: &[String]) -> String {
    let mut counts: HashMap<&str, usize> = HashMap::new();
    let mut best = ("", 0);
    for s in recent.iter().filter(|s| !s.is_empty()) {
        let n = counts.entry(s).or_default();
        *n += 1;
        if *n >= best.1 {
            best = (s, *n);
        }
    }
    best.0.to_owned()
}

/// The key of an XR: `namespace/name`, or `name` when cluster-scoped.
pub fn key(namespace: Option<&str>, name: &str) -> String {
    match namespace {
        Some(ns) if !ns.is_empty() => format!("{ns}/{name}"),
        _ => name.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn breaker(burst: f64) -> Breaker {
        Breaker::new(Settings {
            burst,
            refill_per_second: 1.0,
            cooldown: Duration::from_secs(300),
        })
    }

    #[test]
    fn a_burst_within_the_bucket_keeps_the_circuit_closed() {
        let b = breaker(10.0);
        let t0 = Instant::now();
        for i in 0..10 {
            assert!(b.admit("ns/xr", "ConfigMap/cm (ns)", t0 + Duration::from_millis(i)));
        }
        assert_eq!(b.open("ns/xr"), None);
        let c = b.condition("ns/xr");
        assert_eq!(
            (c.status, c.reason.as_str()),
            (ConditionStatus::True, REASON_CLOSED)
        );
    }

    #[test]
    fn an_empty_bucket_opens_the_circuit_and_names_the_noisiest_source() {
        let b = breaker(10.0);
        let t0 = Instant::now();
        for i in 0..12 {
            let source = if i % 4 == 0 {
                "Secret/s (ns)"
            } else {
                "ConfigMap/cm (ns)"
            };
            b.admit("ns/xr", source, t0 + Duration::from_millis(i));
        }
        assert_eq!(
            b.open("ns/xr"),
            Some(Open {
                triggered_by: "ConfigMap/cm (ns)".into()
            })
        );
        let c = b.condition("ns/xr");
        assert_eq!(
            (c.status, c.reason.as_str()),
            (ConditionStatus::False, REASON_OPEN)
        );
        assert!(
            c.message
                .as_deref()
                .unwrap_or_default()
                .contains("ConfigMap/cm (ns)"),
            "{c:?}"
        );
        // Other XRs are not affected.
        assert_eq!(b.open("ns/other"), None);
    }

    #[test]
    fn an_open_circuit_lets_one_event_through_per_half_open_interval_and_closes_after_the_cooldown() {
        let b = breaker(2.0);
        let t0 = Instant::now();
        let at = |ms: u64| t0 + Duration::from_millis(ms);
        assert!(b.admit("xr", "a", at(0)));
        assert!(b.admit("xr", "a", at(1)));
        // The third event empties the bucket: it opens the circuit, and is itself let through.
        assert!(b.admit("xr", "a", at(2)));
        assert!(b.open("xr").is_some());
        assert!(!b.admit("xr", "a", at(3)), "dropped while open");
        assert!(!b.admit("xr", "a", at(29_000)));
        assert!(b.admit("xr", "a", at(30_002)), "half open: one event per 30 s");
        assert!(!b.admit("xr", "a", at(30_003)));
        // After the cooldown (5 min) the next event closes the circuit.
        assert!(b.admit("xr", "a", at(301_000)));
        assert_eq!(b.open("xr"), None);
        b.reset("xr");
        assert_eq!(b.open("xr"), None);
    }

    #[test]
    fn the_bucket_refills_over_time() {
        let b = breaker(2.0);
        let t0 = Instant::now();
        for s in 0..20 {
            // One event a second with a refill of one a second never empties it.
            assert!(b.admit("xr", "a", t0 + Duration::from_secs(s)));
        }
        assert_eq!(b.open("xr"), None);
        assert_eq!(key(Some("ns"), "xr"), "ns/xr");
        assert_eq!(key(None, "xr"), "xr");
    }
}
