//! Kubernetes quantities (`resource.ParseQuantity`) as approximate float64s, for the
//! `convert` transform's format `quantity`.
//!
//! Grammar: `[+-]digits[.digits]` then a suffix: a binary SI suffix (`Ki` … `Ei`), a
//! decimal SI suffix (`n u m "" k M G T P E`) or a decimal exponent (`e3`, `E-2`).

const FORMAT_WRONG: &str =
    "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'";
const SUFFIX_WRONG: &str = "unable to parse quantity's suffix";

/// Parses a quantity into its approximate value.
pub(super) fn parse(s: &str) -> Result<f64, String> {
    if s.is_empty() {
        return Err(FORMAT_WRONG.to_owned());
    }
    let unsigned = s.strip_prefix(['+', '-']).unwrap_or(s);
    let negative = s.starts_with('-');
    let number_len = unsigned
        .bytes()
        .take_while(|b| b.is_ascii_digit() || *b == b'.')
        .count();
    let number = unsigned.get(..number_len).unwrap_or_default();
    let suffix = unsigned.get(number_len..).unwrap_or_default();
    let valid_number =
        number.bytes().filter(|b| *b == b'.').count() <= 1 && number.bytes().any(|b| b.is_ascii_digit());
    let valid_suffix_chars = {
        let letters = suffix.bytes().take_while(|b| b"eEinumkKMGTP".contains(b)).count();
        let rest = suffix.get(letters..).unwrap_or_default();
        let rest = rest.strip_prefix(['+', '-']).unwrap_or(rest);
        rest.bytes().all(|b| b.is_ascii_digit())
    };
    if !valid_number || !valid_suffix_chars {
        return Err(FORMAT_WRONG.to_owned());
    }
    let mantissa: f64 = number.parse().map_err(|_| FORMAT_WRONG.to_owned())?;
    let multiplier = match suffix {
        "" => 1.0,
        "n" => 1e-9,
        "u" => 1e-6,
        "m" => 1e-3,
        "k" => 1e3,
        "M" => 1e6,
        "G" => 1e9,
        "T" => 1e12,
        "P" => 1e15,
        "E" => 1e18,
        "Ki" => 1024f64,
        "Mi" => 1024f64.powi(2),
        "Gi" => 1024f64.powi(3),
        "Ti" => 1024f64.powi(4),
        "Pi" => 1024f64.powi(5),
        "Ei" => 1024f64.powi(6),
        other => {
            let exp = other
                .strip_prefix(['e', 'E'])
                .and_then(|e| e.parse::<i32>().ok())
                .ok_or_else(|| SUFFIX_WRONG.to_owned())?;
            10f64.powi(exp)
        }
    };
    let value = mantissa * multiplier;
    Ok(if negative { -value } else { value })
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    // Kubernetes quantity examples.
    #[test]
    fn parses_quantities() {
        for (s, want) in [
            ("1", 1.0),
            ("-1.5", -1.5),
            ("100m", 0.1),
            ("2Gi", 2.0 * 1024.0 * 1024.0 * 1024.0),
            ("1k", 1000.0),
            ("5E", 5e18),
            ("1e3", 1000.0),
            ("1E-2", 0.01),
            ("+.5", 0.5),
        ] {
            let got = parse(s).unwrap();
            assert!((got - want).abs() <= want.abs() * 1e-12, "{s}: {got}");
        }
    }

    #[test]
    fn rejects_bad_quantities() {
        assert_eq!(parse("").unwrap_err(), FORMAT_WRONG);
        assert_eq!(parse("abc").unwrap_err(), FORMAT_WRONG);
        assert_eq!(parse("1.2.3").unwrap_err(), FORMAT_WRONG);
        assert_eq!(parse("1 Gi").unwrap_err(), FORMAT_WRONG);
        assert_eq!(parse("1Ki2").unwrap_err(), SUFFIX_WRONG);
        assert_eq!(parse("1Q").unwrap_err(), FORMAT_WRONG);
    }
}
