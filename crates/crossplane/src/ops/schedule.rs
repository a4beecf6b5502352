//! A CronOperation's schedule: parsing the cron pattern (five fields or a nickname such as `@hourly`,
//! as upstream's standard parser; evaluated in UTC by the `croner` crate) and deciding, from the last
//! scheduled time and now, whether an Operation is due ([`decide`]), as upstream's reconciler does:
//!
//! - the next run is the first time of the schedule after the last run (or the CronOperation's
//!   creation);
//! - while it is in the future, wait for it;
//! - when it is more than `startingDeadlineSeconds` late, skip it and wait for the next one after now;
//! - otherwise run it now, then wait for the next one after now.

use croner::Cron;
use croner::parser::{CronParser, Seconds};
use jiff::Timestamp;
use jiff::tz::TimeZone;

/// Why a schedule cannot be used, in words.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ScheduleError {
    /// The pattern does not parse.
    #[error(
        "cannot parse cron schedule {schedule:?}: {reason}; a schedule has five fields (minute, hour, \
         day of month, month, day of week), e.g. \"*/5 * * * *\", or is a nickname such as @hourly"
    )]
    Invalid {
        /// The pattern.
        schedule: String,
        /// What the parser said.
        reason: String,
    },
    /// The pattern never matches after a time.
    #[error("cron schedule {schedule:?} has no time after {after}")]
    Never {
        /// The pattern.
        schedule: String,
        /// The time.
        after: Timestamp,
    },
}

/// A parsed cron schedule.
#[derive(Debug, Clone)]
pub struct Schedule {
    text: String,
    cron: Cron,
}

impl Schedule {
    /// Parses `text`: five fields (no seconds) or a nickname.
    pub fn parse(text: &str) -> Result<Self, ScheduleError> {
        let invalid = |reason: String| ScheduleError::Invalid {
            schedule: text.to_owned(),
            reason,
        };
        if text.trim().is_empty() {
            return Err(invalid("the schedule is empty".into()));
        }
        let parser = CronParser::builder().seconds(Seconds::Disallowed).build();
        let cron = parser.parse(text).map_err(|e| invalid(e.to_string()))?;
        Ok(Self {
            text: text.to_owned(),
            cron,
        })
    }

    /// The first time of the schedule strictly after `after`.
    pub fn next_after(&self, after: Timestamp) -> Result<Timestamp, ScheduleError> {
        let zoned = after.to_zoned(TimeZone::UTC);
        self.cron
            .find_next_occurrence(&zoned, false)
            .map(|z| z.timestamp())
            .map_err(|_| ScheduleError::Never {
                schedule: self.text.clone(),
                after,
            })
    }
}

/// What to do now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Due {
    /// Nothing is due before this time.
    Wait(Timestamp),
    /// The run scheduled at `scheduled` is past its starting deadline: skip it; the next is at `next`.
    Missed {
        /// The skipped run's time.
        scheduled: Timestamp,
        /// The next run after now.
        next: Timestamp,
    },
    /// Start the run scheduled at `scheduled` now; the next is at `next`.
    Run {
        /// The run's scheduled time (it names the Operation).
        scheduled: Timestamp,
        /// The next run after now.
        next: Timestamp,
    },
}

/// Whether a run of `schedule` is due at `now`, the last run having been at `last`, with an optional
/// starting deadline in seconds.
pub fn decide(
    schedule: &Schedule,
    last: Timestamp,
    now: Timestamp,
    deadline_seconds: Option<i64>,
) -> Result<Due, ScheduleError> {
    let scheduled = schedule.next_after(last)?;
    if scheduled > now {
        return Ok(Due::Wait(scheduled));
    }
    let next = schedule.next_after(now)?;
    if let Some(secs) = deadline_seconds {
        let late = now.duration_since(scheduled);
        if late > jiff::SignedDuration::from_secs(secs.max(0)) {
            return Ok(Due::Missed { scheduled, next });
        }
    }
    Ok(Due::Run { scheduled, next })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(s: &str) -> Timestamp {
        s.parse().expect("timestamp")
    }

    #[test]
    fn every_minute_is_due_on_the_next_minute() {
        let s = Schedule::parse("* * * * *").expect("parses");
        assert_eq!(
            s.next_after(at("2026-01-01T10:00:30Z")).ok(),
            Some(at("2026-01-01T10:01:00Z"))
        );
        assert_eq!(
            s.next_after(at("2026-01-01T10:01:00Z")).ok(),
            Some(at("2026-01-01T10:02:00Z"))
        );
        let hourly = Schedule::parse("@hourly").expect("nickname");
        assert_eq!(
            hourly.next_after(at("2026-01-01T10:00:30Z")).ok(),
            Some(at("2026-01-01T11:00:00Z"))
        );
        let five = Schedule::parse("*/5 3 * * *").expect("steps");
        assert_eq!(
            five.next_after(at("2026-01-01T10:00:00Z")).ok(),
            Some(at("2026-01-02T03:00:00Z"))
        );
    }

    #[test]
    fn decides_wait_run_and_missed_as_upstream() {
        let s = Schedule::parse("* * * * *").expect("parses");
        let last = at("2026-01-01T10:00:10Z");
        assert_eq!(
            decide(&s, last, at("2026-01-01T10:00:50Z"), None),
            Ok(Due::Wait(at("2026-01-01T10:01:00Z")))
        );
        assert_eq!(
            decide(&s, last, at("2026-01-01T10:01:05Z"), Some(30)),
            Ok(Due::Run {
                scheduled: at("2026-01-01T10:01:00Z"),
                next: at("2026-01-01T10:02:00Z")
            })
        );
        assert_eq!(
            decide(&s, last, at("2026-01-01T10:01:45Z"), Some(30)),
            Ok(Due::Missed {
                scheduled: at("2026-01-01T10:01:00Z"),
                next: at("2026-01-01T10:02:00Z")
            })
        );
        // Without a deadline a late run still starts.
        assert!(matches!(
            decide(&s, last, at("2026-01-01T10:05:45Z"), None),
            Ok(Due::Run { .. })
        ));
    }

    #[test]
    fn an_invalid_schedule_says_why_in_words() {
        for bad in ["", "every minute", "61 * * * *", "* * * *", "0 * * * * *"] {
            let e = Schedule::parse(bad).expect_err(bad).to_string();
            assert!(e.starts_with("cannot parse cron schedule"), "{bad}: {e}");
            assert!(e.contains("five fields"), "{bad}: {e}");
            assert!(!e.contains("InvalidPattern") && !e.contains("{"), "{bad}: {e}");
        }
    }
}
