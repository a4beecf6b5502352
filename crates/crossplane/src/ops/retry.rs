//! When an Operation runs again after a failed run. Each failed run counts in `status.failures`; once
//! that reaches `spec.retryLimit` (default 5) the Operation is failed for good. Between runs the
//! controller waits [`backoff`]: one second after the first failure, doubling, at most five minutes
//! (upstream leaves this to controller-runtime's per-object exponential backoff).

use std::time::Duration;

/// The first wait.
const BASE: Duration = Duration::from_secs(1);
/// The longest wait.
const MAX: Duration = Duration::from_secs(300);

/// What to do with an Operation that has not completed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Retry {
    /// Run the pipeline (again).
    Run,
    /// The failure limit is reached: mark the Operation failed, run nothing.
    GiveUp {
        /// The limit reached.
        limit: i64,
    },
}

/// Whether an Operation with `failures` failed runs and retry limit `limit` runs again.
pub fn decide(failures: i64, limit: i64) -> Retry {
    if failures >= limit {
        Retry::GiveUp { limit }
    } else {
        Retry::Run
    }
}

/// How long to wait before the next run after `failures` failed runs.
pub fn backoff(failures: i64) -> Duration {
    let exp = u32::try_from(failures.saturating_sub(1).clamp(0, 16)).unwrap_or(16);
    BASE.saturating_mul(2u32.saturating_pow(exp)).min(MAX)
}

/// The condition message of an Operation that reached its limit (upstream's words).
pub fn limit_message(limit: i64) -> String {
    format!("failure limit of {limit} reached")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runs_until_the_limit_then_gives_up() {
        assert_eq!(decide(0, 3), Retry::Run);
        assert_eq!(decide(2, 3), Retry::Run);
        assert_eq!(decide(3, 3), Retry::GiveUp { limit: 3 });
        assert_eq!(decide(4, 3), Retry::GiveUp { limit: 3 });
        // A limit of zero never runs.
        assert_eq!(decide(0, 0), Retry::GiveUp { limit: 0 });
        assert_eq!(limit_message(3), "failure limit of 3 reached");
    }

    #[test]
    fn backoff_doubles_from_one_second_up_to_five_minutes() {
        let secs: Vec<u64> = (0..=10).map(|f| backoff(f).as_secs()).collect();
        assert_eq!(secs, [1, 1, 2, 4, 8, 16, 32, 64, 128, 256, 300]);
        assert_eq!(backoff(1_000), MAX);
        assert_eq!(backoff(-3), BASE);
    }
}
