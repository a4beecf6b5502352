//! Rendering the composite-resource CRD from an XRD (crossplane-runtime `pkg/xcrd/crd.go`, `schemas.go`).
//!
//! The CRD is named after the XRD, has one version per XRD version (the referenceable one is the
//! storage version), the category `composite`, the status subresource, Crossplane's printer columns and
//! the injected fields: `spec.crossplane.*` for modern XRs (`Namespaced`, `Cluster`), the same fields
//! directly under `spec` plus `claimRef` and `writeConnectionSecretToRef` for `LegacyCluster` XRs, and
//! `status.conditions` for all. A version whose XRD asks for the scale subresource serves it too.

use apis::apiextensions::{CompositeResourceDefinition, CompositeResourceVersion};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::{Resource, ResourceExt};
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
    /// `claimNames` is not a names object, or clashes with the XR's names.
    #[error("invalid resource claim names: {0}")]
    ClaimNames(String),
    /// The rendered CRD does not parse.
    #[error("cannot render the CustomResourceDefinition: {0}")]
    Render(#[from] serde_json::Error),
}

/// Which kind of resource a CRD version is rendered for.
#[derive(Clone, Copy)]
enum Shape<'a> {
    /// A modern XR (`spec.crossplane`).
    Modern,
    /// A legacy XR (fields under `spec`, `claimRef`).
    Legacy,
    /// A claim, with the XRD's default `compositeDeletePolicy`.
    Claim(Option<&'a str>),
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
    let shape = if legacy { Shape::Legacy } else { Shape::Modern };
    let mut categories = spec.names.categories.clone();
    if !categories.iter().any(|c| c == "composite") {
        categories.push("composite".to_owned());
    }
    let versions = spec
        .versions
        .iter()
        .map(|v| render_version(v, shape))
        .collect::<Result<Vec<_>, _>>()?;
    let names = names_json(&spec.names, categories);
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

/// The name of the claim CRD of `xrd` (`<claim plural>.<group>`), when it offers claims.
pub fn claim_crd_name(xrd: &CompositeResourceDefinition) -> Option<String> {
    let names = xrd.spec.offered_claim_names().ok()??;
    Some(format!("{}.{}", names.plural, xrd.spec.group))
}

/// Renders the claim CRD of `xrd` (crossplane-runtime `ForCompositeResourceClaim`): namespaced, named
/// by `claimNames`, category `claim`, one version per XRD version with the user's schema plus the
/// claim fields (composition refs and selectors, `compositeDeletePolicy`, `resourceRef`,
/// `writeConnectionSecretToRef{name}`) and `status.conditions`/`connectionDetails`. `None` when the
/// XRD offers no claims (not `LegacyCluster`, or no `claimNames`).
pub fn render_claim(
    xrd: &CompositeResourceDefinition,
) -> Result<Option<CustomResourceDefinition>, RenderError> {
    let spec = &xrd.spec;
    let claim = match spec.offered_claim_names() {
        Ok(Some(n)) => n,
        Ok(None) => return Ok(None),
        Err(e) => return Err(RenderError::ClaimNames(e.to_string())),
    };
    let clash = |a: &str, b: Option<&str>| b.is_some_and(|b| !a.is_empty() && a == b);
    for (a, b) in [
        (claim.kind.as_str(), Some(spec.names.kind.as_str())),
        (claim.plural.as_str(), Some(spec.names.plural.as_str())),
        (
            claim.singular.as_deref().unwrap_or_default(),
            spec.names.singular.as_deref(),
        ),
        (
            claim.list_kind.as_deref().unwrap_or_default(),
            spec.names.list_kind.as_deref(),
        ),
    ] {
        if clash(a, b) {
            return Err(RenderError::ClaimNames(format!(
                "the claim name {a:?} is also a name of the composite resource; give the claim its own kind and plural"
            )));
        }
    }
    if spec.referenceable_version().is_none() {
        return Err(RenderError::Referenceable);
    }
    let mut categories = claim.categories.clone();
    if !categories.iter().any(|c| c == "claim") {
        categories.push("claim".to_owned());
    }
    let policy = spec.default_composite_delete_policy.as_deref();
    let versions = spec
        .versions
        .iter()
        .map(|v| render_version(v, Shape::Claim(policy)))
        .collect::<Result<Vec<_>, _>>()?;
    let mut owner = xrd.controller_owner_ref(&());
    if let Some(o) = owner.as_mut() {
        o.block_owner_deletion = Some(true);
    }
    let crd = json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {
            "name": format!("{}.{}", claim.plural, spec.group),
            "labels": xrd.labels(),
            "ownerReferences": owner.into_iter().collect::<Vec<_>>(),
        },
        "spec": {
            "group": spec.group,
            "names": names_json(&claim, categories),
            "scope": "Namespaced",
            "versions": versions,
        }
    });
    Ok(Some(serde_json::from_value(crd)?))
}

