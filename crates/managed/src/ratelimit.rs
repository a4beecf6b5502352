//! The global reconcile rate limiter behind `--max-reconcile-rate` (crossplane-runtime's
//! `ratelimiter.NewGlobal` wrapped by `ratelimiter.NewReconciler`).
//!
//! A token bucket with rate `r` per second and burst `10 r` is shared by all controllers of a provider.
//! A reconcile that finds no token does not block a worker: it reserves the next token and is requeued
//! for when that token is due; when it comes back it runs without taking another.

use std::collections::HashSet;
use std::sync::Mutex;
use std::time::Duration;

use tokio::time::Instant;

#[derive(Debug)]
struct Bucket {
    tokens: f64,
    last: Instant,
    reserved: HashSet<String>,
}

/// A token bucket shared by every controller of a provider.
#[derive(Debug)]
pub struct GlobalRateLimiter {
    rate: f64,
    burst: f64,
    state: Mutex<Bucket>,
}

impl GlobalRateLimiter {
    /// `rate` reconciles per second, burst `10 × rate` (both at least 1).
    pub fn new(rate: u32) -> Self {
        let rate = f64::from(rate.max(1));
        let burst = rate * 10.0;
        Self {
            rate,
            burst,
            state: Mutex::new(Bucket {
                tokens: burst,
                last: Instant::now(),
                reserved: HashSet::new(),
            }),
        }
    }

    /// `None` if `key` may reconcile now; otherwise how long to wait (a token has been reserved for it).
    pub fn when(&self, key: &str) -> Option<Duration> {
        let mut b = self
            .state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if b.reserved.remove(key) {
            return None;
        }
        let now = Instant::now();
        let elapsed = now.duration_since(b.last).as_secs_f64();
        b.last = now;
        b.tokens = (b.tokens + elapsed * self.rate).min(self.burst);
        b.tokens -= 1.0;
        if b.tokens >= 0.0 {
            return None;
        }
        b.reserved.insert(key.to_owned());
        Some(Duration::from_secs_f64(-b.tokens / self.rate))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn bursts_then_spaces_requests() {
        let l = GlobalRateLimiter::new(1);
        for i in 0..10 {
            assert_eq!(l.when(&format!("k{i}")), None);
        }
        let wait = l.when("late").expect("limited");
        assert!(
            wait > Duration::from_millis(900) && wait <= Duration::from_secs(1),
            "{wait:?}"
        );
        let wait2 = l.when("later").expect("limited");
        assert!(wait2 > wait);
        // The reserved item goes through when it comes back.
        tokio::time::advance(wait).await;
        assert_eq!(l.when("late"), None);
    }
}
