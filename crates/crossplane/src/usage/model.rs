//! The three Usage kinds read as one: a protection.crossplane.io Usage (namespaced), a ClusterUsage and
//! the legacy apiextensions.crossplane.io Usage (both cluster-scoped, no namespaces in their spec), each
//! as [`Found`] with the namespaced spec ([`UsageSpec`]), which is a superset of the other two.

use apis::protection::{ClusterUsageSpec, UsageSpec};
use kube::ResourceExt;
use kube::core::{ApiResource, DynamicObject, GroupVersionKind};

/// Which of the three kinds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Flavor {
    /// `protection.crossplane.io/v1beta1` Usage.
    Usage,
    /// `protection.crossplane.io/v1beta1` ClusterUsage.
    ClusterUsage,
    /// `apiextensions.crossplane.io/v1beta1` Usage.
    Legacy,
}

impl Flavor {
    /// All three.
    pub const ALL: [Flavor; 3] = [Flavor::Usage, Flavor::ClusterUsage, Flavor::Legacy];

    /// The API resource.
    pub fn resource(self) -> ApiResource {
        let (group, kind, plural) = match self {
            Flavor::Usage => (apis::protection::GROUP, "Usage", "usages"),
            Flavor::ClusterUsage => (apis::protection::GROUP, "ClusterUsage", "clusterusages"),
            Flavor::Legacy => (apis::apiextensions::GROUP, "Usage", "usages"),
        };
        ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(group, "v1beta1", kind), plural)
    }

    /// Whether its objects live in a namespace.
    pub fn namespaced(self) -> bool {
        self == Flavor::Usage
    }

    /// The Go type upstream's webhook names in its refusal (`%T` of the Usage).
    pub fn go_type(self) -> &'static str {
        match self {
            Flavor::Usage | Flavor::Legacy => "*v1beta1.Usage",
            Flavor::ClusterUsage => "*v1beta1.ClusterUsage",
        }
    }

    /// The controller's name, as upstream names it (`usage/<kind>.<group>`).
    pub fn controller_name(self) -> &'static str {
        match self {
            Flavor::Usage => "usage/usage.protection.crossplane.io",
            Flavor::ClusterUsage => "usage/clusterusage.protection.crossplane.io",
            Flavor::Legacy => "usage/usage.apiextensions.crossplane.io",
        }
    }
}

/// One Usage of any flavor.
#[derive(Debug, Clone)]
pub struct Found {
    /// Its flavor.
    pub flavor: Flavor,
    /// Its name.
    pub name: String,
    /// Its namespace (a [`Flavor::Usage`] only).
    pub namespace: Option<String>,
    /// Its spec.
    pub spec: UsageSpec,
}

impl Found {
    /// Reads `obj` as a Usage of `flavor`, or says what is wrong with its spec.
    pub fn parse(flavor: Flavor, obj: &DynamicObject) -> Result<Self, String> {
        let spec = obj.data.get("spec").cloned().unwrap_or_default();
        let spec = match flavor {
            Flavor::Usage => serde_json::from_value::<UsageSpec>(spec),
            Flavor::ClusterUsage | Flavor::Legacy => {
                serde_json::from_value::<ClusterUsageSpec>(spec).map(UsageSpec::from)
            }
        }
        .map_err(|e| format!("the spec cannot be read: {e}"))?;
        Ok(Self {
            flavor,
            name: obj.name_any(),
            namespace: obj.namespace().filter(|_| flavor.namespaced()),
            spec,
        })
    }

    /// The namespace of the used resource, as the Usage names it (`None`: cluster-scoped, or the
    /// Usage's own namespace for a namespaced kind).
    pub fn of_namespace(&self) -> Option<&str> {
        self.spec
            .of
            .resource_ref
            .as_ref()
            .and_then(|r| r.namespace.as_deref())
            .or(self.namespace.as_deref())
    }

    /// Whether this Usage names (by `resourceRef`) the object of `api_version`'s group, `kind`, `name`
    /// in `namespace`, as upstream's index matches: by group, not version.
    pub fn protects(&self, api_version: &str, kind: &str, name: &str, namespace: Option<&str>) -> bool {
        let Some(r) = &self.spec.of.resource_ref else {
            return false;
        };
        !r.name.is_empty()
            && r.name == name
            && group(&self.spec.of.api_version) == group(api_version)
            && self.spec.of.kind == kind
            && self.of_namespace().unwrap_or("") == namespace.unwrap_or("")
    }
}

/// The group of an `apiVersion` (`""` for the core group).
pub fn group(api_version: &str) -> &str {
    api_version.split_once('/').map_or("", |(g, _)| g)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn obj(flavor: Flavor, ns: Option<&str>, spec: serde_json::Value) -> DynamicObject {
        let mut o = DynamicObject::new("u", &flavor.resource()).data(json!({"spec": spec}));
        o.metadata.namespace = ns.map(str::to_owned);
        o
    }

    #[test]
    fn a_usage_protects_what_its_ref_names_in_its_own_namespace_or_the_named_one() {
        let spec = json!({"of": {"apiVersion": "v1", "kind": "ConfigMap", "resourceRef": {"name": "cm"}},
                          "reason": "r"});
        let u = Found::parse(Flavor::Usage, &obj(Flavor::Usage, Some("a"), spec)).expect("parses");
        assert!(u.protects("v1", "ConfigMap", "cm", Some("a")));
        assert!(!u.protects("v1", "ConfigMap", "cm", Some("b")));
        assert!(!u.protects("v1", "Secret", "cm", Some("a")));
        let spec = json!({"of": {"apiVersion": "v1", "kind": "ConfigMap",
                                 "resourceRef": {"name": "cm", "namespace": "b"}}, "by": {}});
        let u = Found::parse(Flavor::Usage, &obj(Flavor::Usage, Some("a"), spec)).expect("parses");
        assert!(u.protects("v1", "ConfigMap", "cm", Some("b")));
        assert!(!u.protects("v1", "ConfigMap", "cm", Some("a")));
    }

    #[test]
    fn a_cluster_usage_protects_by_group_whatever_the_version() {
        let spec = json!({"of": {"apiVersion": "example.org/v1", "kind": "X", "resourceRef": {"name": "x"}},
                          "reason": "r"});
        let u = Found::parse(Flavor::ClusterUsage, &obj(Flavor::ClusterUsage, None, spec)).expect("parses");
        assert!(u.protects("example.org/v2", "X", "x", None));
        assert!(!u.protects("other.org/v1", "X", "x", None));
        assert!(!u.protects("example.org/v1", "X", "x", Some("ns")));
    }

    #[test]
    fn an_unresolved_selector_protects_nothing_and_a_bad_spec_says_so() {
        let spec = json!({"of": {"apiVersion": "v1", "kind": "ConfigMap",
                                 "resourceSelector": {"matchLabels": {"a": "b"}}}, "reason": "r"});
        let u = Found::parse(Flavor::Legacy, &obj(Flavor::Legacy, None, spec)).expect("parses");
        assert!(!u.protects("v1", "ConfigMap", "", None));
        let e =
            Found::parse(Flavor::Usage, &obj(Flavor::Usage, Some("a"), json!({"of": 3}))).expect_err("bad");
        assert!(e.starts_with("the spec cannot be read"), "{e}");
    }
}
