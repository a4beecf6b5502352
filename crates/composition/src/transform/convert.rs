//! The `convert` transform: casts between string, bool, int64, float64, object and
//! array.
//!
//! The pairs, formats and messages are upstream's: the input's type is its Go type
//! (`string`, `bool`, `int64`, `float64`; anything else is an invalid input type), `int`
//! means `int64`, the same type in and out is a no-op, and a pair not in the table is
//! "not supported with format ...". Parsing follows Go's `strconv` (`ParseInt` base 10,
//! `ParseBool`, `ParseFloat`), Kubernetes' `resource.ParseQuantity` for format
//! `quantity`, and JSON for format `json`. Deviations: hexadecimal float strings are not
//! parsed, and a float converted to an integer saturates (Go leaves it undefined).

use serde_json::{Map, Value};

use super::{float_value, quantity};
use crate::gofmt::{quote, type_name};
use crate::input::{ConvertTransform, ConvertTransformFormat, TransformIoType};

/// A `convert` transform failure.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// The input is not a string, bool or number.
    #[error("invalid input type {0}")]
    InvalidInputType(&'static str),
    /// The conversion is not in upstream's table.
    #[error("conversion from {from} to {to} is not supported with format {format}")]
    NotSupported {
        /// The input type.
        from: TransformIoType,
        /// The output type.
        to: TransformIoType,
        /// The input format.
        format: ConvertTransformFormat,
    },
    /// The input does not parse as the output type.
    #[error("{0}")]
    Parse(String),
}

/// Converts the input.
pub fn resolve(t: &ConvertTransform, input: &Value) -> Result<Value, Error> {
    use ConvertTransformFormat as F;
    use TransformIoType as T;

    let from = match input {
        Value::String(_) => T::String,
        Value::Bool(_) => T::Bool,
        Value::Number(n) if n.as_i64().is_some() => T::Int64,
        Value::Number(_) => T::Float64,
        other => return Err(Error::InvalidInputType(type_name(other))),
    };
    let to = match t.to_type {
        T::Int => T::Int64,
        other => other,
    };
    if from == to {
        return Ok(input.clone());
    }
    let format = t.format.unwrap_or_default();
    let s = input.as_str().unwrap_or_default();
    let b = input.as_bool().unwrap_or_default();
    let i = input.as_i64().unwrap_or_default();
    let f = input.as_f64().unwrap_or_default();
    let float = |f: f64| float_value(f).map_err(Error::Parse);
    match (from, to, format) {
        (T::String, T::Int64, F::None) => parse_int(s).map(Value::from),
        (T::String, T::Bool, F::None) => parse_bool(s).map(Value::from),
        (T::String, T::Float64, F::None) => float(parse_float(s)?),
        (T::String, T::Float64, F::Quantity) => float(quantity::parse(s).map_err(Error::Parse)?),
        (T::String, T::Object, F::Json) => json_object(s),
        (T::String, T::Array, F::Json) => json_array(s),
        (T::Int64, T::String, F::None) => Ok(Value::from(i.to_string())),
        (T::Int64, T::Bool, F::None) => Ok(Value::from(i == 1)),
        (T::Int64, T::Float64, F::None) => float(i as f64),
        (T::Bool, T::String, F::None) => Ok(Value::from(b.to_string())),
        (T::Bool, T::Int64, F::None) => Ok(Value::from(i64::from(b))),
        (T::Bool, T::Float64, F::None) => float(if b { 1.0 } else { 0.0 }),
        (T::Float64, T::String, F::None) => Ok(Value::from(f.to_string())),
        (T::Float64, T::Int64, F::None) => Ok(Value::from(f as i64)),
        (T::Float64, T::Bool, F::None) => Ok(Value::from(f == 1.0)),
        _ => Err(Error::NotSupported { from, to, format }),
    }
}

/// Go's `strconv.ParseInt(s, 10, 64)`.
fn parse_int(s: &str) -> Result<i64, Error> {
    use std::num::IntErrorKind;
    let digits = s.strip_prefix(['+', '-']).unwrap_or(s);
    let syntax = || Error::Parse(format!("strconv.ParseInt: parsing {}: invalid syntax", quote(s)));
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Err(syntax());
    }
    s.parse::<i64>().map_err(|e| match e.kind() {
        IntErrorKind::PosOverflow | IntErrorKind::NegOverflow => Error::Parse(format!(
            "strconv.ParseInt: parsing {}: value out of range",
            quote(s)
        )),
        _ => syntax(),
    })
}

/// Go's `strconv.ParseBool`.
fn parse_bool(s: &str) -> Result<bool, Error> {
    match s {
        "1" | "t" | "T" | "TRUE" | "true" | "True" => Ok(true),
        "0" | "f" | "F" | "FALSE" | "false" | "False" => Ok(false),
        _ => Err(Error::Parse(format!(
            "strconv.ParseBool: parsing {}: invalid syntax",
            quote(s)
        ))),
    }
}

/// Go's `strconv.ParseFloat(s, 64)`, without hexadecimal floats.
fn parse_float(s: &str) -> Result<f64, Error> {
    let f: f64 = s.parse().map_err(|_| {
        Error::Parse(format!(
            "strconv.ParseFloat: parsing {}: invalid syntax",
            quote(s)
        ))
    })?;
    let named = s.to_ascii_lowercase();
    if f.is_infinite() && !named.contains("inf") {
        return Err(Error::Parse(format!(
            "strconv.ParseFloat: parsing {}: value out of range",
            quote(s)
        )));
    }
    Ok(f)
}

fn json_kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "bool",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

fn parse_json(s: &str) -> Result<Value, Error> {
    serde_json::from_str(s).map_err(|e| Error::Parse(format!("cannot parse JSON: {e}")))
}

