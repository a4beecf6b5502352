//! Status conditions: the `Condition` type, the constructors crossplane-runtime offers for the `Ready` and
//! `Synced` types, and the rule by which a condition replaces an older one of the same type.

use jiff::Timestamp;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Condition type `Ready`: whether the external resource is usable.
pub const TYPE_READY: &str = "Ready";
/// Condition type `Synced`: whether the last reconcile succeeded.
pub const TYPE_SYNCED: &str = "Synced";

/// Reason `Available` (Ready=True).
pub const REASON_AVAILABLE: &str = "Available";
/// Reason `Unavailable` (Ready=False).
pub const REASON_UNAVAILABLE: &str = "Unavailable";
/// Reason `Creating` (Ready=False).
pub const REASON_CREATING: &str = "Creating";
/// Reason `Deleting` (Ready=False).
pub const REASON_DELETING: &str = "Deleting";
/// Reason `ReconcileSuccess` (Synced=True).
pub const REASON_RECONCILE_SUCCESS: &str = "ReconcileSuccess";
/// Reason `ReconcileError` (Synced=False).
pub const REASON_RECONCILE_ERROR: &str = "ReconcileError";
/// Reason `ReconcilePaused` (Synced=False).
pub const REASON_RECONCILE_PAUSED: &str = "ReconcilePaused";

/// A condition's status.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum ConditionStatus {
    /// The condition holds.
    True,
    /// The condition does not hold.
    False,
    /// Not known.
    Unknown,
}

impl ConditionStatus {
    /// `"True"`, `"False"` or `"Unknown"`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::True => "True",
            Self::False => "False",
            Self::Unknown => "Unknown",
        }
    }
}

/// One status condition, as Crossplane writes it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Condition {
    /// The condition type, e.g. `Ready`.
    #[serde(rename = "type")]
    pub type_: String,
    /// Its status.
    pub status: ConditionStatus,
    /// When the condition last changed from one status to another.
    pub last_transition_time: Time,
    /// A machine-readable reason, e.g. `ReconcileError`.
    pub reason: String,
    /// A human-readable message.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// The generation of the object the condition was set for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
}

impl Condition {
    /// A condition with the current time as its transition time and no message.
    pub fn new(type_: &str, status: ConditionStatus, reason: &str) -> Self {
        Self {
            type_: type_.to_owned(),
            status,
            last_transition_time: Time(Timestamp::now()),
            reason: reason.to_owned(),
            message: None,
            observed_generation: None,
        }
    }

    /// The same condition with a message.
    #[must_use]
    pub fn with_message(mut self, message: impl Into<String>) -> Self {
        let message = message.into();
        self.message = (!message.is_empty()).then_some(message);
        self
    }

    /// The same condition stamped with an observed generation.
    #[must_use]
    pub fn with_observed_generation(mut self, generation: Option<i64>) -> Self {
        self.observed_generation = generation;
        self
    }

    /// Whether two conditions are the same but for their transition time (and for the observed generation
    /// when either of them has none, as crossplane-runtime compares).
    pub fn equal(&self, other: &Condition) -> bool {
        let generations_match = match (self.observed_generation, other.observed_generation) {
            (Some(a), Some(b)) if a != 0 && b != 0 => a == b,
            _ => true,
        };
        self.type_ == other.type_
            && self.status == other.status
            && self.reason == other.reason
            && self.message.as_deref().unwrap_or("") == other.message.as_deref().unwrap_or("")
            && generations_match
    }

    /// `Ready=True`, reason `Available`.
    pub fn available() -> Self {
        Self::new(TYPE_READY, ConditionStatus::True, REASON_AVAILABLE)
    }

    /// `Ready=False`, reason `Unavailable`.
    pub fn unavailable() -> Self {
        Self::new(TYPE_READY, ConditionStatus::False, REASON_UNAVAILABLE)
    }

