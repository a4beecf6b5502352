//! Function and FunctionRevision, `pkg.crossplane.io/v1` (upstream `apis/pkg/v1`).
//!
//! Upstream's package manager turns a Function into FunctionRevisions, the active one into a Deployment
//! and a Service, and writes the Service's address to the revision's `status.endpoint`. The core dials
//! that endpoint. For development and tests, a Function annotated
//! `render.crossplane.io/runtime: Development` is dialled at
//! `render.crossplane.io/runtime-development-target` instead (plaintext gRPC), the annotations upstream's
//! `crossplane render` reads.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::package::{PackageStatus, RevisionStatus, RuntimeConfigReference};

/// The annotation naming a Function's runtime; [`RUNTIME_DEVELOPMENT`] means "already running".
pub const ANNOTATION_RUNTIME: &str = "render.crossplane.io/runtime";
/// The runtime of a function that is already running at [`ANNOTATION_RUNTIME_DEVELOPMENT_TARGET`].
pub const RUNTIME_DEVELOPMENT: &str = "Development";
/// The `host:port` of a Development-runtime function (default `localhost:9443`, as upstream).
pub const ANNOTATION_RUNTIME_DEVELOPMENT_TARGET: &str = "render.crossplane.io/runtime-development-target";

crate::package_kind! {
    /// The desired state of a Function: which package, and how to run it.
    #[kube(
        group = "pkg.crossplane.io",
        version = "v1",
        kind = "Function",
        plural = "functions",
        category = "crossplane",
        category = "pkg",
        status = "FunctionStatus",
        printcolumn = r#"{"name":"INSTALLED","type":"string","jsonPath":".status.conditions[?(@.type=='Installed')].status"}"#,
        printcolumn = r#"{"name":"HEALTHY","type":"string","jsonPath":".status.conditions[?(@.type=='Healthy')].status"}"#,
        printcolumn = r#"{"name":"PACKAGE","type":"string","jsonPath":".spec.package"}"#,
        printcolumn = r#"{"name":"AGE","type":"date","jsonPath":".metadata.creationTimestamp"}"#
    )]
    FunctionSpec {
        /// The DeploymentRuntimeConfig the function runs with (default `default`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        #[schemars(extend("default" = {"name": "default"}))]
        runtime_config_ref: Option<RuntimeConfigReference>,
    }
}

/// The observed state of a Function: what every package reports.
pub type FunctionStatus = PackageStatus;

crate::revision_kind! {
    /// The desired state of a FunctionRevision: one version of a Function's package.
    #[kube(
        group = "pkg.crossplane.io",
        version = "v1",
        kind = "FunctionRevision",
        plural = "functionrevisions",
        category = "crossplane",
        category = "pkgrev",
        status = "FunctionRevisionStatus",
        printcolumn = r#"{"name":"HEALTHY","type":"string","jsonPath":".status.conditions[?(@.type=='RevisionHealthy')].status"}"#,
        printcolumn = r#"{"name":"RUNTIME-HEALTHY","type":"string","jsonPath":".status.conditions[?(@.type=='RuntimeHealthy')].status"}"#,
        printcolumn = r#"{"name":"RUNTIME-ACTIVE","type":"string","jsonPath":".status.conditions[?(@.type=='RuntimeActive')].status"}"#,
        printcolumn = r#"{"name":"IMAGE","type":"string","jsonPath":".spec.image"}"#,
        printcolumn = r#"{"name":"STATE","type":"string","jsonPath":".spec.desiredState"}"#,
        printcolumn = r#"{"name":"AGE","type":"date","jsonPath":".metadata.creationTimestamp"}"#,
        printcolumn = r#"{"name":"REVISION","type":"string","jsonPath":".spec.revision","priority":1}"#,
        printcolumn = r#"{"name":"DEP-FOUND","type":"string","jsonPath":".status.foundDependencies","priority":1}"#,
        printcolumn = r#"{"name":"DEP-INSTALLED","type":"string","jsonPath":".status.installedDependencies","priority":1}"#
    )]
    FunctionRevisionSpec {
        /// The DeploymentRuntimeConfig the revision runs with.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        #[schemars(extend("default" = {"name": "default"}))]
        runtime_config_ref: Option<RuntimeConfigReference>,
        /// The Secret with the runtime's TLS server certificate.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        tls_server_secret_name: Option<String>,
        /// The Secret with the runtime's TLS client certificate.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        tls_client_secret_name: Option<String>,
    }
}

/// The observed state of a FunctionRevision.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct FunctionRevisionStatus {
    /// What every revision reports.
    #[serde(flatten)]
    pub revision: RevisionStatus,
    /// The Secret with the runtime's TLS server certificate.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tls_server_secret_name: Option<String>,
    /// The Secret with the runtime's TLS client certificate.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tls_client_secret_name: Option<String>,
    /// The gRPC endpoint of the running function (`dns:///<service>.<namespace>:9443`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub endpoint: Option<String>,
}

/// `crd` with a served, not stored, `v1beta1` beside its `v1`, with the same schema: as upstream serves
/// Function and FunctionRevision (their schemas are alike, so the apiserver converts with strategy None).
pub(crate) fn with_v1beta1(
    mut crd: k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition,
) -> k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition {
    let beta: Vec<_> = crd
        .spec
        .versions
        .iter()
        .filter(|v| v.name == "v1")
        .map(|v| {
            let mut b = v.clone();
            b.name = "v1beta1".to_owned();
            b.storage = false;
            b
        })
        .collect();
    crd.spec.versions.extend(beta);
    crd
}

/// The Function CRD as upstream serves it: `v1` (storage) and `v1beta1`.
pub fn function_crd()
-> k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition {
    use kube::CustomResourceExt;
    with_v1beta1(Function::crd())
}

/// The FunctionRevision CRD as upstream serves it: `v1` (storage) and `v1beta1`.
pub fn function_revision_crd()
-> k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition {
    use kube::CustomResourceExt;
    with_v1beta1(FunctionRevision::crd())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn functions_serve_v1_stored_and_v1beta1_alike() {
        for crd in [function_crd(), function_revision_crd()] {
            let versions: Vec<(&str, bool, bool)> = crd
                .spec
                .versions
                .iter()
                .map(|v| (v.name.as_str(), v.served, v.storage))
                .collect();
            assert_eq!(versions, [("v1", true, true), ("v1beta1", true, false)]);
            assert_eq!(crd.spec.versions[0].schema, crd.spec.versions[1].schema);
            assert!(crd.spec.conversion.is_none(), "strategy None");
        }
    }
}
