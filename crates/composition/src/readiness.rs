//! Readiness checks of observed composed resources (upstream `ready.go`).
//!
//! With no checks, a resource is ready when its `Ready` condition is `True`. Otherwise
//! every check must pass. A field that does not exist fails its check without error; a
//! field of the wrong type is an error (which the composer reports as a warning).

use serde_json::Value;

use crate::fieldpath::{self, FieldPath};
use crate::input::{MatchConditionReadinessCheck, ReadinessCheck, ReadinessCheckType};
use crate::validate::{self, ValidationError};

/// A readiness check failure.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// One check failed to run.
    #[error("cannot run readiness check at index {index}: {source}")]
    Check {
        /// The check's position.
        index: usize,
        /// Why it failed.
        source: CheckError,
    },
}

/// Why one readiness check failed to run.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CheckError {
    /// The check is invalid.
    #[error("invalid: {0}")]
    Invalid(ValidationError),
    /// The field path is invalid, or the field is not what the check expects.
    #[error("{0}")]
    Field(String),
}

/// Whether the observed resource passes the checks (or, with none, has `Ready=True`).
pub fn is_ready(observed: &Value, checks: &[ReadinessCheck]) -> Result<bool, Error> {
    if checks.is_empty() {
        return Ok(condition_status(observed, "Ready") == "True");
    }
    for (index, check) in checks.iter().enumerate() {
        if !run_check(check, observed).map_err(|source| Error::Check { index, source })? {
            return Ok(false);
        }
    }
    Ok(true)
}

/// Runs one check.
pub fn run_check(check: &ReadinessCheck, observed: &Value) -> Result<bool, CheckError> {
    validate::readiness_check(check).map_err(CheckError::Invalid)?;
    let field = || -> Result<Option<&Value>, CheckError> {
        let path = check.field_path.as_deref().unwrap_or_default();
        let path = FieldPath::parse(path).map_err(|e| CheckError::Field(e.to_string()))?;
        match fieldpath::get(observed, &path) {
            Ok(v) => Ok(Some(v)),
            Err(e) if e.is_not_found() => Ok(None),
            Err(e) => Err(CheckError::Field(e.to_string())),
        }
    };
    let path = || check.field_path.clone().unwrap_or_default();
    Ok(match check.type_ {
        ReadinessCheckType::None => true,
        ReadinessCheckType::NonEmpty => field()?.is_some(),
        ReadinessCheckType::MatchString => match field()? {
            None => false,
            Some(Value::String(s)) => Some(s) == check.match_string.as_ref(),
            Some(_) => return Err(CheckError::Field(format!("{}: not a string", path()))),
        },
        ReadinessCheckType::MatchInteger => match field()? {
            None => false,
            Some(Value::Number(n)) if n.as_i64().is_some() => n.as_i64() == check.match_integer,
            Some(_) => {
                return Err(CheckError::Field(format!("{}: not a (int64) number", path())));
            }
        },
        ReadinessCheckType::MatchTrue | ReadinessCheckType::MatchFalse => match field()? {
            None => false,
            Some(Value::Bool(b)) => *b == (check.type_ == ReadinessCheckType::MatchTrue),
            Some(_) => return Err(CheckError::Field(format!("{}: not a bool", path()))),
        },
        ReadinessCheckType::MatchCondition => {
            let want = check.match_condition.clone().unwrap_or_default();
            let MatchConditionReadinessCheck { type_, status } = want;
            condition_status(observed, &type_) == status
        }
    })
}

