//! `RuntimeHealthy` from the Deployment's `Available` condition, as upstream: True when Available is
//! True; otherwise (not yet reported included) False, with the Deployment's own words and what to look
//! at.

use apis::condition::{Condition, ConditionStatus};
use apis::pkg::package::{REASON_HEALTHY, REASON_UNHEALTHY, TYPE_RUNTIME_HEALTHY};
use k8s_openapi::api::apps::v1::Deployment;
use kube::ResourceExt;

/// Whether the Deployment's `Available` condition is True.
pub fn available(d: &Deployment) -> bool {
    condition(d, "Available").is_some_and(|c| c.status == "True")
}

fn condition<'a>(
    d: &'a Deployment,
    type_: &str,
) -> Option<&'a k8s_openapi::api::apps::v1::DeploymentCondition> {
    d.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == type_)
}

/// The revision's `RuntimeHealthy` from its Deployment.
pub fn runtime_healthy(d: &Deployment) -> Condition {
    if available(d) {
        return Condition::new(TYPE_RUNTIME_HEALTHY, ConditionStatus::True, REASON_HEALTHY);
    }
    let name = format!(
        "Deployment {}/{}",
        d.namespace().unwrap_or_default(),
        d.name_any()
    );
    let status = d.status.clone().unwrap_or_default();
    let want = d.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1);
    let ready = status.ready_replicas.unwrap_or(0);
    let reported = condition(d, "Available").map_or_else(
        || "the Deployment controller has not reported its availability yet".to_string(),
        |c| {
            c.message
                .clone()
                .unwrap_or_else(|| c.reason.clone().unwrap_or_default())
        },
    );
    let mut why = format!("{name} is not Available ({ready} of {want} replicas ready): {reported}");
    if let Some(p) = condition(d, "Progressing").filter(|p| p.status == "False")
        && let Some(m) = &p.message
    {
        why.push_str(&format!("; {m}"));
    }
    if let Some(f) = condition(d, "ReplicaFailure").filter(|f| f.status == "True")
        && let Some(m) = &f.message
    {
        why.push_str(&format!("; {m}"));
    }
    why.push_str(&format!(
        "; the previous revision keeps running until this one is Available: look at its Pods (kubectl -n {} get pods -l {}={}) and their events",
        d.namespace().unwrap_or_default(),
        apis::pkg::LABEL_REVISION,
        d.labels().get(apis::pkg::LABEL_REVISION).cloned().unwrap_or_default()
    ));
    Condition::new(TYPE_RUNTIME_HEALTHY, ConditionStatus::False, REASON_UNHEALTHY).with_message(why)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn deployment(conditions: serde_json::Value) -> Deployment {
        serde_json::from_value(json!({
            "metadata": {"name": "d", "namespace": "ns", "labels": {"pkg.crossplane.io/revision": "r"}},
            "spec": {"replicas": 2, "selector": {}, "template": {}},
            "status": {"readyReplicas": 1, "conditions": conditions},
        }))
        .expect("deployment")
    }

    #[test]
    fn available_is_healthy() {
        let c = runtime_healthy(&deployment(json!([{"type": "Available", "status": "True"}])));
        assert_eq!(c.status, ConditionStatus::True);
    }

    #[test]
    fn not_available_says_why_in_words() {
        let c = runtime_healthy(&deployment(json!([
            {"type": "Available", "status": "False", "reason": "MinimumReplicasUnavailable",
             "message": "Deployment does not have minimum availability."},
            {"type": "Progressing", "status": "False", "reason": "ProgressDeadlineExceeded",
             "message": "ReplicaSet \"d-1\" has timed out progressing."},
        ])));
        assert_eq!(c.status, ConditionStatus::False);
        let m = c.message.expect("message");
        assert!(
            m.contains("Deployment ns/d is not Available (1 of 2 replicas ready)"),
            "{m}"
        );
        assert!(
            m.contains("minimum availability") && m.contains("timed out"),
            "{m}"
        );
        assert!(m.contains("pkg.crossplane.io/revision=r"), "{m}");
    }

    #[test]
    fn no_conditions_yet_is_not_healthy_either() {
        let c = runtime_healthy(&deployment(json!([])));
        assert_eq!(c.status, ConditionStatus::False);
        assert!(c.message.expect("message").contains("has not reported"));
    }
}
