//! Go duration strings (`metav1.Duration`, `crossplane.io/poll-interval`): `300ms`, `1.5h`, `2h45m`.

use std::time::Duration;

/// A string that is not a Go duration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InvalidDuration(pub String);

impl std::fmt::Display for InvalidDuration {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "invalid duration {:?}", self.0)
    }
}

impl std::error::Error for InvalidDuration {}

/// Parses a Go duration. Negative durations are rejected; `"0"` is zero.
pub fn parse_go_duration(s: &str) -> Result<Duration, InvalidDuration> {
    let err = || InvalidDuration(s.to_owned());
    let t = s.trim();
    if t == "0" {
        return Ok(Duration::ZERO);
    }
    let t = t.strip_prefix('+').unwrap_or(t);
    if t.is_empty() || t.starts_with('-') {
        return Err(err());
    }
    let mut rest = t;
    let mut total = 0f64;
    while !rest.is_empty() {
        let num_len = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .ok_or_else(err)?;
        if num_len == 0 {
            return Err(err());
        }
        let value: f64 = rest[..num_len].parse().map_err(|_| err())?;
        rest = &rest[num_len..];
        let unit_len = rest
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(rest.len());
        let seconds = match &rest[..unit_len] {
            "ns" => 1e-9,
            "us" | "µs" | "μs" => 1e-6,
            "ms" => 1e-3,
            "s" => 1.0,
            "m" => 60.0,
            "h" => 3600.0,
            _ => return Err(err()),
        };
        rest = &rest[unit_len..];
        total += value * seconds;
    }
    Duration::try_from_secs_f64(total).map_err(|_| err())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_go_durations() {
        assert_eq!(parse_go_duration("10s"), Ok(Duration::from_secs(10)));
        assert_eq!(parse_go_duration("1m30s"), Ok(Duration::from_secs(90)));
        assert_eq!(parse_go_duration("1.5h"), Ok(Duration::from_secs(5400)));
        assert_eq!(parse_go_duration("250ms"), Ok(Duration::from_millis(250)));
        assert_eq!(parse_go_duration("0"), Ok(Duration::ZERO));
        assert!(parse_go_duration("10").is_err());
        assert!(parse_go_duration("-1s").is_err());
        assert!(parse_go_duration("1x").is_err());
        assert!(parse_go_duration("").is_err());
    }
}
