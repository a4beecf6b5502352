//! Configuration and ConfigurationRevision, `pkg.crossplane.io/v1` (upstream
//! `apis/pkg/v1/configuration_types.go`): a package of XRDs and Compositions, with no runtime.

use super::package::{PackageStatus, RevisionStatus};

crate::package_kind! {
    /// The desired state of a Configuration.
    #[kube(
        group = "pkg.crossplane.io",
        version = "v1",
        kind = "Configuration",
        plural = "configurations",
        category = "crossplane",
        category = "pkg",
        status = "PackageStatus",
        printcolumn = r#"{"name":"INSTALLED","type":"string","jsonPath":".status.conditions[?(@.type=='Installed')].status"}"#,
        printcolumn = r#"{"name":"HEALTHY","type":"string","jsonPath":".status.conditions[?(@.type=='Healthy')].status"}"#,
        printcolumn = r#"{"name":"PACKAGE","type":"string","jsonPath":".spec.package"}"#,
        printcolumn = r#"{"name":"AGE","type":"date","jsonPath":".metadata.creationTimestamp"}"#
    )]
    ConfigurationSpec {}
}

crate::revision_kind! {
    /// The desired state of a ConfigurationRevision.
    #[kube(
        group = "pkg.crossplane.io",
        version = "v1",
        kind = "ConfigurationRevision",
        plural = "configurationrevisions",
        category = "crossplane",
        category = "pkgrev",
        status = "RevisionStatus",
        printcolumn = r#"{"name":"HEALTHY","type":"string","jsonPath":".status.conditions[?(@.type=='RevisionHealthy')].status"}"#,
        printcolumn = r#"{"name":"IMAGE","type":"string","jsonPath":".spec.image"}"#,
        printcolumn = r#"{"name":"STATE","type":"string","jsonPath":".spec.desiredState"}"#,
        printcolumn = r#"{"name":"AGE","type":"date","jsonPath":".metadata.creationTimestamp"}"#,
        printcolumn = r#"{"name":"REVISION","type":"string","jsonPath":".spec.revision","priority":1}"#,
        printcolumn = r#"{"name":"DEP-FOUND","type":"string","jsonPath":".status.foundDependencies","priority":1}"#,
        printcolumn = r#"{"name":"DEP-INSTALLED","type":"string","jsonPath":".status.installedDependencies","priority":1}"#
    )]
    ConfigurationRevisionSpec {}
}
