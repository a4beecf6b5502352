//! Go's integer and float formatting (`fmt` on top of `strconv`).

use super::Spec;
use super::print::{pad, pad_number};

/// Formats an `int64`; false if the verb does not apply to integers.
pub(super) fn fmt_integer(out: &mut String, spec: &Spec, i: i64, verb: char) -> bool {
    let (base, upper, prefix) = match verb {
        'v' | 'd' => (10, false, ""),
        'b' => (2, false, "0b"),
        'o' => (8, false, "0"),
        'O' => (8, false, "0o"),
        'x' => (16, false, "0x"),
        'X' => (16, true, "0X"),
        'c' => {
            let c = u32::try_from(i)
                .ok()
                .and_then(char::from_u32)
                .unwrap_or('\u{fffd}');
            pad(out, spec, &c.to_string());
            return true;
        }
        'q' => {
            let c = u32::try_from(i)
                .ok()
                .and_then(char::from_u32)
                .unwrap_or('\u{fffd}');
            let quoted = super::quote(&c.to_string());
            let inner = quoted.get(1..quoted.len().saturating_sub(1)).unwrap_or_default();
            let inner = if c == '\'' {
                "\\'".to_owned()
            } else {
                inner.replace("\\\"", "\"")
            };
            pad(out, spec, &format!("'{inner}'"));
            return true;
        }
        'U' => {
            let mut s = format!("U+{:04X}", i.unsigned_abs());
            if spec.sharp
                && let Some(c) = u32::try_from(i).ok().and_then(char::from_u32)
            {
                s.push_str(&format!(" '{c}'"));
            }
            pad(out, spec, &s);
            return true;
        }
        _ => return false,
    };
    let magnitude = i.unsigned_abs();
    let mut digits = match base {
        2 => format!("{magnitude:b}"),
        8 => format!("{magnitude:o}"),
        16 if upper => format!("{magnitude:X}"),
        16 => format!("{magnitude:x}"),
        _ => magnitude.to_string(),
    };
    if let Some(p) = spec.prec {
        if p == 0 && magnitude == 0 {
            digits.clear();
        } else if digits.len() < p {
            digits = format!("{}{digits}", "0".repeat(p - digits.len()));
        }
    }
    let with_prefix = (spec.sharp && base != 10) || verb == 'O';
    if with_prefix && !(verb == 'o' && digits.starts_with('0')) {
        digits = format!("{prefix}{digits}");
    }
    let sign = if i < 0 {
        "-"
    } else if spec.plus {
        "+"
    } else if spec.space {
        " "
    } else {
        ""
    };
    // A precision disables zero padding, as in Go.
    let spec = Spec {
        zero: spec.zero && spec.prec.is_none(),
        ..*spec
    };
    pad_number(out, &spec, sign, &digits);
    true
}

/// Formats a `float64`; false if the verb does not apply to floats.
pub(super) fn fmt_float(out: &mut String, spec: &Spec, f: f64, verb: char) -> bool {
    let abs = f.abs();
    let body = match verb {
        'v' | 'g' | 'G' => {
            let s = fmt_g(abs, spec.prec);
            if verb == 'G' { s.to_uppercase() } else { s }
        }
        'f' | 'F' => format!("{:.*}", spec.prec.unwrap_or(6), abs),
        'e' | 'E' => {
            let s = fmt_e_prec(abs, spec.prec.unwrap_or(6));
            if verb == 'E' { s.to_uppercase() } else { s }
        }
        _ => return false,
    };
    let sign = if f.is_sign_negative() {
        "-"
    } else if spec.plus || spec.plus_v {
        "+"
    } else if spec.space {
        " "
    } else {
        ""
    };
    pad_number(out, spec, sign, &body);
    true
}

/// Decimal digits (no leading zeros, at least one) and the decimal point position, as
/// strconv's `decimalSlice`: value = 0.d1d2d3... × 10^dp.
struct Digits {
    d: Vec<u8>,
    dp: i32,
}

/// Parses Rust's `{:e}` output, `d.ddde±x`, into digits.
fn digits_from_exp(s: &str) -> Digits {
    let (mantissa, exp) = s.split_once('e').unwrap_or((s, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    let mut d: Vec<u8> = mantissa.bytes().filter(u8::is_ascii_digit).collect();
    if d.is_empty() {
        d.push(b'0');
    }
    Digits { d, dp: exp + 1 }
}

fn trim_trailing_zeros(d: &mut Digits) {
    while d.d.len() > 1 && d.d.last() == Some(&b'0') {
        d.d.pop();
    }
}

/// strconv `%e` from digits with `prec` fractional digits.
fn fmt_e(d: &Digits, prec: usize) -> String {
    let mut s = String::new();
    s.push(char::from(*d.d.first().unwrap_or(&b'0')));
    if prec > 0 {
        s.push('.');
        for i in 1..=prec {
            s.push(char::from(*d.d.get(i).unwrap_or(&b'0')));
        }
    }
    let exp = if d.d.iter().all(|b| *b == b'0') {
        0
    } else {
        d.dp - 1
    };
    s.push('e');
    s.push(if exp < 0 { '-' } else { '+' });
    let e = exp.unsigned_abs();
    if e < 10 {
        s.push('0');
    }
    s.push_str(&e.to_string());
    s
}

/// strconv `%f` from digits with `prec` fractional digits.
fn fmt_f(d: &Digits, prec: usize) -> String {
    let mut s = String::new();
    let digit = |i: i64| -> char {
        usize::try_from(i)
            .ok()
            .and_then(|i| d.d.get(i))
            .map_or('0', |b| char::from(*b))
    };
    if d.dp > 0 {
        for i in 0..i64::from(d.dp) {
            s.push(digit(i));
        }
    } else {
        s.push('0');
    }
    if prec > 0 {
        s.push('.');
        for j in 0..prec {
            s.push(digit(i64::from(d.dp) + j as i64));
        }
    }
    s
}

fn fmt_e_prec(abs: f64, prec: usize) -> String {
    let d = digits_from_exp(&format!("{:.*e}", prec, abs));
    fmt_e(&d, prec)
}

/// strconv `%g`: shortest digits when `prec` is `None`.
fn fmt_g(abs: f64, prec: Option<usize>) -> String {
    let (d, eprec, prec) = match prec {
        None => {
            let d = digits_from_exp(&format!("{abs:e}"));
            let nd = d.d.len();
            // Shortest: use precision 6 for the %e decision.
            (d, 6, nd)
        }
        Some(p) => {
            let p = p.max(1);
            let mut d = digits_from_exp(&format!("{:.*e}", p - 1, abs));
            trim_trailing_zeros(&mut d);
            let nd = d.d.len();
            let mut eprec = p;
            if eprec > nd && i64::try_from(nd).unwrap_or(i64::MAX) >= i64::from(d.dp) {
                eprec = nd;
            }
            (d, eprec, p)
        }
    };
    let nd = d.d.len();
    let exp = d.dp - 1;
    if exp < -4 || i64::from(exp) >= i64::try_from(eprec).unwrap_or(i64::MAX) {
        let prec = prec.min(nd);
        return fmt_e(&d, prec.saturating_sub(1));
    }
    let dp = usize::try_from(d.dp).unwrap_or(0);
    let prec = if prec > dp { nd } else { prec };
    let frac = i64::try_from(prec).unwrap_or(0) - i64::from(d.dp);
    fmt_f(&d, usize::try_from(frac).unwrap_or(0))
}
