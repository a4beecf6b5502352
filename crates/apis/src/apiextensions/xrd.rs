//! CompositeResourceDefinition, `apiextensions.crossplane.io/v2` (crossplane `apis/apiextensions/v2/
//! xrd_types.go`), also served as the deprecated `v1`, the storage version, as upstream ([`crd`]).

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceColumnDefinition;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::condition::Condition;

/// The scope of the composite resources an XRD defines.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum CompositeResourceScope {
    /// Namespaced XRs (the v2 default).
    #[default]
    Namespaced,
    /// Cluster-scoped XRs with the modern schema (`spec.crossplane`).
    Cluster,
    /// Cluster-scoped XRs with the v1 schema (fields directly under `spec`, claims).
    LegacyCluster,
}

impl CompositeResourceScope {
    /// Whether the XRs have the v1 (legacy) schema.
    pub fn is_legacy(self) -> bool {
        self == Self::LegacyCluster
    }

    /// Whether the XRs are namespaced.
    pub fn is_namespaced(self) -> bool {
        self == Self::Namespaced
    }
}

/// How an XR follows new revisions of its Composition.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum CompositionUpdatePolicy {
    /// Always use the latest revision.
    #[default]
    Automatic,
    /// Stay on the pinned revision.
    Manual,
}

/// The names of the composite resource (the CRD's names).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct XrdNames {
    /// The plural, e.g. `xbuckets`.
    pub plural: String,
    /// The singular, e.g. `xbucket`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub singular: Option<String>,
    /// The kind, e.g. `XBucket`.
    pub kind: String,
    /// The list kind; defaults to `<kind>List`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub list_kind: Option<String>,
    /// Short names.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub short_names: Vec<String>,
    /// Categories; Crossplane adds `composite`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub categories: Vec<String>,
}

/// A reference to an object by name.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct NameReference {
    /// The name.
    pub name: String,
}

/// The schema of one XRD version.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CompositeResourceValidation {
    /// The OpenAPI v3 schema of the XR (`spec`, `status`); Crossplane injects its own fields.
    #[serde(rename = "openAPIV3Schema", default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "crate::preserve_unknown_fields")]
    pub open_api_v3_schema: Option<serde_json::Value>,
}

/// One version of the composite resource.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CompositeResourceVersion {
    /// The version name, e.g. `v1alpha1`.
    pub name: String,
    /// Whether Compositions may reference this version; exactly one version is referenceable and it is
    /// the CRD's storage version.
    pub referenceable: bool,
    /// Whether the version is served.
    pub served: bool,
    /// Whether the version is deprecated.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deprecated: Option<bool>,
    /// The warning returned to clients of a deprecated version.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deprecation_warning: Option<String>,
    /// The schema.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schema: Option<CompositeResourceValidation>,
    /// Extra printer columns, after Crossplane's.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub additional_printer_columns: Vec<CustomResourceColumnDefinition>,
}

/// The desired state of a CompositeResourceDefinition.
#[derive(CustomResource, Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "apiextensions.crossplane.io",
    version = "v2",
    kind = "CompositeResourceDefinition",
    plural = "compositeresourcedefinitions",
    shortname = "xrd",
    shortname = "xrds",
    category = "crossplane",
    status = "CompositeResourceDefinitionStatus",
    printcolumn = r#"{"name":"ESTABLISHED","type":"string","jsonPath":".status.conditions[?(@.type=='Established')].status"}"#,
    printcolumn = r#"{"name":"OFFERED","type":"string","jsonPath":".status.conditions[?(@.type=='Offered')].status"}"#,
    printcolumn = r#"{"name":"AGE","type":"date","jsonPath":".metadata.creationTimestamp"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct CompositeResourceDefinitionSpec {
    /// The API group of the XR.
    pub group: String,
    /// The names of the XR.
    pub names: XrdNames,
    /// The scope of the XR; `Namespaced` by default.
    #[serde(default)]
    pub scope: CompositeResourceScope,
    /// The Composition used when an XR names none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default_composition_ref: Option<NameReference>,
    /// The Composition every XR must use.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub enforced_composition_ref: Option<NameReference>,
    /// The update policy used when an XR states none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default_composition_update_policy: Option<CompositionUpdatePolicy>,
    /// The versions of the XR.
    pub versions: Vec<CompositeResourceVersion>,
    /// The names of the claim a `LegacyCluster` XRD offers (its claim CRD and claim controller).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "crate::preserve_unknown_fields")]
    pub claim_names: Option<serde_json::Value>,
    /// The connection secret keys an XR publishes (legacy XRs).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub connection_secret_keys: Vec<String>,
    /// What deleting a claim does to its XR by default (`Background` or `Foreground`; legacy XRs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default_composite_delete_policy: Option<String>,
}

/// The warning the apiserver returns to clients of `apiextensions.crossplane.io/v1` XRDs, as upstream.
pub const V1_DEPRECATION: &str = "CompositeResourceDefinition v1 is deprecated and will be removed in a future release; consider migrating to v2";

