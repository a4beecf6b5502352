//! An MRD's CRD (upstream `internal/controller/apiextensions/managed/reconciler.go`, `crd.go`).
//!
//! - Deleting: nothing to do (the CRD carries an owner reference to the MRD, so it goes with it).
//! - Paused (`crossplane.io/paused: "true"`): nothing.
//! - Inactive: no CRD; `Established=False`, `InactiveManagedResource`.
//! - Active: the CRD named as the MRD, with the MRD's CRD spec (not its `connectionDetails` and
//!   `state`), owned by the MRD and by the MRD's own owners (its controller, the ProviderRevision,
//!   stays the CRD's controller, as upstream), server-side applied as [`FIELD_MANAGER`], forced.
//!   `Established` follows the CRD's: True `EstablishedManagedResource`, else Unknown
//!   `PendingManagedResource`; a failed write is False with the apiserver's words.
//!
//! An MRD never goes back to Inactive (its CRD refuses the change), so there is no path that deletes a
//! CRD, as upstream.

use std::sync::Arc;
use std::time::Duration;

use apis::apiextensions::mrd::{REASON_ESTABLISHED, REASON_INACTIVE, REASON_PENDING, TYPE_ESTABLISHED};
use apis::condition::{Condition, ConditionStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::api::{DynamicObject, Patch, PatchParams};
use kube::core::ApiResource;
use kube::runtime::controller::Action;
use kube::{Api, ResourceExt};
use serde_json::{Value, json};

use super::{Ctx, mrd_api};
use crate::error::Error;
use crate::pkg::object::{self, owner_ref, str_at};

/// The field manager of the CRDs (upstream's `FieldOwnerMRD`).
pub const FIELD_MANAGER: &str = "apiextensions.crossplane.io/managed";

/// The CRD API.
fn crd_api() -> ApiResource {
    ApiResource::erase::<
        k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition,
    >(&())
}

/// Whether MRD `mrd` is Active.
pub fn is_active(mrd: &DynamicObject) -> bool {
    str_at(mrd, "/spec/state") == Some("Active")
}

/// The CRD that MRD `mrd` stands for: its name, its CRD spec fields, its labels, and owner references
/// to the MRD and to the MRD's owners.
pub fn desired_crd(mrd: &DynamicObject) -> Result<Value, Error> {
    let mut spec = mrd.data.get("spec").cloned().unwrap_or(json!({}));
    if let Some(m) = spec.as_object_mut() {
        m.remove("connectionDetails");
        m.remove("state");
    }
    let mut owners = vec![owner_ref(
        mrd,
        apis::apiextensions::mrd::API_VERSION,
        apis::apiextensions::mrd::KIND,
        false,
    )?];
    owners.extend(mrd.owner_references().iter().cloned());
    Ok(json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {
            "name": mrd.name_any(),
            "labels": mrd.labels(),
            "ownerReferences": owners,
        },
        "spec": spec,
    }))
}

