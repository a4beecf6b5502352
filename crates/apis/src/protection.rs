//! The `protection.crossplane.io` API, `v1beta1`: Usage (namespaced) and ClusterUsage (crossplane
//! `apis/protection/v1beta1`). A Usage says that one resource (`of`) is used by another (`by`), or is
//! protected for a `reason`; while it exists, deleting the used resource is refused by the core's
//! admission webhook.
//!
//! The legacy `apiextensions.crossplane.io` Usage has ClusterUsage's spec; it lives in
//! [`crate::apiextensions::usage`].

use std::collections::BTreeMap;

use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::Condition;

/// The API group.
pub const GROUP: &str = "protection.crossplane.io";
/// The API version.
pub const VERSION: &str = "v1beta1";

/// The label the core puts on a used resource; the webhook is called only for objects carrying it.
pub const LABEL_IN_USE: &str = "crossplane.io/in-use";
/// The annotation on a Usage that says, in words, what it protects.
pub const ANNOTATION_USAGE_DETAILS: &str = "crossplane.io/usage-details";
/// The annotation the webhook puts on a used resource whose deletion it refused: the propagation policy
/// of that deletion, replayed once the Usage is gone (`replayDeletion`).
pub const ANNOTATION_DELETION_ATTEMPT: &str = "usage.crossplane.io/deletion-attempt-with-policy";
/// The finalizer the core keeps on a Usage until it has cleaned up after it.
pub const FINALIZER: &str = "usage.apiextensions.crossplane.io";

/// The CEL rule that a resource is named or selected.
const REF_OR_SELECTOR: &str = "has(self.resourceRef) || has(self.resourceSelector)";
/// Its message, upstream's words.
const REF_OR_SELECTOR_MESSAGE: &str = "either a resource reference or a resource selector should be set.";

/// A resource by name: cluster-scoped, or in the Usage's namespace.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ResourceRef {
    /// Name of the referent.
    pub name: String,
}

/// A resource by labels: cluster-scoped, or in the Usage's namespace.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ResourceSelector {
    /// An object with these labels is selected.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub match_labels: BTreeMap<String, String>,
    /// Only an object with the same controller reference as the Usage is selected.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub match_controller_ref: Option<bool>,
}

/// Any resource: cluster-scoped, or in the Usage's namespace.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [{"rule": REF_OR_SELECTOR, "message": REF_OR_SELECTOR_MESSAGE}]))]
pub struct Resource {
    /// API version of the referent.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub api_version: String,
    /// Kind of the referent.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub kind: String,
    /// The resource by name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resource_ref: Option<ResourceRef>,
    /// The resource by labels; ignored when `resourceRef` is set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resource_selector: Option<ResourceSelector>,
}

/// A resource by name, optionally in another namespace.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct NamespacedResourceRef {
    /// Name of the referent.
    pub name: String,
    /// Namespace of the referent; the Usage's when omitted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
}

/// A resource by labels, optionally in another namespace.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NamespacedResourceSelector {
    /// An object with these labels is selected.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub match_labels: BTreeMap<String, String>,
    /// Only an object with the same controller reference as the Usage is selected.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub match_controller_ref: Option<bool>,
    /// An object in this namespace is selected; the Usage's when omitted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
}

/// Any resource: cluster-scoped, in the Usage's namespace, or in another namespace.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [{"rule": REF_OR_SELECTOR, "message": REF_OR_SELECTOR_MESSAGE}]))]
pub struct NamespacedResource {
    /// API version of the referent.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub api_version: String,
    /// Kind of the referent.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub kind: String,
    /// The resource by name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resource_ref: Option<NamespacedResourceRef>,
    /// The resource by labels; ignored when `resourceRef` is set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resource_selector: Option<NamespacedResourceSelector>,
}

/// The observed state of a Usage or ClusterUsage.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct UsageStatus {
    /// Conditions (`Ready`, `Synced`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["type"]))]
    pub conditions: Vec<Condition>,
}

/// The desired state of a Usage: `of` is used by `by`, or protected for `reason`.
#[derive(CustomResource, Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "protection.crossplane.io",
    version = "v1beta1",
    kind = "Usage",
    plural = "usages",
    namespaced,
    category = "crossplane",
    status = "UsageStatus",
    printcolumn = r#"{"name":"DETAILS","type":"string","jsonPath":".metadata.annotations.crossplane\\.io/usage-details"}"#,
    printcolumn = r#"{"name":"READY","type":"string","jsonPath":".status.conditions[?(@.type=='Ready')].status"}"#,
    printcolumn = r#"{"name":"AGE","type":"date","jsonPath":".metadata.creationTimestamp"}"#
)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [
    {"rule": "has(self.by) || has(self.reason)",
     "message": "either \"spec.by\" or \"spec.reason\" must be specified."},
    {"rule": "has(self.by) || (!has(self.of.resourceRef) || !has(self.of.resourceRef.__namespace__)) && (!has(self.of.resourceSelector) || !has(self.of.resourceSelector.__namespace__))",
     "message": "cross-namespace \"spec.of\" is not allowed without \"spec.by\" resource."},
]))]
pub struct UsageSpec {
    /// The resource being used.
    pub of: NamespacedResource,
    /// The resource using it: cluster-scoped or in the Usage's namespace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub by: Option<Resource>,
    /// Why the resource may not be deleted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Once the Usage is gone, delete the used resource again if its deletion was refused before.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replay_deletion: Option<bool>,
}