fn names_json(n: &apis::apiextensions::XrdNames, categories: Vec<String>) -> Value {
    let mut names = json!({
        "plural": n.plural,
        "kind": n.kind,
        "listKind": n.list_kind.clone().unwrap_or_else(|| format!("{}List", n.kind)),
        "categories": categories,
    });
    if let Some(s) = &n.singular {
        names["singular"] = json!(s);
    }
    if !n.short_names.is_empty() {
        names["shortNames"] = json!(n.short_names);
    }
    names
}

fn render_version(v: &CompositeResourceVersion, shape: Shape<'_>) -> Result<Value, RenderError> {
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
    add_crossplane_spec(spec_props, shape);
    let legacy = !matches!(shape, Shape::Modern);
    props.insert("spec".into(), Value::Object(spec));

    let status = status_schema(props, legacy).map_err(bad)?;
    props.insert("status".into(), Value::Object(status));
    props.insert("apiVersion".into(), json!({"type": "string"}));
    props.insert("kind".into(), json!({"type": "string"}));
    props.insert(
        "metadata".into(),
        json!({"type": "object", "properties": {"name": {"type": "string", "maxLength": 63}}}),
    );

    let columns = columns(v, shape, legacy);
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
    // The XR (not its claim) serves the scale subresource the XRD asks for, as upstream's.
    let scale = v.subresources.as_ref().and_then(|s| s.scale.as_ref());
    if let (Some(scale), Shape::Modern | Shape::Legacy) = (scale, shape) {
        out["subresources"]["scale"] = json!(scale);
    }
    Ok(out)
}

/// The fields Crossplane adds to an XR's or claim's spec, in the place `shape` keeps them.
fn add_crossplane_spec(spec_props: &mut Map<String, Value>, shape: Shape<'_>) {
    match shape {
        Shape::Legacy => {
            for (k, s) in crossplane_spec_props() {
                spec_props.insert(k, s);
            }
            spec_props.insert("claimRef".into(), claim_ref_schema());
            spec_props.insert(
                "writeConnectionSecretToRef".into(),
                json!({"type": "object", "required": ["name", "namespace"],
                       "properties": {"name": {"type": "string"}, "namespace": {"type": "string"}}}),
            );
        }
        Shape::Modern => {
            let fields: Map<String, Value> = crossplane_spec_props().into_iter().collect();
            spec_props.insert(
                "crossplane".into(),
                json!({"type": "object", "description": "Configures how Crossplane will reconcile this composite resource", "properties": fields}),
            );
        }
        Shape::Claim(policy) => {
            for (k, s) in crossplane_spec_props() {
                if k != "resourceRefs" {
                    spec_props.insert(k, s);
                }
            }
            let mut delete = json!({"type": "string", "enum": ["Background", "Foreground"]});
            if let Some(p) = policy {
                delete["default"] = json!(p);
            }
            spec_props.insert("compositeDeletePolicy".into(), delete);
            spec_props.insert(
                "resourceRef".into(),
                json!({"type": "object", "required": ["apiVersion", "kind", "name"],
                       "properties": {"apiVersion": {"type": "string"}, "kind": {"type": "string"},
                                      "name": {"type": "string"}}}),
            );
            spec_props.insert(
                "writeConnectionSecretToRef".into(),
                json!({"type": "object", "required": ["name"], "properties": {"name": {"type": "string"}}}),
            );
        }
    }
}

/// `properties.status` with the conditions (and, for legacy XRs and claims, the connection details and
/// claim condition types) added; what is wrong when the user's status is not an object.
fn status_schema(props: &mut Map<String, Value>, legacy: bool) -> Result<Map<String, Value>, &'static str> {
    let mut status = take_object(props, "status").ok_or("properties.status must be an object")?;
    status.insert("type".into(), json!("object"));
    let status_props =
        object_entry(&mut status, "properties").ok_or("status.properties must be an object")?;
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
    Ok(status)
}