/// The status of a condition in `status.conditions`; `Unknown` when absent, as
/// crossplane-runtime's `GetCondition` reports it.
pub fn condition_status<'a>(observed: &'a Value, type_: &str) -> &'a str {
    observed
        .pointer("/status/conditions")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .find(|c| c.get("type").and_then(Value::as_str) == Some(type_))
        .and_then(|c| c.get("status").and_then(Value::as_str))
        .unwrap_or("Unknown")
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use serde_json::json;

    use super::*;

    fn checks(v: Value) -> Vec<ReadinessCheck> {
        serde_json::from_value(v).unwrap()
    }

    fn observed() -> Value {
        json!({
            "status": {
                "atProvider": {"state": "Online", "replicas": 3, "healthy": true, "degraded": false, "ratio": 0.5},
                "conditions": [{"type": "Ready", "status": "True"}, {"type": "Synced", "status": "False"}]
            }
        })
    }

    // Crossplane docs: with no readiness checks a resource is ready when its Ready
    // condition is True.
    #[test]
    fn default_is_ready_condition() {
        assert!(is_ready(&observed(), &[]).unwrap());
        let not_ready = json!({"status": {"conditions": [{"type": "Ready", "status": "False"}]}});
        assert!(!is_ready(&not_ready, &[]).unwrap());
        assert!(!is_ready(&json!({}), &[]).unwrap());
    }

    // Docs, "Resource readiness checks": each check type.
    #[test]
    fn check_types() {
        let ready = |c: Value| is_ready(&observed(), &checks(json!([c]))).unwrap();
        assert!(ready(
            json!({"type": "MatchString", "fieldPath": "status.atProvider.state", "matchString": "Online"})
        ));
        assert!(!ready(
            json!({"type": "MatchString", "fieldPath": "status.atProvider.state", "matchString": "Offline"})
        ));
        assert!(ready(
            json!({"type": "MatchInteger", "fieldPath": "status.atProvider.replicas", "matchInteger": 3})
        ));
        assert!(!ready(
            json!({"type": "MatchInteger", "fieldPath": "status.atProvider.replicas", "matchInteger": 4})
        ));
        assert!(ready(
            json!({"type": "MatchTrue", "fieldPath": "status.atProvider.healthy"})
        ));
        assert!(!ready(
            json!({"type": "MatchTrue", "fieldPath": "status.atProvider.degraded"})
        ));
        assert!(ready(
            json!({"type": "MatchFalse", "fieldPath": "status.atProvider.degraded"})
        ));
        assert!(ready(
            json!({"type": "NonEmpty", "fieldPath": "status.atProvider.state"})
        ));
        assert!(!ready(
            json!({"type": "NonEmpty", "fieldPath": "status.atProvider.missing"})
        ));
        assert!(ready(
            json!({"type": "MatchCondition", "matchCondition": {"type": "Synced", "status": "False"}})
        ));
        assert!(ready(
            json!({"type": "MatchCondition", "matchCondition": {"type": "Gone", "status": "Unknown"}})
        ));
        assert!(ready(json!({"type": "None"})));
        // A missing field fails the check without error.
        assert!(!ready(json!({"type": "MatchTrue", "fieldPath": "status.nope"})));
    }

    #[test]
    fn all_checks_must_pass() {
        let cs = checks(json!([
            {"type": "MatchString", "fieldPath": "status.atProvider.state", "matchString": "Online"},
            {"type": "MatchTrue", "fieldPath": "status.atProvider.degraded"}
        ]));
        assert!(!is_ready(&observed(), &cs).unwrap());
    }

    // Upstream: a field of the wrong type, or an invalid check, is an error.
    #[test]
    fn errors() {
        let cs = checks(
            json!([{"type": "None"}, {"type": "MatchInteger", "fieldPath": "status.atProvider.ratio", "matchInteger": 1}]),
        );
        assert_eq!(
            is_ready(&observed(), &cs).unwrap_err().to_string(),
            "cannot run readiness check at index 1: status.atProvider.ratio: not a (int64) number"
        );
        let cs = checks(json!([{"type": "MatchString", "fieldPath": "status.atProvider.state"}]));
        assert_eq!(
            is_ready(&observed(), &cs).unwrap_err().to_string(),
            "cannot run readiness check at index 0: invalid: matchString: Required value: cannot be nil for type MatchString"
        );
    }
}
