//! Composite connection details extracted from observed composed resources (upstream
//! `connection.go`).
//!
//! A secret key or field that does not exist (yet) is skipped without error, since it
//! may appear later. A field that is not a string contributes its JSON encoding.

use std::collections::BTreeMap;

use serde_json::Value;

use crate::fieldpath::{self, FieldPath};
use crate::gojson;
use crate::input::{ConnectionDetail, ConnectionDetailType};
use crate::validate::{self, ValidationError};

/// Connection details: keys to secret bytes.
pub type ConnectionDetails = BTreeMap<String, Vec<u8>>;

/// A connection detail failure: only an invalid configuration is one.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid: {0}")]
pub struct Error(pub ValidationError);

/// Extracts the configured details from an observed composed resource and its
/// connection secret.
pub fn extract(
    observed: &Value,
    secret: &ConnectionDetails,
    details: &[ConnectionDetail],
) -> Result<ConnectionDetails, Error> {
    let mut out = ConnectionDetails::new();
    for cd in details {
        validate::connection_detail(cd).map_err(Error)?;
        let value = match cd.type_ {
            Some(ConnectionDetailType::FromValue) => cd.value.as_ref().map(|v| v.as_bytes().to_vec()),
            Some(ConnectionDetailType::FromConnectionSecretKey) => cd
                .from_connection_secret_key
                .as_ref()
                .and_then(|k| secret.get(k))
                .cloned(),
            Some(ConnectionDetailType::FromFieldPath) => cd
                .from_field_path
                .as_deref()
                .and_then(|p| from_field_path(observed, p)),
            None => None,
        };
        if let Some(value) = value {
            out.insert(cd.name.clone(), value);
        }
    }
    Ok(out)
}

/// The field as a plain string, else as JSON; `None` if it cannot be read.
fn from_field_path(observed: &Value, path: &str) -> Option<Vec<u8>> {
    let path = FieldPath::parse(path).ok()?;
    match fieldpath::get(observed, &path).ok()? {
        Value::String(s) => Some(s.as_bytes().to_vec()),
        other => Some(gojson::marshal(other).into_bytes()),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use serde_json::json;

    use super::*;

    // Crossplane docs, "Composite resource connection details": the three types.
    #[test]
    fn extracts_each_type() {
        let observed = json!({"status": {"atProvider": {"endpoint": "db.example.org", "port": 5432}}});
        let secret = ConnectionDetails::from([("password".to_owned(), b"s3cret".to_vec())]);
        let details: Vec<ConnectionDetail> = serde_json::from_value(json!([
            {"name": "password", "type": "FromConnectionSecretKey", "fromConnectionSecretKey": "password"},
            {"name": "missing", "type": "FromConnectionSecretKey", "fromConnectionSecretKey": "nope"},
            {"name": "endpoint", "type": "FromFieldPath", "fromFieldPath": "status.atProvider.endpoint"},
            {"name": "port", "type": "FromFieldPath", "fromFieldPath": "status.atProvider.port"},
            {"name": "later", "type": "FromFieldPath", "fromFieldPath": "status.atProvider.later"},
            {"name": "user", "type": "FromValue", "value": "admin"}
        ]))
        .unwrap();
        let got = extract(&observed, &secret, &details).unwrap();
        let want = ConnectionDetails::from([
            ("password".to_owned(), b"s3cret".to_vec()),
            ("endpoint".to_owned(), b"db.example.org".to_vec()),
            ("port".to_owned(), b"5432".to_vec()),
            ("user".to_owned(), b"admin".to_vec()),
        ]);
        assert_eq!(got, want);
    }

    #[test]
    fn invalid_detail_is_an_error() {
        let details: Vec<ConnectionDetail> =
            serde_json::from_value(json!([{"name": "user", "type": "FromValue"}])).unwrap();
        assert_eq!(
            extract(&json!({}), &ConnectionDetails::new(), &details)
                .unwrap_err()
                .to_string(),
            "invalid: value: Required value: value connection detail requires a value"
        );
    }
}
