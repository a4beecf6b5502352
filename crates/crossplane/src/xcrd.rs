//! Rendering the composite-resource CRD from an XRD (crossplane-runtime `pkg/xcrd/crd.go`, `schemas.go`).
//!
//! The CRD is named after the XRD, has one version per XRD version (the referenceable one is the
//! storage version), the category `composite`, the status subresource, Crossplane's printer columns and
//! the injected fields: `spec.crossplane.*` for modern XRs (`Namespaced`, `Cluster`), the same fields
//! directly under `spec` plus `claimRef` and `writeConnectionSecretToRef` for `LegacyCluster` XRs, and
//! `status.conditions` for all.

use apis::apiextensions::{CompositeResourceDefinition, CompositeResourceVersion};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::ResourceExt;
use serde_json::{Map, Value, json};

/// Why an XRD cannot be rendered into a CRD.
#[derive(Debug, thiserror::Error)]
pub enum RenderError {
    /// The XRD has no name.
    #[error("the CompositeResourceDefinition has no name")]
    NoName,
    /// The name is not `<plural>.<group>`.
    #[error("the CompositeResourceDefinition name must be {expected:?}")]
    BadName {
        /// `<plural>.<group>`.
        expected: String,
    },
    /// Not exactly one version is referenceable.
    #[error("exactly one version must be referenceable")]
    Referenceable,
    /// A version's schema is not what an XR schema must be.
    #[error("invalid schema for version {version:?}: {message}")]
    Schema {
        /// The version.
        version: String,
        /// What is wrong.
        message: String,
    },
    /// The rendered CRD does not parse.
    #[error("cannot render the CustomResourceDefinition: {0}")]
    Render(#[from] serde_json::Error),
}

/// The path of Crossplane's fields in the XR: `spec.crossplane` (modern) or `spec` (legacy).
pub fn crossplane_fields_path(legacy: bool) -> &'static [&'static str] {
    if legacy {
        &["spec"]
    } else {
        &["spec", "crossplane"]
    }
}

/// Renders the XR CRD of `xrd`.
pub fn render(xrd: &CompositeResourceDefinition) -> Result<CustomResourceDefinition, RenderError> {
    let name = xrd.metadata.name.clone().ok_or(RenderError::NoName)?;
    let spec = &xrd.spec;
    let expected = format!("{}.{}", spec.names.plural, spec.group);
    if name != expected {
        return Err(RenderError::BadName { expected });
    }
    if spec.referenceable_version().is_none() {
        return Err(RenderError::Referenceable);
    }
    let legacy = spec.scope.is_legacy();
    let mut categories = spec.names.categories.clone();
    if !categories.iter().any(|c| c == "composite") {
        categories.push("composite".to_owned());
    }
    let versions = spec
        .versions
        .iter()
        .map(|v| render_version(v, legacy))
        .collect::<Result<Vec<_>, _>>()?;
    let mut names = json!({
        "plural": spec.names.plural,
        "kind": spec.names.kind,
        "listKind": spec.names.list_kind.clone().unwrap_or_else(|| format!("{}List", spec.names.kind)),
        "categories": categories,
    });
    if let Some(s) = &spec.names.singular {
        names["singular"] = json!(s);
    }
    if !spec.names.short_names.is_empty() {
        names["shortNames"] = json!(spec.names.short_names);
    }
    let crd = json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {
            "name": name,
            "labels": xrd.labels(),
        },
        "spec": {
            "group": spec.group,
            "names": names,
            "scope": if spec.scope.is_namespaced() { "Namespaced" } else { "Cluster" },
            "versions": versions,
        }
    });
    Ok(serde_json::from_value(crd)?)
}

