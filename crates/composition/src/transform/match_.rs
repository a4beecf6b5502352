//! The `match` transform: the result of the first pattern that matches the input, else a
//! fallback.

use regex::Regex;
use serde_json::Value;

use crate::gofmt::type_name;
use crate::input::{MatchFallbackTo, MatchTransform, MatchTransformPattern, MatchTransformPatternType};

/// A `match` transform failure.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// A pattern could not be tested.
    #[error("cannot match pattern at index {index}: {source}")]
    Pattern {
        /// The pattern's position.
        index: usize,
        /// Why it could not be tested.
        source: PatternError,
    },
    /// `fallbackTo: Input` and a `fallbackValue` are both set.
    #[error("cannot set both a fallback value and the fallback to input flag")]
    FallbackBoth,
}

/// Why a pattern could not be tested against the input.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PatternError {
    /// The field its type needs is not set.
    #[error("{field} is required by type {type_}")]
    MissingField {
        /// `literal` or `regexp`.
        field: &'static str,
        /// The pattern type.
        type_: &'static str,
    },
    /// The input is not a string.
    #[error("unsupported input type '{0}'")]
    InputType(&'static str),
    /// The regexp does not compile.
    #[error("cannot compile regexp: {0}")]
    Regexp(String),
}

/// Tests the patterns in order.
pub fn resolve(t: &MatchTransform, input: &Value) -> Result<Value, Error> {
    for (index, p) in t.patterns.iter().enumerate() {
        if matches(p, input).map_err(|source| Error::Pattern { index, source })? {
            return Ok(p.result.clone().unwrap_or(Value::Null));
        }
    }
    match t.fallback_to.unwrap_or_default() {
        MatchFallbackTo::Input if t.fallback_value.is_some() => Err(Error::FallbackBoth),
        MatchFallbackTo::Input => Ok(input.clone()),
        MatchFallbackTo::Value => Ok(t.fallback_value.clone().unwrap_or(Value::Null)),
    }
}

/// Whether one pattern matches the input.
pub fn matches(p: &MatchTransformPattern, input: &Value) -> Result<bool, PatternError> {
    match p.type_ {
        MatchTransformPatternType::Literal => {
            let literal = p.literal.as_deref().ok_or(PatternError::MissingField {
                field: "literal",
                type_: "literal",
            })?;
            let s = input
                .as_str()
                .ok_or_else(|| PatternError::InputType(type_name(input)))?;
            Ok(s == literal)
        }
        MatchTransformPatternType::Regexp => {
            let re = p.regexp.as_deref().ok_or(PatternError::MissingField {
                field: "regexp",
                type_: "regexp",
            })?;
            let re = Regex::new(re).map_err(|e| PatternError::Regexp(e.to_string()))?;
            if input.is_null() {
                return Err(PatternError::InputType("null"));
            }
            let s = input
                .as_str()
                .ok_or_else(|| PatternError::InputType(type_name(input)))?;
            Ok(re.is_match(s))
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use serde_json::json;

    use super::*;

    fn t(v: Value) -> MatchTransform {
        serde_json::from_value(v).unwrap()
    }

    // Crossplane docs, "Match transforms": literal patterns compare exactly, regexp
    // patterns search; the first match's result wins.
    #[test]
    fn first_matching_pattern_wins() {
        let m = t(json!({
            "patterns": [
                {"type": "literal", "literal": "us-west-2", "result": "us-west"},
                {"type": "regexp", "regexp": "^eu-.*", "result": {"region": "eu"}},
                {"type": "regexp", "regexp": "north", "result": "never"}
            ],
            "fallbackValue": "unknown"
        }));
        assert_eq!(resolve(&m, &json!("us-west-2")).unwrap(), json!("us-west"));
        assert_eq!(
            resolve(&m, &json!("eu-north-1")).unwrap(),
            json!({"region": "eu"})
        );
        // Literal matching is case sensitive.
        assert_eq!(resolve(&m, &json!("US-WEST-2")).unwrap(), json!("unknown"));
    }

    // Docs: `fallbackTo: Input` returns the input when nothing matches; without a
    // fallback value the output is null.
    #[test]
    fn fallbacks() {
        let m = t(json!({"patterns": [{"literal": "a", "result": 1}], "fallbackTo": "Input"}));
        assert_eq!(resolve(&m, &json!("z")).unwrap(), json!("z"));
        let m = t(json!({"patterns": [{"literal": "a", "result": 1}]}));
        assert_eq!(resolve(&m, &json!("z")).unwrap(), Value::Null);
        let m = t(json!({"patterns": [], "fallbackTo": "Input", "fallbackValue": null}));
        assert_eq!(resolve(&m, &json!("z")).unwrap_err(), Error::FallbackBoth);
    }

    // Upstream: patterns only match string input.
    #[test]
    fn non_string_input_is_an_error() {
        let m = t(json!({"patterns": [{"type": "literal", "literal": "1", "result": 1}]}));
        assert_eq!(
            resolve(&m, &json!(1)).unwrap_err().to_string(),
            "cannot match pattern at index 0: unsupported input type 'int64'"
        );
        let m = t(json!({"patterns": [{"type": "regexp", "regexp": ".", "result": 1}]}));
        assert_eq!(
            resolve(&m, &Value::Null).unwrap_err().to_string(),
            "cannot match pattern at index 0: unsupported input type 'null'"
        );
        let m = t(json!({"patterns": [{"type": "regexp", "regexp": "(", "result": 1}]}));
        assert!(matches!(
            resolve(&m, &json!("x")),
            Err(Error::Pattern {
                index: 0,
                source: PatternError::Regexp(_)
            })
        ));
    }
}
