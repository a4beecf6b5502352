//! ManagedResourceDefinition, `apiextensions.crossplane.io/v1alpha1` (crossplane
//! `apis/apiextensions/v1alpha1/mrd_types.go`): a provider's managed-resource CRD held back until it
//! is activated. Its spec is a CRD's spec plus `connectionDetails` and `state`; the core writes the
//! real CRD only while the MRD is `Active`, and an MRD never goes back to `Inactive`.

use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::condition::Condition;

/// The API version.
pub const API_VERSION: &str = "apiextensions.crossplane.io/v1alpha1";
/// The kind.
pub const KIND: &str = "ManagedResourceDefinition";
/// The plural.
pub const PLURAL: &str = "managedresourcedefinitions";

/// Condition type: the MRD's CRD is established (upstream's `Established`).
pub const TYPE_ESTABLISHED: &str = "Established";
/// Reason: the CRD is established.
pub const REASON_ESTABLISHED: &str = "EstablishedManagedResource";
/// Reason: the CRD is written and not yet established, or cannot be written (upstream uses this
/// reason for both).
pub const REASON_PENDING: &str = "PendingManagedResource";
/// Reason: the MRD is Inactive, so there is no CRD.
pub const REASON_INACTIVE: &str = "InactiveManagedResource";
/// Reason: the MRD is being deleted.
pub const REASON_TERMINATING: &str = "TerminatingManagedResource";

/// Whether the MRD's CRD exists.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum ManagedResourceDefinitionState {
    /// The CRD is written.
    Active,
    /// No CRD (the default).
    #[default]
    Inactive,
}

impl ManagedResourceDefinitionState {
    /// Whether it is `Active`.
    pub fn is_active(self) -> bool {
        self == Self::Active
    }
}

/// The names of the managed resource (a CRD's names).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MrdNames {
    /// The plural, lowercase.
    pub plural: String,
    /// The singular, lowercase.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub singular: Option<String>,
    /// The kind.
    pub kind: String,
    /// The list kind; defaults to `<kind>List`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub list_kind: Option<String>,
    /// Short names.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub short_names: Vec<String>,
    /// Categories.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub categories: Vec<String>,
}

/// The schema of one version.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MrdValidation {
    /// The OpenAPI v3 schema of the managed resource.
    #[serde(default, rename = "openAPIV3Schema", skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "crate::schema::preserve_unknown_fields")]
    pub open_api_v3_schema: Option<serde_json::Value>,
}

/// One version of the managed resource, as a CRD's version.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MrdVersion {
    /// The version name, e.g. `v1alpha1`.
    pub name: String,
    /// Whether the version is served.
    pub served: bool,
    /// Whether the version is stored (exactly one is).
    pub storage: bool,
    /// Whether the version is deprecated.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deprecated: Option<bool>,
    /// The warning returned to clients of a deprecated version.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deprecation_warning: Option<String>,
    /// The schema.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schema: Option<MrdValidation>,
    /// The subresources (`status`, `scale`), as a CRD's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "crate::schema::preserve_unknown_fields")]
    pub subresources: Option<serde_json::Value>,
    /// The printer columns, as a CRD's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "preserve_unknown_list")]
    pub additional_printer_columns: Option<serde_json::Value>,
    /// The selectable fields, as a CRD's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "preserve_unknown_list")]
    pub selectable_fields: Option<serde_json::Value>,
}

fn preserve_unknown_list(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({
        "type": "array",
        "items": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
    })
}

/// A connection detail key the managed resource publishes.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ConnectionDetail {
    /// The key.
    pub name: String,
    /// How the key is used.
    pub description: String,
}

