//! Required schemas: the OpenAPI v3 schema of a kind a function asks for (`requirements.schemas`), as
//! the apiserver publishes it (`/openapi/v3`, one document per group-version), with its references
//! inlined so the function needs nothing else (upstream's OpenAPI required-schemas fetcher).
//!
//! The schema is the document's component whose `x-kubernetes-group-version-kind` names exactly the
//! kind. A `$ref` (and Kubernetes' `allOf: [{$ref}]`, which carries a field's description and default
//! beside the reference) is replaced by the schema it names, the field's own keywords kept; a
//! reference back into a schema being inlined (a recursive type) becomes an object that keeps unknown
//! fields. No document for the group-version, or no component for the kind: no schema (`None`), as
//! upstream answers an empty Schema. Documents are cached by their server-relative URL, which carries
//! the content's hash.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use serde_json::{Map, Value};

/// The prefix of references into the document's components.
const REF_PREFIX: &str = "#/components/schemas/";

/// OpenAPI documents by server-relative URL (which includes the content hash).
#[derive(Debug, Default)]
pub struct Cache {
    docs: Mutex<HashMap<String, Arc<Value>>>,
}

async fn get_json(client: &kube::Client, path: &str) -> Result<Value, String> {
    let req = http::Request::get(path)
        .body(Vec::new())
        .map_err(|e| format!("cannot build the request for {path}: {e}"))?;
    client
        .request::<Value>(req)
        .await
        .map_err(|e| format!("cannot read {path}: {}", crate::error::explain(&e)))
}

/// The schema of `api_version`/`kind`, references inlined; `None` when the apiserver publishes none.
pub async fn fetch(
    client: &kube::Client,
    cache: &Cache,
    api_version: &str,
    kind: &str,
) -> Result<Option<Value>, String> {
    let (group, version) = match api_version.split_once('/') {
        Some((g, v)) => (g, v),
        None => ("", api_version),
    };
    if version.is_empty() || kind.is_empty() {
        return Err(format!(
            "a schema requirement needs an apiVersion and a kind, got {api_version:?} {kind:?}"
        ));
    }
    let key = if group.is_empty() {
        format!("api/{version}")
    } else {
        format!("apis/{api_version}")
    };
    let paths = get_json(client, "/openapi/v3").await?;
    let Some(url) = paths
        .pointer(&format!("/paths/{}", key.replace('~', "~0").replace('/', "~1")))
        .and_then(|p| p.get("serverRelativeURL"))
        .and_then(Value::as_str)
    else {
        return Ok(None);
    };
    let cached = cache
        .docs
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .get(url)
        .cloned();
    let doc = match cached {
        Some(d) => d,
        None => {
            let d = Arc::new(get_json(client, url).await?);
            let mut docs = cache
                .docs
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            // A group-version's old documents (another hash) are dropped.
            docs.retain(|u, _| u.split('?').next() != url.split('?').next());
            docs.insert(url.to_owned(), d.clone());
            d
        }
    };
    Ok(of_kind(&doc, group, version, kind))
}

/// The flattened schema of `group`/`version` `kind` in OpenAPI document `doc`.
pub fn of_kind(doc: &Value, group: &str, version: &str, kind: &str) -> Option<Value> {
    let components = doc.pointer("/components/schemas")?.as_object()?;
    let (name, _) = components.iter().find(|(_, s)| {
        let gvks = s.get("x-kubernetes-group-version-kind").and_then(Value::as_array);
        matches!(gvks.map(Vec::as_slice), Some([g])
            if g["group"].as_str().unwrap_or("") == group
                && g["version"] == version
                && g["kind"] == kind)
    })?;
    let entry = serde_json::json!({"$ref": format!("{REF_PREFIX}{name}")});
    Some(flatten(components, &entry, &mut Vec::new()))
}

/// The reference `schema` stands for: its `$ref`, or the one of an `allOf` holding only a reference.
fn reference(schema: &Map<String, Value>) -> Option<&str> {
    if let Some(r) = schema.get("$ref").and_then(Value::as_str) {
        return Some(r);
    }
    match schema.get("allOf").and_then(Value::as_array).map(Vec::as_slice) {
        Some([only]) => only.get("$ref").and_then(Value::as_str),
        _ => None,
    }
}