/// A JSON object from a string; `null` yields an empty object, as Go's unmarshalling
/// into a map does.
fn json_object(s: &str) -> Result<Value, Error> {
    match parse_json(s)? {
        v @ Value::Object(_) => Ok(v),
        Value::Null => Ok(Value::Object(Map::new())),
        other => Err(Error::Parse(format!(
            "json: cannot unmarshal {} into Go value of type map[string]interface {{}}",
            json_kind(&other)
        ))),
    }
}

/// A JSON array from a string; `null` yields `null`, as Go's unmarshalling into a slice
/// does.
fn json_array(s: &str) -> Result<Value, Error> {
    match parse_json(s)? {
        v @ (Value::Array(_) | Value::Null) => Ok(v),
        other => Err(Error::Parse(format!(
            "json: cannot unmarshal {} into Go value of type []interface {{}}",
            json_kind(&other)
        ))),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use serde_json::json;

    use super::*;

    fn run(t: Value, input: Value) -> Result<Value, Error> {
        let t: ConvertTransform = serde_json::from_value(t).unwrap();
        resolve(&t, &input)
    }

    // Crossplane docs, "Convert transforms": the conversion table between string, bool,
    // int/int64 and float64.
    #[test]
    fn conversion_table() {
        let cases = [
            ("string", json!(1), json!("1")),
            ("string", json!(true), json!("true")),
            ("string", json!(1.5), json!("1.5")),
            ("int", json!("42"), json!(42)),
            ("int64", json!("-42"), json!(-42)),
            ("int64", json!(true), json!(1)),
            ("int64", json!(2.9), json!(2)),
            ("bool", json!("true"), json!(true)),
            ("bool", json!("0"), json!(false)),
            ("bool", json!(1), json!(true)),
            ("bool", json!(2), json!(false)),
            ("bool", json!(1.0), json!(true)),
            ("float64", json!("1.5"), json!(1.5)),
            ("float64", json!(3), json!(3.0)),
            ("float64", json!(false), json!(0.0)),
            // Same type in and out: unchanged.
            ("string", json!("x"), json!("x")),
            ("int", json!(7), json!(7)),
        ];
        for (to, input, want) in cases {
            let got = run(json!({"toType": to}), input.clone()).unwrap();
            assert_eq!(got, want, "{input} to {to}");
        }
    }

    // Docs: format `quantity` parses Kubernetes quantities into float64.
    #[test]
    fn quantity_format() {
        let q = |s: &str| run(json!({"toType": "float64", "format": "quantity"}), json!(s));
        assert_eq!(q("1Ki").unwrap(), json!(1024.0));
        assert_eq!(q("500m").unwrap(), json!(0.5));
        assert_eq!(q("2G").unwrap(), json!(2e9));
        assert_eq!(q("1.5e3").unwrap(), json!(1500.0));
        assert!(matches!(q("1Qi"), Err(Error::Parse(_))));
    }

    // Docs: format `json` parses a JSON string into an object or an array.
    #[test]
    fn json_format() {
        assert_eq!(
            run(
                json!({"toType": "object", "format": "json"}),
                json!(r#"{"a": [1]}"#)
            )
            .unwrap(),
            json!({"a": [1]})
        );
        assert_eq!(
            run(json!({"toType": "array", "format": "json"}), json!("[1, \"b\"]")).unwrap(),
            json!([1, "b"])
        );
        assert_eq!(
            run(json!({"toType": "object", "format": "json"}), json!("[1]"))
                .unwrap_err()
                .to_string(),
            "json: cannot unmarshal array into Go value of type map[string]interface {}"
        );
    }

    // Upstream: a conversion that fails to parse is an error.
    #[test]
    fn failed_conversion_is_an_error() {
        assert_eq!(
            run(json!({"toType": "int64"}), json!("abc"))
                .unwrap_err()
                .to_string(),
            "strconv.ParseInt: parsing \"abc\": invalid syntax"
        );
        assert_eq!(
            run(json!({"toType": "int"}), json!("99999999999999999999"))
                .unwrap_err()
                .to_string(),
            "strconv.ParseInt: parsing \"99999999999999999999\": value out of range"
        );
        assert_eq!(
            run(json!({"toType": "bool"}), json!("yes"))
                .unwrap_err()
                .to_string(),
            "strconv.ParseBool: parsing \"yes\": invalid syntax"
        );
        assert_eq!(
            run(json!({"toType": "float64"}), json!("1.2.3"))
                .unwrap_err()
                .to_string(),
            "strconv.ParseFloat: parsing \"1.2.3\": invalid syntax"
        );
        assert!(matches!(
            run(json!({"toType": "float64"}), json!("NaN")),
            Err(Error::Parse(_))
        ));
    }

    // Upstream: pairs outside the table, and non-scalar input, are errors.
    #[test]
    fn unsupported_conversions() {
        assert_eq!(
            run(json!({"toType": "object"}), json!("{}"))
                .unwrap_err()
                .to_string(),
            "conversion from string to object is not supported with format none"
        );
        assert_eq!(
            run(json!({"toType": "int", "format": "quantity"}), json!("1Gi"))
                .unwrap_err()
                .to_string(),
            "conversion from string to int64 is not supported with format quantity"
        );
        assert_eq!(
            run(json!({"toType": "string"}), json!({"a": 1}))
                .unwrap_err()
                .to_string(),
            "invalid input type map[string]interface {}"
        );
        assert_eq!(
            run(json!({"toType": "string"}), Value::Null)
                .unwrap_err()
                .to_string(),
            "invalid input type <nil>"
        );
    }
}
