//! The metadata Crossplane gives composed resources: the label `crossplane.io/composite` (and the claim
//! labels), the annotation `crossplane.io/composition-resource-name`, a controller owner reference to
//! the XR, `generateName: <xr-name>-`, and a name generated client-side so that `resourceRefs` can be
//! persisted before anything is created (a crash then never leaves an untracked duplicate).

use apis::apiextensions::labels::{
    ANNOTATION_COMPOSITION_RESOURCE_NAME, LABEL_CLAIM_NAME, LABEL_CLAIM_NAMESPACE, LABEL_COMPOSITE,
};
use serde_json::{Map, Value, json};

/// The XR a composed resource belongs to.
#[derive(Debug, Clone)]
pub struct Owner {
    /// apiVersion.
    pub api_version: String,
    /// kind.
    pub kind: String,
    /// name.
    pub name: String,
    /// uid.
    pub uid: String,
    /// namespace, for namespaced XRs.
    pub namespace: Option<String>,
    /// The XR's labels (for the claim labels).
    pub labels: std::collections::BTreeMap<String, String>,
}

const NAME_CHARS: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";

/// A name like the apiserver's `generateName`: the prefix (cut to 58 characters) and five random
/// characters.
pub fn generate_name(prefix: &str) -> String {
    let prefix: String = prefix.chars().take(58).collect();
    let suffix: String = (0..5)
        .map(|_| char::from(NAME_CHARS[fastrand::usize(..NAME_CHARS.len())]))
        .collect();
    format!("{prefix}{suffix}")
}

/// Where a composed resource goes, as upstream places it: a namespaced XR composes only namespaced
/// kinds, always into its own namespace; a cluster-scoped XR composes cluster-scoped kinds, and
/// namespaced kinds in the namespace its template gives. `Ok(None)` is a cluster-scoped resource; the
/// error says what to change.
pub fn namespace_of(
    resource: &Value,
    template: &str,
    kind: &str,
    kind_namespaced: bool,
    xr_namespace: Option<&str>,
) -> Result<Option<String>, String> {
    let given = resource
        .pointer("/metadata/namespace")
        .and_then(Value::as_str)
        .filter(|n| !n.is_empty());
    match (xr_namespace, kind_namespaced) {
        (Some(ns), true) => Ok(Some(ns.to_owned())),
        (Some(ns), false) => Err(format!(
            "cannot compose {template:?}: {kind} is cluster-scoped, and a namespaced composite resource \
             (namespace {ns}) can only compose namespaced resources in its own namespace; compose it from \
             a cluster-scoped composite resource (XRD scope Cluster) or remove it from the Composition"
        )),
        (None, true) => given.map(|n| Some(n.to_owned())).ok_or_else(|| {
            format!(
                "cannot compose {template:?}: {kind} is namespaced and the composite resource is \
                 cluster-scoped, so the composed resource must say where it goes; set its \
                 metadata.namespace in the Composition"
            )
        }),
        (None, false) => Ok(None),
    }
}

/// The name a Composition gives a composed resource explicitly (`metadata.name`), if any; otherwise
/// the core generates one from the XR's name.
pub fn explicit_name(resource: &Value) -> Option<&str> {
    resource
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .filter(|n| !n.is_empty())
}

/// Sets the composed resource's metadata for `owner` and template `template`. `name` is the existing,
/// explicit or generated name; `namespace` is where it goes ([`namespace_of`]; `None` for cluster-scoped
/// kinds); `generate_name` says the name is the core's, so `generateName: <xr-name>-` is set too (as
/// upstream, not for a name the Composition gives: a CRD's name must be `<plural>.<group>`, and the
/// apiserver checks `generateName` against that too).
pub fn decorate(
    resource: &mut Value,
    owner: &Owner,
    template: &str,
    name: &str,
    namespace: Option<&str>,
    generate_name: bool,
) {
    let Value::Object(obj) = resource else {
        return;
    };
    let meta = obj.entry("metadata").or_insert_with(|| Value::Object(Map::new()));
    if !meta.is_object() {
        *meta = Value::Object(Map::new());
    }
    let Value::Object(meta) = meta else {
        return;
    };
    let labels = meta.entry("labels").or_insert_with(|| json!({}));
    if let Value::Object(l) = labels {
        l.insert(LABEL_COMPOSITE.into(), json!(owner.name));
        for key in [LABEL_CLAIM_NAME, LABEL_CLAIM_NAMESPACE] {
            if let Some(v) = owner.labels.get(key) {
                l.insert(key.into(), json!(v));
            }
        }
    }
    let annotations = meta.entry("annotations").or_insert_with(|| json!({}));
    if let Value::Object(a) = annotations {
        a.insert(ANNOTATION_COMPOSITION_RESOURCE_NAME.into(), json!(template));
    }
    if generate_name {
        meta.insert("generateName".into(), json!(format!("{}-", owner.name)));
    }
    meta.insert("name".into(), json!(name));
    match namespace {
        Some(ns) => {
            meta.insert("namespace".into(), json!(ns));
        }
        None => {
            meta.remove("namespace");
        }
    }
    meta.insert(
        "ownerReferences".into(),
        json!([{
            "apiVersion": owner.api_version,
            "kind": owner.kind,
            "name": owner.name,
            "uid": owner.uid,
            "controller": true,
            "blockOwnerDeletion": true,
        }]),
    );
}

