//! Lock, `pkg.crossplane.io/v1beta1` (upstream `apis/pkg/v1beta1/lock.go`): one cluster object named
//! `lock` listing every installed package revision and its dependencies, from which the package
//! manager resolves `dependsOn`. Its `packages` sit at the top level, beside `metadata`, not under a
//! `spec`, so the type and its CRD are written out here instead of derived.

use k8s_openapi::{
    apiextensions_apiserver::pkg::apis::apiextensions::v1::{
        CustomResourceColumnDefinition, CustomResourceDefinition, CustomResourceDefinitionNames,
        CustomResourceDefinitionSpec, CustomResourceDefinitionVersion, CustomResourceSubresourceStatus,
        CustomResourceSubresources, CustomResourceValidation, JSONSchemaProps,
    },
    apimachinery::pkg::apis::meta::v1::ObjectMeta,
};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The name of the one Lock.
pub const LOCK_NAME: &str = "lock";

/// A package kind as the Lock records it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum PackageType {
    /// A Configuration.
    Configuration,
    /// A Provider.
    Provider,
    /// A Function.
    Function,
}

/// A dependency of a locked package.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Dependency {
    /// The dependency's package source (without tag).
    pub package: String,
    /// Its API version (`pkg.crossplane.io/v1`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_version: Option<String>,
    /// Its kind.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    /// Its type (older locks).
    #[serde(default, rename = "type", skip_serializing_if = "Option::is_none")]
    pub package_type: Option<PackageType>,
    /// A semver range or a digest.
    pub constraints: String,
}

/// One installed package revision.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct LockPackage {
    /// The revision's name.
    pub name: String,
    /// Its API version.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_version: Option<String>,
    /// Its kind.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    /// Its type (older locks).
    #[serde(default, rename = "type", skip_serializing_if = "Option::is_none")]
    pub package_type: Option<PackageType>,
    /// The package source, without tag.
    pub source: String,
    /// The version (tag or digest).
    pub version: String,
    /// Its dependencies.
    pub dependencies: Vec<Dependency>,
}

/// The Lock's status.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct LockStatus {
    /// Conditions.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["type"]))]
    pub conditions: Vec<crate::Condition>,
}

/// The Lock.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Lock {
    /// Its metadata (named [`LOCK_NAME`]).
    pub metadata: ObjectMeta,
    /// The installed package revisions.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub packages: Vec<LockPackage>,
    /// Its status.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<LockStatus>,
}

impl k8s_openapi::Resource for Lock {
    const API_VERSION: &'static str = "pkg.crossplane.io/v1beta1";
    const GROUP: &'static str = "pkg.crossplane.io";
    const KIND: &'static str = "Lock";
    const VERSION: &'static str = "v1beta1";
    const URL_PATH_SEGMENT: &'static str = "locks";
    type Scope = k8s_openapi::ClusterResourceScope;
}

impl k8s_openapi::Metadata for Lock {
    type Ty = ObjectMeta;
    fn metadata(&self) -> &ObjectMeta {
        &self.metadata
    }
    fn metadata_mut(&mut self) -> &mut ObjectMeta {
        &mut self.metadata
    }
}

/// The schema of the Lock's fields besides the type's own (`packages`, `status`).
#[derive(JsonSchema)]
#[allow(dead_code)]
struct LockBody {
    #[serde(default)]
    packages: Vec<LockPackage>,
    #[serde(default)]
    status: Option<LockStatus>,
}

/// The Lock's CRD, as upstream serves it (`v1beta1`, cluster scope, a status subresource).
pub fn lock_crd() -> CustomResourceDefinition {
    let generate = schemars::generate::SchemaSettings::openapi3()
        .with(|s| {
            s.inline_subschemas = true;
            s.meta_schema = None;
        })
        .with_transform(schemars::transform::AddNullable::default())
        .with_transform(kube::core::schema::StructuralSchemaRewriter)
        .with_transform(kube::core::schema::OptionalEnum)
        .into_generator();
    let body = serde_json::to_value(generate.into_root_schema_for::<LockBody>()).unwrap_or_default();
    let mut schema: JSONSchemaProps = serde_json::from_value(body).unwrap_or_default();
    schema.description = Some("Lock is the CRD type that tracks package dependencies.".into());
    let props = schema.properties.get_or_insert_with(Default::default);
    for (field, kind) in [
        ("apiVersion", "string"),
        ("kind", "string"),
        ("metadata", "object"),
    ] {
        props.insert(
            field.into(),
            JSONSchemaProps {
                type_: Some(kind.into()),
                ..Default::default()
            },
        );
    }
    schema.required = None;
    CustomResourceDefinition {
        metadata: ObjectMeta {
            name: Some("locks.pkg.crossplane.io".into()),
            ..Default::default()
        },
        spec: CustomResourceDefinitionSpec {
            group: "pkg.crossplane.io".into(),
            names: CustomResourceDefinitionNames {
                kind: "Lock".into(),
                list_kind: Some("LockList".into()),
                plural: "locks".into(),
                singular: Some("lock".into()),
                ..Default::default()
            },
            scope: "Cluster".into(),
            versions: vec![CustomResourceDefinitionVersion {
                name: "v1beta1".into(),
                served: true,
                storage: true,
                additional_printer_columns: Some(vec![CustomResourceColumnDefinition {
                    name: "AGE".into(),
                    type_: "date".into(),
                    json_path: ".metadata.creationTimestamp".into(),
                    ..Default::default()
                }]),
                schema: Some(CustomResourceValidation {
                    open_api_v3_schema: Some(schema),
                }),
                subresources: Some(CustomResourceSubresources {
                    status: Some(CustomResourceSubresourceStatus(serde_json::json!({}))),
                    ..Default::default()
                }),
                ..Default::default()
            }],
            ..Default::default()
        },
        status: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_lock_crd_has_packages_at_the_top_level() {
        let crd = lock_crd();
        let schema = crd.spec.versions[0]
            .schema
            .as_ref()
            .and_then(|s| s.open_api_v3_schema.as_ref())
            .expect("a schema");
        let props = schema.properties.as_ref().expect("properties");
        for field in ["apiVersion", "kind", "metadata", "packages", "status"] {
            assert!(props.contains_key(field), "{field}");
        }
        let lock: Lock = serde_json::from_value(serde_json::json!({
            "apiVersion": "pkg.crossplane.io/v1beta1", "kind": "Lock", "metadata": {"name": "lock"},
            "packages": [{"name": "provider-nop-abc", "source": "xpkg.crossplane.io/crossplane-contrib/provider-nop",
                          "version": "v0.4.0", "dependencies": [], "type": "Provider"}],
        }))
        .expect("a lock");
        assert_eq!(lock.packages[0].package_type, Some(PackageType::Provider));
        // Structural: the optional enum is a plain string enum.
        let item = serde_json::to_value(&props["packages"]).expect("json");
        assert_eq!(item["items"]["properties"]["type"]["type"], "string");
        assert_eq!(
            item["items"]["properties"]["type"]["enum"],
            serde_json::json!(["Configuration", "Provider", "Function"])
        );
    }
}