fn render_version(v: &CompositeResourceVersion, legacy: bool) -> Result<Value, RenderError> {
    let bad = |message: &str| RenderError::Schema {
        version: v.name.clone(),
        message: message.to_owned(),
    };
    let user = v
        .schema
        .as_ref()
        .and_then(|s| s.open_api_v3_schema.clone())
        .unwrap_or_else(|| json!({"type": "object"}));
    let Value::Object(mut root) = user else {
        return Err(bad("openAPIV3Schema must be an object"));
    };
    if root.get("type").is_some_and(|t| t != "object") {
        return Err(bad("openAPIV3Schema must have type object"));
    }
    root.insert("type".into(), json!("object"));
    let props = object_entry(&mut root, "properties").ok_or_else(|| bad("properties must be an object"))?;
    let mut spec = take_object(props, "spec").ok_or_else(|| bad("properties.spec must be an object"))?;
    if spec.get("type").is_some_and(|t| t != "object") {
        return Err(bad("properties.spec must have type object"));
    }
    spec.insert("type".into(), json!("object"));
    let spec_props =
        object_entry(&mut spec, "properties").ok_or_else(|| bad("spec.properties must be an object"))?;
    if legacy {
        for (k, s) in crossplane_spec_props() {
            spec_props.insert(k, s);
        }
        spec_props.insert("claimRef".into(), claim_ref_schema());
        spec_props.insert(
            "writeConnectionSecretToRef".into(),
            json!({"type": "object", "required": ["name", "namespace"],
                   "properties": {"name": {"type": "string"}, "namespace": {"type": "string"}}}),
        );
    } else {
        let fields: Map<String, Value> = crossplane_spec_props().into_iter().collect();
        spec_props.insert(
            "crossplane".into(),
            json!({"type": "object", "description": "Configures how Crossplane will reconcile this composite resource", "properties": fields}),
        );
    }
    props.insert("spec".into(), Value::Object(spec));

    let mut status =
        take_object(props, "status").ok_or_else(|| bad("properties.status must be an object"))?;
    status.insert("type".into(), json!("object"));
    let status_props =
        object_entry(&mut status, "properties").ok_or_else(|| bad("status.properties must be an object"))?;
    status_props.insert("conditions".into(), conditions_schema());
    if legacy {
        status_props.insert(
            "connectionDetails".into(),
            json!({"type": "object", "properties": {"lastPublishedTime": {"type": "string", "format": "date-time"}}}),
        );
        status_props.insert(
            "claimConditionTypes".into(),
            json!({"type": "array", "items": {"type": "string"}, "x-kubernetes-list-type": "set"}),
        );
    }
    props.insert("status".into(), Value::Object(status));
    props.insert("apiVersion".into(), json!({"type": "string"}));
    props.insert("kind".into(), json!({"type": "string"}));
    props.insert(
        "metadata".into(),
        json!({"type": "object", "properties": {"name": {"type": "string", "maxLength": 63}}}),
    );

    let mut columns = printer_columns(legacy);
    columns.extend(v.additional_printer_columns.iter().map(|c| json!(c)));
    let mut out = json!({
        "name": v.name,
        "served": v.served,
        "storage": v.referenceable,
        "schema": {"openAPIV3Schema": Value::Object(root)},
        "subresources": {"status": {}},
        "additionalPrinterColumns": columns,
    });
    if let Some(d) = v.deprecated {
        out["deprecated"] = json!(d);
    }
    if let Some(w) = &v.deprecation_warning {
        out["deprecationWarning"] = json!(w);
    }
    Ok(out)
}

/// `map[key]` as an object, inserting an empty one; `None` when it is something else.
fn object_entry<'a>(map: &'a mut Map<String, Value>, key: &str) -> Option<&'a mut Map<String, Value>> {
    map.entry(key.to_owned())
        .or_insert_with(|| json!({}))
        .as_object_mut()
}

/// Removes `map[key]`, an object (empty when missing); `None` when it is something else.
fn take_object(map: &mut Map<String, Value>, key: &str) -> Option<Map<String, Value>> {
    match map.remove(key) {
        None => Some(Map::new()),
        Some(Value::Object(m)) => Some(m),
        Some(_) => None,
    }
}

fn name_ref_schema() -> Value {
    json!({"type": "object", "required": ["name"], "properties": {"name": {"type": "string"}}})
}

fn selector_schema() -> Value {
    json!({"type": "object", "required": ["matchLabels"],
           "properties": {"matchLabels": {"type": "object", "additionalProperties": {"type": "string"}}}})
}

fn claim_ref_schema() -> Value {
    json!({"type": "object", "required": ["apiVersion", "kind", "namespace", "name"],
           "properties": {"apiVersion": {"type": "string"}, "kind": {"type": "string"},
                          "namespace": {"type": "string"}, "name": {"type": "string"}}})
}

/// The composition fields Crossplane injects (under `spec.crossplane`, or `spec` for legacy XRs).
fn crossplane_spec_props() -> Vec<(String, Value)> {
    vec![
        ("compositionRef".into(), name_ref_schema()),
        ("compositionSelector".into(), selector_schema()),
        ("compositionRevisionRef".into(), name_ref_schema()),
        ("compositionRevisionSelector".into(), selector_schema()),
        (
            "compositionUpdatePolicy".into(),
            json!({"type": "string", "enum": ["Automatic", "Manual"]}),
        ),
        (
            "resourceRefs".into(),
            json!({"type": "array", "x-kubernetes-list-type": "atomic",
                   "items": {"type": "object", "required": ["apiVersion", "kind"], "x-kubernetes-map-type": "atomic",
                             "properties": {"apiVersion": {"type": "string"}, "kind": {"type": "string"},
                                            "name": {"type": "string"}, "namespace": {"type": "string"}}}}),
        ),
    ]
}

