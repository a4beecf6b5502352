//! Per-object exponential backoff for failed reconciles, so that a persistent error never hot-loops.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

/// Failure counts per object key; the delay doubles from `min` up to `max`.
#[derive(Debug)]
pub struct Backoff {
    min: Duration,
    max: Duration,
    failures: Mutex<HashMap<String, u32>>,
}

impl Backoff {
    /// A backoff from `min` to `max`.
    pub fn new(min: Duration, max: Duration) -> Self {
        Self {
            min,
            max,
            failures: Mutex::new(HashMap::new()),
        }
    }

    /// Records a failure of `key` and returns how long to wait.
    pub fn fail(&self, key: &str) -> Duration {
        let mut map = self
            .failures
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let n = map.entry(key.to_owned()).or_insert(0);
        let delay = self.min.saturating_mul(1u32 << (*n).min(16)).min(self.max);
        *n = n.saturating_add(1);
        delay
    }

    /// Forgets the failures of `key`.
    pub fn succeed(&self, key: &str) {
        let mut map = self
            .failures
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        map.remove(key);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn doubles_up_to_max_and_resets() {
        let b = Backoff::new(Duration::from_secs(1), Duration::from_secs(30));
        let d: Vec<_> = (0..7).map(|_| b.fail("x").as_secs()).collect();
        assert_eq!(d, [1, 2, 4, 8, 16, 30, 30]);
        b.succeed("x");
        assert_eq!(b.fail("x").as_secs(), 1);
    }
}