/// The printer columns: upstream's for an XR (before the version's own) or a claim (after them).
fn columns(v: &CompositeResourceVersion, shape: Shape<'_>, legacy: bool) -> Vec<Value> {
    match shape {
        Shape::Claim(_) => {
            let mut c: Vec<Value> = v.additional_printer_columns.iter().map(|c| json!(c)).collect();
            c.extend(claim_printer_columns());
            c
        }
        _ => {
            let mut c = printer_columns(legacy);
            c.extend(v.additional_printer_columns.iter().map(|c| json!(c)));
            c
        }
    }
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

fn claim_printer_columns() -> Vec<Value> {
    vec![
        json!({"name": "SYNCED", "type": "string", "jsonPath": ".status.conditions[?(@.type=='Synced')].status"}),
        json!({"name": "READY", "type": "string", "jsonPath": ".status.conditions[?(@.type=='Ready')].status"}),
        json!({"name": "CONNECTION-SECRET", "type": "string", "jsonPath": ".spec.writeConnectionSecretToRef.name"}),
        json!({"name": "AGE", "type": "date", "jsonPath": ".metadata.creationTimestamp"}),
    ]
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
    fn claim_crd_is_namespaced_with_claim_fields() {
        let mut x = xrd(
            "LegacyCluster",
            json!({"type": "object", "properties": {"spec": {"type": "object",
                "properties": {"size": {"type": "integer"}}}}}),
        );
        assert!(render_claim(&x).expect("renders").is_none());
        x.spec.claim_names = Some(json!({"kind": "Thing", "plural": "things"}));
        x.spec.default_composite_delete_policy = Some("Foreground".into());
        let crd = render_claim(&x).expect("renders").expect("offered");
        assert_eq!(crd.metadata.name.as_deref(), Some("things.example.org"));
        assert_eq!(claim_crd_name(&x).as_deref(), Some("things.example.org"));
        assert_eq!(crd.spec.scope, "Namespaced");
        assert_eq!(crd.spec.names.kind, "Thing");
        assert_eq!(crd.spec.names.categories, Some(vec!["claim".to_owned()]));
        let v = &crd.spec.versions[0];
        let cols: Vec<_> = v
            .additional_printer_columns
            .iter()
            .flatten()
            .map(|c| c.name.as_str())
            .collect();
        assert_eq!(cols, ["SYNCED", "READY", "CONNECTION-SECRET", "AGE"]);
        let schema = serde_json::to_value(&v.schema).expect("json");
        let spec = &schema["openAPIV3Schema"]["properties"]["spec"]["properties"];
        assert_eq!(spec["size"]["type"], "integer");
        assert_eq!(spec["compositeDeletePolicy"]["default"], "Foreground");
        assert_eq!(
            spec["resourceRef"]["required"],
            json!(["apiVersion", "kind", "name"])
        );
        assert_eq!(spec["writeConnectionSecretToRef"]["required"], json!(["name"]));
        assert!(
            spec["writeConnectionSecretToRef"]["properties"]
                .get("namespace")
                .is_none()
        );
        assert!(spec.get("compositionSelector").is_some());
        assert!(spec.get("claimRef").is_none());
        let status = &schema["openAPIV3Schema"]["properties"]["status"]["properties"];
        assert!(status.get("conditions").is_some());
        assert!(status.get("connectionDetails").is_some());
    }

    #[test]
    fn claim_names_must_differ_and_need_legacy_scope() {
        let mut x = xrd("LegacyCluster", json!({"type": "object"}));
        x.spec.claim_names = Some(json!({"kind": "XThing", "plural": "things"}));
        let e = render_claim(&x).expect_err("clash");
        assert!(e.to_string().contains("\"XThing\""), "{e}");
        x.spec.claim_names = Some(json!("nope"));
        assert!(matches!(render_claim(&x), Err(RenderError::ClaimNames(_))));
        let mut x = xrd("Cluster", json!({"type": "object"}));
        x.spec.claim_names = Some(json!({"kind": "Thing", "plural": "things"}));
        assert!(render_claim(&x).expect("renders").is_none());
    }

    #[test]
    fn scale_subresource_is_rendered_into_the_xr_crd_only() {
        for scope in ["Namespaced", "Cluster", "LegacyCluster"] {
            let mut x = xrd(scope, json!({"type": "object"}));
            let plain = render(&x).expect("renders");
            let sub = serde_json::to_value(&plain.spec.versions[0].subresources).expect("json");
            assert_eq!(sub, json!({"status": {}}), "{scope}: no scale unless asked");

            x.spec.versions[0].subresources = Some(
                serde_json::from_value(json!({"scale": {
                "specReplicasPath": ".spec.replicas", "statusReplicasPath": ".status.replicas",
                "labelSelectorPath": ".status.labelSelector"}}))
                .expect("subresources"),
            );
            let crd = render(&x).expect("renders");
            let sub = serde_json::to_value(&crd.spec.versions[0].subresources).expect("json");
            assert_eq!(
                sub,
                json!({"status": {}, "scale": {"specReplicasPath": ".spec.replicas",
                                               "statusReplicasPath": ".status.replicas",
                                               "labelSelectorPath": ".status.labelSelector"}}),
                "{scope}"
            );
        }
        let mut x = xrd("LegacyCluster", json!({"type": "object"}));
        x.spec.claim_names = Some(json!({"kind": "Thing", "plural": "things"}));
        x.spec.versions[0].subresources = Some(
            serde_json::from_value(json!({"scale": {
            "specReplicasPath": ".spec.replicas", "statusReplicasPath": ".status.replicas"}}))
            .expect("subresources"),
        );
        let claim = render_claim(&x).expect("renders").expect("offered");
        let sub = serde_json::to_value(&claim.spec.versions[0].subresources).expect("json");
        assert_eq!(sub, json!({"status": {}}), "the claim serves no scale");
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
