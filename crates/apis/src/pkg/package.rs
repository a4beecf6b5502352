//! What every package kind shares (upstream `apis/pkg/v1/package_types.go`, `revision_types.go`,
//! `conditions.go`, `interfaces.go`): the spec fields of Provider, Function and Configuration and of
//! their revisions, written once by [`package_kind!`](crate::package_kind) and
//! [`revision_kind!`](crate::revision_kind); the status pieces; labels and conditions.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Label on a revision naming its package (`pkg.crossplane.io/package=<package name>`).
pub const LABEL_PACKAGE: &str = "pkg.crossplane.io/package";
/// Label naming the revision on the objects made for it.
pub const LABEL_REVISION: &str = "pkg.crossplane.io/revision";
/// Label naming the provider on its runtime's objects.
pub const LABEL_PROVIDER: &str = "pkg.crossplane.io/provider";
/// Label naming the function on its runtime's objects.
pub const LABEL_FUNCTION: &str = "pkg.crossplane.io/function";
/// Label naming the provider family (from the meta object) on a revision.
pub const LABEL_PROVIDER_FAMILY: &str = "pkg.crossplane.io/provider-family";

/// Condition type: whether the package's current revision is installed.
pub const TYPE_INSTALLED: &str = "Installed";
/// Condition type: whether the package (its current revision) is healthy.
pub const TYPE_HEALTHY: &str = "Healthy";
/// Condition type: whether a revision's objects are established.
pub const TYPE_REVISION_HEALTHY: &str = "RevisionHealthy";
/// Condition type: whether a revision's runtime (Deployment) is healthy.
pub const TYPE_RUNTIME_HEALTHY: &str = "RuntimeHealthy";
/// Condition type: whether a revision's runtime is active (not awaiting activation, `safe-start`).
pub const TYPE_RUNTIME_ACTIVE: &str = "RuntimeActive";

/// Reason (Installed=False): the package is being fetched and unpacked.
pub const REASON_UNPACKING: &str = "UnpackingPackage";
/// Reason (Installed=False): the current revision is inactive.
pub const REASON_INACTIVE: &str = "InactivePackageRevision";
/// Reason (Installed=True): the current revision is active.
pub const REASON_ACTIVE: &str = "ActivePackageRevision";
/// Reason (Healthy=False): the revision is unhealthy.
pub const REASON_UNHEALTHY: &str = "UnhealthyPackageRevision";
/// Reason (Healthy=True): the revision is healthy.
pub const REASON_HEALTHY: &str = "HealthyPackageRevision";
/// Reason (Healthy=Unknown): the revision's health is not known yet.
pub const REASON_UNKNOWN_HEALTH: &str = "UnknownPackageRevisionHealth";
/// Reason (RuntimeActive=True).
pub const REASON_ACTIVE_RUNTIME: &str = "ActiveRuntime";
/// Reason (RuntimeActive=False): a `safe-start` provider waits for one of its MRDs to be activated.
pub const REASON_AWAITING_ACTIVATION: &str = "AwaitingActivation";

/// `spec.desiredState` of an active revision.
pub const STATE_ACTIVE: &str = "Active";
/// `spec.desiredState` of an inactive revision.
pub const STATE_INACTIVE: &str = "Inactive";

/// The CEL rule upstream puts on `spec.package`: a fully qualified reference (a dotted registry host,
/// a repository, a tag and/or a digest).
pub const PACKAGE_RULE: &str =
    r"self.matches('^[^\\.\\/]+(\\.[^\\.\\/]+)+(\\/[^\\/:@]+)+(:[^:@]+(@sha256.+)?|@sha256.+)$')";
/// The message of [`PACKAGE_RULE`].
pub const PACKAGE_RULE_MESSAGE: &str = "must be a fully qualified image name, including the registry, \
repository, and tag or digest. For example, xpkg.crossplane.io/crossplane-contrib/provider-nop:v0.4.0 or \
xpkg.crossplane.io/crossplane-contrib/provider-nop@sha256:...";

