//! The words of Usages: the webhook's refusal (upstream's `inUseMessage`, same shape, so that tools
//! matching upstream's text keep working) and the `crossplane.io/usage-details` annotation.

use super::model::Found;

/// Why deleting an object is refused, naming the first of its `usages` and what uses it:
/// `This resource is in-use by 1 usage(s), including the *v1beta1.Usage "u" (in namespace "ns") by
/// resource ConfigMap/using.` (or `with reason: "…"`).
pub fn in_use(usages: &[Found]) -> String {
    let Some(first) = usages.first() else {
        return "This resource is in-use.".to_owned();
    };
    let id = match &first.namespace {
        Some(ns) => format!("{:?} (in namespace {ns:?})", first.name),
        None => format!("{:?}", first.name),
    };
    let head = format!(
        "This resource is in-use by {} usage(s), including the {} {id}",
        usages.len(),
        first.flavor.go_type()
    );
    if let Some(by) = &first.spec.by {
        let name = by.resource_ref.as_ref().map_or("", |r| r.name.as_str());
        return format!("{head} by resource {}/{name}.", by.kind);
    }
    match first.spec.reason.as_deref().filter(|r| !r.is_empty()) {
        Some(r) => format!("{head} with reason: {r:?}."),
        None => format!("{head}."),
    }
}

/// The `crossplane.io/usage-details` annotation: the reason, else `<By>/<name> uses <Of>/<name>` (with
/// the namespace of a used resource in another namespace), else `undefined`.
pub fn details(u: &Found) -> String {
    if let Some(r) = u.spec.reason.as_deref().filter(|r| !r.is_empty()) {
        return r.to_owned();
    }
    let Some(by) = &u.spec.by else {
        return "undefined".to_owned();
    };
    let by_name = by.resource_ref.as_ref().map_or("", |r| r.name.as_str());
    let of = &u.spec.of;
    let of_name = of.resource_ref.as_ref().map_or("", |r| r.name.as_str());
    match of.resource_ref.as_ref().and_then(|r| r.namespace.as_deref()) {
        Some(ns) if !ns.is_empty() => {
            format!(
                "{}/{by_name} uses {}/{of_name} in namespace {ns}",
                by.kind, of.kind
            )
        }
        _ => format!("{}/{by_name} uses {}/{of_name}", by.kind, of.kind),
    }
}

#[cfg(test)]
mod tests {
    use apis::protection::{NamespacedResource, NamespacedResourceRef, Resource, ResourceRef, UsageSpec};

    use super::*;
    use crate::usage::model::Flavor;

    fn usage(flavor: Flavor, ns: Option<&str>, by: Option<&str>, reason: Option<&str>) -> Found {
        Found {
            flavor,
            name: "using-uses-used".into(),
            namespace: ns.map(str::to_owned),
            spec: UsageSpec {
                of: NamespacedResource {
                    api_version: "v1".into(),
                    kind: "ConfigMap".into(),
                    resource_ref: Some(NamespacedResourceRef {
                        name: "used-resource".into(),
                        namespace: None,
                    }),
                    resource_selector: None,
                },
                by: by.map(|b| Resource {
                    api_version: "v1".into(),
                    kind: "ConfigMap".into(),
                    resource_ref: Some(ResourceRef { name: b.into() }),
                    resource_selector: None,
                }),
                reason: reason.map(str::to_owned),
                replay_deletion: None,
            },
        }
    }

    #[test]
    fn the_refusal_has_upstreams_shape() {
        assert_eq!(
            in_use(&[usage(
                Flavor::Usage,
                Some("default"),
                Some("using-resource"),
                None
            )]),
            "This resource is in-use by 1 usage(s), including the *v1beta1.Usage \"using-uses-used\" \
             (in namespace \"default\") by resource ConfigMap/using-resource."
        );
        let two = [
            usage(
                Flavor::ClusterUsage,
                None,
                None,
                Some("This resource is protected!"),
            ),
            usage(Flavor::Legacy, None, None, None),
        ];
        assert_eq!(
            in_use(&two),
            "This resource is in-use by 2 usage(s), including the *v1beta1.ClusterUsage \"using-uses-used\" \
             with reason: \"This resource is protected!\"."
        );
        assert_eq!(
            in_use(&two[1..]),
            "This resource is in-use by 1 usage(s), including the *v1beta1.Usage \"using-uses-used\"."
        );
    }

    #[test]
    fn details_name_the_reason_or_the_pair() {
        assert_eq!(
            details(&usage(Flavor::Usage, Some("d"), None, Some("keep"))),
            "keep"
        );
        assert_eq!(
            details(&usage(Flavor::Usage, Some("d"), Some("using-resource"), None)),
            "ConfigMap/using-resource uses ConfigMap/used-resource"
        );
        let mut across = usage(Flavor::Usage, Some("d"), Some("using-resource"), None);
        if let Some(r) = across.spec.of.resource_ref.as_mut() {
            r.namespace = Some("crossplane-system".into());
        }
        assert_eq!(
            details(&across),
            "ConfigMap/using-resource uses ConfigMap/used-resource in namespace crossplane-system"
        );
        assert_eq!(details(&usage(Flavor::Legacy, None, None, None)), "undefined");
    }
}
