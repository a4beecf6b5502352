//! Configuration: the builder, its validation, and the validated [`ElectionConfig`].
//!
//! Validation follows client-go (`lease_duration > renew_deadline > 1.2 × retry_period`, all > 0) and adds
//! the rules this crate's safety argument needs:
//!
//! - `lease_duration − renew_deadline ≥ stop_margin` (default 1 s). A leader stops acting at
//!   `sent + renew_deadline`; another candidate may acquire no earlier than `W + lease_duration` with
//!   `W ≥ sent`. The difference is the time leader work has to stop, in-flight writes to land, and clock
//!   rates to drift apart.
//! - `lease_duration` is a whole number of seconds, at least 1 s and at most [`MAX_LEASE_DURATION`],
//!   because the Lease stores `leaseDurationSeconds` as an integer and because remote durations above
//!   that bound are clamped by every candidate of this crate (see the crate docs).
//! - `namespace`, `name` and `identity` are not empty; `identity` is not client-go's reserved
//!   `leaderelection.k8s.io/unknown`.
//!
//! Every error names the field and the rule it broke.

use std::{collections::BTreeMap, time::Duration};

use crate::{elector::Elector, metrics::Metrics, record::UNKNOWN_LEADER};

/// The largest lease duration this crate accepts in its configuration, and the bound to which larger
/// `leaseDurationSeconds` read from the cluster are clamped (with a warning).
pub const MAX_LEASE_DURATION: Duration = Duration::from_secs(3600);

/// Which Kubernetes object(s) hold the leader record.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum LockKind {
    /// A `coordination.k8s.io/v1` Lease (client-go `leases`). The default and the only kind client-go
    /// still supports.
    #[default]
    Lease,
    /// A ConfigMap whose annotation `control-plane.alpha.kubernetes.io/leader` holds the record as JSON
    /// (client-go `configmaps`, removed upstream in 1.24). For migrating old deployments only.
    ConfigMap,
    /// client-go's `configmapsleases` MultiLock: the ConfigMap is the primary lock and the Lease the
    /// secondary; both are written on every acquire and renew. The middle step of a ConfigMap → Lease
    /// migration.
    ConfigMapAndLease,
}

impl LockKind {
    /// client-go's name for this lock type (`leases`, `configmaps`, `configmapsleases`).
    pub fn client_go_name(self) -> &'static str {
        match self {
            LockKind::Lease => "leases",
            LockKind::ConfigMap => "configmaps",
            LockKind::ConfigMapAndLease => "configmapsleases",
        }
    }
}

/// The validated configuration of an [`Elector`].
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct ElectionConfig {
    /// Namespace of the lock object(s).
    pub namespace: String,
    /// Name of the lock object(s).
    pub name: String,
    /// This candidate's identity, written as `holderIdentity`. Must be unique among candidates.
    pub identity: String,
    /// How long a record stays valid after a candidate observed it change (`leaseDurationSeconds`).
    pub lease_duration: Duration,
    /// How long after sending its last successful renew a leader keeps acting.
    pub renew_deadline: Duration,
    /// How often the leader renews.
    pub retry_period: Duration,
    /// Whether `run` releases the lock when `shutdown` resolves while leading.
    pub release_on_cancel: bool,
    /// Labels set on the lock object(s) at every write. Other labels are preserved.
    pub labels: BTreeMap<String, String>,
    /// Which object(s) hold the record.
    pub lock_kind: LockKind,
    /// The minimum `lease_duration − renew_deadline` accepted.
    pub stop_margin: Duration,
}

impl ElectionConfig {
    /// The timeout applied to each API request: `max(1 s, renew_deadline / 2)`, as client-go's
    /// `NewFromKubeconfig` sets it. It is separate from the renew budget.
    pub fn request_timeout(&self) -> Duration {
        (self.renew_deadline / 2).max(Duration::from_secs(1))
    }

    /// `lease_duration` in whole seconds, as written to `leaseDurationSeconds`.
    pub fn lease_duration_seconds(&self) -> i32 {
        // Validation guarantees 1 ..= 3600 whole seconds.
        i32::try_from(self.lease_duration.as_secs()).unwrap_or(i32::MAX)
    }

