//! Printing one argument with one verb, Go style.

use serde_json::{Map, Value};

use super::Spec;
use super::number::{fmt_float, fmt_integer};

/// The Go type name (`%T`) of a JSON value as Kubernetes decodes it.
pub fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "<nil>",
        Value::Bool(_) => "bool",
        Value::Number(n) if n.as_i64().is_some() => "int64",
        Value::Number(_) => "float64",
        Value::String(_) => "string",
        Value::Object(_) => "map[string]interface {}",
        Value::Array(_) => "[]interface {}",
    }
}

/// Go's `strconv.Quote`: a double-quoted string with Go escapes.
pub fn quote(s: &str) -> String {
    quote_with(s, '"', false)
}

fn quote_with(s: &str, q: char, ascii_only: bool) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push(q);
    for c in s.chars() {
        match c {
            '\x07' => out.push_str("\\a"),
            '\x08' => out.push_str("\\b"),
            '\x0c' => out.push_str("\\f"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\x0b' => out.push_str("\\v"),
            '\\' => out.push_str("\\\\"),
            c if c == q => {
                out.push('\\');
                out.push(c);
            }
            c if (c as u32) < 0x20 || c == '\x7f' => out.push_str(&format!("\\x{:02x}", c as u32)),
            c if c.is_ascii() => out.push(c),
            c if ascii_only || c.is_control() || c == '\u{feff}' => {
                if (c as u32) < 0x10000 {
                    out.push_str(&format!("\\u{:04x}", c as u32));
                } else {
                    out.push_str(&format!("\\U{:08x}", c as u32));
                }
            }
            c => out.push(c),
        }
    }
    out.push(q);
    out
}

/// Writes `s` padded to the width with spaces.
pub(super) fn pad(out: &mut String, spec: &Spec, s: &str) {
    let len = s.chars().count();
    let fill = spec.width.map_or(0, |w| w.saturating_sub(len));
    if spec.minus {
        out.push_str(s);
        out.extend(std::iter::repeat_n(' ', fill));
    } else {
        out.extend(std::iter::repeat_n(' ', fill));
        out.push_str(s);
    }
}

/// Writes a number `sign` + `body`, padded to the width with spaces, or with zeros
/// after the sign when the `0` flag is set.
pub(super) fn pad_number(out: &mut String, spec: &Spec, sign: &str, body: &str) {
    let len = sign.chars().count() + body.chars().count();
    let fill = spec.width.map_or(0, |w| w.saturating_sub(len));
    if spec.zero && !spec.minus {
        out.push_str(sign);
        out.extend(std::iter::repeat_n('0', fill));
        out.push_str(body);
    } else if spec.minus {
        out.push_str(sign);
        out.push_str(body);
        out.extend(std::iter::repeat_n(' ', fill));
    } else {
        out.extend(std::iter::repeat_n(' ', fill));
        out.push_str(sign);
        out.push_str(body);
    }
}

/// Prints one top-level argument.
pub(super) fn print_arg(out: &mut String, spec: &Spec, arg: &Value, verb: char) {
    if verb == 'T' {
        pad(out, spec, type_name(arg));
        return;
    }
    if arg.is_null() {
        match verb {
            'v' => pad(out, spec, "<nil>"),
            _ => bad_verb(out, spec, arg, verb),
        }
        return;
    }
    print_value(out, spec, arg, verb);
}

/// Prints a value; `null` inside a map or slice prints as `<nil>` whatever the verb.
fn print_value(out: &mut String, spec: &Spec, v: &Value, verb: char) {
    match v {
        Value::Null if spec.sharp_v => out.push_str("interface {}(nil)"),
        Value::Null => out.push_str("<nil>"),
        Value::Bool(b) => match verb {
            't' | 'v' => pad(out, spec, if *b { "true" } else { "false" }),
            _ => bad_verb(out, spec, v, verb),
        },
        Value::Number(n) => match n.as_i64() {
            Some(i) => {
                if !fmt_integer(out, spec, i, verb) {
                    bad_verb(out, spec, v, verb);
                }
            }
            None => {
                let f = n.as_f64().unwrap_or_default();
                if !fmt_float(out, spec, f, verb) {
                    bad_verb(out, spec, v, verb);
                }
            }
        },
        Value::String(s) => fmt_string(out, spec, v, s, verb),
        Value::Object(m) => print_map(out, spec, m, verb),
        Value::Array(a) => print_slice(out, spec, a, verb),
    }
}