/// The desired state of a ManagedResourceDefinition: a CRD's spec, its connection details and its
/// state.
#[derive(CustomResource, Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "apiextensions.crossplane.io",
    version = "v1alpha1",
    kind = "ManagedResourceDefinition",
    plural = "managedresourcedefinitions",
    shortname = "mrd",
    shortname = "mrds",
    category = "crossplane",
    status = "ManagedResourceDefinitionStatus",
    printcolumn = r#"{"name":"STATE","type":"string","jsonPath":".spec.state"}"#,
    printcolumn = r#"{"name":"ESTABLISHED","type":"string","jsonPath":".status.conditions[?(@.type=='Established')].status"}"#,
    printcolumn = r#"{"name":"AGE","type":"date","jsonPath":".metadata.creationTimestamp"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct ManagedResourceDefinitionSpec {
    /// The API group of the managed resource; immutable.
    #[schemars(extend("x-kubernetes-validations" = [{"rule": "self == oldSelf", "message": "Value is immutable"}]))]
    pub group: String,
    /// Its names; immutable, the plural and singular lowercase.
    #[schemars(extend("x-kubernetes-validations" = [
        {"rule": "self == oldSelf", "message": "Value is immutable"},
        {"rule": "self.plural == self.plural.lowerAscii()", "message": "Plural name must be lowercase"},
        {"rule": "!has(self.singular) || self.singular == self.singular.lowerAscii()",
         "message": "Singular name must be lowercase"},
    ]))]
    pub names: MrdNames,
    /// `Namespaced` (the default) or `Cluster`; immutable.
    #[serde(default = "namespaced")]
    #[schemars(extend(
        "enum" = ["Namespaced", "Cluster"],
        "default" = "Namespaced",
        "x-kubernetes-validations" = [{"rule": "self == oldSelf", "message": "Value is immutable"}],
    ))]
    pub scope: String,
    /// Its versions.
    pub versions: Vec<MrdVersion>,
    /// How versions are converted, as a CRD's `conversion`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "crate::schema::preserve_unknown_fields")]
    pub conversion: Option<serde_json::Value>,
    /// A CRD's `preserveUnknownFields`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preserve_unknown_fields: Option<bool>,
    /// The connection detail keys the managed resource publishes.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub connection_details: Vec<ConnectionDetail>,
    /// `Active` writes the CRD; `Inactive` (the default) does not. Once Active, it stays Active.
    #[serde(default)]
    #[schemars(extend("x-kubernetes-validations" = [{
        "rule": "self == oldSelf || oldSelf != 'Active'",
        "message": "state cannot be changed once it becomes Active",
    }]))]
    pub state: ManagedResourceDefinitionState,
}

fn namespaced() -> String {
    "Namespaced".to_owned()
}

/// The observed state of a ManagedResourceDefinition.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ManagedResourceDefinitionStatus {
    /// Conditions (`Established`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["type"]))]
    pub conditions: Vec<Condition>,
}

/// The MRD CRD, with `spec.state` defaulting to `Inactive` as upstream's.
pub fn crd() -> k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition {
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::JSON;
    use kube::CustomResourceExt;
    let mut crd = ManagedResourceDefinition::crd();
    for v in &mut crd.spec.versions {
        if let Some(state) = v
            .schema
            .as_mut()
            .and_then(|s| s.open_api_v3_schema.as_mut())
            .and_then(|s| s.properties.as_mut())
            .and_then(|p| p.get_mut("spec"))
            .and_then(|s| s.properties.as_mut())
            .and_then(|p| p.get_mut("state"))
        {
            state.default = Some(JSON(serde_json::json!("Inactive")));
        }
    }
    crd
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_crd_is_upstreams_shape() {
        let crd = crd();
        assert_eq!(
            crd.metadata.name.as_deref(),
            Some("managedresourcedefinitions.apiextensions.crossplane.io")
        );
        assert_eq!(crd.spec.scope, "Cluster");
        assert_eq!(
            crd.spec.names.short_names,
            Some(vec!["mrd".to_string(), "mrds".to_string()])
        );
        let v = &crd.spec.versions[0];
        assert_eq!(v.name, "v1alpha1");
        let cols: Vec<&str> = v
            .additional_printer_columns
            .iter()
            .flatten()
            .map(|c| c.name.as_str())
            .collect();
        assert_eq!(cols, ["STATE", "ESTABLISHED", "AGE"]);
        let text = serde_json::to_string(&crd).unwrap_or_default();
        assert!(text.contains(r#""default":"Inactive""#), "{text}");
        assert!(text.contains("state cannot be changed once it becomes Active"));
    }

    #[test]
    fn a_crd_spec_reads_as_an_mrd_spec() {
        let spec: ManagedResourceDefinitionSpec = serde_json::from_value(serde_json::json!({
            "group": "nop.crossplane.io", "scope": "Cluster",
            "names": {"kind": "NopResource", "plural": "nopresources"},
            "versions": [{"name": "v1alpha1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object"}},
                "subresources": {"status": {}},
                "additionalPrinterColumns": [{"name": "READY", "type": "string", "jsonPath": ".x"}]}],
        }))
        .expect("a CRD spec");
        assert_eq!(spec.state, ManagedResourceDefinitionState::Inactive);
        assert_eq!(
            spec.versions[0].subresources,
            Some(serde_json::json!({"status": {}}))
        );
    }
}