/// One reconcile of an MRD.
pub async fn reconcile(mrd: Arc<DynamicObject>, ctx: Arc<Ctx>) -> Result<Action, Error> {
    if mrd.metadata.deletion_timestamp.is_some()
        || mrd
            .annotations()
            .get(crate::pkg::manager::ANNOTATION_PAUSED)
            .map(String::as_str)
            == Some("true")
    {
        return Ok(Action::await_change());
    }
    let mrds: Api<DynamicObject> = Api::all_with(ctx.client.clone(), &mrd_api());
    if !is_active(&mrd) {
        let c = Condition::new(TYPE_ESTABLISHED, ConditionStatus::False, REASON_INACTIVE)
            .with_message("the ManagedResourceDefinition is Inactive, so its CustomResourceDefinition is not created; activate it (spec.state: Active, or a ManagedResourceActivationPolicy that names it)");
        object::patch_status(&mrds, &mrd, vec![c], json!({})).await?;
        return Ok(Action::await_change());
    }
    let name = mrd.name_any();
    let desired = desired_crd(&mrd)?;
    let crds: Api<DynamicObject> = Api::all_with(ctx.client.clone(), &crd_api());
    let applied = match write(&crds, &name, &desired).await {
        Ok(c) => c,
        Err(e) if e.is_not_leader() || e.is_conflict() => return Err(e),
        Err(e) => {
            let c = Condition::new(TYPE_ESTABLISHED, ConditionStatus::False, REASON_PENDING)
                .with_message(format!("cannot apply CustomResourceDefinition {name}: {e}"));
            object::patch_status(&mrds, &mrd, vec![c], json!({})).await?;
            return Ok(Action::requeue(Duration::from_secs(30)));
        }
    };
    let established = object::is_true(&applied, "Established");
    let c = if established {
        Condition::new(TYPE_ESTABLISHED, ConditionStatus::True, REASON_ESTABLISHED)
    } else {
        Condition::new(TYPE_ESTABLISHED, ConditionStatus::Unknown, REASON_PENDING).with_message(format!(
            "waiting for CustomResourceDefinition {name} to be established"
        ))
    };
    object::patch_status(&mrds, &mrd, vec![c], json!({})).await?;
    if established {
        tracing::debug!(mrd = %name, "the CustomResourceDefinition is established");
        Ok(Action::await_change())
    } else {
        // The CRD watch brings its establishment; look again in case it was missed.
        Ok(Action::requeue(Duration::from_secs(5)))
    }
}

/// Applies the CRD. When the stored CRD names another controller (it was installed before MRDs, or
/// an upgrade moved the MRD to a new revision while another field manager holds the old reference),
/// its owner references are first replaced, so the apply never leaves two controllers.
async fn write(crds: &Api<DynamicObject>, name: &str, desired: &Value) -> Result<DynamicObject, Error> {
    let want: Vec<OwnerReference> = serde_json::from_value(desired["metadata"]["ownerReferences"].clone())?;
    if let Some(existing) = crds.get_opt(name).await? {
        let theirs = object::controller_of(existing.owner_references()).map(|o| o.uid.clone());
        let ours = object::controller_of(&want).map(|o| o.uid.clone());
        if theirs.is_some() && theirs != ours {
            let patch = json!({"metadata": {
                "ownerReferences": want,
                "resourceVersion": existing.resource_version(),
            }});
            crds.patch(name, &PatchParams::default(), &Patch::Merge(&patch))
                .await?;
        }
    }
    let pp = PatchParams::apply(FIELD_MANAGER).force();
    Ok(crds.patch(name, &pp, &Patch::Apply(desired)).await?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_crd_is_the_mrds_spec_owned_by_the_mrd_and_its_controller() {
        let mrd: DynamicObject = serde_json::from_value(json!({
            "apiVersion": "apiextensions.crossplane.io/v1alpha1", "kind": "ManagedResourceDefinition",
            "metadata": {"name": "nopresources.nop.example.org", "uid": "mrd-uid",
                "labels": {"team": "a"},
                "ownerReferences": [{"apiVersion": "pkg.crossplane.io/v1", "kind": "ProviderRevision",
                    "name": "rev", "uid": "rev-uid", "controller": true}]},
            "spec": {"group": "nop.example.org", "scope": "Cluster", "state": "Active",
                "names": {"kind": "NopResource", "plural": "nopresources"},
                "connectionDetails": [{"name": "k", "description": "d"}],
                "versions": [{"name": "v1alpha1", "served": true, "storage": true}]},
        }))
        .expect("an MRD");
        assert!(is_active(&mrd));
        let crd = desired_crd(&mrd).expect("a CRD");
        assert_eq!(crd["metadata"]["name"], "nopresources.nop.example.org");
        assert_eq!(crd["spec"]["group"], "nop.example.org");
        assert!(crd["spec"].get("state").is_none() && crd["spec"].get("connectionDetails").is_none());
        assert_eq!(crd["metadata"]["labels"]["team"], "a");
        let owners = &crd["metadata"]["ownerReferences"];
        assert_eq!(owners[0]["kind"], "ManagedResourceDefinition");
        assert_eq!(owners[0]["controller"], false);
        assert_eq!(owners[1]["kind"], "ProviderRevision");
        assert_eq!(owners[1]["controller"], true);
    }
}