/// A reference to a Secret in the package manager's namespace (`packagePullSecrets[]`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct LocalObjectReference {
    /// The Secret's name.
    #[serde(default)]
    #[schemars(extend("default" = ""))]
    pub name: String,
}

/// A reference to the runtime configuration of a Provider or Function (`runtimeConfigRef`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RuntimeConfigReference {
    /// Defaults to `pkg.crossplane.io/v1beta1`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = "pkg.crossplane.io/v1beta1"))]
    pub api_version: Option<String>,
    /// Defaults to `DeploymentRuntimeConfig`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = "DeploymentRuntimeConfig"))]
    pub kind: Option<String>,
    /// The config's name.
    pub name: String,
}

impl Default for RuntimeConfigReference {
    fn default() -> Self {
        RuntimeConfigReference {
            api_version: None,
            kind: None,
            name: "default".into(),
        }
    }
}

/// An ImageConfig that was applied to a package, and why (`SetImagePullSecret`, `VerifyImage`,
/// `RewriteImage`, `ConfigureRuntime`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ImageConfigRef {
    /// The ImageConfig's name.
    pub name: String,
    /// Why it was applied.
    pub reason: String,
}

/// An object a revision installed (`status.objectRefs[]`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TypedReference {
    /// Its API version.
    pub api_version: String,
    /// Its kind.
    pub kind: String,
    /// Its name.
    pub name: String,
    /// Its UID.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uid: Option<String>,
}

/// A map of labels or annotations.
pub type StringMap = BTreeMap<String, String>;

/// Defines a package kind's spec struct (Provider, Function, Configuration) with upstream's
/// `PackageSpec` fields, the given kube attributes and any extra fields.
#[macro_export]
macro_rules! package_kind {
    ($(#[$attr:meta])* $name:ident { $($(#[$fattr:meta])* $field:ident : $ty:ty,)* }) => {
        #[derive(kube::CustomResource, Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize, schemars::JsonSchema)]
        $(#[$attr])*
        #[serde(rename_all = "camelCase")]
        pub struct $name {
            /// The OCI reference of the package: fully qualified (registry, repository, tag or digest).
            #[schemars(extend("x-kubernetes-validations" = [{
                "rule": $crate::pkg::package::PACKAGE_RULE,
                "message": $crate::pkg::package::PACKAGE_RULE_MESSAGE,
            }]))]
            pub package: String,
            /// `Automatic` (default) makes each new revision active; `Manual` leaves that to the user.
            #[serde(default, skip_serializing_if = "Option::is_none")]
            #[schemars(extend("default" = "Automatic"))]
            pub revision_activation_policy: Option<String>,
            /// How many inactive revisions to keep (default 1; 0 keeps all).
            #[serde(default, skip_serializing_if = "Option::is_none")]
            #[schemars(extend("default" = 1))]
            pub revision_history_limit: Option<i64>,
            /// Secrets (`kubernetes.io/dockerconfigjson`, in the Crossplane namespace) to pull the package with.
            #[serde(default, skip_serializing_if = "Vec::is_empty")]
            pub package_pull_secrets: Vec<$crate::pkg::package::LocalObjectReference>,
            /// `IfNotPresent` (default), `Always` or `Never`.
            #[serde(default, skip_serializing_if = "Option::is_none")]
            #[schemars(extend("default" = "IfNotPresent"))]
            pub package_pull_policy: Option<String>,
            /// Install even if the package's `crossplane.version` constraint is not met.
            #[serde(default, skip_serializing_if = "Option::is_none")]
            #[schemars(extend("default" = false))]
            pub ignore_crossplane_constraints: Option<bool>,
            /// Do not resolve the package's dependencies.
            #[serde(default, skip_serializing_if = "Option::is_none")]
            #[schemars(extend("default" = false))]
            pub skip_dependency_resolution: Option<bool>,
            /// Labels added to every object the package manager makes for this package.
            #[serde(default, skip_serializing_if = "Option::is_none")]
            pub common_labels: Option<$crate::pkg::package::StringMap>,
            /// Annotations added to every object the package manager makes for this package.
            #[serde(default, skip_serializing_if = "Option::is_none")]
            pub common_annotations: Option<$crate::pkg::package::StringMap>,
            $($(#[$fattr])* pub $field: $ty,)*
        }
    };
}

