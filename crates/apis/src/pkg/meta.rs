//! The meta objects inside a package, `meta.pkg.crossplane.io/v1` (upstream `apis/pkg/meta/v1`):
//! the package's `crossplane.yaml`, which `package.yaml` carries first. They are never served by
//! the apiserver; the package manager reads them from the package.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// The meta objects' API group.
pub const META_GROUP: &str = "meta.pkg.crossplane.io";
/// Their API version.
pub const META_API_VERSION: &str = "meta.pkg.crossplane.io/v1";

/// The capabilities upstream knows: a function usable in compositions.
pub const CAPABILITY_COMPOSITION: &str = "composition";
/// The capabilities upstream knows: a function usable in operations.
pub const CAPABILITY_OPERATION: &str = "operation";
/// The capabilities upstream knows: a provider whose runtime waits until one of its MRDs is active.
pub const CAPABILITY_SAFE_START: &str = "safe-start";

/// The version of Crossplane a package needs.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CrossplaneConstraints {
    /// A semver constraint, e.g. `>=v1.20.0`.
    pub version: String,
}

/// A package this package depends on.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Dependency {
    /// The dependency's API version (`pkg.crossplane.io/v1`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_version: Option<String>,
    /// Its kind (`Provider`, `Function`, `Configuration`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    /// Its package source, without tag.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub package: Option<String>,
    /// Older form: a provider source.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider: Option<String>,
    /// Older form: a configuration source.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub configuration: Option<String>,
    /// Older form: a function source.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub function: Option<String>,
    /// A semver range or a digest.
    pub version: String,
}

impl Dependency {
    /// The dependency's source, whichever field names it.
    pub fn source(&self) -> Option<&str> {
        self.package
            .as_deref()
            .or(self.provider.as_deref())
            .or(self.configuration.as_deref())
            .or(self.function.as_deref())
    }
}

/// What every meta object's spec has.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MetaSpec {
    /// The Crossplane version the package needs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub crossplane: Option<CrossplaneConstraints>,
    /// The packages it depends on.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub depends_on: Vec<Dependency>,
    /// The capabilities it declares.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub capabilities: Vec<String>,
}

/// The metadata of a meta object.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct MetaObjectMeta {
    /// The package's name.
    #[serde(default)]
    pub name: String,
    /// Labels, copied onto the revision.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
    /// Annotations, copied onto the revision.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub annotations: BTreeMap<String, String>,
}

/// The kind of a meta object.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum MetaKind {
    /// `meta.pkg.crossplane.io/v1` Provider.
    Provider,
    /// `meta.pkg.crossplane.io/v1` Function.
    Function,
    /// `meta.pkg.crossplane.io/v1` Configuration.
    Configuration,
}

/// A meta object: a package's Provider, Function or Configuration.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Meta {
    /// `meta.pkg.crossplane.io/v1` (or an older version).
    pub api_version: String,
    /// Which kind of package.
    pub kind: MetaKind,
    /// Its metadata.
    #[serde(default)]
    pub metadata: MetaObjectMeta,
    /// Its spec.
    #[serde(default)]
    pub spec: MetaSpec,
}

/// Whether `capabilities` hold `capability`, compared as upstream's `CapabilitiesContainFuzzyMatch`:
/// ignoring case and every character that is not a letter or digit (so `SafeStart` is `safe-start`).
pub fn capabilities_contain<S: AsRef<str>>(capabilities: &[S], capability: &str) -> bool {
    let norm = |s: &str| -> String {
        s.chars()
            .filter(char::is_ascii_alphanumeric)
            .map(|c| c.to_ascii_lowercase())
            .collect()
    };
    let want = norm(capability);
    capabilities.iter().any(|c| norm(c.as_ref()) == want)
}

impl Meta {
    /// Whether the package declares `capability`, compared as upstream does ([`capabilities_contain`]).
    pub fn has_capability(&self, capability: &str) -> bool {
        capabilities_contain(&self.spec.capabilities, capability)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_an_upstream_meta_provider() {
        let meta: Meta = serde_json::from_value(serde_json::json!({
            "apiVersion": "meta.pkg.crossplane.io/v1",
            "kind": "Provider",
            "metadata": {"name": "provider-nop", "annotations": {"meta.crossplane.io/maintainer": "x"}},
            "spec": {
                "crossplane": {"version": ">=v1.20.0"},
                "capabilities": ["SafeStart"],
                "dependsOn": [{"provider": "xpkg.crossplane.io/crossplane-contrib/provider-kubernetes", "version": ">=v0.1.0"}],
            },
        }))
        .expect("a meta Provider");
        assert_eq!(meta.kind, MetaKind::Provider);
        assert!(meta.has_capability(CAPABILITY_SAFE_START));
        assert!(!meta.has_capability(CAPABILITY_COMPOSITION));
        assert_eq!(
            meta.spec.depends_on[0].source(),
            Some("xpkg.crossplane.io/crossplane-contrib/provider-kubernetes")
        );
    }
}