    /// `namespace/name`, as client-go's `Describe`.
    pub fn describe(&self) -> String {
        format!("{}/{}", self.namespace, self.name)
    }
}

/// Builds an [`Elector`]; `build` validates the configuration.
#[derive(Clone)]
#[must_use = "a builder does nothing until build() is called"]
pub struct ElectorBuilder {
    client: kube::Client,
    config: ElectionConfig,
    metrics: Metrics,
}

impl std::fmt::Debug for ElectorBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ElectorBuilder")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

impl ElectorBuilder {
    /// A builder with client-go's documented defaults: lease 15 s, renew 10 s, retry 2 s; release on
    /// cancel; a Lease lock; a stop margin of 1 s; no labels.
    ///
    /// Give the elector a client of its own (its own rate limiter and connection pool) so controller
    /// traffic cannot starve renewals.
    pub fn new(
        client: kube::Client,
        namespace: impl Into<String>,
        name: impl Into<String>,
        identity: impl Into<String>,
    ) -> Self {
        Self {
            client,
            config: ElectionConfig {
                namespace: namespace.into(),
                name: name.into(),
                identity: identity.into(),
                lease_duration: Duration::from_secs(15),
                renew_deadline: Duration::from_secs(10),
                retry_period: Duration::from_secs(2),
                release_on_cancel: true,
                labels: BTreeMap::new(),
                lock_kind: LockKind::Lease,
                stop_margin: Duration::from_secs(1),
            },
            metrics: Metrics::new(),
        }
    }

    /// Sets `lease_duration` (default 15 s).
    pub fn lease_duration(mut self, d: Duration) -> Self {
        self.config.lease_duration = d;
        self
    }

    /// Sets `renew_deadline` (default 10 s).
    pub fn renew_deadline(mut self, d: Duration) -> Self {
        self.config.renew_deadline = d;
        self
    }

    /// Sets `retry_period` (default 2 s).
    pub fn retry_period(mut self, d: Duration) -> Self {
        self.config.retry_period = d;
        self
    }

    /// Sets whether the lock is released when `shutdown` resolves while leading (default true).
    pub fn release_on_cancel(mut self, b: bool) -> Self {
        self.config.release_on_cancel = b;
        self
    }

    /// Sets the labels written on the lock object(s) (default none).
    pub fn labels(mut self, l: BTreeMap<String, String>) -> Self {
        self.config.labels = l;
        self
    }

    /// Sets the lock kind (default [`LockKind::Lease`]).
    pub fn lock_kind(mut self, k: LockKind) -> Self {
        self.config.lock_kind = k;
        self
    }

    /// Sets the minimum `lease_duration − renew_deadline` the builder accepts (default 1 s).
    pub fn stop_margin(mut self, d: Duration) -> Self {
        self.config.stop_margin = d;
        self
    }

    /// Registers `leader_election_master_status{name}` and `leader_election_slowpath_total{name}` in
    /// `registry`. Registering into the same registry twice is harmless.
    pub fn metrics(self, registry: &prometheus::Registry) -> Self {
        self.metrics.register(registry);
        self
    }

    /// Validates the configuration and builds the elector.
    pub fn build(self) -> Result<Elector, ConfigError> {
        validate(&self.config)?;
        Ok(Elector::new(self.client, self.config, self.metrics))
    }
}

