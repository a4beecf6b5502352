//! The election's timings: their defaults, their rules and their names, in one place.
//!
//! - `lease_duration`: how long a record stays valid after a candidate saw it change.
//! - `renew_deadline`: how long after sending its last successful renew a leader keeps acting.
//! - `retry_period`: how often the leader renews and standbys retry.
//! - **the stop margin** ([`Timings::stop_margin`]) is `lease_duration − renew_deadline`: the time leader
//!   work has to stop, and writes in flight to land, before another candidate may acquire. It must be at
//!   least [`Timings::min_stop_margin`].
//!
//! [`Timings::validate`] follows client-go (all three positive, and `lease_duration > renew_deadline >
//! 1.2 × retry_period`) and adds the rules this crate's safety argument needs: a whole-second lease of
//! at most [`MAX_LEASE_DURATION`], and a stop margin of at least `min_stop_margin`.
//!
//! # Flags
//!
//! With the `clap` feature, [`TimingFlags`] declares `--lease-duration`, `--renew-deadline` and
//! `--retry-period` (Go durations) for a binary to flatten into its parser; [`TimingFlags::over`] fills
//! what was not given from the binary's defaults. The flags live here rather than in each binary so the
//! names, the parser and the defaults they fall back to have one owner; clap stays optional so a library
//! user of the elector does not pay for it.

use std::time::Duration;

use crate::config::ConfigError;

/// The largest lease duration this crate accepts in its configuration, and the bound to which larger
/// `leaseDurationSeconds` read from the cluster are clamped (with a warning).
pub const MAX_LEASE_DURATION: Duration = Duration::from_secs(3600);

/// client-go's `JitterFactor`: the renew deadline must exceed this many retry periods.
pub const JITTER_FACTOR: f64 = 1.2;

/// The election's timings. [`Timings::DEFAULT`] is client-go's (15 s / 10 s / 2 s, least stop margin 1 s).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Timings {
    /// How long a record stays valid after a candidate observed it change (`leaseDurationSeconds`).
    pub lease_duration: Duration,
    /// How long after sending its last successful renew a leader keeps acting.
    pub renew_deadline: Duration,
    /// How often the leader renews.
    pub retry_period: Duration,
    /// The least [`stop_margin`](Self::stop_margin) accepted.
    pub min_stop_margin: Duration,
}

impl Default for Timings {
    fn default() -> Self {
        Self::DEFAULT
    }
}

impl Timings {
    /// client-go's and controller-runtime's defaults: lease 15 s, renew 10 s, retry 2 s; least stop margin
    /// 1 s.
    pub const DEFAULT: Timings = Timings::new(
        Duration::from_secs(15),
        Duration::from_secs(10),
        Duration::from_secs(2),
    );

    /// These timings with the default least stop margin (1 s).
    pub const fn new(lease_duration: Duration, renew_deadline: Duration, retry_period: Duration) -> Self {
        Self {
            lease_duration,
            renew_deadline,
            retry_period,
            min_stop_margin: Duration::from_secs(1),
        }
    }

    /// Sets the least accepted stop margin.
    #[must_use]
    pub const fn with_min_stop_margin(mut self, margin: Duration) -> Self {
        self.min_stop_margin = margin;
        self
    }

    /// `lease_duration − renew_deadline`: how long, after a leader's term ends by the clock, before another
    /// candidate can acquire. Leader work must have stopped within it.
    pub fn stop_margin(&self) -> Duration {
        self.lease_duration.saturating_sub(self.renew_deadline)
    }

    /// `lease_duration` in whole seconds, as written to `leaseDurationSeconds`.
    pub fn lease_duration_seconds(&self) -> i32 {
        // Validation guarantees 1 ..= 3600 whole seconds.
        i32::try_from(self.lease_duration.as_secs()).unwrap_or(i32::MAX)
    }

    /// The timeout applied to each API request: `max(1 s, renew_deadline / 2)`, as client-go's
    /// `NewFromKubeconfig` sets it. It is separate from the renew budget.
    pub fn request_timeout(&self) -> Duration {
        (self.renew_deadline / 2).max(Duration::from_secs(1))
    }

