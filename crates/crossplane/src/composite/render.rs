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

/// Sets the composed resource's metadata for `owner` and template `template`. `name` is the existing or
/// generated name; `namespace` is forced for namespaced resources of namespaced XRs.
pub fn decorate(resource: &mut Value, owner: &Owner, template: &str, name: &str, namespaced: bool) {
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
    meta.insert("generateName".into(), json!(format!("{}-", owner.name)));
    meta.insert("name".into(), json!(name));
    match (&owner.namespace, namespaced) {
        (Some(ns), true) => {
            meta.insert("namespace".into(), json!(ns));
        }
        _ => {
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
        decorate(&mut r, &owner, "tpl", &name, true);
        assert_eq!(r["metadata"]["labels"]["k"], "v");
        assert_eq!(r["metadata"]["labels"][LABEL_COMPOSITE], "my-xr");
        assert_eq!(r["metadata"]["labels"][LABEL_CLAIM_NAME], "c");
        assert_eq!(r["metadata"]["generateName"], "my-xr-");
        assert_eq!(r["metadata"]["namespace"], "ns");
        assert_eq!(template_name(&r), Some("tpl"));
        assert!(controlled_by(&r, "u1"));
        assert!(!controlled_by(&r, "u2"));
        decorate(&mut r, &owner, "tpl", &name, false);
        assert!(r["metadata"].get("namespace").is_none());
    }
}
