//! JSON values to and from `google.protobuf.Struct`, the encoding of resources, inputs and contexts.
//!
//! Struct numbers are doubles. A double that holds a whole number within ±2^53 comes back as a JSON
//! integer, so that Kubernetes integer fields (`replicas: 3`) survive a round trip through a function.

use prost_types::value::Kind;
use prost_types::{ListValue, Struct, Value as PValue};
use serde_json::{Map, Number, Value};

/// The largest integer a double holds exactly.
const EXACT: f64 = 9_007_199_254_740_992.0;

/// A JSON value as a protobuf value.
pub fn to_value(v: &Value) -> PValue {
    let kind = match v {
        Value::Null => Kind::NullValue(0),
        Value::Bool(b) => Kind::BoolValue(*b),
        Value::Number(n) => Kind::NumberValue(n.as_f64().unwrap_or(0.0)),
        Value::String(s) => Kind::StringValue(s.clone()),
        Value::Array(a) => Kind::ListValue(ListValue {
            values: a.iter().map(to_value).collect(),
        }),
        Value::Object(o) => Kind::StructValue(to_struct(o)),
    };
    PValue { kind: Some(kind) }
}

/// A JSON object as a Struct.
pub fn to_struct(o: &Map<String, Value>) -> Struct {
    Struct {
        fields: o.iter().map(|(k, v)| (k.clone(), to_value(v))).collect(),
    }
}

/// A JSON value as a Struct: objects convert, anything else gives `None` (a Struct is an object).
pub fn struct_of(v: &Value) -> Option<Struct> {
    v.as_object().map(to_struct)
}

/// A protobuf value as JSON. Non-finite numbers (which JSON cannot hold) become null.
pub fn from_value(v: &PValue) -> Value {
    match &v.kind {
        None | Some(Kind::NullValue(_)) => Value::Null,
        Some(Kind::BoolValue(b)) => Value::Bool(*b),
        Some(Kind::NumberValue(n)) => number(*n),
        Some(Kind::StringValue(s)) => Value::String(s.clone()),
        Some(Kind::ListValue(l)) => Value::Array(l.values.iter().map(from_value).collect()),
        Some(Kind::StructValue(s)) => Value::Object(from_struct(s)),
    }
}

/// A Struct as a JSON object.
pub fn from_struct(s: &Struct) -> Map<String, Value> {
    s.fields.iter().map(|(k, v)| (k.clone(), from_value(v))).collect()
}

fn number(n: f64) -> Value {
    if n.fract() == 0.0 && n.abs() <= EXACT {
        // In range and whole, so the cast is exact.
        #[allow(clippy::cast_possible_truncation)]
        return Value::Number(Number::from(n as i64));
    }
    Number::from_f64(n).map_or(Value::Null, Value::Number)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn round_trips_kubernetes_objects() {
        let v = json!({"apiVersion": "v1", "kind": "ConfigMap", "spec": {"replicas": 3, "ratio": 0.5,
            "on": true, "none": null, "list": [1, "a", {"b": -2}]}});
        let s = struct_of(&v).expect("object");
        assert_eq!(Value::Object(from_struct(&s)), v);
        assert!(struct_of(&json!([1])).is_none());
    }

    #[test]
    fn non_finite_numbers_become_null() {
        let v = PValue {
            kind: Some(Kind::NumberValue(f64::NAN)),
        };
        assert_eq!(from_value(&v), Value::Null);
        let big = PValue {
            kind: Some(Kind::NumberValue(1e300)),
        };
        assert!(from_value(&big).is_f64());
    }
}