    /// Checks every rule, in the order the module docs list them. Each error names the field.
    pub fn validate(&self) -> Result<(), ConfigError> {
        for (field, value) in [
            ("lease_duration", self.lease_duration),
            ("renew_deadline", self.renew_deadline),
            ("retry_period", self.retry_period),
        ] {
            if value.is_zero() {
                return Err(ConfigError::NotPositive { field });
            }
        }
        if self.lease_duration.subsec_nanos() != 0 || self.lease_duration > MAX_LEASE_DURATION {
            return Err(ConfigError::LeaseDurationSeconds {
                got: self.lease_duration,
                max: MAX_LEASE_DURATION,
            });
        }
        if self.lease_duration <= self.renew_deadline {
            return Err(ConfigError::LeaseNotAboveRenew {
                lease: self.lease_duration,
                renew: self.renew_deadline,
            });
        }
        let jittered = self.retry_period.mul_f64(JITTER_FACTOR);
        if self.renew_deadline <= jittered {
            return Err(ConfigError::RenewNotAboveJitteredRetry {
                renew: self.renew_deadline,
                retry: self.retry_period,
                jittered,
            });
        }
        if self.stop_margin() < self.min_stop_margin {
            return Err(ConfigError::StopMarginTooSmall {
                margin: self.stop_margin(),
                min_stop_margin: self.min_stop_margin,
            });
        }
        Ok(())
    }
}

/// `--lease-duration`, `--renew-deadline` and `--retry-period`, for a binary to flatten into its clap
/// parser with `#[command(flatten)]`. Each is optional: [`TimingFlags::over`] takes the binary's default
/// for what was not given.
#[cfg(feature = "clap")]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::Args)]
pub struct TimingFlags {
    /// How long standbys wait after the last observed renewal before taking over (e.g. 15s).
    #[arg(long, value_parser = crate::duration::parse_duration, value_name = "DURATION")]
    pub lease_duration: Option<Duration>,

    /// How long the leader keeps its term without a successful renewal (e.g. 10s).
    #[arg(long, value_parser = crate::duration::parse_duration, value_name = "DURATION")]
    pub renew_deadline: Option<Duration>,

    /// Time between election attempts (e.g. 2s).
    #[arg(long, value_parser = crate::duration::parse_duration, value_name = "DURATION")]
    pub retry_period: Option<Duration>,
}

