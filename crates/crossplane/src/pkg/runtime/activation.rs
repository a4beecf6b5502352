//! Safe start (upstream `runtime.go` `BuilderWithMRDs`): a Provider revision with the `safe-start`
//! capability whose ManagedResourceDefinitions are all Inactive runs its Deployment at 0 replicas,
//! `RuntimeActive=False` (`AwaitingActivation`) and `RuntimeHealthy=True`, until the first of them is
//! activated. A one-way latch: once the revision is `RuntimeActive` (`ActiveRuntime`), it is never
//! scaled back to 0. A revision without the capability, or without MRDs, is never held back.

use apis::condition::{Condition, ConditionStatus};
use apis::pkg::package::{
    REASON_ACTIVE_RUNTIME, REASON_AWAITING_ACTIVATION, REASON_HEALTHY, TYPE_RUNTIME_ACTIVE,
    TYPE_RUNTIME_HEALTHY,
};
use kube::api::{DynamicObject, ListParams};
use kube::{Api, ResourceExt};
use serde_json::Value;

use crate::error::Error;
use crate::pkg::object;

/// Upstream's words for a runtime held at 0 replicas.
pub const AWAITING_MESSAGE: &str =
    "Package runtime is scaled to zero; awaiting the first ManagedResourceDefinition to be activated";

/// Whether the revision declares `safe-start` (in `status.capabilities`, copied from its package).
pub fn safe_start(rev: &DynamicObject) -> bool {
    let caps: Vec<&str> = rev
        .data
        .pointer("/status/capabilities")
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    apis::pkg::meta::capabilities_contain(&caps, apis::pkg::meta::CAPABILITY_SAFE_START)
}

/// Whether the revision has already been `RuntimeActive` (the latch).
pub fn latched(rev: &DynamicObject) -> bool {
    apis::condition::get(&object::conditions(rev), TYPE_RUNTIME_ACTIVE)
        .is_some_and(|c| c.reason == REASON_ACTIVE_RUNTIME)
}

/// Whether the runtime waits for activation, given the states of the MRDs the revision controls
/// (`true` for Active).
pub fn decide(safe_start: bool, latched: bool, mrds_active: &[bool]) -> bool {
    safe_start && !latched && !mrds_active.is_empty() && !mrds_active.iter().any(|a| *a)
}

/// Whether revision `rev`'s runtime waits for activation: reads the MRDs it controls.
pub async fn awaiting(client: &kube::Client, rev: &DynamicObject) -> Result<bool, Error> {
    if !safe_start(rev) || latched(rev) {
        return Ok(false);
    }
    let uid = rev.uid().unwrap_or_default();
    let mrds: Api<DynamicObject> = Api::all_with(client.clone(), &crate::mrd::mrd_api());
    let states: Vec<bool> = mrds
        .list(&ListParams::default())
        .await?
        .items
        .iter()
        .filter(|m| object::controller_of(m.owner_references()).is_some_and(|o| o.uid == uid))
        .map(crate::mrd::crd::is_active)
        .collect();
    Ok(decide(true, false, &states))
}

/// The conditions of a runtime held at 0 replicas: healthy, and not active.
pub fn awaiting_conditions() -> Vec<Condition> {
    vec![
        Condition::new(TYPE_RUNTIME_HEALTHY, ConditionStatus::True, REASON_HEALTHY)
            .with_message(AWAITING_MESSAGE),
        Condition::new(
            TYPE_RUNTIME_ACTIVE,
            ConditionStatus::False,
            REASON_AWAITING_ACTIVATION,
        )
        .with_message(AWAITING_MESSAGE),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn only_a_safe_start_revision_with_all_mrds_inactive_waits() {
        assert!(decide(true, false, &[false, false]));
        assert!(!decide(true, false, &[false, true]), "one Active MRD starts it");
        assert!(
            !decide(false, false, &[false]),
            "no safe-start: today's behaviour"
        );
        assert!(!decide(true, true, &[false]), "the latch holds");
        assert!(!decide(true, false, &[]), "no MRDs: nothing to wait for");
    }

    #[test]
    fn capabilities_and_the_latch_are_read_from_the_revision() {
        let rev: DynamicObject = serde_json::from_value(json!({
            "apiVersion": "pkg.crossplane.io/v1", "kind": "ProviderRevision",
            "metadata": {"name": "r"},
            "status": {"capabilities": ["SafeStart"], "conditions": [
                {"type": "RuntimeActive", "status": "True", "reason": "ActiveRuntime",
                 "lastTransitionTime": "2025-01-01T00:00:00Z"}]},
        }))
        .expect("a revision");
        assert!(safe_start(&rev));
        assert!(latched(&rev));
    }
}
