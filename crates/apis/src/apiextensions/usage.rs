//! The legacy Usage, `apiextensions.crossplane.io` `v1alpha1` (stored) and `v1beta1` (crossplane
//! `apis/apiextensions/v1beta1/usage_types.go`): cluster-scoped, with ClusterUsage's spec
//! ([`crate::protection::ClusterUsageSpec`]). Both versions are served and deprecated in favour of
//! `protection.crossplane.io`, as upstream serves them; their schemas are the same, so no conversion.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::CustomResourceExt;

/// The API version the core reads it at.
pub const API_VERSION: &str = "apiextensions.crossplane.io/v1beta1";
/// The kind.
pub const KIND: &str = "Usage";
/// The plural.
pub const PLURAL: &str = "usages";
/// Upstream's deprecation warning.
const DEPRECATION: &str = "apiextensions.crossplane.io Usage is deprecated; migrate to \
                           protection.crossplane.io Usage or ClusterUsage";

/// The legacy Usage CRD: ClusterUsage's schema in group `apiextensions.crossplane.io`, versions
/// `v1alpha1` (storage) and `v1beta1`, both deprecated.
pub fn crd() -> CustomResourceDefinition {
    let mut crd = crate::protection::ClusterUsage::crd();
    let group = super::GROUP;
    crd.metadata.name = Some(format!("{PLURAL}.{group}"));
    crd.spec.group = group.to_owned();
    crd.spec.names.kind = KIND.to_owned();
    crd.spec.names.plural = PLURAL.to_owned();
    crd.spec.names.singular = Some("usage".to_owned());
    crd.spec.names.list_kind = Some("UsageList".to_owned());
    let Some(mut v1beta1) = crd.spec.versions.pop() else {
        return crd;
    };
    v1beta1.deprecated = Some(true);
    v1beta1.deprecation_warning = Some(DEPRECATION.to_owned());
    v1beta1.storage = false;
    let mut v1alpha1 = v1beta1.clone();
    v1alpha1.name = "v1alpha1".to_owned();
    v1alpha1.storage = true;
    crd.spec.versions = vec![v1alpha1, v1beta1];
    crd
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_versions_are_served_deprecated_and_v1alpha1_is_stored() {
        let crd = crd();
        assert_eq!(
            crd.metadata.name.as_deref(),
            Some("usages.apiextensions.crossplane.io")
        );
        assert_eq!(crd.spec.scope, "Cluster");
        assert_eq!(crd.spec.names.kind, "Usage");
        let v: Vec<(&str, bool, bool, Option<bool>)> = crd
            .spec
            .versions
            .iter()
            .map(|v| (v.name.as_str(), v.served, v.storage, v.deprecated))
            .collect();
        assert_eq!(
            v,
            [
                ("v1alpha1", true, true, Some(true)),
                ("v1beta1", true, false, Some(true))
            ]
        );
    }
}
