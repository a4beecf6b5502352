//! [`ObjectKind`]: what the Object client needs from either Object kind.

use kube::ResourceExt;
use managed::Managed;

use crate::types::{ObjectFields, cluster, namespaced};

/// Either Object kind.
pub trait ObjectKind: Managed {
    /// The shared fields.
    fn fields(&self) -> &ObjectFields;
    /// Records the object as observed.
    fn set_observed(&mut self, manifest: Option<serde_json::Value>);
    /// The namespace a manifest without one lands in.
    fn default_manifest_namespace(&self) -> Option<String>;
    /// The default `apiVersion` of `dependsOn` references (this group's Object).
    fn default_reference_api_version() -> &'static str;
}

impl ObjectKind for cluster::Object {
    fn fields(&self) -> &ObjectFields {
        &self.spec.object
    }
    fn set_observed(&mut self, manifest: Option<serde_json::Value>) {
        self.status
            .get_or_insert_with(Default::default)
            .at_provider
            .manifest = manifest;
    }
    fn default_manifest_namespace(&self) -> Option<String> {
        None
    }
    fn default_reference_api_version() -> &'static str {
        "kubernetes.crossplane.io/v1alpha2"
    }
}

impl ObjectKind for namespaced::Object {
    fn fields(&self) -> &ObjectFields {
        &self.spec.object
    }
    fn set_observed(&mut self, manifest: Option<serde_json::Value>) {
        self.status
            .get_or_insert_with(Default::default)
            .at_provider
            .manifest = manifest;
    }
    fn default_manifest_namespace(&self) -> Option<String> {
        self.namespace()
    }
    fn default_reference_api_version() -> &'static str {
        "kubernetes.m.crossplane.io/v1alpha1"
    }
}

#[cfg(test)]
mod tests {
    use managed::ConfigRef;
    use serde_json::json;

    use crate::types::{cluster, namespaced};

    fn namespaced_object(config: serde_json::Value) -> namespaced::Object {
        serde_json::from_value(json!({
            "apiVersion": "kubernetes.m.crossplane.io/v1alpha1",
            "kind": "Object",
            "metadata": { "name": "o", "namespace": "team-a" },
            "spec": { "forProvider": { "manifest": {} }, "providerConfigRef": config },
        }))
        .expect("a valid Object")
    }

    #[test]
    fn namespaced_objects_name_a_config_by_kind() {
        let pc = namespaced_object(json!({ "kind": "ProviderConfig", "name": "local" }));
        assert_eq!(
            ConfigRef::of(&pc),
            Ok(ConfigRef::Namespaced("team-a".into(), "local".into()))
        );
        let cpc = namespaced_object(json!({ "kind": "ClusterProviderConfig", "name": "all" }));
        assert_eq!(ConfigRef::of(&cpc), Ok(ConfigRef::Cluster("all".into())));
        let bad = namespaced_object(json!({ "kind": "Secret", "name": "x" }));
        let err = ConfigRef::of(&bad).expect_err("an unknown kind is refused");
        assert!(err.contains("\"Secret\" is not ProviderConfig"), "{err}");
    }

    #[test]
    fn legacy_objects_default_to_the_default_config() {
        let o: cluster::Object = serde_json::from_value(json!({
            "apiVersion": "kubernetes.crossplane.io/v1alpha2",
            "kind": "Object",
            "metadata": { "name": "o" },
            "spec": { "forProvider": { "manifest": {} } },
        }))
        .expect("a valid Object");
        assert_eq!(ConfigRef::of(&o), Ok(ConfigRef::Legacy("default".into())));
    }
}
