//! Time formats on the wire.
//!
//! - Lease times are `metav1.MicroTime`: RFC 3339 with exactly six fractional digits in UTC, e.g.
//!   `2026-07-24T10:15:30.123456Z` (apimachinery `RFC3339Micro`). Sub-microsecond digits are truncated,
//!   as Go's formatting truncates.
//! - ConfigMap annotation records use `metav1.Time`: RFC 3339 in whole seconds, UTC, e.g.
//!   `2026-07-24T10:15:30Z`.
//!
//! Parsing is lenient: any RFC 3339 timestamp (any number of fractional digits, any offset) is
//! accepted; anything else — missing, `null`, a number, garbage — reads as "no time". Remote times are
//! never used for decisions (expiry is judged by local observation), so an unreadable time only matters
//! for what the next write preserves: a leader renewing a record whose `acquireTime` is unreadable writes
//! the current time instead.

use jiff::Timestamp;
use serde_json::Value;

/// Formats `ts` as a `MicroTime`: `YYYY-MM-DDTHH:MM:SS.ffffffZ`.
pub(crate) fn format_micro(ts: Timestamp) -> String {
    jiff::fmt::strtime::format("%Y-%m-%dT%H:%M:%S%.6fZ", ts).unwrap_or_else(|_| ts.to_string())
}

/// Formats `ts` as a `metav1.Time`: `YYYY-MM-DDTHH:MM:SSZ`.
pub(crate) fn format_seconds(ts: Timestamp) -> String {
    jiff::fmt::strtime::format("%Y-%m-%dT%H:%M:%SZ", ts).unwrap_or_else(|_| ts.to_string())
}

/// Parses an RFC 3339 timestamp; `None` for anything unreadable.
pub(crate) fn parse(s: &str) -> Option<Timestamp> {
    s.trim().parse::<Timestamp>().ok()
}

/// Parses a JSON value holding a time; `None` unless it is a readable RFC 3339 string.
pub(crate) fn parse_value(v: Option<&Value>) -> Option<Timestamp> {
    v.and_then(Value::as_str).and_then(parse)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ts(s: &str) -> Timestamp {
        s.parse().expect("test timestamp")
    }

    #[test]
    fn micro_has_exactly_six_digits_in_utc() {
        assert_eq!(
            format_micro(ts("2026-07-24T10:15:30.123456789Z")),
            "2026-07-24T10:15:30.123456Z"
        );
        assert_eq!(
            format_micro(ts("2026-07-24T10:15:30Z")),
            "2026-07-24T10:15:30.000000Z"
        );
        assert_eq!(
            format_micro(ts("2026-07-24T12:15:30.5+02:00")),
            "2026-07-24T10:15:30.500000Z"
        );
        // Truncates rather than rounds, like Go.
        assert_eq!(
            format_micro(ts("2026-12-31T23:59:59.9999999Z")),
            "2026-12-31T23:59:59.999999Z"
        );
    }

    #[test]
    fn seconds_format_drops_fraction() {
        assert_eq!(
            format_seconds(ts("2026-07-24T10:15:30.987Z")),
            "2026-07-24T10:15:30Z"
        );
        assert_eq!(
            format_seconds(ts("2026-07-24T11:15:30-01:00")),
            "2026-07-24T12:15:30Z"
        );
    }

    #[test]
    fn round_trips() {
        let now = Timestamp::now();
        let micro = parse(&format_micro(now)).expect("parse micro");
        assert_eq!(micro.as_microsecond(), now.as_microsecond());
        let secs = parse(&format_seconds(now)).expect("parse seconds");
        assert_eq!(secs.as_second(), now.as_second());
    }

    #[test]
    fn lenient_parse() {
        assert_eq!(parse("2026-07-24T10:15:30Z"), Some(ts("2026-07-24T10:15:30Z")));
        assert_eq!(
            parse("2026-07-24T10:15:30.1Z"),
            Some(ts("2026-07-24T10:15:30.1Z"))
        );
        assert_eq!(
            parse(" 2026-07-24T10:15:30.123456Z "),
            Some(ts("2026-07-24T10:15:30.123456Z"))
        );
        for garbage in ["", "yesterday", "2026-13-40T99:99:99Z", "1690000000", "null"] {
            assert_eq!(parse(garbage), None, "{garbage:?}");
        }
        assert_eq!(parse_value(None), None);
        assert_eq!(parse_value(Some(&Value::Null)), None);
        assert_eq!(parse_value(Some(&serde_json::json!(12))), None);
        assert_eq!(
            parse_value(Some(&serde_json::json!("2026-07-24T10:15:30Z"))),
            Some(ts("2026-07-24T10:15:30Z"))
        );
    }
}