/// The XRD CRD as upstream serves it: `v1` (the storage version, deprecated, `scope` defaulting to
/// `LegacyCluster`) and `v2` (`scope` defaulting to `Namespaced`), one schema, conversion `None`.
///
/// Serving and storing `v1` lets this CRD replace upstream's on a cluster whose `status.storedVersions`
/// holds `v1`, and lets users' `apiextensions.crossplane.io/v1` manifests apply unchanged. The
/// controllers read XRDs as `v2`; the apiserver serves either version of the same stored object.
pub fn crd() -> k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition {
    use kube::CustomResourceExt;
    let mut crd = CompositeResourceDefinition::crd();
    if let Some(v2) = crd.spec.versions.first_mut() {
        v2.storage = false;
        let mut v1 = v2.clone();
        v1.name = "v1".to_owned();
        v1.storage = true;
        v1.deprecated = Some(true);
        v1.deprecation_warning = Some(V1_DEPRECATION.to_owned());
        if let Some(scope) = v1
            .schema
            .as_mut()
            .and_then(|s| s.open_api_v3_schema.as_mut())
            .and_then(|s| s.properties.as_mut())
            .and_then(|p| p.get_mut("spec"))
            .and_then(|s| s.properties.as_mut())
            .and_then(|p| p.get_mut("scope"))
        {
            scope.default = Some(
                k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::JSON(serde_json::json!(
                    "LegacyCluster"
                )),
            );
        }
        crd.spec.versions.insert(0, v1);
    }
    crd
}

/// The kind of the controllers an XRD started.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DependentResourceType {
    /// The apiVersion.
    pub api_version: String,
    /// The kind.
    pub kind: String,
}

/// The controllers an XRD started.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct XrdControllerStatus {
    /// The XR type the composite controller watches.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub composite_resource_type: Option<DependentResourceType>,
}

/// The observed state of a CompositeResourceDefinition.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CompositeResourceDefinitionStatus {
    /// Conditions (`Established`, `Synced`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["type"]))]
    pub conditions: Vec<Condition>,
    /// The controllers started for this XRD.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub controllers: Option<XrdControllerStatus>,
}

impl CompositeResourceDefinitionSpec {
    /// The names of the claim this XRD offers: `claimNames` of a `LegacyCluster` XRD. `None` when it
    /// offers none; an error when `claimNames` is not a names object.
    pub fn offered_claim_names(&self) -> Result<Option<XrdNames>, serde_json::Error> {
        match &self.claim_names {
            Some(v) if self.scope.is_legacy() && !v.is_null() => serde_json::from_value(v.clone()).map(Some),
            _ => Ok(None),
        }
    }

    /// The referenceable version, if exactly one is.
    pub fn referenceable_version(&self) -> Option<&CompositeResourceVersion> {
        let mut refs = self.versions.iter().filter(|v| v.referenceable);
        let first = refs.next()?;
        refs.next().is_none().then_some(first)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube::CustomResourceExt;

    #[test]
    fn crd_is_cluster_scoped_v2() {
        let crd = CompositeResourceDefinition::crd();
        assert_eq!(crd.spec.scope, "Cluster");
        assert_eq!(crd.spec.versions[0].name, "v2");
        assert_eq!(crd.spec.group, "apiextensions.crossplane.io");
    }

    #[test]
    fn crd_serves_v1_as_storage_and_v2() {
        let crd = crd();
        let versions: Vec<(&str, bool, bool)> = crd
            .spec
            .versions
            .iter()
            .map(|v| (v.name.as_str(), v.served, v.storage))
            .collect();
        assert_eq!(versions, [("v1", true, true), ("v2", true, false)]);
        let default_scope = |i: usize| {
            crd.spec.versions[i]
                .schema
                .as_ref()
                .and_then(|s| s.open_api_v3_schema.as_ref())
                .and_then(|s| s.properties.as_ref())
                .and_then(|p| p.get("spec"))
                .and_then(|s| s.properties.as_ref())
                .and_then(|p| p.get("scope"))
                .and_then(|s| s.default.as_ref())
                .map(|d| d.0.clone())
        };
        assert_eq!(default_scope(0), Some(serde_json::json!("LegacyCluster")));
        assert_eq!(default_scope(1), Some(serde_json::json!("Namespaced")));
        assert_eq!(crd.spec.versions[0].deprecated, Some(true));
    }

    #[test]
    fn scope_defaults_to_namespaced() {
        let spec: CompositeResourceDefinitionSpec = serde_json::from_value(serde_json::json!({
            "group": "example.org",
            "names": {"kind": "XThing", "plural": "xthings"},
            "versions": [{"name": "v1", "referenceable": true, "served": true}]
        }))
        .expect("parses");
        assert_eq!(spec.scope, CompositeResourceScope::Namespaced);
        assert_eq!(spec.referenceable_version().map(|v| v.name.as_str()), Some("v1"));
    }
}
