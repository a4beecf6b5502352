//! A Provider's managed-resource CRDs as ManagedResourceDefinitions (upstream
//! `internal/converter/custom_to_managed.go`, beta flag `--enable-custom-to-managed-resource-conversion`,
//! default on).
//!
//! Every CRD of a Provider package becomes an MRD of the same name and spec, except those of a
//! provider's own configuration kinds ([`NOT_MANAGED`]: ProviderConfig, ClusterProviderConfig and their
//! usages), which stay CRDs. A provider without the `safe-start` capability gets its MRDs `Active`, so
//! its CRDs appear as before; with it they start `Inactive` (the MRD's default) and wait for an
//! activation policy.

use serde_json::{Value, json};

use super::establish::Install;

/// The kinds that are not managed resources and stay CRDs (upstream's list).
pub const NOT_MANAGED: [&str; 4] = [
    "ProviderConfig",
    "ClusterProviderConfig",
    "ProviderConfigUsage",
    "ClusterProviderConfigUsage",
];

/// Whether CRD `crd` defines a managed resource: anything but [`NOT_MANAGED`] (a CRD without a kind
/// counts as one, as upstream).
pub fn is_managed_resource(crd: &Value) -> bool {
    match crd.pointer("/spec/names/kind").and_then(Value::as_str) {
        Some(kind) => !NOT_MANAGED.contains(&kind),
        None => true,
    }
}

/// The MRD for CRD `crd`: the same metadata and spec with `state` Active when `active`, else left to
/// the MRD's default (Inactive).
pub fn to_mrd(crd: &Value, active: bool) -> Value {
    let mut mrd = crd.clone();
    mrd["apiVersion"] = json!(apis::apiextensions::mrd::API_VERSION);
    mrd["kind"] = json!(apis::apiextensions::mrd::KIND);
    if let Some(o) = mrd.as_object_mut() {
        o.remove("status");
    }
    if !mrd["spec"].is_object() {
        mrd["spec"] = json!({});
    }
    mrd["spec"]["state"] = json!(if active { "Active" } else { "Inactive" });
    mrd
}

/// `installs` with each managed-resource CRD replaced by its MRD.
pub fn convert(installs: Vec<Install>, active: bool) -> Result<Vec<Install>, String> {
    installs
        .into_iter()
        .map(|i| {
            if i.api.kind == "CustomResourceDefinition" && is_managed_resource(&i.object) {
                Install::of(&to_mrd(&i.object, active))
            } else {
                Ok(i)
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn crd(kind: &str) -> Value {
        json!({
            "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": format!("{}s.nop.example.org", kind.to_lowercase())},
            "spec": {"group": "nop.example.org", "names": {"kind": kind, "plural": format!("{}s", kind.to_lowercase())},
                "scope": "Cluster", "versions": []},
            "status": {"storedVersions": []},
        })
    }

    #[test]
    fn managed_resource_crds_become_mrds_and_provider_configs_stay_crds() {
        let installs = [
            "NopResource",
            "ProviderConfig",
            "ClusterProviderConfig",
            "ProviderConfigUsage",
        ]
        .iter()
        .map(|k| Install::of(&crd(k)).expect("install"))
        .collect();
        let out = convert(installs, false).expect("converted");
        let kinds: Vec<&str> = out.iter().map(|i| i.api.kind.as_str()).collect();
        assert_eq!(
            kinds,
            [
                "ManagedResourceDefinition",
                "CustomResourceDefinition",
                "CustomResourceDefinition",
                "CustomResourceDefinition"
            ]
        );
        let mrd = &out[0];
        assert_eq!(mrd.api.plural, "managedresourcedefinitions");
        assert_eq!(mrd.api.group, "apiextensions.crossplane.io");
        assert_eq!(mrd.name, "nopresources.nop.example.org");
        assert_eq!(mrd.object["spec"]["state"], "Inactive");
        assert_eq!(mrd.object["spec"]["group"], "nop.example.org");
        assert!(mrd.object.get("status").is_none());
        let active =
            convert(vec![Install::of(&crd("NopResource")).expect("install")], true).expect("converted");
        assert_eq!(active[0].object["spec"]["state"], "Active");
    }
}
