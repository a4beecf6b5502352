//! Connection details: those of composed resources are read from the Secrets they name in
//! `spec.writeConnectionSecretToRef` (for the pipeline's observed state), and those the pipeline
//! desires for the composite are written to the XR's `writeConnectionSecretToRef` (legacy XRs: under
//! `spec`), a Secret of type `connection.crossplane.io/v1alpha1` controlled by the XR.

use std::collections::BTreeMap;

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use kube::Api;
use kube::api::{Patch, PatchParams};
use serde_json::{Value, json};

use crate::error::Error;

/// The Secret type of connection secrets.
pub const SECRET_TYPE: &str = "connection.crossplane.io/v1alpha1";

/// `spec.writeConnectionSecretToRef` of an object: (namespace, name). A namespaced object's ref may
/// leave the namespace out (it then means the object's own).
pub fn secret_ref(obj: &Value) -> Option<(String, String)> {
    let r = obj.pointer("/spec/writeConnectionSecretToRef")?;
    let name = r.get("name")?.as_str().filter(|n| !n.is_empty())?;
    let ns = r
        .get("namespace")
        .and_then(Value::as_str)
        .or_else(|| obj.pointer("/metadata/namespace").and_then(Value::as_str))?;
    Some((ns.to_owned(), name.to_owned()))
}

/// The data of the connection Secret `obj` writes, empty when it names none or it does not exist yet.
pub async fn read(client: &kube::Client, obj: &Value) -> Result<BTreeMap<String, Vec<u8>>, Error> {
    let Some((ns, name)) = secret_ref(obj) else {
        return Ok(BTreeMap::new());
    };
    let api: Api<Secret> = Api::namespaced(client.clone(), &ns);
    Ok(api
        .get_opt(&name)
        .await?
        .and_then(|s| s.data)
        .unwrap_or_default()
        .into_iter()
        .map(|(k, v)| (k, v.0))
        .collect())
}

/// Applies the XR's connection Secret with `details`, when the XR names one and there is something to
/// write. `owner` is the XR's controller owner reference.
pub async fn write(
    client: &kube::Client,
    xr: &Value,
    owner: Value,
    details: &BTreeMap<String, Vec<u8>>,
    field_manager: &str,
) -> Result<(), Error> {
    let Some((ns, name)) = secret_ref(xr) else {
        return Ok(());
    };
    if details.is_empty() {
        return Ok(());
    }
    let data: BTreeMap<String, ByteString> = details
        .iter()
        .map(|(k, v)| (k.clone(), ByteString(v.clone())))
        .collect();
    let secret = json!({
        "apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": name, "namespace": ns, "ownerReferences": [owner]},
        "type": SECRET_TYPE,
        "data": data,
    });
    let api = Api::<Secret>::namespaced(client.clone(), &ns);
    api.patch(
        &name,
        &PatchParams::apply(field_manager).force(),
        &Patch::Apply(&secret),
    )
    .await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refs_default_to_the_objects_namespace() {
        let mr =
            json!({"metadata": {"namespace": "a"}, "spec": {"writeConnectionSecretToRef": {"name": "s"}}});
        assert_eq!(secret_ref(&mr), Some(("a".into(), "s".into())));
        let xr = json!({"spec": {"writeConnectionSecretToRef": {"name": "s", "namespace": "b"}}});
        assert_eq!(secret_ref(&xr), Some(("b".into(), "s".into())));
        assert_eq!(
            secret_ref(&json!({"spec": {"writeConnectionSecretToRef": {"name": "s"}}})),
            None
        );
        assert_eq!(secret_ref(&json!({})), None);
    }
}
