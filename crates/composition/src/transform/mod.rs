//! Transforms: functions applied in order to a patch's value (upstream
//! `transforms.go`). One module per transform type; messages follow upstream's, which
//! wraps a failure as `<type> transform could not resolve: <reason>` and a list position
//! as `transform at index <i> returned error: ...`.
//!
//! Values are JSON values seen as the Go types Kubernetes' decoder yields (`int64` for
//! integers that fit, `float64` otherwise); a float result that is not finite is an
//! error, as upstream's JSON encoding of it fails.

pub mod convert;
pub mod map;
pub mod match_;
pub mod math;
mod quantity;
pub mod string;

use serde_json::{Number, Value};

use crate::input::{Transform, TransformType};

/// A failure of one transform in a list.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("transform at index {index} returned error: {source}")]
pub struct Error {
    /// The transform's position in the patch's `transforms`.
    pub index: usize,
    /// What went wrong.
    pub source: ResolveError,
}

/// A failure of one transform.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ResolveError {
    /// The configuration field of the transform's type is not set.
    #[error("given transform type {0} requires configuration")]
    MissingConfig(TransformType),
    /// A `map` transform failed.
    #[error("map transform could not resolve: {0}")]
    Map(#[from] map::Error),
    /// A `match` transform failed.
    #[error("match transform could not resolve: {0}")]
    Match(#[from] match_::Error),
    /// A `math` transform failed.
    #[error("math transform could not resolve: {0}")]
    Math(#[from] math::Error),
    /// A `string` transform failed.
    #[error("string transform could not resolve: {0}")]
    String(#[from] string::Error),
    /// A `convert` transform failed.
    #[error("convert transform could not resolve: {0}")]
    Convert(#[from] convert::Error),
}

/// Applies `transforms` in order to `input`.
pub fn resolve_all(transforms: &[Transform], input: Value) -> Result<Value, Error> {
    transforms
        .iter()
        .enumerate()
        .try_fold(input, |value, (index, t)| {
            resolve(t, &value).map_err(|source| Error { index, source })
        })
}

/// Applies one transform.
pub fn resolve(t: &Transform, input: &Value) -> Result<Value, ResolveError> {
    let missing = || ResolveError::MissingConfig(t.type_);
    Ok(match t.type_ {
        TransformType::Map => map::resolve(t.map.as_ref().ok_or_else(missing)?, input)?,
        TransformType::Match => match_::resolve(t.match_.as_ref().ok_or_else(missing)?, input)?,
        TransformType::Math => math::resolve(t.math.as_ref().ok_or_else(missing)?, input)?,
        TransformType::String => string::resolve(t.string.as_ref().ok_or_else(missing)?, input)?,
        TransformType::Convert => convert::resolve(t.convert.as_ref().ok_or_else(missing)?, input)?,
    })
}

/// A JSON number from a float, or Go's JSON encoding error for NaN and infinities.
pub(crate) fn float_value(f: f64) -> Result<Value, String> {
    Number::from_f64(f).map(Value::Number).ok_or_else(|| {
        let shown = if f.is_nan() {
            "NaN"
        } else if f > 0.0 {
            "+Inf"
        } else {
            "-Inf"
        };
        format!("json: unsupported value: {shown}")
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use serde_json::json;

    use super::*;

    fn transforms(v: Value) -> Vec<Transform> {
        serde_json::from_value(v).unwrap()
    }

    // Upstream docs: transforms run in order, each on the previous output.
    #[test]
    fn resolves_in_order() {
        let ts = transforms(json!([
            {"type": "math", "math": {"type": "Multiply", "multiply": 2}},
            {"type": "convert", "convert": {"toType": "string"}},
            {"type": "string", "string": {"type": "Format", "fmt": "%s-gb"}}
        ]));
        assert_eq!(resolve_all(&ts, json!(5)).unwrap(), json!("10-gb"));
    }

    #[test]
    fn names_the_failing_transform() {
        let ts = transforms(json!([
            {"type": "string", "string": {"type": "Convert", "convert": "ToUpper"}},
            {"type": "map", "map": {"a": "b"}}
        ]));
        let err = resolve_all(&ts, json!("x")).unwrap_err();
        assert_eq!(err.index, 1);
        assert_eq!(
            err.to_string(),
            "transform at index 1 returned error: map transform could not resolve: key X is not found in map"
        );
    }

    #[test]
    fn missing_configuration_is_an_error() {
        let ts = transforms(json!([{"type": "math"}]));
        assert_eq!(
            resolve_all(&ts, json!(1)).unwrap_err().source,
            ResolveError::MissingConfig(TransformType::Math)
        );
    }
}
