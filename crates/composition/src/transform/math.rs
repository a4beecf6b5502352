//! The `math` transform: `Multiply`, `ClampMin`, `ClampMax`.
//!
//! As upstream: an integer times the factor is an integer (wrapping on overflow, as Go's
//! `int64` does), a float times it a float; a clamp compares the input truncated to an
//! integer and returns either the bound (an integer) or the input unchanged.

use serde_json::Value;

use super::float_value;
use crate::gofmt::type_name;
use crate::input::{MathTransform, MathTransformType};
use crate::validate::{self, ValidationError};

/// A `math` transform failure.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// The configuration is invalid (no type, or no value for the type).
    #[error("{0}")]
    Invalid(ValidationError),
    /// The input is not a number.
    #[error("input is required to be a number for math transformer, got {0}")]
    NotANumber(&'static str),
    /// The result cannot be represented in JSON.
    #[error("{0}")]
    Unrepresentable(String),
}

/// Applies the operation.
pub fn resolve(t: &MathTransform, input: &Value) -> Result<Value, Error> {
    validate::math_transform(t).map_err(Error::Invalid)?;
    let Value::Number(n) = input else {
        return Err(Error::NotANumber(type_name(input)));
    };
    let as_int = n.as_i64();
    let as_float = n.as_f64().unwrap_or_default();
    match (t.type_, t.multiply, t.clamp_min, t.clamp_max) {
        (Some(MathTransformType::Multiply), Some(m), _, _) => match as_int {
            Some(i) => Ok(Value::from(i.wrapping_mul(m))),
            None => float_value(as_float * m as f64).map_err(Error::Unrepresentable),
        },
        (Some(MathTransformType::ClampMin), _, Some(min), _) => {
            let v = as_int.unwrap_or(as_float as i64);
            Ok(if v < min { Value::from(min) } else { input.clone() })
        }
        (Some(MathTransformType::ClampMax), _, _, Some(max)) => {
            let v = as_int.unwrap_or(as_float as i64);
            Ok(if v > max { Value::from(max) } else { input.clone() })
        }
        // Validation rejects every other combination.
        _ => Err(Error::Invalid(ValidationError::required(
            "type",
            "math transform type is required",
        ))),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use serde_json::json;

    use super::*;

    fn t(v: Value) -> MathTransform {
        serde_json::from_value(v).unwrap()
    }

    // Crossplane docs, "Math transforms": `multiply: 2` doubles the input.
    #[test]
    fn multiplies() {
        let m = t(json!({"type": "Multiply", "multiply": 2}));
        assert_eq!(resolve(&m, &json!(3)).unwrap(), json!(6));
        assert_eq!(resolve(&m, &json!(1.5)).unwrap(), json!(3.0));
    }

    // Docs: ClampMin raises values below the bound, ClampMax lowers values above it;
    // other values pass unchanged.
    #[test]
    fn clamps() {
        let min = t(json!({"type": "ClampMin", "clampMin": 20}));
        assert_eq!(resolve(&min, &json!(10)).unwrap(), json!(20));
        assert_eq!(resolve(&min, &json!(25.5)).unwrap(), json!(25.5));
        let max = t(json!({"type": "ClampMax", "clampMax": 5}));
        assert_eq!(resolve(&max, &json!(10)).unwrap(), json!(5));
        assert_eq!(resolve(&max, &json!(3)).unwrap(), json!(3));
    }

    // Upstream: non-number input and incomplete configuration are errors.
    #[test]
    fn errors() {
        let m = t(json!({"type": "Multiply", "multiply": 2}));
        assert_eq!(
            resolve(&m, &json!("3")).unwrap_err().to_string(),
            "input is required to be a number for math transformer, got string"
        );
        let m = t(json!({"type": "ClampMin"}));
        assert_eq!(
            resolve(&m, &json!(1)).unwrap_err().to_string(),
            "clampMin: Required value: must specify a value if a clamp min math transform is specified"
        );
        let m = t(json!({"multiply": 2}));
        assert_eq!(
            resolve(&m, &json!(1)).unwrap_err().to_string(),
            "type: Required value: math transform type is required"
        );
        let m = t(json!({"type": "Multiply", "multiply": 10}));
        assert_eq!(
            resolve(&m, &json!(1.7e308)).unwrap_err().to_string(),
            "json: unsupported value: +Inf"
        );
    }
}
