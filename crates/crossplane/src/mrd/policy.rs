//! An MRAP activates MRDs (upstream `internal/controller/apiextensions/activationpolicy`): every MRD
//! whose name matches one of `spec.activate` (wildcards, [`apis::apiextensions::activation::matches`])
//! gets `spec.state: Active` (a merge patch of that field only), and `status.activated` lists the
//! matching MRDs, sorted. `Healthy` is True (`Running`) when every activation succeeded, else Unknown
//! (`EncounteredErrors`) with how many failed. Nothing is ever deactivated.

use std::sync::Arc;

use apis::apiextensions::activation::{
    ManagedResourceActivationPolicySpec, REASON_HEALTHY, REASON_UNHEALTHY, TYPE_HEALTHY,
};
use apis::condition::{Condition, ConditionStatus};
use kube::api::{DynamicObject, ListParams, Patch, PatchParams};
use kube::runtime::controller::Action;
use kube::{Api, ResourceExt};
use serde_json::json;

use super::{Ctx, mrap_api, mrd_api};
use crate::error::Error;
use crate::pkg::object;

/// One reconcile of an MRAP.
pub async fn reconcile(mrap: Arc<DynamicObject>, ctx: Arc<Ctx>) -> Result<Action, Error> {
    if mrap.metadata.deletion_timestamp.is_some()
        || mrap
            .annotations()
            .get(crate::pkg::manager::ANNOTATION_PAUSED)
            .map(String::as_str)
            == Some("true")
    {
        return Ok(Action::await_change());
    }
    let policy = mrap.name_any();
    let mraps: Api<DynamicObject> = Api::all_with(ctx.client.clone(), &mrap_api());
    let spec: ManagedResourceActivationPolicySpec = match mrap.data.get("spec") {
        Some(s) => serde_json::from_value(s.clone())?,
        None => ManagedResourceActivationPolicySpec::default(),
    };
    let mrds: Api<DynamicObject> = Api::all_with(ctx.client.clone(), &mrd_api());
    let mut lp = ListParams::default();
    if let Some(s) = &ctx.selector {
        lp = lp.labels(s);
    }
    let mut activated = Vec::new();
    let mut failed = Vec::new();
    for mrd in mrds.list(&lp).await?.items {
        let name = mrd.name_any();
        if !spec.activates(&name) {
            continue;
        }
        if !super::crd::is_active(&mrd) {
            let patch = json!({"spec": {"state": "Active"}});
            match mrds
                .patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
                .await
            {
                Ok(_) => {
                    tracing::info!(policy = %policy, mrd = %name, "activated the ManagedResourceDefinition")
                }
                Err(e) => {
                    let e = Error::from(e);
                    if e.is_not_leader() {
                        return Err(e);
                    }
                    tracing::warn!(policy = %policy, mrd = %name, error = %e, "cannot activate the ManagedResourceDefinition");
                    failed.push(format!("{name}: {e}"));
                }
            }
        }
        activated.push(name);
    }
    activated.sort();
    let condition = if failed.is_empty() {
        Condition::new(TYPE_HEALTHY, ConditionStatus::True, REASON_HEALTHY)
    } else {
        Condition::new(TYPE_HEALTHY, ConditionStatus::Unknown, REASON_UNHEALTHY).with_message(format!(
            "failed to activate {} of {} ManagedResourceDefinitions: {}",
            failed.len(),
            activated.len(),
            failed.join("; ")
        ))
    };
    // An empty list is left out while the status has none, so an unchanged status is never written.
    let fields = if activated.is_empty() && mrap.data.pointer("/status/activated").is_none() {
        json!({})
    } else {
        json!({ "activated": activated })
    };
    object::patch_status(&mraps, &mrap, vec![condition], fields).await?;
    Ok(if failed.is_empty() {
        Action::await_change()
    } else {
        Action::requeue(std::time::Duration::from_secs(30))
    })
}
