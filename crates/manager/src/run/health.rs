//! Liveness: what `/healthz` checks.
//!
//! Healthy unless the elector loop has died, or this replica leads and its last renewal was *sent* longer
//! ago than `lease_duration + tolerance` (client-go's `HealthzAdaptor` rule: it catches a leader whose
//! renew loop is stuck while its term somehow still stands). Standbys are healthy.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use election::Leadership;
use tokio::sync::watch;
use tokio::time::Instant;

/// The default tolerance over the lease duration, as kube-controller-manager uses.
pub const DEFAULT_HEALTH_TOLERANCE: Duration = Duration::from_secs(20);

/// Shared liveness state, read by `/healthz`.
#[derive(Clone, Debug)]
pub struct Health {
    elector_alive: Arc<AtomicBool>,
    election: Option<ElectionHealth>,
}

#[derive(Clone, Debug)]
struct ElectionHealth {
    leadership: watch::Receiver<Leadership>,
    lease_duration: Duration,
    tolerance: Duration,
}

impl Health {
    /// Liveness without leader election: always healthy.
    pub fn without_election() -> Self {
        Self {
            elector_alive: Arc::new(AtomicBool::new(true)),
            election: None,
        }
    }

    /// Liveness that watches an elector.
    pub fn with_election(
        leadership: watch::Receiver<Leadership>,
        lease_duration: Duration,
        tolerance: Duration,
    ) -> Self {
        Self {
            elector_alive: Arc::new(AtomicBool::new(true)),
            election: Some(ElectionHealth {
                leadership,
                lease_duration,
                tolerance,
            }),
        }
    }

    /// Records that the elector loop has ended.
    pub fn elector_stopped(&self) {
        self.elector_alive.store(false, Ordering::Release);
    }

    /// `Ok` when healthy, otherwise the reason.
    pub fn check(&self) -> Result<(), String> {
        if !self.elector_alive.load(Ordering::Acquire) {
            return Err("the leader elector loop has stopped".to_owned());
        }
        let Some(e) = &self.election else { return Ok(()) };
        let last_sent = match &*e.leadership.borrow() {
            Leadership::Leading { term } => term.guard().last_renew_sent(),
            Leadership::Following { .. } => return Ok(()),
        };
        stale_renewal(last_sent, Instant::now(), e.lease_duration + e.tolerance)
    }
}

/// Fails when `now − last_sent > limit`.
fn stale_renewal(last_sent: Instant, now: Instant, limit: Duration) -> Result<(), String> {
    let since = now.saturating_duration_since(last_sent);
    if since > limit {
        return Err(format!(
            "leading, but the last successful renewal was sent {:.1}s ago (limit {:.1}s: lease duration + tolerance)",
            since.as_secs_f64(),
            limit.as_secs_f64()
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn without_election_healthy_until_elector_stops() {
        let h = Health::without_election();
        assert!(h.check().is_ok());
        h.clone().elector_stopped();
        assert!(h.check().expect_err("dead").contains("elector"));
    }

    #[test]
    fn standby_is_healthy() {
        let (_tx, rx) = watch::channel(Leadership::Following {
            leader: Some("other".into()),
        });
        let h = Health::with_election(rx, Duration::from_secs(15), DEFAULT_HEALTH_TOLERANCE);
        assert!(h.check().is_ok());
    }

    #[test]
    fn stale_renewal_fails_after_lease_plus_tolerance() {
        let t0 = Instant::now();
        let limit = Duration::from_secs(35);
        assert!(stale_renewal(t0, t0 + Duration::from_secs(35), limit).is_ok());
        let e = stale_renewal(t0, t0 + Duration::from_secs(36), limit).expect_err("stale");
        assert!(e.contains("36.0s ago"), "{e}");
    }
}
