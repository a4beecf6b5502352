//! The `map` transform: the input string is a key; its value is the output.

use serde_json::Value;

use crate::gofmt::type_name;
use crate::input::MapTransform;

/// A `map` transform failure.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// The input is not a key of the map.
    #[error("key {0} is not found in map")]
    KeyNotFound(String),
    /// The input is not a string.
    #[error("type {0} is not supported for map transform")]
    UnsupportedType(&'static str),
}

/// Looks the input up in the map.
pub fn resolve(t: &MapTransform, input: &Value) -> Result<Value, Error> {
    match input {
        Value::String(key) => t
            .pairs
            .get(key)
            .cloned()
            .ok_or_else(|| Error::KeyNotFound(key.clone())),
        other => Err(Error::UnsupportedType(type_name(other))),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use serde_json::json;

    use super::*;

    fn map(v: Value) -> MapTransform {
        serde_json::from_value(v).unwrap()
    }

    // Crossplane docs, "Map transforms": `map: {us-west-1: us-west-1, ...}` turns the
    // generic location into the provider's; values may be any JSON.
    #[test]
    fn maps_keys_to_values() {
        let t = map(json!({"EU": "eu-north-1", "US": "us-east-2", "obj": {"a": [1]}}));
        assert_eq!(resolve(&t, &json!("EU")).unwrap(), json!("eu-north-1"));
        assert_eq!(resolve(&t, &json!("obj")).unwrap(), json!({"a": [1]}));
    }

    // Upstream: a key that is not in the map is an error ("key %s is not found in map").
    #[test]
    fn bad_key_is_an_error() {
        let t = map(json!({"EU": "eu-north-1"}));
        let err = resolve(&t, &json!("APAC")).unwrap_err();
        assert_eq!(err, Error::KeyNotFound("APAC".into()));
        assert_eq!(err.to_string(), "key APAC is not found in map");
    }

    // Upstream: only string input is supported.
    #[test]
    fn non_string_input_is_an_error() {
        let t = map(json!({"1": "one"}));
        assert_eq!(
            resolve(&t, &json!(1)).unwrap_err().to_string(),
            "type int64 is not supported for map transform"
        );
    }
}