/// The desired state of a ClusterUsage: as a Usage's, but of a cluster-scoped resource (or one
/// selected cluster-wide).
#[derive(CustomResource, Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "protection.crossplane.io",
    version = "v1beta1",
    kind = "ClusterUsage",
    plural = "clusterusages",
    category = "crossplane",
    status = "UsageStatus",
    printcolumn = r#"{"name":"DETAILS","type":"string","jsonPath":".metadata.annotations.crossplane\\.io/usage-details"}"#,
    printcolumn = r#"{"name":"READY","type":"string","jsonPath":".status.conditions[?(@.type=='Ready')].status"}"#,
    printcolumn = r#"{"name":"AGE","type":"date","jsonPath":".metadata.creationTimestamp"}"#
)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [
    {"rule": "has(self.by) || has(self.reason)",
     "message": "either \"spec.by\" or \"spec.reason\" must be specified."},
]))]
pub struct ClusterUsageSpec {
    /// The resource being used.
    pub of: Resource,
    /// The resource using it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub by: Option<Resource>,
    /// Why the resource may not be deleted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Once the Usage is gone, delete the used resource again if its deletion was refused before.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replay_deletion: Option<bool>,
}

impl From<ClusterUsageSpec> for UsageSpec {
    /// A ClusterUsage's spec read as a Usage's (no namespaces).
    fn from(s: ClusterUsageSpec) -> Self {
        let of = NamespacedResource {
            api_version: s.of.api_version,
            kind: s.of.kind,
            resource_ref: s.of.resource_ref.map(|r| NamespacedResourceRef {
                name: r.name,
                namespace: None,
            }),
            resource_selector: s.of.resource_selector.map(|r| NamespacedResourceSelector {
                match_labels: r.match_labels,
                match_controller_ref: r.match_controller_ref,
                namespace: None,
            }),
        };
        Self {
            of,
            by: s.by,
            reason: s.reason,
            replay_deletion: s.replay_deletion,
        }
    }
}

/// The CRDs of this group: Usage and ClusterUsage.
pub fn crds()
-> Vec<k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition> {
    use kube::CustomResourceExt;
    vec![Usage::crd(), ClusterUsage::crd()]
}

#[cfg(test)]
mod tests {
    use kube::CustomResourceExt;
    use serde_json::{Value, json};

    use super::*;

    fn schema(
        crd: &k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition,
    ) -> Value {
        serde_json::to_value(&crd.spec.versions[0].schema).expect("schema as JSON")["openAPIV3Schema"].clone()
    }

    #[test]
    fn usage_is_namespaced_and_cluster_usage_is_not() {
        let (u, c) = (Usage::crd(), ClusterUsage::crd());
        assert_eq!(
            u.metadata.name.as_deref(),
            Some("usages.protection.crossplane.io")
        );
        assert_eq!(u.spec.scope, "Namespaced");
        assert_eq!(
            c.metadata.name.as_deref(),
            Some("clusterusages.protection.crossplane.io")
        );
        assert_eq!(c.spec.scope, "Cluster");
        assert!(
            u.spec.versions[0]
                .subresources
                .as_ref()
                .is_some_and(|s| s.status.is_some())
        );
    }

    #[test]
    fn the_crds_carry_upstreams_cel_rules() {
        let u = schema(&Usage::crd());
        let rules = u["properties"]["spec"]["x-kubernetes-validations"].to_string();
        assert!(rules.contains("has(self.by) || has(self.reason)"), "{rules}");
        assert!(rules.contains("__namespace__"), "{rules}");
        let of = u["properties"]["spec"]["properties"]["of"]["x-kubernetes-validations"].to_string();
        assert!(of.contains(REF_OR_SELECTOR), "{of}");
        let by = u["properties"]["spec"]["properties"]["by"]["x-kubernetes-validations"].to_string();
        assert!(by.contains(REF_OR_SELECTOR), "{by}");
        let c = schema(&ClusterUsage::crd());
        assert!(
            !c["properties"]["spec"]["x-kubernetes-validations"]
                .to_string()
                .contains("__namespace__"),
            "a ClusterUsage has no namespaces to check"
        );
    }

    #[test]
    fn a_cluster_usage_spec_reads_as_a_usage_spec() {
        let c: ClusterUsageSpec = serde_json::from_value(json!({
            "of": {"apiVersion": "v1", "kind": "Namespace", "resourceSelector": {"matchLabels": {"a": "b"}}},
            "reason": "protected"}))
        .expect("parses");
        let u = UsageSpec::from(c);
        assert_eq!(u.of.kind, "Namespace");
        assert_eq!(u.of.resource_selector.expect("selector").match_labels["a"], "b");
        assert_eq!(u.reason.as_deref(), Some("protected"));
    }
}
