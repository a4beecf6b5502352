//! Provider and ProviderRevision, `pkg.crossplane.io/v1` (upstream `apis/pkg/v1/provider_types.go`):
//! a provider package, and each version of it the package manager installed.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::package::{PackageStatus, RevisionStatus, RuntimeConfigReference};

crate::package_kind! {
    /// The desired state of a Provider: which package, and how to run it.
    #[kube(
        group = "pkg.crossplane.io",
        version = "v1",
        kind = "Provider",
        plural = "providers",
        category = "crossplane",
        category = "pkg",
        status = "PackageStatus",
        printcolumn = r#"{"name":"INSTALLED","type":"string","jsonPath":".status.conditions[?(@.type=='Installed')].status"}"#,
        printcolumn = r#"{"name":"HEALTHY","type":"string","jsonPath":".status.conditions[?(@.type=='Healthy')].status"}"#,
        printcolumn = r#"{"name":"PACKAGE","type":"string","jsonPath":".spec.package"}"#,
        printcolumn = r#"{"name":"AGE","type":"date","jsonPath":".metadata.creationTimestamp"}"#
    )]
    ProviderSpec {
        /// The DeploymentRuntimeConfig the provider runs with (default `default`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        #[schemars(extend("default" = {"name": "default"}))]
        runtime_config_ref: Option<RuntimeConfigReference>,
    }
}

crate::revision_kind! {
    /// The desired state of a ProviderRevision: one version of a Provider's package.
    #[kube(
        group = "pkg.crossplane.io",
        version = "v1",
        kind = "ProviderRevision",
        plural = "providerrevisions",
        category = "crossplane",
        category = "pkgrev",
        status = "ProviderRevisionStatus",
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
    ProviderRevisionSpec {
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

/// The observed state of a ProviderRevision (or FunctionRevision, with an endpoint).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ProviderRevisionStatus {
    /// What every revision reports.
    #[serde(flatten)]
    pub revision: RevisionStatus,
    /// The Secret with the runtime's TLS server certificate.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tls_server_secret_name: Option<String>,
    /// The Secret with the runtime's TLS client certificate.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tls_client_secret_name: Option<String>,
}