/// A configuration rule was broken. Each message names the field and the rule.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// A required string was empty.
    #[error("{field} must not be empty")]
    Empty {
        /// The field.
        field: &'static str,
    },
    /// The identity is client-go's reserved placeholder.
    #[error(
        "identity must not be {UNKNOWN_LEADER:?}: client-go reserves it for a lock whose holders disagree"
    )]
    ReservedIdentity,
    /// A duration was zero.
    #[error("{field} must be greater than zero")]
    NotPositive {
        /// The field.
        field: &'static str,
    },
    /// `lease_duration` was not a whole number of seconds, or was outside 1 s ..= 1 h.
    #[error(
        "lease_duration must be a whole number of seconds between 1s and {max:?} (leaseDurationSeconds is an \
         integer), got {got:?}"
    )]
    LeaseDurationSeconds {
        /// The configured value.
        got: Duration,
        /// The largest accepted value.
        max: Duration,
    },
    /// `lease_duration ≤ renew_deadline`.
    #[error("lease_duration ({lease:?}) must be greater than renew_deadline ({renew:?})")]
    LeaseNotAboveRenew {
        /// `lease_duration`.
        lease: Duration,
        /// `renew_deadline`.
        renew: Duration,
    },
    /// `renew_deadline ≤ 1.2 × retry_period`.
    #[error(
        "renew_deadline ({renew:?}) must be greater than 1.2 × retry_period ({retry:?} × 1.2 = {jittered:?}); \
         lower retry_period or raise renew_deadline"
    )]
    RenewNotAboveJitteredRetry {
        /// `renew_deadline`.
        renew: Duration,
        /// `retry_period`.
        retry: Duration,
        /// `1.2 × retry_period`.
        jittered: Duration,
    },
    /// `lease_duration − renew_deadline < stop_margin`.
    #[error(
        "lease_duration − renew_deadline ({margin:?}) must be at least stop_margin ({stop_margin:?}): the leader \
         needs that long to stop its work before another candidate may acquire; raise lease_duration or lower \
         renew_deadline"
    )]
    MarginTooSmall {
        /// `lease_duration − renew_deadline`.
        margin: Duration,
        /// The configured minimum.
        stop_margin: Duration,
    },
}

