//! The claim's connection Secret (crossplane `claim/connection.go`): a copy of its XR's connection
//! Secret in the claim's namespace, named by the claim's `spec.writeConnectionSecretToRef.name`,
//! controlled by the claim.

use k8s_openapi::api::core::v1::Secret;
use kube::Api;
use kube::api::{Patch, PatchParams};
use serde_json::{Value, json};

use crate::composite::connection::{SECRET_TYPE, secret_ref};
use crate::error::Error;

/// Copies the XR's connection Secret to the claim's; whether it wrote anything new. Nothing happens
/// when either names no Secret or the XR's does not exist yet; an XR Secret that the XR does not
/// control, or a claim Secret that something else controls, is an error, as upstream.
pub async fn propagate(client: &kube::Client, claim: &Value, xr: &Value) -> Result<bool, Error> {
    let Some((from_ns, from_name)) = secret_ref(xr) else {
        return Ok(false);
    };
    let Some((to_ns, to_name)) = secret_ref(claim) else {
        return Ok(false);
    };
    let from: Api<Secret> = Api::namespaced(client.clone(), &from_ns);
    let Some(source) = from.get_opt(&from_name).await? else {
        return Ok(false);
    };
    let xr_uid = xr.pointer("/metadata/uid").and_then(Value::as_str);
    let controlled = source
        .metadata
        .owner_references
        .iter()
        .flatten()
        .any(|o| o.controller == Some(true) && Some(o.uid.as_str()) == xr_uid);
    if !controlled {
        return Err(Error::Message(format!(
            "cannot propagate connection details: Secret {from_ns}/{from_name} is not controlled by the composite resource"
        )));
    }
    let data = source.data.unwrap_or_default();
    let to: Api<Secret> = Api::namespaced(client.clone(), &to_ns);
    if let Some(existing) = to.get_opt(&to_name).await? {
        let claim_uid = claim.pointer("/metadata/uid").and_then(Value::as_str);
        let foreign = existing
            .metadata
            .owner_references
            .iter()
            .flatten()
            .any(|o| o.controller == Some(true) && Some(o.uid.as_str()) != claim_uid);
        if foreign {
            return Err(Error::Message(format!(
                "cannot propagate connection details: Secret {to_ns}/{to_name} is controlled by another object; name another Secret in spec.writeConnectionSecretToRef"
            )));
        }
        if existing.data.unwrap_or_default() == data {
            return Ok(false);
        }
    }
    let owner = json!({
        "apiVersion": claim["apiVersion"], "kind": claim["kind"],
        "name": claim.pointer("/metadata/name"), "uid": claim.pointer("/metadata/uid"),
        "controller": true, "blockOwnerDeletion": true,
    });
    let secret = json!({
        "apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": to_name, "namespace": to_ns, "ownerReferences": [owner]},
        "type": SECRET_TYPE,
        "data": data,
    });
    Api::<Secret>::namespaced(client.clone(), &to_ns)
        .patch(
            &to_name,
            &PatchParams::apply(super::FIELD_MANAGER).force(),
            &Patch::Apply(&secret),
        )
        .await?;
    Ok(true)
}
