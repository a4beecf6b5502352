//! When to reconcile again: the poll interval with jitter.

use std::time::Duration;

/// `interval` moved randomly by up to `±fraction` (crossplane's default is 10 %).
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
    fn stays_within_bounds() {
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
