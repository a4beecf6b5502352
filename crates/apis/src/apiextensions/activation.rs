//! ManagedResourceActivationPolicy, `apiextensions.crossplane.io/v1alpha1` (crossplane
//! `apis/apiextensions/v1alpha1/mrd_policy_types.go`): which ManagedResourceDefinitions to activate,
//! by name, with wildcards (`*.nop.crossplane.io`, `*`).

use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::condition::Condition;

/// The API version.
pub const API_VERSION: &str = "apiextensions.crossplane.io/v1alpha1";
/// The kind.
pub const KIND: &str = "ManagedResourceActivationPolicy";
/// The plural.
pub const PLURAL: &str = "managedresourceactivationpolicies";

/// Condition type: the policy activated every MRD it matches (upstream's `Healthy`).
pub const TYPE_HEALTHY: &str = "Healthy";
/// Reason: every matching MRD is Active.
pub const REASON_HEALTHY: &str = "Running";
/// Reason: some matching MRD could not be activated.
pub const REASON_UNHEALTHY: &str = "EncounteredErrors";

/// The MRD names to activate.
#[derive(CustomResource, Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "apiextensions.crossplane.io",
    version = "v1alpha1",
    kind = "ManagedResourceActivationPolicy",
    plural = "managedresourceactivationpolicies",
    shortname = "mrap",
    category = "crossplane",
    status = "ManagedResourceActivationPolicyStatus",
    printcolumn = r#"{"name":"AGE","type":"date","jsonPath":".metadata.creationTimestamp"}"#
)]
pub struct ManagedResourceActivationPolicySpec {
    /// MRD names to activate; `*` matches any run of characters (`*.aws.crossplane.io`, `*`) and `?`
    /// any one character. Not regular expressions.
    #[schemars(length(min = 1))]
    pub activate: Vec<String>,
}

/// The observed state of a ManagedResourceActivationPolicy.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ManagedResourceActivationPolicyStatus {
    /// Conditions (`Healthy`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["type"]))]
    pub conditions: Vec<Condition>,
    /// The MRDs this policy activated, sorted.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub activated: Vec<String>,
}

impl ManagedResourceActivationPolicySpec {
    /// Whether one of the policy's patterns matches MRD `name`.
    pub fn activates(&self, name: &str) -> bool {
        self.activate.iter().any(|p| matches(p, name))
    }
}

/// Whether `pattern` matches all of `name`, as upstream's `filepath.Match` on MRD names (which
/// carry no `/`): `*` matches any run of characters, `?` one character, `\` escapes the next one, and
/// anything else itself. Character classes (`[a-z]`) are not supported and match literally.
pub fn matches(pattern: &str, name: &str) -> bool {
    let p: Vec<char> = pattern.chars().collect();
    let n: Vec<char> = name.chars().collect();
    // Iterative wildcard matching with backtracking to the last `*`.
    let (mut pi, mut ni) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while ni < n.len() {
        match p.get(pi) {
            Some('*') => {
                star = Some((pi, ni));
                pi += 1;
                continue;
            }
            Some('?') => {
                pi += 1;
                ni += 1;
                continue;
            }
            Some('\\') if p.get(pi + 1) == Some(&n[ni]) => {
                pi += 2;
                ni += 1;
                continue;
            }
            Some(c) if *c != '\\' && *c == n[ni] => {
                pi += 1;
                ni += 1;
                continue;
            }
            _ => {}
        }
        match star {
            Some((sp, sn)) => {
                pi = sp + 1;
                ni = sn + 1;
                star = Some((sp, sn + 1));
            }
            None => return false,
        }
    }
    p[pi..].iter().all(|c| *c == '*')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wildcards_match_as_upstreams_filepath_match() {
        let cases = [
            ("*", "buckets.s3.aws.crossplane.io", true),
            ("*.nop.crossplane.io", "nopresources.nop.crossplane.io", true),
            ("*.nop.crossplane.io", "nop.crossplane.io", false),
            (
                "*.nop.crossplane.io",
                "nopresources.nop.crossplane.io.evil",
                false,
            ),
            ("*.nop.crossplane.io", "nopresources.other.crossplane.io", false),
            ("*.aws.crossplane.io", "buckets.s3.aws.crossplane.io", true),
            (
                "nopresources.nop.crossplane.io",
                "nopresources.nop.crossplane.io",
                true,
            ),
            (
                "nopresources.nop.crossplane.io",
                "nopresource.nop.crossplane.io",
                false,
            ),
            ("nop*.nop.crossplane.io", "nopresources.nop.crossplane.io", true),
            ("*resources.*", "nopresources.nop.crossplane.io", true),
            (
                "nopresource?.nop.crossplane.io",
                "nopresources.nop.crossplane.io",
                true,
            ),
            (
                "nopresource?.nop.crossplane.io",
                "nopresource.nop.crossplane.io",
                false,
            ),
            ("", "a", false),
            ("", "", true),
            (r"a\*", "a*", true),
            (r"a\*", "ab", false),
        ];
        for (p, n, want) in cases {
            assert_eq!(matches(p, n), want, "{p:?} against {n:?}");
        }
    }

    #[test]
    fn a_policy_activates_what_any_pattern_matches() {
        let spec = ManagedResourceActivationPolicySpec {
            activate: vec!["*.a.io".into(), "x.b.io".into()],
        };
        assert!(spec.activates("y.a.io"));
        assert!(spec.activates("x.b.io"));
        assert!(!spec.activates("y.b.io"));
    }
}