    /// `Ready=False`, reason `Creating`.
    pub fn creating() -> Self {
        Self::new(TYPE_READY, ConditionStatus::False, REASON_CREATING)
    }

    /// `Ready=False`, reason `Deleting`.
    pub fn deleting() -> Self {
        Self::new(TYPE_READY, ConditionStatus::False, REASON_DELETING)
    }

    /// `Synced=True`, reason `ReconcileSuccess`.
    pub fn reconcile_success() -> Self {
        Self::new(TYPE_SYNCED, ConditionStatus::True, REASON_RECONCILE_SUCCESS)
    }

    /// `Synced=False`, reason `ReconcileError`, with the error as the message.
    pub fn reconcile_error(error: impl std::fmt::Display) -> Self {
        Self::new(TYPE_SYNCED, ConditionStatus::False, REASON_RECONCILE_ERROR).with_message(error.to_string())
    }

    /// `Synced=False`, reason `ReconcilePaused`.
    pub fn reconcile_paused() -> Self {
        Self::new(TYPE_SYNCED, ConditionStatus::False, REASON_RECONCILE_PAUSED)
    }
}

/// The condition of type `type_`, if any.
pub fn get<'a>(conditions: &'a [Condition], type_: &str) -> Option<&'a Condition> {
    conditions.iter().find(|c| c.type_ == type_)
}

/// crossplane-runtime's `SetConditions`: each new condition replaces the one of the same type unless the
/// two are [equal](Condition::equal), in which case the old one (and its transition time) stays. Returns
/// whether anything changed.
pub fn set(conditions: &mut Vec<Condition>, new: impl IntoIterator<Item = Condition>) -> bool {
    let mut changed = false;
    for c in new {
        match conditions.iter_mut().find(|old| old.type_ == c.type_) {
            Some(old) if old.equal(&c) => {}
            Some(old) => {
                let keep_time = old.status == c.status;
                let time = old.last_transition_time.clone();
                *old = c;
                if keep_time {
                    old.last_transition_time = time;
                }
                changed = true;
            }
            None => {
                conditions.push(c);
                changed = true;
            }
        }
    }
    changed
}

/// Whether the condition `type_` is present with status `True`.
pub fn is_true(conditions: &[Condition], type_: &str) -> bool {
    get(conditions, type_).is_some_and(|c| c.status == ConditionStatus::True)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn constructors_match_crossplane() {
        let c = Condition::reconcile_error("boom");
        assert_eq!(
            (
                c.type_.as_str(),
                c.status,
                c.reason.as_str(),
                c.message.as_deref()
            ),
            ("Synced", ConditionStatus::False, "ReconcileError", Some("boom"))
        );
        assert_eq!(Condition::available().reason, "Available");
        assert_eq!(Condition::creating().status, ConditionStatus::False);
        assert_eq!(Condition::reconcile_paused().reason, "ReconcilePaused");
    }

    #[test]
    fn set_replaces_only_when_different() {
        let mut cs = Vec::new();
        assert!(set(&mut cs, [Condition::creating()]));
        let t0 = cs[0].last_transition_time.clone();
        assert!(!set(&mut cs, [Condition::creating()]));
        assert_eq!(cs[0].last_transition_time, t0);
        assert!(set(
            &mut cs,
            [Condition::available(), Condition::reconcile_success()]
        ));
        assert_eq!(cs.len(), 2);
        assert!(is_true(&cs, TYPE_READY));
        assert!(is_true(&cs, TYPE_SYNCED));
    }

    #[test]
    fn serializes_like_crossplane() {
        let c = Condition::reconcile_paused();
        let v = serde_json::to_value(&c).expect("json");
        assert_eq!(v["type"], "Synced");
        assert_eq!(v["status"], "False");
        assert_eq!(v["reason"], "ReconcilePaused");
        assert!(v.get("message").is_none());
        assert!(v["lastTransitionTime"].is_string());
    }
}
