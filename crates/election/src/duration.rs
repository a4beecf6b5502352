//! Durations on the command line: `15s`, `500ms`, `1m30s`, `1.5s`.
//!
//! The grammar is Go's `time.ParseDuration` (what Crossplane's and controller-runtime's flags accept):
//! one or more `<decimal><unit>` pairs with units `ns`, `us`/`µs`, `ms`, `s`, `m`, `h`. A bare `0` is
//! accepted too. Negative durations are rejected: no timing here can be negative. A small parser avoids
//! another dependency for thirty lines of code. It lives in `election`, the lowest crate whose flags
//! (the timings) take Go durations; `manager::duration` re-exports it for every other flag.

use std::time::Duration;

/// Why a duration did not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid duration {input:?}: {reason} (examples: 15s, 500ms, 1m30s)")]
pub struct ParseDurationError {
    input: String,
    reason: &'static str,
}

/// Parses a Go-style duration such as `15s`, `500ms` or `1m30s`.
pub fn parse_duration(input: &str) -> Result<Duration, ParseDurationError> {
    let fail = |reason| ParseDurationError {
        input: input.to_owned(),
        reason,
    };
    let s = input.trim();
    if s.is_empty() {
        return Err(fail("empty"));
    }
    if s.starts_with('-') {
        return Err(fail("must not be negative"));
    }
    let s = s.strip_prefix('+').unwrap_or(s);
    if s == "0" {
        return Ok(Duration::ZERO);
    }
    let mut rest = s;
    let mut total_nanos: u128 = 0;
    while !rest.is_empty() {
        let number_len = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        if number_len == 0 {
            return Err(fail("expected a number"));
        }
        let (number, after) = rest.split_at(number_len);
        let unit_len = after
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(after.len());
        let (unit, after) = after.split_at(unit_len);
        let unit_nanos: u128 = match unit {
            "ns" => 1,
            "us" | "µs" | "μs" => 1_000,
            "ms" => 1_000_000,
            "s" => 1_000_000_000,
            "m" => 60 * 1_000_000_000,
            "h" => 3_600 * 1_000_000_000,
            "" => return Err(fail("missing unit")),
            _ => return Err(fail("unknown unit")),
        };
        total_nanos = total_nanos
            .checked_add(scale(number, unit_nanos).ok_or_else(|| fail("bad number"))?)
            .ok_or_else(|| fail("too large"))?;
        rest = after;
    }
    let secs = u64::try_from(total_nanos / 1_000_000_000).map_err(|_| fail("too large"))?;
    // The remainder is below 1e9 and fits in u32.
    let nanos = u32::try_from(total_nanos % 1_000_000_000).map_err(|_| fail("too large"))?;
    Ok(Duration::new(secs, nanos))
}

/// `number` (digits with at most one dot) times `unit_nanos`, rounded down to whole nanoseconds.
fn scale(number: &str, unit_nanos: u128) -> Option<u128> {
    let (whole, frac) = number.split_once('.').unwrap_or((number, ""));
    if whole.is_empty() && frac.is_empty() || frac.contains('.') {
        return None;
    }
    let whole: u128 = if whole.is_empty() { 0 } else { whole.parse().ok()? };
    let mut nanos = whole.checked_mul(unit_nanos)?;
    let mut place = unit_nanos;
    for digit in frac.chars() {
        place /= 10;
        nanos = nanos.checked_add(u128::from(digit.to_digit(10)?) * place)?;
    }
    Some(nanos)
}

/// Formats a duration the way it is written on the command line (`15s`, `1.5s`, `500ms`).
pub fn format_duration(d: Duration) -> String {
    if d.is_zero() {
        return "0s".to_owned();
    }
    if d.subsec_nanos() == 0 {
        return format!("{}s", d.as_secs());
    }
    if d < Duration::from_secs(1) && d.subsec_nanos().is_multiple_of(1_000_000) {
        return format!("{}ms", d.as_millis());
    }
    format!("{}s", d.as_secs_f64())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_go_durations() {
        let ok = [
            ("15s", Duration::from_secs(15)),
            ("500ms", Duration::from_millis(500)),
            ("1m30s", Duration::from_secs(90)),
            ("1.5s", Duration::from_millis(1500)),
            ("2h", Duration::from_secs(7200)),
            ("0", Duration::ZERO),
            ("0s", Duration::ZERO),
            ("10us", Duration::from_micros(10)),
            ("7ns", Duration::from_nanos(7)),
            (".5s", Duration::from_millis(500)),
        ];
        for (input, want) in ok {
            assert_eq!(parse_duration(input), Ok(want), "{input}");
        }
    }

    #[test]
    fn rejects_bad_durations() {
        for input in [
            "",
            "15",
            "s",
            "-1s",
            "1x",
            "1..5s",
            "1.2.3s",
            "abc",
            "99999999999999999999h",
        ] {
            assert!(parse_duration(input).is_err(), "{input} should fail");
        }
    }

    #[test]
    fn formats_round_trip() {
        for d in [
            Duration::from_secs(15),
            Duration::from_millis(500),
            Duration::from_millis(1500),
        ] {
            assert_eq!(parse_duration(&format_duration(d)), Ok(d));
        }
    }
}
