//! CompositeResourceDefinition, `apiextensions.crossplane.io/v2` (crossplane `apis/apiextensions/v2/
//! xrd_types.go`), also served as the deprecated `v1`, the storage version, as upstream ([`crd`]).

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    CustomResourceColumnDefinition, CustomResourceSubresourceScale,
};
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
    /// The warning returned to clients of a deprecated version (at most 256 characters).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 256))]
    pub deprecation_warning: Option<String>,
    /// The schema.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schema: Option<CompositeResourceValidation>,
    /// Extra printer columns, after Crossplane's.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub additional_printer_columns: Vec<CustomResourceColumnDefinition>,
    /// The subresources the XR's CRD serves in this version beyond `status` (which it always serves).
    /// Compositions are responsible for filling in what they expose.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subresources: Option<CompositeResourceSubresources>,
}

/// The subresources of one XR version (upstream's `CompositeResourceDefinitionVersionSubresources`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CompositeResourceSubresources {
    /// Serve a `/scale` subresource returning an `autoscaling/v1` Scale, whose replicas and selector
    /// are read from (and written to) the XR at these paths.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scale: Option<CustomResourceSubresourceScale>,
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
#[schemars(extend("x-kubernetes-validations" = [
    {"rule": "(has(self.scope) && self.scope == 'LegacyCluster') || !has(self.claimNames)",
     "message": "only LegacyCluster composite resources can offer claims: set spec.scope to LegacyCluster or remove spec.claimNames"},
    {"rule": "(has(self.scope) && self.scope == 'LegacyCluster') || !has(self.connectionSecretKeys)",
     "message": "only LegacyCluster composite resources publish connection secrets: set spec.scope to LegacyCluster or remove spec.connectionSecretKeys"},
]))]
pub struct CompositeResourceDefinitionSpec {
    /// The API group of the XR; immutable.
    #[schemars(extend("x-kubernetes-validations" = [immutable("spec.group")]))]
    pub group: String,
    /// The names of the XR; immutable, the plural and singular lowercase.
    #[schemars(extend("x-kubernetes-validations" = [
        immutable("spec.names"), lowercase("spec.names")[0], lowercase("spec.names")[1]]))]
    pub names: XrdNames,
    /// The scope of the XR; `Namespaced` by default; immutable.
    #[serde(default)]
    #[schemars(extend("x-kubernetes-validations" = [immutable("spec.scope")]))]
    pub scope: CompositeResourceScope,
    /// The Composition used when an XR names none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default_composition_ref: Option<NameReference>,
    /// The Composition every XR must use; immutable.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("x-kubernetes-validations" = [immutable("spec.enforcedCompositionRef")]))]
    pub enforced_composition_ref: Option<NameReference>,
    /// The update policy used when an XR states none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default_composition_update_policy: Option<CompositionUpdatePolicy>,
    /// The versions of the XR.
    pub versions: Vec<CompositeResourceVersion>,
    /// The names of the claim a `LegacyCluster` XRD offers (its claim CRD and claim controller); may be
    /// added to an XRD but not changed, the plural and singular lowercase.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<XrdNames>")]
    #[schemars(extend("x-kubernetes-validations" = [
        immutable("spec.claimNames"), lowercase("spec.claimNames")[0], lowercase("spec.claimNames")[1]]))]
    pub claim_names: Option<serde_json::Value>,
    /// The connection secret keys an XR publishes (legacy XRs).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub connection_secret_keys: Vec<String>,
    /// What deleting a claim does to its XR by default (`Background` or `Foreground`; legacy XRs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default_composite_delete_policy: Option<String>,
}

/// The apiserver's rule (CEL) that field `field` keeps the value it was given first (upstream's
/// `self == oldSelf`).
fn immutable(field: &str) -> serde_json::Value {
    serde_json::json!({
        "rule": "self == oldSelf",
        "message": format!("{field} is immutable: delete the CompositeResourceDefinition and create it anew to change it"),
    })
}

/// The apiserver's rules (CEL) that the plural and singular of names at `field` are lowercase.
fn lowercase(field: &str) -> [serde_json::Value; 2] {
    [
        serde_json::json!({"rule": "self.plural == self.plural.lowerAscii()",
                           "message": format!("{field}.plural must be lowercase")}),
        serde_json::json!({"rule": "!has(self.singular) || self.singular == self.singular.lowerAscii()",
                           "message": format!("{field}.singular must be lowercase")}),
    ]
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
    fn the_crd_refuses_what_upstreams_refuses() {
        let crd = serde_json::to_value(crd()).expect("CRD as JSON");
        for v in [0, 1] {
            let spec = crd
                .pointer(&format!(
                    "/spec/versions/{v}/schema/openAPIV3Schema/properties/spec"
                ))
                .expect("spec schema");
            let rules = |s: &serde_json::Value| s["x-kubernetes-validations"].to_string();
            assert!(rules(spec).contains("!has(self.claimNames)"), "{spec}");
            assert!(rules(spec).contains("!has(self.connectionSecretKeys)"), "{spec}");
            let props = &spec["properties"];
            for field in ["group", "names", "scope", "claimNames", "enforcedCompositionRef"] {
                assert!(
                    rules(&props[field]).contains("self == oldSelf"),
                    "{field}: {}",
                    props[field]
                );
            }
            for field in ["names", "claimNames"] {
                assert!(
                    rules(&props[field]).contains("self.plural.lowerAscii()"),
                    "{field}"
                );
                assert!(
                    rules(&props[field]).contains("self.singular.lowerAscii()"),
                    "{field}"
                );
            }
            assert_eq!(
                props["claimNames"]["required"],
                serde_json::json!(["kind", "plural"])
            );
            let version = &props["versions"]["items"]["properties"];
            assert_eq!(version["deprecationWarning"]["maxLength"], 256);
            assert!(
                version["subresources"]["properties"]["scale"]["properties"]
                    .get("specReplicasPath")
                    .is_some(),
                "{}",
                version["subresources"]
            );
        }
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