fn conditions_schema() -> Value {
    json!({
        "type": "array",
        "description": "Conditions of the resource.",
        "x-kubernetes-list-type": "map",
        "x-kubernetes-list-map-keys": ["type"],
        "items": {
            "type": "object",
            "required": ["lastTransitionTime", "reason", "status", "type"],
            "properties": {
                "lastTransitionTime": {"type": "string", "format": "date-time"},
                "message": {"type": "string"},
                "observedGeneration": {"type": "integer", "format": "int64"},
                "reason": {"type": "string"},
                "status": {"type": "string"},
                "type": {"type": "string"}
            }
        }
    })
}

fn printer_columns(legacy: bool) -> Vec<Value> {
    let base = if legacy { ".spec" } else { ".spec.crossplane" };
    vec![
        json!({"name": "SYNCED", "type": "string", "jsonPath": ".status.conditions[?(@.type=='Synced')].status"}),
        json!({"name": "READY", "type": "string", "jsonPath": ".status.conditions[?(@.type=='Ready')].status"}),
        json!({"name": "COMPOSITION", "type": "string", "jsonPath": format!("{base}.compositionRef.name")}),
        json!({"name": "COMPOSITIONREVISION", "type": "string", "priority": 1,
               "jsonPath": format!("{base}.compositionRevisionRef.name")}),
        json!({"name": "AGE", "type": "date", "jsonPath": ".metadata.creationTimestamp"}),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn xrd(scope: &str, schema: Value) -> CompositeResourceDefinition {
        serde_json::from_value(json!({
            "apiVersion": "apiextensions.crossplane.io/v2",
            "kind": "CompositeResourceDefinition",
            "metadata": {"name": "xthings.example.org"},
            "spec": {
                "group": "example.org", "scope": scope,
                "names": {"kind": "XThing", "plural": "xthings"},
                "versions": [{"name": "v1", "referenceable": true, "served": true,
                              "schema": {"openAPIV3Schema": schema}}]
            }
        }))
        .expect("xrd")
    }

    #[test]
    fn modern_xr_gets_spec_crossplane_columns_and_category() {
        let schema = json!({"type": "object", "properties": {"spec": {"type": "object",
            "properties": {"size": {"type": "integer"}}}}});
        let crd = render(&xrd("Cluster", schema)).expect("renders");
        assert_eq!(crd.spec.scope, "Cluster");
        assert_eq!(crd.spec.names.categories, Some(vec!["composite".to_owned()]));
        let v = &crd.spec.versions[0];
        assert!(v.storage);
        let cols: Vec<_> = v
            .additional_printer_columns
            .iter()
            .flatten()
            .map(|c| c.name.as_str())
            .collect();
        assert_eq!(
            cols,
            ["SYNCED", "READY", "COMPOSITION", "COMPOSITIONREVISION", "AGE"]
        );
        let schema = serde_json::to_value(&v.schema).expect("json");
        let spec = &schema["openAPIV3Schema"]["properties"]["spec"]["properties"];
        assert_eq!(spec["size"]["type"], "integer");
        assert_eq!(
            spec["crossplane"]["properties"]["compositionUpdatePolicy"]["enum"],
            json!(["Automatic", "Manual"])
        );
        let status = &schema["openAPIV3Schema"]["properties"]["status"]["properties"];
        assert_eq!(status["conditions"]["x-kubernetes-list-type"], "map");
    }

    #[test]
    fn legacy_and_namespaced_scopes() {
        let crd = render(&xrd("LegacyCluster", json!({"type": "object"}))).expect("renders");
        assert_eq!(crd.spec.scope, "Cluster");
        let schema = serde_json::to_value(&crd.spec.versions[0].schema).expect("json");
        let spec = &schema["openAPIV3Schema"]["properties"]["spec"]["properties"];
        assert!(spec.get("crossplane").is_none());
        assert!(spec.get("compositionRef").is_some());
        assert!(spec.get("claimRef").is_some());
        let crd = render(&xrd("Namespaced", json!({"type": "object"}))).expect("renders");
        assert_eq!(crd.spec.scope, "Namespaced");
    }

    #[test]
    fn bad_schemas_are_refused() {
        let e = render(&xrd("Cluster", json!({"type": "string"}))).expect_err("bad");
        assert!(e.to_string().contains("type object"), "{e}");
        let e = render(&xrd(
            "Cluster",
            json!({"type": "object", "properties": {"spec": 3}}),
        ))
        .expect_err("bad");
        assert!(e.to_string().contains("properties.spec"), "{e}");
        let mut x = xrd("Cluster", json!({"type": "object"}));
        x.metadata.name = Some("wrong".into());
        assert!(matches!(render(&x), Err(RenderError::BadName { .. })));
    }
}
