//! The `pkg.crossplane.io` API (upstream `apis/pkg`), one module per kind:
//! - [`package`]: what every package and revision kind shares (spec fields, status, labels,
//!   conditions);
//! - [`provider`]: Provider and ProviderRevision (`v1`);
//! - [`function`]: Function and FunctionRevision (`v1`, also served as `v1beta1`), and the
//!   annotations that point a Function at an endpoint that is already running;
//! - [`configuration`]: Configuration and ConfigurationRevision (`v1`);
//! - [`runtime_config`]: DeploymentRuntimeConfig (`v1beta1`);
//! - [`image_config`]: ImageConfig (`v1beta1`);
//! - [`lock`]: the Lock (`v1beta1`);
//! - [`meta`]: the `meta.pkg.crossplane.io/v1` objects inside a package.
//!
//! Upstream serves `v1beta1` beside `v1` only for Function and FunctionRevision; Provider,
//! Configuration and their revisions serve `v1` alone (upstream's `cluster/crds/`).

pub mod configuration;
pub mod function;
pub mod image_config;
pub mod lock;
pub mod meta;
pub mod package;
pub mod provider;
pub mod runtime_config;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;

pub use configuration::{Configuration, ConfigurationRevision, ConfigurationRevisionSpec, ConfigurationSpec};
pub use function::{
    ANNOTATION_RUNTIME, ANNOTATION_RUNTIME_DEVELOPMENT_TARGET, Function, FunctionRevision,
    FunctionRevisionSpec, FunctionRevisionStatus, FunctionSpec, FunctionStatus, RUNTIME_DEVELOPMENT,
    function_crd, function_revision_crd,
};
pub use image_config::{ImageConfig, ImageConfigSpec};
pub use lock::{LOCK_NAME, Lock, lock_crd};
pub use package::{
    LABEL_FUNCTION, LABEL_PACKAGE, LABEL_PROVIDER, LABEL_PROVIDER_FAMILY, LABEL_REVISION, PackageStatus,
    RevisionStatus, STATE_ACTIVE, STATE_INACTIVE,
};
pub use provider::{Provider, ProviderRevision, ProviderRevisionSpec, ProviderRevisionStatus, ProviderSpec};
pub use runtime_config::{DEFAULT_RUNTIME_CONFIG, DeploymentRuntimeConfig, DeploymentRuntimeConfigSpec};

/// The API group.
pub const GROUP: &str = "pkg.crossplane.io";

/// Every `pkg.crossplane.io` CRD, as upstream serves them.
pub fn crds() -> Vec<CustomResourceDefinition> {
    use kube::CustomResourceExt;
    vec![
        Provider::crd(),
        ProviderRevision::crd(),
        function_crd(),
        function_revision_crd(),
        Configuration::crd(),
        ConfigurationRevision::crd(),
        DeploymentRuntimeConfig::crd(),
        ImageConfig::crd(),
        lock_crd(),
    ]
}

#[cfg(test)]
mod tests {
    use serde_json::Value;

    use super::*;

    fn spec_schema(crd: &CustomResourceDefinition) -> Value {
        let v = serde_json::to_value(&crd.spec.versions[0]).expect("json");
        v.pointer("/schema/openAPIV3Schema/properties/spec")
            .cloned()
            .unwrap_or_default()
    }

    #[test]
    fn versions_are_upstreams() {
        let served: Vec<(String, Vec<String>)> = crds()
            .iter()
            .map(|c| {
                let versions = c.spec.versions.iter().map(|v| v.name.clone()).collect();
                (c.spec.names.kind.clone(), versions)
            })
            .collect();
        let want = [
            ("Provider", vec!["v1"]),
            ("ProviderRevision", vec!["v1"]),
            ("Function", vec!["v1", "v1beta1"]),
            ("FunctionRevision", vec!["v1", "v1beta1"]),
            ("Configuration", vec!["v1"]),
            ("ConfigurationRevision", vec!["v1"]),
            ("DeploymentRuntimeConfig", vec!["v1beta1"]),
            ("ImageConfig", vec!["v1beta1"]),
            ("Lock", vec!["v1beta1"]),
        ];
        assert_eq!(served.len(), want.len());
        for ((kind, versions), (wk, wv)) in served.iter().zip(want) {
            let versions: Vec<&str> = versions.iter().map(String::as_str).collect();
            assert_eq!((kind.as_str(), versions), (wk, wv));
        }
        for crd in crds() {
            assert_eq!(crd.spec.scope, "Cluster", "{}", crd.spec.names.kind);
        }
    }

    #[test]
    fn package_specs_carry_upstreams_defaults_and_rule() {
        use kube::CustomResourceExt;
        for crd in [Provider::crd(), function_crd(), Configuration::crd()] {
            let spec = spec_schema(&crd);
            let kind = &crd.spec.names.kind;
            assert_eq!(spec["required"], serde_json::json!(["package"]), "{kind}");
            let p = &spec["properties"];
            assert_eq!(p["packagePullPolicy"]["default"], "IfNotPresent", "{kind}");
            assert_eq!(p["revisionActivationPolicy"]["default"], "Automatic", "{kind}");
            assert_eq!(p["revisionHistoryLimit"]["default"], 1, "{kind}");
            assert_eq!(p["ignoreCrossplaneConstraints"]["default"], false, "{kind}");
            assert_eq!(
                p["packagePullSecrets"]["items"]["properties"]["name"]["default"], "",
                "{kind}"
            );
            let rule = p["package"]["x-kubernetes-validations"][0]["rule"]
                .as_str()
                .unwrap_or_default();
            assert!(rule.starts_with("self.matches('^[^"), "{kind}: {rule}");
            let runtime = kind != "Configuration";
            assert_eq!(
                p["runtimeConfigRef"]["default"]["name"] == "default",
                runtime,
                "{kind}"
            );
            let columns: Vec<&str> = crd.spec.versions[0]
                .additional_printer_columns
                .iter()
                .flatten()
                .map(|c| c.name.as_str())
                .collect();
            assert_eq!(columns, ["INSTALLED", "HEALTHY", "PACKAGE", "AGE"], "{kind}");
        }
        let rev = spec_schema(&ProviderRevision::crd());
        assert_eq!(
            rev["required"],
            serde_json::json!(["desiredState", "image", "revision"])
        );
        let columns: Vec<String> = ProviderRevision::crd().spec.versions[0]
            .additional_printer_columns
            .iter()
            .flatten()
            .map(|c| c.name.clone())
            .collect();
        assert_eq!(
            columns,
            [
                "HEALTHY",
                "RUNTIME-HEALTHY",
                "RUNTIME-ACTIVE",
                "IMAGE",
                "STATE",
                "AGE",
                "REVISION",
                "DEP-FOUND",
                "DEP-INSTALLED"
            ]
        );
    }
}
