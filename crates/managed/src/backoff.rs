//! Per-item failure backoff (crossplane-runtime's controller rate limiter: 1 s doubling to 60 s).

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

/// Exponential backoff per key; a success forgets the key.
#[derive(Debug)]
pub struct ItemBackoff {
    base: Duration,
    max: Duration,
    failures: Mutex<HashMap<String, u32>>,
}

impl ItemBackoff {
    /// Backoff from `base`, doubling per consecutive failure, capped at `max`.
    pub fn new(base: Duration, max: Duration) -> Self {
        Self {
            base,
            max,
            failures: Mutex::new(HashMap::new()),
        }
    }

    /// Records a failure of `key` and returns how long to wait before retrying it.
    pub fn next(&self, key: &str) -> Duration {
        let mut map = self
            .failures
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let n = map.entry(key.to_owned()).or_insert(0);
        let exp = (*n).min(20);
        *n = n.saturating_add(1);
        self.base.saturating_mul(1u32 << exp).min(self.max)
    }

    /// Forgets `key`'s failures.
    pub fn forget(&self, key: &str) {
        let mut map = self
            .failures
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        map.remove(key);
    }

    /// Consecutive failures recorded for `key`.
    pub fn failures(&self, key: &str) -> u32 {
        let map = self
            .failures
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        map.get(key).copied().unwrap_or(0)
    }
}

impl Default for ItemBackoff {
    fn default() -> Self {
        Self::new(Duration::from_secs(1), Duration::from_secs(60))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn doubles_caps_and_forgets() {
        let b = ItemBackoff::default();
        let seq: Vec<u64> = (0..8).map(|_| b.next("a").as_secs()).collect();
        assert_eq!(seq, vec![1, 2, 4, 8, 16, 32, 60, 60]);
        assert_eq!(b.next("b").as_secs(), 1);
        b.forget("a");
        assert_eq!(b.failures("a"), 0);
        assert_eq!(b.next("a").as_secs(), 1);
    }
}
