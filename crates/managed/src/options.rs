//! How a managed controller behaves: poll interval and jitter, concurrency, the global rate limiter,
//! the resync period, external-name handling and timeouts.

use std::sync::Arc;
use std::time::Duration;

use crate::ratelimit::GlobalRateLimiter;
use crate::usage::UsageTracker;

/// Options of one managed controller. Several controllers of a provider share one rate limiter.
#[derive(Clone)]
pub struct Options {
    /// How often an up-to-date resource is observed again (crossplane-runtime default 1 m).
    pub poll_interval: Duration,
    /// Jitter applied to the poll interval, as a fraction (0.1 = ±10 %).
    pub poll_jitter: f64,
    /// Reconciles running at once.
    pub max_concurrent: u16,
    /// The provider's global reconcile rate limiter, if any.
    pub rate_limiter: Option<Arc<GlobalRateLimiter>>,
    /// Reconcile every resource this often regardless of events (`--sync`).
    pub sync_interval: Option<Duration>,
    /// The external name is derived from the spec, so a create whose outcome is unknown can be retried
    /// safely (`WithDeterministicExternalName`); disables the safe-create stop.
    pub deterministic_external_name: bool,
    /// Default the external name to `metadata.name` (crossplane-runtime's `NameAsExternalName`).
    pub name_as_external_name: bool,
    /// How long after a successful create a missing external resource is considered still appearing.
    pub creation_grace_period: Duration,
    /// Timeout of each external call.
    pub timeout: Duration,
    /// First and longest per-item backoff after a failure.
    pub backoff: (Duration, Duration),
    /// Track ProviderConfig usage before connecting.
    pub usage: Option<Arc<UsageTracker>>,
    /// Only watch resources matching this label selector.
    pub label_selector: Option<String>,
    /// How often the `crossplane_managed_resource_{exists,ready,synced}` gauges are counted
    /// (crossplane-runtime's `--poll-state-metric`, 5 s).
    pub poll_state_metric: Duration,
    /// The upstream compatibility flags that were given, with their values: a provider reads those it
    /// applies itself (`manager::config::compat::Effect::Applied`).
    pub compat: Vec<manager::config::compat::Given>,
}

impl Options {
    /// The value of compatibility flag `name` (long name, without `--`), if it was given.
    pub fn compat_flag(&self, name: &str) -> Option<&str> {
        self.compat
            .iter()
            .find(|g| g.name == name)
            .map(|g| g.value.as_str())
    }
}

impl Default for Options {
    fn default() -> Self {
        Self {
            poll_interval: Duration::from_secs(60),
            poll_jitter: 0.1,
            max_concurrent: 1,
            rate_limiter: None,
            sync_interval: None,
            deterministic_external_name: false,
            name_as_external_name: true,
            creation_grace_period: Duration::from_secs(30),
            timeout: Duration::from_secs(60),
            backoff: (Duration::from_secs(1), Duration::from_secs(60)),
            usage: None,
            label_selector: None,
            poll_state_metric: Duration::from_secs(5),
            compat: Vec::new(),
        }
    }
}

impl std::fmt::Debug for Options {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Options")
            .field("poll_interval", &self.poll_interval)
            .field("poll_jitter", &self.poll_jitter)
            .field("max_concurrent", &self.max_concurrent)
            .field("rate_limited", &self.rate_limiter.is_some())
            .field("sync_interval", &self.sync_interval)
            .field("deterministic_external_name", &self.deterministic_external_name)
            .field("name_as_external_name", &self.name_as_external_name)
            .field("creation_grace_period", &self.creation_grace_period)
            .field("timeout", &self.timeout)
            .field("backoff", &self.backoff)
            .field("usage", &self.usage.is_some())
            .field("label_selector", &self.label_selector)
            .field("poll_state_metric", &self.poll_state_metric)
            .field("compat", &self.compat)
            .finish()
    }
}