/// Checks every rule, in the order the crate docs list them.
pub(crate) fn validate(c: &ElectionConfig) -> Result<(), ConfigError> {
    for (field, value) in [
        ("namespace", &c.namespace),
        ("name", &c.name),
        ("identity", &c.identity),
    ] {
        if value.is_empty() {
            return Err(ConfigError::Empty { field });
        }
    }
    if c.identity == UNKNOWN_LEADER {
        return Err(ConfigError::ReservedIdentity);
    }
    for (field, value) in [
        ("lease_duration", c.lease_duration),
        ("renew_deadline", c.renew_deadline),
        ("retry_period", c.retry_period),
    ] {
        if value.is_zero() {
            return Err(ConfigError::NotPositive { field });
        }
    }
    if c.lease_duration.subsec_nanos() != 0 || c.lease_duration > MAX_LEASE_DURATION {
        return Err(ConfigError::LeaseDurationSeconds {
            got: c.lease_duration,
            max: MAX_LEASE_DURATION,
        });
    }
    if c.lease_duration <= c.renew_deadline {
        return Err(ConfigError::LeaseNotAboveRenew {
            lease: c.lease_duration,
            renew: c.renew_deadline,
        });
    }
    let jittered = c.retry_period.mul_f64(1.2);
    if c.renew_deadline <= jittered {
        return Err(ConfigError::RenewNotAboveJitteredRetry {
            renew: c.renew_deadline,
            retry: c.retry_period,
            jittered,
        });
    }
    let margin = c.lease_duration - c.renew_deadline;
    if margin < c.stop_margin {
        return Err(ConfigError::MarginTooSmall {
            margin,
            stop_margin: c.stop_margin,
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config() -> ElectionConfig {
        ElectionConfig {
            namespace: "ns".into(),
            name: "lease".into(),
            identity: "me".into(),
            lease_duration: Duration::from_secs(15),
            renew_deadline: Duration::from_secs(10),
            retry_period: Duration::from_secs(2),
            release_on_cancel: true,
            labels: BTreeMap::new(),
            lock_kind: LockKind::Lease,
            stop_margin: Duration::from_secs(1),
        }
    }

    fn err(f: impl FnOnce(&mut ElectionConfig)) -> ConfigError {
        let mut c = config();
        f(&mut c);
        match validate(&c) {
            Err(e) => e,
            Ok(()) => panic!("config {c:?} should be rejected"),
        }
    }

    #[test]
    fn defaults_and_crossplane_timings_are_valid() {
        assert_eq!(validate(&config()), Ok(()));
        let mut c = config();
        c.lease_duration = Duration::from_secs(60);
        c.renew_deadline = Duration::from_secs(50);
        assert_eq!(validate(&c), Ok(()));
        c.retry_period = Duration::from_secs(10);
        assert_eq!(validate(&c), Ok(()));
    }

    #[test]
    fn empty_strings_are_rejected_by_name() {
        for field in ["namespace", "name", "identity"] {
            let e = err(|c| match field {
                "namespace" => c.namespace.clear(),
                "name" => c.name.clear(),
                _ => c.identity.clear(),
            });
            assert_eq!(e, ConfigError::Empty { field });
            assert_eq!(e.to_string(), format!("{field} must not be empty"));
        }
        assert_eq!(
            err(|c| c.identity = UNKNOWN_LEADER.into()),
            ConfigError::ReservedIdentity
        );
    }

    #[test]
    fn zero_durations_are_rejected_by_name() {
        assert_eq!(
            err(|c| c.lease_duration = Duration::ZERO).to_string(),
            "lease_duration must be greater than zero"
        );
        assert_eq!(
            err(|c| c.renew_deadline = Duration::ZERO).to_string(),
            "renew_deadline must be greater than zero"
        );
        assert_eq!(
            err(|c| c.retry_period = Duration::ZERO).to_string(),
            "retry_period must be greater than zero"
        );
    }

    #[test]
    fn lease_must_be_whole_seconds_within_bounds() {
        let e = err(|c| c.lease_duration = Duration::from_millis(15_500));
        assert!(matches!(e, ConfigError::LeaseDurationSeconds { .. }));
        assert!(
            e.to_string()
                .starts_with("lease_duration must be a whole number of seconds")
        );
        let e = err(|c| c.lease_duration = Duration::from_secs(3601));
        assert!(matches!(e, ConfigError::LeaseDurationSeconds { .. }));
        let mut c = config();
        c.lease_duration = MAX_LEASE_DURATION;
        assert_eq!(validate(&c), Ok(()));
    }

    #[test]
    fn lease_must_exceed_renew() {
        let e = err(|c| c.renew_deadline = Duration::from_secs(15));
        assert!(matches!(e, ConfigError::LeaseNotAboveRenew { .. }));
        assert_eq!(
            e.to_string(),
            "lease_duration (15s) must be greater than renew_deadline (15s)"
        );
    }

    #[test]
    fn renew_must_exceed_jittered_retry() {
        // 1.2 × 2s = 2.4s: renew 2.4s is rejected, 2.5s accepted (with a bigger lease for the margin).
        let e = err(|c| c.renew_deadline = Duration::from_millis(2400));
        assert!(matches!(e, ConfigError::RenewNotAboveJitteredRetry { .. }), "{e}");
        assert!(
            e.to_string()
                .starts_with("renew_deadline (2.4s) must be greater than 1.2 × retry_period")
        );
        let mut c = config();
        c.renew_deadline = Duration::from_millis(2500);
        assert_eq!(validate(&c), Ok(()));
    }

    #[test]
    fn margin_must_cover_stop_margin() {
        let e = err(|c| {
            c.lease_duration = Duration::from_secs(11);
            c.renew_deadline = Duration::from_millis(10_500);
        });
        assert_eq!(
            e,
            ConfigError::MarginTooSmall {
                margin: Duration::from_millis(500),
                stop_margin: Duration::from_secs(1)
            }
        );
        assert!(e.to_string().contains("stop_margin"));
        let mut c = config();
        c.stop_margin = Duration::from_secs(6);
        assert!(matches!(validate(&c), Err(ConfigError::MarginTooSmall { .. })));
        c.stop_margin = Duration::from_secs(5);
        assert_eq!(validate(&c), Ok(()));
    }

    #[test]
    fn request_timeout_is_half_renew_at_least_one_second() {
        let mut c = config();
        assert_eq!(c.request_timeout(), Duration::from_secs(5));
        c.renew_deadline = Duration::from_millis(1500);
        assert_eq!(c.request_timeout(), Duration::from_secs(1));
        assert_eq!(c.lease_duration_seconds(), 15);
    }
}
