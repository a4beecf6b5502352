//! Go JSON behaviour that upstream's output depends on.
//!
//! - [`marshal`] is Go's `encoding/json.Marshal` of a decoded JSON value: object keys
//!   sorted, `<`, `>`, `&`, U+2028 and U+2029 escaped, floats in Go's notation. The
//!   string transforms `ToJson` and the hashes of non-string input use it, so their
//!   output matches upstream byte for byte.
//! - [`normalize`] mirrors the JSON round trip upstream applies to every patched value
//!   (Kubernetes' decoder turns integral floats into `int64`): `2.0` becomes `2`.

use serde_json::{Number, Value};

/// Go's `json.Marshal` of `v`.
pub fn marshal(v: &Value) -> String {
    let mut out = String::new();
    write(&mut out, v);
    out
}

fn write(out: &mut String, v: &Value) {
    match v {
        Value::Null => out.push_str("null"),
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::Number(n) => write_number(out, n),
        Value::String(s) => write_string(out, s),
        Value::Array(a) => {
            out.push('[');
            for (i, item) in a.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write(out, item);
            }
            out.push(']');
        }
        Value::Object(m) => {
            let mut entries: Vec<(&String, &Value)> = m.iter().collect();
            entries.sort_by(|a, b| a.0.cmp(b.0));
            out.push('{');
            for (i, (k, item)) in entries.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_string(out, k);
                out.push(':');
                write(out, item);
            }
            out.push('}');
        }
    }
}

fn write_number(out: &mut String, n: &Number) {
    if let Some(i) = n.as_i64() {
        out.push_str(&i.to_string());
        return;
    }
    let f = n.as_f64().unwrap_or_default();
    out.push_str(&format_float(f));
}

/// Go's `encoding/json` float64 notation: `%f`-like shortest digits for
/// 1e-6 ≤ |f| < 1e21, else exponent form such as `1e+21` or `1e-7`.
pub fn format_float(f: f64) -> String {
    let abs = f.abs();
    if abs == 0.0 || (1e-6..1e21).contains(&abs) {
        // Rust's shortest representation, never in exponent form.
        return format!("{f}");
    }
    let s = format!("{f:e}");
    match s.split_once('e') {
        Some((mantissa, exp)) if !exp.starts_with('-') => {
            let exp = if exp.len() < 2 {
                format!("0{exp}")
            } else {
                exp.to_owned()
            };
            format!("{mantissa}e+{exp}")
        }
        _ => s,
    }
}

fn write_string(out: &mut String, s: &str) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\x08' => out.push_str("\\b"),
            '\x0c' => out.push_str("\\f"),
            '<' | '>' | '&' | '\u{2028}' | '\u{2029}' => {
                out.push_str(&format!("\\u{:04x}", c as u32));
            }
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
}

/// Whether `v` is the zero value of its Go type once decoded (`null`, `false`, `0`, `""`, `[]` or
/// `{}`): what Go's `omitempty` leaves out, and what mergo overwrites in a merge that keeps existing
/// values.
pub fn is_zero(v: &Value) -> bool {
    match v {
        Value::Null => true,
        Value::Bool(b) => !b,
        Value::Number(n) => n.as_f64() == Some(0.0),
        Value::String(s) => s.is_empty(),
        Value::Array(a) => a.is_empty(),
        Value::Object(o) => o.is_empty(),
    }
}

/// Turns integral floats that fit an `int64` (and are below 1e21) into integers,
/// recursively, as upstream's JSON round trip of patched values does.
pub fn normalize(v: Value) -> Value {
    match v {
        Value::Number(n) if n.as_i64().is_none() => {
            let f = n.as_f64().unwrap_or_default();
            // Integral, and inside int64 (which is also below 1e21).
            if f.fract() == 0.0 && (-9.223_372_036_854_776e18..9.223_372_036_854_776e18).contains(&f) {
                Value::Number(Number::from(f as i64))
            } else {
                Value::Number(n)
            }
        }
        Value::Array(a) => Value::Array(a.into_iter().map(normalize).collect()),
        Value::Object(m) => Value::Object(m.into_iter().map(|(k, v)| (k, normalize(v))).collect()),
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    // Go encoding/json: sorted keys, HTML-safe escaping, float notation.
    #[test]
    fn marshals_like_go() {
        assert_eq!(
            marshal(&json!({"b": [1, 2.5, "x<y"], "a": null, "c": {"z": true, "y": false}})),
            r#"{"a":null,"b":[1,2.5,"x\u003cy"],"c":{"y":false,"z":true}}"#
        );
        assert_eq!(marshal(&json!("tab\tand\u{1}")), r#""tab\tand\u0001""#);
        assert_eq!(format_float(1e21), "1e+21");
        assert_eq!(format_float(1e-7), "1e-7");
        assert_eq!(format_float(1.5e-10), "1.5e-10");
        assert_eq!(format_float(123456789.0), "123456789");
        assert_eq!(format_float(0.000001), "0.000001");
    }

    #[test]
    fn normalizes_integral_floats() {
        assert_eq!(normalize(json!(2.0)), json!(2));
        assert_eq!(normalize(json!(2.5)), json!(2.5));
        assert_eq!(normalize(json!({"a": [1.0, -3.0]})), json!({"a": [1, -3]}));
        assert_eq!(normalize(json!(1e21)), json!(1e21));
    }
}
