//! Statistics of the samples: nearest-rank percentiles and rates per minute.

use std::time::Duration;

/// Nearest-rank percentile of `xs` (sorted inside).
pub(crate) fn pct(xs: &[f64], p: f64) -> f64 {
    if xs.is_empty() {
        return f64::NAN;
    }
    let mut v = xs.to_vec();
    v.sort_by(f64::total_cmp);
    let rank = ((p / 100.0) * v.len() as f64).ceil().max(1.0) as usize;
    v[rank.min(v.len()) - 1]
}

pub(super) fn per_min(n: usize, window: Duration) -> f64 {
    n as f64 * 60.0 / window.as_secs_f64()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_rank() {
        let v = [5.0, 1.0, 3.0, 2.0, 4.0];
        assert_eq!(pct(&v, 50.0), 3.0);
        assert_eq!(pct(&v, 99.0), 5.0);
        assert!(pct(&[], 50.0).is_nan());
    }
}