/// `schema` with every reference inlined; `path` holds the references being inlined (cycles).
fn flatten(components: &Map<String, Value>, schema: &Value, path: &mut Vec<String>) -> Value {
    match schema {
        Value::Object(m) => {
            if let Some(r) = reference(m).map(str::to_owned) {
                let mut own = m.clone();
                own.remove("$ref");
                own.remove("allOf");
                let target = r.strip_prefix(REF_PREFIX).and_then(|n| components.get(n));
                let inlined = match target {
                    Some(_) if path.contains(&r) => {
                        serde_json::json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true})
                    }
                    Some(t) => {
                        path.push(r.clone());
                        let v = flatten(components, t, path);
                        path.pop();
                        v
                    }
                    // A reference outside the document's components is left as it is.
                    None => return Value::Object(m.clone()),
                };
                let mut out = inlined.as_object().cloned().unwrap_or_default();
                // The field's own keywords (description, default) win over the referenced schema's.
                for (k, v) in own {
                    out.insert(k, flatten(components, &v, path));
                }
                return Value::Object(out);
            }
            Value::Object(
                m.iter()
                    .map(|(k, v)| (k.clone(), flatten(components, v, path)))
                    .collect(),
            )
        }
        Value::Array(a) => Value::Array(a.iter().map(|v| flatten(components, v, path)).collect()),
        other => other.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn doc() -> Value {
        json!({"components": {"schemas": {
            "io.k8s.api.core.v1.ConfigMap": {
                "type": "object",
                "x-kubernetes-group-version-kind": [{"group": "", "version": "v1", "kind": "ConfigMap"}],
                "properties": {
                    "data": {"type": "object", "additionalProperties": {"type": "string"}},
                    "metadata": {"allOf": [{"$ref": "#/components/schemas/meta.ObjectMeta"}],
                                 "default": {}, "description": "Standard object's metadata."},
                    "owner": {"$ref": "#/components/schemas/meta.OwnerReference"}
                }
            },
            "meta.ObjectMeta": {"type": "object", "description": "ObjectMeta is metadata.",
                                "properties": {"name": {"type": "string"},
                                               "owners": {"type": "array", "items": {
                                                   "$ref": "#/components/schemas/meta.OwnerReference"}}}},
            "meta.OwnerReference": {"type": "object", "properties": {"name": {"type": "string"}}},
            "Props": {"type": "object",
                      "x-kubernetes-group-version-kind": [{"group": "x.org", "version": "v1", "kind": "Props"}],
                      "properties": {"not": {"$ref": "#/components/schemas/Props"}}}
        }}})
    }

    #[test]
    fn references_are_inlined_with_the_fields_own_keywords() {
        let s = of_kind(&doc(), "", "v1", "ConfigMap").expect("ConfigMap");
        let meta = &s["properties"]["metadata"];
        assert_eq!(meta["properties"]["name"]["type"], "string");
        assert_eq!(meta["description"], "Standard object's metadata.");
        assert!(
            meta.get("$ref").is_none() && meta.get("allOf").is_none(),
            "{meta}"
        );
        assert_eq!(
            meta["properties"]["owners"]["items"]["properties"]["name"]["type"],
            "string"
        );
        assert_eq!(s["properties"]["owner"]["properties"]["name"]["type"], "string");
        assert!(!s.to_string().contains("$ref"), "a reference is left: {s}");
    }

    #[test]
    fn a_recursive_reference_ends_in_an_open_object_and_an_unknown_kind_in_none() {
        let s = of_kind(&doc(), "x.org", "v1", "Props").expect("Props");
        assert_eq!(
            s["properties"]["not"]["x-kubernetes-preserve-unknown-fields"],
            true
        );
        assert!(of_kind(&doc(), "", "v1", "Secret").is_none());
        assert!(of_kind(&doc(), "x.org", "v2", "Props").is_none());
    }
}
