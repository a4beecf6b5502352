//! Prometheus metrics, named as client-go's component-base registers them.
//!
//! - `leader_election_master_status{name}` (gauge): 1 while this process leads the lock `name`, else 0.
//! - `leader_election_slowpath_total{name}` (counter): renewals that fell back to get-and-replace after a
//!   conflict.
//!
//! The collectors are process-wide (like client-go's metrics provider), so two electors in one process
//! that use the same lock name share a label value. They are registered into every registry passed to
//! [`ElectorBuilder::metrics`](crate::ElectorBuilder::metrics); registering twice into the same registry
//! is ignored.

use std::sync::OnceLock;

use prometheus::{IntCounterVec, IntGaugeVec, Opts, Registry};

struct Collectors {
    master_status: IntGaugeVec,
    slowpath: IntCounterVec,
}

fn collectors() -> &'static Collectors {
    static COLLECTORS: OnceLock<Collectors> = OnceLock::new();
    COLLECTORS.get_or_init(|| Collectors {
        master_status: IntGaugeVec::new(
            Opts::new(
                "leader_election_master_status",
                "Gauge of if the reporting system is master of the relevant lease, 0 indicates backup, 1 \
                 indicates master. 'name' is the string used to identify the lease.",
            ),
            &["name"],
        )
        .unwrap_or_else(|e| unreachable!("static metric options are valid: {e}")),
        slowpath: IntCounterVec::new(
            Opts::new(
                "leader_election_slowpath_total",
                "Total number of slow path exercised in renewing leader leases. 'name' is the string used to \
                 identify the lease.",
            ),
            &["name"],
        )
        .unwrap_or_else(|e| unreachable!("static metric options are valid: {e}")),
    })
}

/// Handle used by the elector to update its metrics.
#[derive(Clone, Debug, Default)]
pub(crate) struct Metrics {
    _private: (),
}

impl Metrics {
    pub(crate) fn new() -> Self {
        Self::default()
    }

    /// Registers the collectors in `registry`; "already registered" is not an error.
    pub(crate) fn register(&self, registry: &Registry) {
        let c = collectors();
        for result in [
            registry.register(Box::new(c.master_status.clone())),
            registry.register(Box::new(c.slowpath.clone())),
        ] {
            match result {
                Ok(()) | Err(prometheus::Error::AlreadyReg) => {}
                Err(e) => tracing::warn!(error = %e, "cannot register leader election metrics"),
            }
        }
    }

    /// Sets `leader_election_master_status{name}`, and exposes `leader_election_slowpath_total{name}`
    /// from then on (at zero until the first slow path), so both series of a lock are scrapeable.
    pub(crate) fn set_leading(&self, name: &str, leading: bool) {
        let c = collectors();
        c.master_status.with_label_values(&[name]).set(i64::from(leading));
        c.slowpath.with_label_values(&[name]);
    }

    /// Increments `leader_election_slowpath_total{name}`.
    pub(crate) fn slowpath(&self, name: &str) {
        collectors().slowpath.with_label_values(&[name]).inc();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn registers_once_and_reports() {
        let registry = Registry::new();
        let m = Metrics::new();
        m.register(&registry);
        m.register(&registry);
        m.set_leading("metrics-test", true);
        m.slowpath("metrics-test");
        let families = registry.gather();
        let names: Vec<_> = families.iter().map(|f| f.name().to_string()).collect();
        assert!(
            names.contains(&"leader_election_master_status".to_string()),
            "{names:?}"
        );
        assert!(
            names.contains(&"leader_election_slowpath_total".to_string()),
            "{names:?}"
        );
        m.set_leading("metrics-test", false);
        assert_eq!(
            collectors()
                .master_status
                .with_label_values(&["metrics-test"])
                .get(),
            0
        );
    }
}
