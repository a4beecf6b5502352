//! Configuration: the builder, its validation, and the validated [`ElectionConfig`].
//!
//! The timing rules live with the timings ([`Timings::validate`]); this module adds the rules on names:
//! `namespace`, `name` and `identity` are not empty; `identity` is not client-go's reserved
//! `leaderelection.k8s.io/unknown`. Every error names the field and the rule it broke.

use std::{collections::BTreeMap, time::Duration};

use crate::{elector::Elector, metrics::Metrics, record::UNKNOWN_LEADER, timings::Timings, warm::KEEP_WARM};

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
    /// The timings.
    pub timings: Timings,
    /// Whether `run` releases the lock when `shutdown` resolves while leading.
    pub release_on_cancel: bool,
    /// Labels set on the lock object(s) at every write. Other labels are preserved.
    pub labels: BTreeMap<String, String>,
    /// Which object(s) hold the record.
    pub lock_kind: LockKind,
    /// How often a following candidate sends a request that keeps a connection of its pool ready for
    /// its acquiring write (see [`KEEP_WARM`](crate::KEEP_WARM)); `None` sends none, and the acquiring
    /// write then opens a new connection.
    pub keep_warm: Option<Duration>,
}

impl ElectionConfig {
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
    /// A builder with [`Timings::DEFAULT`] (client-go's), release on cancel, a Lease lock and no labels.
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
                timings: Timings::DEFAULT,
                release_on_cancel: true,
                labels: BTreeMap::new(),
                lock_kind: LockKind::Lease,
                keep_warm: Some(KEEP_WARM),
            },
            metrics: Metrics::new(),
        }
    }

    /// Sets the timings (default [`Timings::DEFAULT`]).
    pub fn timings(mut self, timings: Timings) -> Self {
        self.config.timings = timings;
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

    /// Sets how often a following candidate keeps a connection ready for its acquiring write (default
    /// [`KEEP_WARM`](crate::KEEP_WARM)); `None` turns it off.
    pub fn keep_warm(mut self, period: Option<Duration>) -> Self {
        self.config.keep_warm = period;
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
    /// The stop margin `lease_duration − renew_deadline` is below `min_stop_margin`.
    #[error(
        "the stop margin lease_duration − renew_deadline ({margin:?}) must be at least min_stop_margin \
         ({min_stop_margin:?}): the leader needs that long to stop its work before another candidate may \
         acquire; raise lease_duration or lower renew_deadline"
    )]
    StopMarginTooSmall {
        /// `lease_duration − renew_deadline`.
        margin: Duration,
        /// The configured minimum.
        min_stop_margin: Duration,
    },
}

/// Checks the names, then the timings.
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
    if c.keep_warm == Some(Duration::ZERO) {
        return Err(ConfigError::NotPositive { field: "keep_warm" });
    }
    c.timings.validate()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config() -> ElectionConfig {
        ElectionConfig {
            namespace: "ns".into(),
            name: "lease".into(),
            identity: "me".into(),
            timings: Timings::DEFAULT,
            release_on_cancel: true,
            labels: BTreeMap::new(),
            lock_kind: LockKind::Lease,
            keep_warm: Some(KEEP_WARM),
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
    fn empty_strings_are_rejected_by_name() {
        assert_eq!(validate(&config()), Ok(()));
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
    fn timings_are_validated_too() {
        let e = err(|c| c.timings.retry_period = Duration::ZERO);
        assert_eq!(
            e,
            ConfigError::NotPositive {
                field: "retry_period"
            }
        );
    }

    #[test]
    fn a_zero_keep_warm_period_is_rejected_and_none_turns_it_off() {
        let e = err(|c| c.keep_warm = Some(Duration::ZERO));
        assert_eq!(e, ConfigError::NotPositive { field: "keep_warm" });
        assert_eq!(e.to_string(), "keep_warm must be greater than zero");
        let mut off = config();
        off.keep_warm = None;
        assert_eq!(validate(&off), Ok(()));
    }
}
