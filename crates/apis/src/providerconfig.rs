//! The shapes of ProviderConfig and ProviderConfigUsage.
//!
//! Every provider declares these kinds in its own API group, so this module holds the shared parts: the
//! ProviderConfig status, the credential selectors, and the ProviderConfigUsage object. A usage keeps its
//! fields at the top level (`providerConfigRef`, `resourceRef`), not under `spec`, as Crossplane's does;
//! kube's `CustomResource` derive cannot express that, so [`usage_crd`] writes its CRD.

use std::collections::BTreeMap;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    CustomResourceDefinition, CustomResourceDefinitionNames, CustomResourceDefinitionSpec,
    CustomResourceDefinitionVersion, CustomResourceValidation, JSONSchemaProps,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::condition::Condition;
use crate::reference::SecretKeySelector;

/// The status of a ProviderConfig: its conditions and how many resources use it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ProviderConfigStatus {
    /// Conditions, keyed by type.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["type"]))]
    pub conditions: Vec<Condition>,
    /// The number of ProviderConfigUsages of this config.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub users: Option<i64>,
}

/// Where a provider's credentials come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum CredentialsSource {
    /// No credentials.
    None,
    /// A key of a Secret.
    Secret,
    /// The provider's own identity (for Kubernetes: the in-cluster config).
    InjectedIdentity,
    /// An environment variable.
    Environment,
    /// A file.
    Filesystem,
}

/// An environment variable holding credentials.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct EnvSelector {
    /// The variable's name.
    pub name: String,
}

/// A file holding credentials.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct FsSelector {
    /// The file's path.
    pub path: String,
}

/// crossplane-runtime's `CommonCredentialSelectors`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CommonCredentialSelectors {
    /// The Secret key, for source `Secret`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret_ref: Option<SecretKeySelector>,
    /// The variable, for source `Environment`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub env: Option<EnvSelector>,
    /// The file, for source `Filesystem`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fs: Option<FsSelector>,
}

/// The ProviderConfig a usage counts for: a name, and for namespaced providers a kind.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct UsageProviderConfigRef {
    /// `ProviderConfig` or `ClusterProviderConfig`; absent for cluster-scoped (legacy) usages.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    /// The config's name.
    pub name: String,
}

/// A reference to an object by API version, kind, name and UID.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TypedReference {
    /// API version of the referent.
    pub api_version: String,
    /// Kind of the referent.
    pub kind: String,
    /// Name of the referent.
    pub name: String,
    /// UID of the referent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uid: Option<String>,
}

/// The fields of a ProviderConfigUsage (top-level in the object).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ProviderConfigUsageSpec {
    /// The config in use.
    pub provider_config_ref: UsageProviderConfigRef,
    /// The managed resource using it.
    pub resource_ref: TypedReference,
}

/// Where a provider's ProviderConfigUsage kind lives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UsageKind<'a> {
    /// API group, e.g. `kubernetes.crossplane.io`.
    pub group: &'a str,
    /// Version, e.g. `v1alpha1`.
    pub version: &'a str,
    /// Namespaced (`*.m.crossplane.io`) or cluster-scoped.
    pub namespaced: bool,
    /// The provider's short category, e.g. `kubernetes`.
    pub category: &'a str,
}

impl UsageKind<'_> {
    /// The kind name.
    pub const KIND: &'static str = "ProviderConfigUsage";
    /// The plural resource name.
    pub const PLURAL: &'static str = "providerconfigusages";
}

/// The CRD of a provider's `ProviderConfigUsage` kind.
pub fn usage_crd(kind: UsageKind<'_>) -> CustomResourceDefinition {
    let string = || JSONSchemaProps {
        type_: Some("string".to_owned()),
        ..JSONSchemaProps::default()
    };
    let object = |props: Vec<(&str, JSONSchemaProps)>, required: &[&str]| JSONSchemaProps {
        type_: Some("object".to_owned()),
        properties: Some(
            props
                .into_iter()
                .map(|(k, v)| (k.to_owned(), v))
                .collect::<BTreeMap<_, _>>(),
        ),
        required: (!required.is_empty()).then(|| required.iter().map(|s| (*s).to_owned()).collect()),
        ..JSONSchemaProps::default()
    };
    let mut pc_ref = vec![("name", string())];
    if kind.namespaced {
        pc_ref.push(("kind", string()));
    }
    let schema = object(
        vec![
            ("apiVersion", string()),
            ("kind", string()),
            (
                "metadata",
                JSONSchemaProps {
                    type_: Some("object".to_owned()),
                    ..JSONSchemaProps::default()
                },
            ),
            ("providerConfigRef", object(pc_ref, &["name"])),
            (
                "resourceRef",
                object(
                    vec![
                        ("apiVersion", string()),
                        ("kind", string()),
                        ("name", string()),
                        ("uid", string()),
                    ],
                    &["apiVersion", "kind", "name"],
                ),
            ),
        ],
        &["providerConfigRef", "resourceRef"],
    );
    CustomResourceDefinition {
        metadata: ObjectMeta {
            name: Some(format!("{}.{}", UsageKind::PLURAL, kind.group)),
            ..ObjectMeta::default()
        },
        spec: CustomResourceDefinitionSpec {
            group: kind.group.to_owned(),
            names: CustomResourceDefinitionNames {
                kind: UsageKind::KIND.to_owned(),
                list_kind: Some(format!("{}List", UsageKind::KIND)),
                plural: UsageKind::PLURAL.to_owned(),
                singular: Some("providerconfigusage".to_owned()),
                categories: Some(vec![
                    "crossplane".to_owned(),
                    "provider".to_owned(),
                    kind.category.to_owned(),
                ]),
                short_names: None,
            },
            scope: if kind.namespaced { "Namespaced" } else { "Cluster" }.to_owned(),
            versions: vec![CustomResourceDefinitionVersion {
                name: kind.version.to_owned(),
                served: true,
                storage: true,
                schema: Some(CustomResourceValidation {
                    open_api_v3_schema: Some(schema),
                }),
                ..CustomResourceDefinitionVersion::default()
            }],
            ..CustomResourceDefinitionSpec::default()
        },
        status: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn usage_crd_is_named_and_scoped() {
        let crd = usage_crd(UsageKind {
            group: "kubernetes.m.crossplane.io",
            version: "v1alpha1",
            namespaced: true,
            category: "kubernetes",
        });
        assert_eq!(
            crd.metadata.name.as_deref(),
            Some("providerconfigusages.kubernetes.m.crossplane.io")
        );
        assert_eq!(crd.spec.scope, "Namespaced");
        let v = serde_json::to_value(&crd).expect("json");
        assert_eq!(
            v["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["providerConfigRef"]["properties"]
                ["kind"]["type"],
            "string"
        );
    }
}
