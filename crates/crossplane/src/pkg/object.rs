//! Reading and writing package and revision objects as dynamic objects: their spec fields, their
//! conditions, status patches and owner references.

use apis::condition::{self, Condition};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::api::{DynamicObject, Patch, PatchParams};
use kube::{Api, ResourceExt};
use serde_json::{Value, json};

use crate::error::Error;

/// A string at `pointer` (`/spec/package`) of an object.
pub fn str_at<'a>(obj: &'a DynamicObject, pointer: &str) -> Option<&'a str> {
    obj.data.pointer(pointer).and_then(Value::as_str)
}

/// The object's conditions.
pub fn conditions(obj: &DynamicObject) -> Vec<Condition> {
    obj.data
        .pointer("/status/conditions")
        .and_then(|c| serde_json::from_value(c.clone()).ok())
        .unwrap_or_default()
}

/// Whether condition `type_` is True.
pub fn is_true(obj: &DynamicObject, type_: &str) -> bool {
    condition::is_true(&conditions(obj), type_)
}

/// The message of condition `type_`, if any.
pub fn message(obj: &DynamicObject, type_: &str) -> Option<String> {
    conditions(obj)
        .into_iter()
        .find(|c| c.type_ == type_)
        .and_then(|c| c.message)
}

/// Merge-patches the status of `obj`: `fields` (beside conditions) and the conditions `new` set on
/// top of the current ones. Writes nothing when nothing changed (a null field, which removes it, is
/// unchanged when absent).
pub async fn patch_status(
    api: &Api<DynamicObject>,
    obj: &DynamicObject,
    new: Vec<Condition>,
    fields: Value,
) -> Result<(), Error> {
    let mut conds = conditions(obj);
    let changed = condition::set(&mut conds, new);
    let current = obj.data.get("status").cloned().unwrap_or(json!({}));
    let fields_changed = fields
        .as_object()
        .is_some_and(|m| m.iter().any(|(k, v)| current.get(k).unwrap_or(&Value::Null) != v));
    if !changed && !fields_changed {
        return Ok(());
    }
    let mut status = fields;
    if let Some(m) = status.as_object_mut() {
        m.insert("conditions".into(), serde_json::to_value(&conds)?);
    }
    // The resourceVersion makes the write conditional: the revision and runtime controllers both
    // write a revision's conditions, and neither may drop what the other wrote (a 409 is retried).
    let mut patch = json!({ "status": status });
    if let Some(rv) = obj.resource_version() {
        patch["metadata"] = json!({ "resourceVersion": rv });
    }
    api.patch_status(&obj.name_any(), &PatchParams::default(), &Patch::Merge(&patch))
        .await?;
    Ok(())
}

/// A controller (or, with `controller` false, plain) owner reference to `obj`.
pub fn owner_ref(
    obj: &DynamicObject,
    api_version: &str,
    kind: &str,
    controller: bool,
) -> Result<OwnerReference, Error> {
    let uid = obj
        .uid()
        .ok_or_else(|| Error::Message(format!("{kind} {} has no uid yet", obj.name_any())))?;
    Ok(OwnerReference {
        api_version: api_version.to_string(),
        kind: kind.to_string(),
        name: obj.name_any(),
        uid,
        controller: Some(controller),
        block_owner_deletion: Some(true),
    })
}

/// The controller reference among `refs`, if any.
pub fn controller_of(refs: &[OwnerReference]) -> Option<&OwnerReference> {
    refs.iter().find(|r| r.controller == Some(true))
}
