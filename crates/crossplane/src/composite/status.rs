//! The XR's `Synced` and `Ready` conditions and the status it is written with.

use apis::condition::{self, Condition};
use serde_json::Value;

/// What one successful compose found.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Outcome {
    /// Template names of composed resources that are not ready.
    pub unready: Vec<String>,
    /// Template names of composed resources that could not be applied.
    pub unsynced: Vec<String>,
    /// The XR's readiness when a function stated it (it overrides the composed resources').
    pub composite_ready: Option<bool>,
    /// Conditions functions set on the XR.
    pub conditions: Vec<Condition>,
    /// The smallest response TTL of the pipeline's functions.
    pub ttl: Option<std::time::Duration>,
}

/// `Synced`, `Ready` and the functions' conditions for a successful compose.
pub fn all(outcome: &Outcome) -> Vec<Condition> {
    let [synced, mut ready] = conditions(outcome);
    match outcome.composite_ready {
        Some(true) => ready = Condition::available(),
        Some(false) => ready = Condition::creating(),
        None => {}
    }
    let mut all = vec![synced, ready];
    all.extend(outcome.conditions.iter().cloned());
    all
}

/// `Synced` and `Ready` for a successful compose, with upstream's reasons and messages.
pub fn conditions(outcome: &Outcome) -> [Condition; 2] {
    let synced = if outcome.unsynced.is_empty() {
        Condition::reconcile_success()
    } else {
        Condition::reconcile_error(format!("Unsynced resources: {}", outcome.unsynced.join(", ")))
    };
    let ready = if outcome.unready.is_empty() {
        Condition::available()
    } else {
        Condition::creating().with_message(format!("Unready resources: {}", outcome.unready.join(", ")))
    };
    [synced, ready]
}

/// The current conditions of an object (entries that do not parse are dropped).
pub fn current(obj: &Value) -> Vec<Condition> {
    obj.pointer("/status/conditions")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(|c| serde_json::from_value(c.clone()).ok())
                .collect()
        })
        .unwrap_or_default()
}

/// The new status: the current one, with `overlay` merged in and `new` conditions set. `None` when it
/// equals the current status (nothing to write).
pub fn next(obj: &Value, overlay: Option<&Value>, new: impl IntoIterator<Item = Condition>) -> Option<Value> {
    let before = obj
        .get("status")
        .cloned()
        .unwrap_or_else(|| serde_json::json!({}));
    let mut status = before.clone();
    if let Some(o) = overlay {
        merge(&mut status, o);
    }
    let mut conds = current(obj);
    let changed = condition::set(&mut conds, new);
    if changed || status.get("conditions").is_none() && !conds.is_empty() {
        status["conditions"] = serde_json::to_value(&conds).unwrap_or(Value::Null);
    }
    (status != before).then_some(status)
}

/// Deep-merges `overlay` into `base` (objects merge, everything else replaces).
pub fn merge(base: &mut Value, overlay: &Value) {
    match (base, overlay) {
        (Value::Object(b), Value::Object(o)) => {
            for (k, v) in o {
                match b.get_mut(k) {
                    Some(slot) => merge(slot, v),
                    None => {
                        b.insert(k.clone(), v.clone());
                    }
                }
            }
        }
        (b, o) => *b = o.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn ready_and_synced_messages() {
        let [s, r] = conditions(&Outcome {
            unready: vec!["a".into(), "b".into()],
            ..Outcome::default()
        });
        assert_eq!(
            (s.reason.as_str(), r.reason.as_str()),
            ("ReconcileSuccess", "Creating")
        );
        assert_eq!(r.message.as_deref(), Some("Unready resources: a, b"));
        let [s, r] = conditions(&Outcome::default());
        assert_eq!(r.reason, "Available");
        assert_eq!(s.status, apis::ConditionStatus::True);
    }

    #[test]
    fn next_is_none_when_nothing_changes() {
        let xr = json!({"status": {}});
        let st = next(&xr, Some(&json!({"x": 1})), conditions(&Outcome::default())).expect("changed");
        assert_eq!(st["x"], 1);
        let xr2 = json!({"status": st});
        assert!(next(&xr2, Some(&json!({"x": 1})), conditions(&Outcome::default())).is_none());
    }
}