fn fmt_string(out: &mut String, spec: &Spec, v: &Value, s: &str, verb: char) {
    match verb {
        'v' if spec.sharp_v => pad(out, spec, &quote(s)),
        'v' | 's' => {
            let truncated: String = match spec.prec {
                Some(p) => s.chars().take(p).collect(),
                None => s.to_owned(),
            };
            pad(out, spec, &truncated);
        }
        'q' => {
            let q = if spec.sharp && !s.contains('`') && !s.chars().any(|c| c.is_control() && c != '\t') {
                format!("`{s}`")
            } else {
                quote_with(s, '"', spec.plus)
            };
            pad(out, spec, &q);
        }
        'x' | 'X' => {
            let bytes = match spec.prec {
                Some(p) => s.as_bytes().get(..p).unwrap_or(s.as_bytes()),
                None => s.as_bytes(),
            };
            let mut hex = String::new();
            if spec.sharp && !bytes.is_empty() {
                hex.push_str(if verb == 'x' { "0x" } else { "0X" });
            }
            for b in bytes {
                if verb == 'x' {
                    hex.push_str(&format!("{b:02x}"));
                } else {
                    hex.push_str(&format!("{b:02X}"));
                }
            }
            pad(out, spec, &hex);
        }
        _ => bad_verb(out, spec, v, verb),
    }
}

fn sorted_entries(m: &Map<String, Value>) -> Vec<(&String, &Value)> {
    let mut entries: Vec<(&String, &Value)> = m.iter().collect();
    entries.sort_by(|a, b| a.0.cmp(b.0));
    entries
}

fn print_map(out: &mut String, spec: &Spec, m: &Map<String, Value>, verb: char) {
    if spec.sharp_v {
        out.push_str("map[string]interface {}{");
        for (i, (k, v)) in sorted_entries(m).into_iter().enumerate() {
            if i > 0 {
                out.push_str(", ");
            }
            out.push_str(&quote(k));
            out.push(':');
            print_value(out, spec, v, verb);
        }
        out.push('}');
        return;
    }
    out.push_str("map[");
    for (i, (k, v)) in sorted_entries(m).into_iter().enumerate() {
        if i > 0 {
            out.push(' ');
        }
        fmt_string(out, spec, &Value::String(k.clone()), k, verb);
        out.push(':');
        print_value(out, spec, v, verb);
    }
    out.push(']');
}

fn print_slice(out: &mut String, spec: &Spec, a: &[Value], verb: char) {
    if spec.sharp_v {
        out.push_str("[]interface {}{");
        for (i, v) in a.iter().enumerate() {
            if i > 0 {
                out.push_str(", ");
            }
            print_value(out, spec, v, verb);
        }
        out.push('}');
        return;
    }
    out.push('[');
    for (i, v) in a.iter().enumerate() {
        if i > 0 {
            out.push(' ');
        }
        print_value(out, spec, v, verb);
    }
    out.push(']');
}

/// `%!verb(type=value)`.
fn bad_verb(out: &mut String, spec: &Spec, v: &Value, verb: char) {
    out.push_str("%!");
    out.push(verb);
    out.push('(');
    if v.is_null() {
        out.push_str("<nil>");
    } else {
        out.push_str(type_name(v));
        out.push('=');
        let plain = Spec {
            sharp_v: false,
            plus_v: false,
            ..*spec
        };
        print_value(out, &plain, v, 'v');
    }
    out.push(')');
}