/// Whether `resource` is controlled by the XR with `uid`.
pub fn controlled_by(resource: &Value, uid: &str) -> bool {
    resource
        .pointer("/metadata/ownerReferences")
        .and_then(Value::as_array)
        .is_some_and(|refs| {
            refs.iter()
                .any(|r| r.get("controller") == Some(&json!(true)) && r.get("uid") == Some(&json!(uid)))
        })
}

/// The template name of a composed resource.
pub fn template_name(resource: &Value) -> Option<&str> {
    resource
        .pointer("/metadata/annotations")?
        .get(ANNOTATION_COMPOSITION_RESOURCE_NAME)?
        .as_str()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decorates_like_crossplane() {
        let owner = Owner {
            api_version: "example.org/v1".into(),
            kind: "X".into(),
            name: "my-xr".into(),
            uid: "u1".into(),
            namespace: Some("ns".into()),
            labels: [(LABEL_CLAIM_NAME.to_owned(), "c".to_owned())].into(),
        };
        let mut r = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"labels": {"k": "v"}}});
        let name = generate_name("my-xr-");
        assert_eq!(name.len(), "my-xr-".len() + 5);
        decorate(&mut r, &owner, "tpl", &name, Some("ns"), true);
        assert_eq!(r["metadata"]["labels"]["k"], "v");
        assert_eq!(r["metadata"]["labels"][LABEL_COMPOSITE], "my-xr");
        assert_eq!(r["metadata"]["labels"][LABEL_CLAIM_NAME], "c");
        assert_eq!(r["metadata"]["generateName"], "my-xr-");
        assert_eq!(r["metadata"]["namespace"], "ns");
        assert_eq!(template_name(&r), Some("tpl"));
        assert!(controlled_by(&r, "u1"));
        assert!(!controlled_by(&r, "u2"));
        decorate(&mut r, &owner, "tpl", &name, None, true);
        assert!(r["metadata"].get("namespace").is_none());
    }

    #[test]
    fn places_composed_resources_as_upstream() {
        let cm = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"namespace": "default"}});
        let bare = json!({"apiVersion": "v1", "kind": "ConfigMap"});
        // A namespaced XR forces its own namespace, whatever the template says.
        assert_eq!(
            namespace_of(&cm, "cm", "ConfigMap", true, Some("mine")),
            Ok(Some("mine".to_owned()))
        );
        // ... and refuses cluster-scoped kinds, saying what to do.
        let e = namespace_of(&bare, "role", "ClusterRole", false, Some("mine"))
            .err()
            .unwrap_or_default();
        assert!(
            e.contains("cluster-scoped") && e.contains("namespaced composite resource"),
            "{e}"
        );
        // A cluster-scoped XR keeps the template's namespace for namespaced kinds.
        assert_eq!(
            namespace_of(&cm, "cm", "ConfigMap", true, None),
            Ok(Some("default".to_owned()))
        );
        let e = namespace_of(&bare, "cm", "ConfigMap", true, None)
            .err()
            .unwrap_or_default();
        assert!(e.contains("metadata.namespace"), "{e}");
        assert_eq!(
            namespace_of(&bare, "crd", "CustomResourceDefinition", false, None),
            Ok(None)
        );
    }

    #[test]
    fn a_named_resource_gets_no_generate_name() {
        let owner = Owner {
            api_version: "example.org/v1".into(),
            kind: "X".into(),
            name: "my-xr".into(),
            uid: "u1".into(),
            namespace: None,
            labels: Default::default(),
        };
        let mut crd = json!({"kind": "CustomResourceDefinition", "metadata": {"name": "things.example.org"}});
        decorate(&mut crd, &owner, "crd", "things.example.org", None, false);
        assert!(crd["metadata"].get("generateName").is_none(), "{crd}");
        assert_eq!(crd["metadata"]["name"], "things.example.org");
    }

    #[test]
    fn explicit_names_are_kept() {
        assert_eq!(
            explicit_name(&json!({"metadata": {"name": "controllers.test.example.org"}})),
            Some("controllers.test.example.org")
        );
        assert_eq!(explicit_name(&json!({"metadata": {"name": ""}})), None);
        assert_eq!(explicit_name(&json!({"kind": "ConfigMap"})), None);
    }
}