#[cfg(feature = "clap")]
impl TimingFlags {
    /// The flag's name (without dashes) for a [`ConfigError`] about a timing, so a binary can say which
    /// flag to change; `None` for errors that are not about a timing.
    pub fn flag_of(e: &ConfigError) -> Option<&'static str> {
        Some(match e {
            ConfigError::NotPositive {
                field: "renew_deadline",
            }
            | ConfigError::LeaseNotAboveRenew { .. } => "renew-deadline",
            ConfigError::NotPositive {
                field: "retry_period",
            }
            | ConfigError::RenewNotAboveJitteredRetry { .. } => "retry-period",
            ConfigError::NotPositive { .. }
            | ConfigError::LeaseDurationSeconds { .. }
            | ConfigError::StopMarginTooSmall { .. } => "lease-duration",
            _ => return None,
        })
    }

    /// The given flags over `defaults` (unvalidated; call [`Timings::validate`]).
    pub fn over(&self, defaults: Timings) -> Timings {
        Timings {
            lease_duration: self.lease_duration.unwrap_or(defaults.lease_duration),
            renew_deadline: self.renew_deadline.unwrap_or(defaults.renew_deadline),
            retry_period: self.retry_period.unwrap_or(defaults.retry_period),
            min_stop_margin: defaults.min_stop_margin,
        }
    }

    /// Writes `defaults` into a clap command's help text, so `--help` shows the binary's values.
    pub fn show_defaults(cmd: clap::Command, defaults: &Timings) -> clap::Command {
        use crate::duration::format_duration;
        [
            ("lease_duration", defaults.lease_duration),
            ("renew_deadline", defaults.renew_deadline),
            ("retry_period", defaults.retry_period),
        ]
        .into_iter()
        .fold(cmd, |cmd, (id, value)| {
            cmd.mut_arg(id, |arg| {
                let about = arg.get_help().map(ToString::to_string).unwrap_or_default();
                arg.help(format!("{about} [default: {}]", format_duration(value)))
            })
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn err(f: impl FnOnce(&mut Timings)) -> ConfigError {
        let mut t = Timings::DEFAULT;
        f(&mut t);
        match t.validate() {
            Err(e) => e,
            Ok(()) => panic!("timings {t:?} should be rejected"),
        }
    }

    #[test]
    fn defaults_and_crossplane_timings_are_valid() {
        assert_eq!(Timings::DEFAULT.validate(), Ok(()));
        assert_eq!(Timings::default(), Timings::DEFAULT);
        let mut t = Timings::new(
            Duration::from_secs(60),
            Duration::from_secs(50),
            Duration::from_secs(2),
        );
        assert_eq!(t.validate(), Ok(()));
        t.retry_period = Duration::from_secs(10);
        assert_eq!(t.validate(), Ok(()));
        assert_eq!(t.stop_margin(), Duration::from_secs(10));
    }

    #[test]
    fn zero_durations_are_rejected_by_name() {
        assert_eq!(
            err(|t| t.lease_duration = Duration::ZERO).to_string(),
            "lease_duration must be greater than zero"
        );
        assert_eq!(
            err(|t| t.renew_deadline = Duration::ZERO).to_string(),
            "renew_deadline must be greater than zero"
        );
        assert_eq!(
            err(|t| t.retry_period = Duration::ZERO).to_string(),
            "retry_period must be greater than zero"
        );
    }

    #[test]
    fn lease_must_be_whole_seconds_within_bounds() {
        let e = err(|t| t.lease_duration = Duration::from_millis(15_500));
        assert!(matches!(e, ConfigError::LeaseDurationSeconds { .. }));
        assert!(
            e.to_string()
                .starts_with("lease_duration must be a whole number of seconds")
        );
        let e = err(|t| t.lease_duration = Duration::from_secs(3601));
        assert!(matches!(e, ConfigError::LeaseDurationSeconds { .. }));
        let mut t = Timings::DEFAULT;
        t.lease_duration = MAX_LEASE_DURATION;
        assert_eq!(t.validate(), Ok(()));
    }

    #[test]
    fn lease_must_exceed_renew() {
        let e = err(|t| t.renew_deadline = Duration::from_secs(15));
        assert!(matches!(e, ConfigError::LeaseNotAboveRenew { .. }));
        assert_eq!(
            e.to_string(),
            "lease_duration (15s) must be greater than renew_deadline (15s)"
        );
    }

    #[test]
    fn renew_must_exceed_jittered_retry() {
        // 1.2 × 2s = 2.4s: renew 2.4s is rejected, 2.5s accepted (with a bigger lease for the margin).
        let e = err(|t| t.renew_deadline = Duration::from_millis(2400));
        assert!(matches!(e, ConfigError::RenewNotAboveJitteredRetry { .. }), "{e}");
        assert!(
            e.to_string()
                .starts_with("renew_deadline (2.4s) must be greater than 1.2 × retry_period")
        );
        let mut t = Timings::DEFAULT;
        t.renew_deadline = Duration::from_millis(2500);
        assert_eq!(t.validate(), Ok(()));
    }

    #[test]
    fn stop_margin_must_cover_its_minimum() {
        let e = err(|t| {
            t.lease_duration = Duration::from_secs(11);
            t.renew_deadline = Duration::from_millis(10_500);
        });
        assert_eq!(
            e,
            ConfigError::StopMarginTooSmall {
                margin: Duration::from_millis(500),
                min_stop_margin: Duration::from_secs(1)
            }
        );
        assert!(e.to_string().contains("min_stop_margin"));
        let t = Timings::DEFAULT.with_min_stop_margin(Duration::from_secs(6));
        assert!(matches!(
            t.validate(),
            Err(ConfigError::StopMarginTooSmall { .. })
        ));
        let t = Timings::DEFAULT.with_min_stop_margin(Duration::from_secs(5));
        assert_eq!(t.validate(), Ok(()));
    }

    #[test]
    fn request_timeout_is_half_renew_at_least_one_second() {
        let mut t = Timings::DEFAULT;
        assert_eq!(t.request_timeout(), Duration::from_secs(5));
        t.renew_deadline = Duration::from_millis(1500);
        assert_eq!(t.request_timeout(), Duration::from_secs(1));
        assert_eq!(t.lease_duration_seconds(), 15);
    }

    #[cfg(feature = "clap")]
    #[test]
    fn flags_fall_back_to_defaults_and_errors_name_their_flag() {
        let flags = TimingFlags {
            renew_deadline: Some(Duration::from_secs(12)),
            ..TimingFlags::default()
        };
        let t = flags.over(Timings::DEFAULT.with_min_stop_margin(Duration::from_secs(2)));
        assert_eq!(t.lease_duration, Duration::from_secs(15));
        assert_eq!(t.renew_deadline, Duration::from_secs(12));
        assert_eq!(t.min_stop_margin, Duration::from_secs(2));
        let flag = |f: fn(&mut Timings)| TimingFlags::flag_of(&err(f));
        assert_eq!(
            flag(|t| t.renew_deadline = t.lease_duration),
            Some("renew-deadline")
        );
        assert_eq!(
            flag(|t| t.retry_period = Duration::from_secs(9)),
            Some("retry-period")
        );
        assert_eq!(flag(|t| t.retry_period = Duration::ZERO), Some("retry-period"));
        assert_eq!(
            flag(|t| t.lease_duration = Duration::from_secs(7200)),
            Some("lease-duration")
        );
        assert_eq!(
            flag(|t| t.lease_duration = Duration::from_secs(10)),
            Some("renew-deadline")
        );
        assert_eq!(TimingFlags::flag_of(&ConfigError::ReservedIdentity), None);
    }
}
