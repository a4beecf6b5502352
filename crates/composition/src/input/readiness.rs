//! Readiness check types (upstream `resources_common.go`).

use serde::{Deserialize, Serialize};

/// The readiness check types.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum ReadinessCheckType {
    /// Ready when `fieldPath` exists.
    NonEmpty,
    /// Ready when the string at `fieldPath` equals `matchString`.
    MatchString,
    /// Ready when the integer at `fieldPath` equals `matchInteger`.
    MatchInteger,
    /// Ready when the boolean at `fieldPath` is true.
    MatchTrue,
    /// Ready when the boolean at `fieldPath` is false.
    MatchFalse,
    /// Ready when a condition has a status.
    MatchCondition,
    /// Always ready.
    None,
}

impl ReadinessCheckType {
    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::NonEmpty => "NonEmpty",
            Self::MatchString => "MatchString",
            Self::MatchInteger => "MatchInteger",
            Self::MatchTrue => "MatchTrue",
            Self::MatchFalse => "MatchFalse",
            Self::MatchCondition => "MatchCondition",
            Self::None => "None",
        }
    }
}

/// One readiness check.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ReadinessCheck {
    /// The check type.
    #[serde(rename = "type")]
    pub type_: ReadinessCheckType,
    /// The field checked; required except by `None` and `MatchCondition`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub field_path: Option<String>,
    /// The expected string of `MatchString`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub match_string: Option<String>,
    /// The expected integer of `MatchInteger`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub match_integer: Option<i64>,
    /// The expected condition of `MatchCondition`; `Ready`=`True` when unset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub match_condition: Option<MatchConditionReadinessCheck>,
}

/// The condition a `MatchCondition` check expects.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MatchConditionReadinessCheck {
    /// The condition type; `Ready` when unset.
    #[serde(default = "default_condition_type", rename = "type")]
    pub type_: String,
    /// The expected status; `True` when unset.
    #[serde(default = "default_condition_status")]
    pub status: String,
}

impl Default for MatchConditionReadinessCheck {
    fn default() -> Self {
        Self {
            type_: default_condition_type(),
            status: default_condition_status(),
        }
    }
}

fn default_condition_type() -> String {
    "Ready".to_owned()
}

fn default_condition_status() -> String {
    "True".to_owned()
}
