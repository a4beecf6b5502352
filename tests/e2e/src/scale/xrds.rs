//! `n` namespaced v2 XRDs, each of a group and kind of its own, created at once ([`super::tally`]
//! counts them Established).

use std::time::Duration;

use kube::{
    Api,
    api::{ApiResource, DynamicObject, GroupVersionKind},
};
use serde_json::{Value, json};

/// How long `n` XRDs may take to be Established: 3 minutes, and 2 s more per XRD.
pub fn timeout(n: usize) -> Duration {
    Duration::from_secs(180 + 2 * n as u64)
}

/// The XRD kind.
pub fn api(client: &kube::Client) -> Api<DynamicObject> {
    let gvk = GroupVersionKind::gvk("apiextensions.crossplane.io", "v2", "CompositeResourceDefinition");
    Api::all_with(client.clone(), &ApiResource::from_gvk(&gvk))
}

/// The `i`th XRD: group `s<i>.scale.crossplane-rs.io`, kind `XScale<i>`, namespaced, one version with a
/// small schema.
pub fn xrd(i: usize) -> Value {
    let group = format!("s{i:04}.scale.crossplane-rs.io");
    let plural = format!("xscale{i:04}s");
    json!({
        "apiVersion": "apiextensions.crossplane.io/v2",
        "kind": "CompositeResourceDefinition",
        "metadata": {"name": format!("{plural}.{group}")},
        "spec": {
            "scope": "Namespaced",
            "group": group,
            "names": {"kind": format!("XScale{i:04}"), "plural": plural},
            "versions": [{"name": "v1", "served": true, "referenceable": true, "schema": {"openAPIV3Schema": {
                "type": "object",
                "properties": {"spec": {"type": "object", "properties": {"value": {"type": "string"}}}},
            }}}],
        },
    })
}

/// Whether `obj` is `Established=True`.
pub fn established(obj: &DynamicObject) -> bool {
    obj.data["status"]["conditions"].as_array().is_some_and(|cs| {
        cs.iter()
            .any(|c| c["type"] == "Established" && c["status"] == "True")
    })
}

/// Creates XRDs `0..n` at once ([`super::create_all`]).
pub async fn create(api: &Api<DynamicObject>, n: usize) -> anyhow::Result<()> {
    super::create_all(api, n, "XRD", |i| Ok(serde_json::from_value(xrd(i))?)).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_xrd_has_a_group_and_kind_of_its_own() {
        let (a, b) = (xrd(7), xrd(8));
        assert_eq!(a["metadata"]["name"], "xscale0007s.s0007.scale.crossplane-rs.io");
        assert_ne!(a["spec"]["group"], b["spec"]["group"]);
        assert_ne!(a["spec"]["names"]["kind"], b["spec"]["names"]["kind"]);
        assert!(serde_json::from_value::<DynamicObject>(a).is_ok());
    }
}
