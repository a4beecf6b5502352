//! Where Crossplane's fields live in an XR: under `spec.crossplane` for modern XRs, directly under
//! `spec` for legacy (`LegacyCluster`) XRs.

use serde_json::Value;

/// A reference to a composed resource, as kept in `resourceRefs`.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ResourceRef {
    /// The apiVersion.
    pub api_version: String,
    /// The kind.
    pub kind: String,
    /// The name.
    #[serde(default)]
    pub name: String,
    /// The namespace, for namespaced resources.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
}

/// Accessor for the Crossplane fields of one XR.
#[derive(Debug, Clone, Copy)]
pub struct Fields<'a> {
    xr: &'a Value,
    legacy: bool,
}

impl<'a> Fields<'a> {
    /// The fields of `xr`.
    pub fn new(xr: &'a Value, legacy: bool) -> Self {
        Self { xr, legacy }
    }

    /// The object holding the fields, if present.
    pub fn base(&self) -> Option<&'a Value> {
        let spec = self.xr.get("spec")?;
        if self.legacy {
            Some(spec)
        } else {
            spec.get("crossplane")
        }
    }

    fn get(&self, key: &str) -> Option<&'a Value> {
        self.base()?.get(key)
    }

    /// `compositionRef.name`.
    pub fn composition_ref(&self) -> Option<&'a str> {
        self.get("compositionRef")?.get("name")?.as_str()
    }

    /// `compositionRevisionRef.name`.
    pub fn composition_revision_ref(&self) -> Option<&'a str> {
        self.get("compositionRevisionRef")?.get("name")?.as_str()
    }

    /// `compositionSelector.matchLabels` as a label selector string; `None` without a selector.
    pub fn composition_selector(&self) -> Option<String> {
        match_labels(self.get("compositionSelector")?)
    }

    /// `compositionRevisionSelector.matchLabels` as a label selector string.
    pub fn composition_revision_selector(&self) -> Option<String> {
        match_labels(self.get("compositionRevisionSelector")?)
    }

    /// `compositionUpdatePolicy`.
    pub fn update_policy(&self) -> Option<&'a str> {
        self.get("compositionUpdatePolicy")?.as_str()
    }

    /// `resourceRefs` (entries that do not parse are skipped).
    pub fn resource_refs(&self) -> Vec<ResourceRef> {
        self.get("resourceRefs")
            .and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(|v| serde_json::from_value(v.clone()).ok())
                    .collect()
            })
            .unwrap_or_default()
    }

    /// Wraps `fields` at the right place in a spec patch: `{"spec": {"crossplane": fields}}` or
    /// `{"spec": fields}`.
    pub fn spec_patch(legacy: bool, fields: Value) -> Value {
        if legacy {
            serde_json::json!({ "spec": fields })
        } else {
            serde_json::json!({ "spec": { "crossplane": fields } })
        }
    }
}

fn match_labels(selector: &Value) -> Option<String> {
    let labels = selector.get("matchLabels")?.as_object()?;
    Some(
        labels
            .iter()
            .map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or_default()))
            .collect::<Vec<_>>()
            .join(","),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn modern_and_legacy_paths() {
        let modern = json!({"spec": {"crossplane": {"compositionRef": {"name": "a"},
            "compositionSelector": {"matchLabels": {"x": "1", "y": "2"}},
            "resourceRefs": [{"apiVersion": "v1", "kind": "ConfigMap", "name": "c"}]}}});
        let f = Fields::new(&modern, false);
        assert_eq!(f.composition_ref(), Some("a"));
        assert_eq!(f.composition_selector().as_deref(), Some("x=1,y=2"));
        assert_eq!(f.resource_refs()[0].name, "c");
        assert_eq!(Fields::new(&modern, true).composition_ref(), None);
        let legacy = json!({"spec": {"compositionRef": {"name": "b"}}});
        assert_eq!(Fields::new(&legacy, true).composition_ref(), Some("b"));
        assert_eq!(
            Fields::spec_patch(false, json!({"a": 1})),
            json!({"spec": {"crossplane": {"a": 1}}})
        );
    }
}
