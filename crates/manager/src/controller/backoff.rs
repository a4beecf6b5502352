//! Retry timing for controllers: per-object exponential [`Backoff`] after failures, and [`jittered`]
//! intervals so that many objects polled at the same period do not line up.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

/// Failure counts per object key; the delay doubles from `base` up to `max` (controller-runtime's
/// per-item rate limiter; crossplane-runtime uses 1 s to 60 s). A success forgets the key.
#[derive(Debug)]
pub struct Backoff {
    base: Duration,
    max: Duration,
    failures: Mutex<HashMap<String, u32>>,
}

impl Default for Backoff {
    /// 1 s doubling to 60 s.
    fn default() -> Self {
        Self::new(Duration::from_secs(1), Duration::from_secs(60))
    }
}

impl Backoff {
    /// A backoff from `base`, doubling per consecutive failure, capped at `max`.
    pub fn new(base: Duration, max: Duration) -> Self {
        Self {
            base,
            max,
            failures: Mutex::new(HashMap::new()),
        }
    }

    fn map(&self) -> std::sync::MutexGuard<'_, HashMap<String, u32>> {
        self.failures
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Records a failure of `key` and returns how long to wait before retrying it.
    pub fn fail(&self, key: &str) -> Duration {
        let mut map = self.map();
        let n = map.entry(key.to_owned()).or_insert(0);
        let delay = self.base.saturating_mul(1u32 << (*n).min(20)).min(self.max);
        *n = n.saturating_add(1);
        delay
    }

    /// Forgets the failures of `key`.
    pub fn succeed(&self, key: &str) {
        self.map().remove(key);
    }

    /// Consecutive failures recorded for `key`.
    pub fn failures(&self, key: &str) -> u32 {
        self.map().get(key).copied().unwrap_or(0)
    }
}

/// `interval` moved randomly by up to `±fraction` (crossplane's poll jitter is 10 %).
pub fn jittered(interval: Duration, fraction: f64) -> Duration {
    let f = fraction.clamp(0.0, 1.0);
    if f == 0.0 || interval.is_zero() {
        return interval;
    }
    let factor = 1.0 + f * (fastrand::f64() * 2.0 - 1.0);
    interval.mul_f64(factor)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn doubles_caps_and_forgets() {
        let b = Backoff::default();
        let seq: Vec<u64> = (0..8).map(|_| b.fail("a").as_secs()).collect();
        assert_eq!(seq, vec![1, 2, 4, 8, 16, 32, 60, 60]);
        assert_eq!(b.fail("b").as_secs(), 1);
        b.succeed("a");
        assert_eq!(b.failures("a"), 0);
        assert_eq!(b.fail("a").as_secs(), 1);
        let short = Backoff::new(Duration::from_secs(1), Duration::from_secs(30));
        let seq: Vec<u64> = (0..7).map(|_| short.fail("x").as_secs()).collect();
        assert_eq!(seq, [1, 2, 4, 8, 16, 30, 30]);
    }

    #[test]
    fn jitter_stays_within_bounds() {
        let base = Duration::from_secs(10);
        let mut distinct = std::collections::HashSet::new();
        for _ in 0..200 {
            let d = jittered(base, 0.1);
            assert!(
                d >= Duration::from_secs(9) && d <= Duration::from_secs(11),
                "{d:?}"
            );
            distinct.insert(d.as_millis());
        }
        assert!(distinct.len() > 10);
        assert_eq!(jittered(base, 0.0), base);
    }
}