/// Defines a revision kind's spec struct with upstream's `PackageRevisionSpec` fields, the given kube
/// attributes and any extra fields.
#[macro_export]
macro_rules! revision_kind {
    ($(#[$attr:meta])* $name:ident { $($(#[$fattr:meta])* $field:ident : $ty:ty,)* }) => {
        #[derive(kube::CustomResource, Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize, schemars::JsonSchema)]
        $(#[$attr])*
        #[serde(rename_all = "camelCase")]
        pub struct $name {
            /// `Active` or `Inactive`.
            pub desired_state: String,
            /// The package image this revision installs.
            pub image: String,
            /// The revision number: the highest is the package's current revision.
            pub revision: i64,
            /// Secrets to pull the package with.
            #[serde(default, skip_serializing_if = "Vec::is_empty")]
            pub package_pull_secrets: Vec<$crate::pkg::package::LocalObjectReference>,
            /// `IfNotPresent` (default), `Always` or `Never`.
            #[serde(default, skip_serializing_if = "Option::is_none")]
            #[schemars(extend("default" = "IfNotPresent"))]
            pub package_pull_policy: Option<String>,
            /// Install even if the `crossplane.version` constraint is not met.
            #[serde(default, skip_serializing_if = "Option::is_none")]
            #[schemars(extend("default" = false))]
            pub ignore_crossplane_constraints: Option<bool>,
            /// Do not resolve dependencies.
            #[serde(default, skip_serializing_if = "Option::is_none")]
            #[schemars(extend("default" = false))]
            pub skip_dependency_resolution: Option<bool>,
            /// Labels added to every object made for this revision.
            #[serde(default, skip_serializing_if = "Option::is_none")]
            pub common_labels: Option<$crate::pkg::package::StringMap>,
            /// Annotations added to every object made for this revision.
            #[serde(default, skip_serializing_if = "Option::is_none")]
            pub common_annotations: Option<$crate::pkg::package::StringMap>,
            $($(#[$fattr])* pub $field: $ty,)*
        }
    };
}

/// The observed state of a Provider, Function or Configuration.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PackageStatus {
    /// Installed and Healthy.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["type"]))]
    pub conditions: Vec<crate::Condition>,
    /// The name of the current revision.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub current_revision: Option<String>,
    /// The package reference of the current revision.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub current_identifier: Option<String>,
    /// The package reference after ImageConfig rewrites.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resolved_package: Option<String>,
    /// The ImageConfigs applied to the package.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub applied_image_config_refs: Vec<ImageConfigRef>,
}

/// The observed state of a revision: what all revision kinds share, plus the TLS Secret names of
/// Provider and Function revisions and a FunctionRevision's endpoint.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RevisionStatus {
    /// RevisionHealthy, RuntimeHealthy, RuntimeActive.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["type"]))]
    pub conditions: Vec<crate::Condition>,
    /// The objects this revision installed, sorted.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub object_refs: Vec<TypedReference>,
    /// Dependencies found in the Lock.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub found_dependencies: Option<i64>,
    /// Dependencies installed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub installed_dependencies: Option<i64>,
    /// Dependencies whose version does not satisfy the constraint.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub invalid_dependencies: Option<i64>,
    /// The capabilities the package's meta object declares.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub capabilities: Vec<String>,
    /// The image after ImageConfig rewrites.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resolved_image: Option<String>,
    /// The ImageConfigs applied.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub applied_image_config_refs: Vec<ImageConfigRef>,
}
