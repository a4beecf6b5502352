//! Pure functions over manifests: validating the desired object, field paths, the up-to-date check and
//! readiness.

use serde_json::{Map, Value};

/// A manifest that cannot be applied.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ManifestError {
    /// Not a JSON object.
    #[error(
        "spec.forProvider.manifest is not a Kubernetes object: expected an object with apiVersion and kind, got {0}"
    )]
    NotAnObject(&'static str),
    /// A required field is missing or not a string.
    #[error("spec.forProvider.manifest is not a Kubernetes object: {0} must be a non-empty string")]
    Missing(&'static str),
    /// A field path does not parse.
    #[error("invalid field path {0:?}")]
    BadPath(String),
}

fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// The desired object's identity.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Desired {
    /// `apiVersion`.
    pub api_version: String,
    /// `kind`.
    pub kind: String,
    /// `metadata.name`.
    pub name: String,
    /// `metadata.namespace`, if set.
    pub namespace: Option<String>,
    /// The whole object, name (and namespace) defaulted.
    pub object: Value,
}

impl Desired {
    /// The API group (empty for the core group).
    pub fn group(&self) -> &str {
        self.api_version.rsplit_once('/').map_or("", |(g, _)| g)
    }

    /// Sets `metadata.namespace` (for namespaced kinds whose manifest names none).
    pub fn set_namespace(&mut self, namespace: &str) {
        if let Some(meta) = self.object.get_mut("metadata").and_then(Value::as_object_mut) {
            meta.insert("namespace".to_owned(), Value::String(namespace.to_owned()));
        }
        self.namespace = Some(namespace.to_owned());
    }

    /// The version.
    pub fn version(&self) -> &str {
        self.api_version
            .rsplit_once('/')
            .map_or(self.api_version.as_str(), |(_, v)| v)
    }
}

/// Validates `manifest`, defaulting `metadata.name` to `default_name` and, if given,
/// `metadata.namespace` to `default_namespace`.
pub fn desired(
    manifest: &Value,
    default_name: &str,
    default_namespace: Option<&str>,
) -> Result<Desired, ManifestError> {
    let Value::Object(map) = manifest else {
        return Err(ManifestError::NotAnObject(type_name(manifest)));
    };
    let mut object = map.clone();
    let string = |m: &Map<String, Value>, k: &str| {
        m.get(k)
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
            .map(str::to_owned)
    };
    let api_version = string(&object, "apiVersion").ok_or(ManifestError::Missing("apiVersion"))?;
    let kind = string(&object, "kind").ok_or(ManifestError::Missing("kind"))?;
    let metadata = object
        .entry("metadata")
        .or_insert_with(|| Value::Object(Map::new()));
    let Value::Object(metadata) = metadata else {
        return Err(ManifestError::Missing("metadata"));
    };
    let name = match string(metadata, "name") {
        Some(n) => n,
        None => {
            metadata.insert("name".to_owned(), Value::String(default_name.to_owned()));
            default_name.to_owned()
        }
    };
    let namespace = match (string(metadata, "namespace"), default_namespace) {
        (Some(ns), _) => Some(ns),
        (None, Some(ns)) => {
            metadata.insert("namespace".to_owned(), Value::String(ns.to_owned()));
            Some(ns.to_owned())
        }
        (None, None) => None,
    };
    Ok(Desired {
        api_version,
        kind,
        name,
        namespace,
        object: Value::Object(object),
    })
}

/// One step of a field path.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Segment {
    Field(String),
    Index(usize),
}

/// Parses `a.b[0].c` and `data["x.y"]`.
fn parse_path(path: &str) -> Result<Vec<Segment>, ManifestError> {
    let bad = || ManifestError::BadPath(path.to_owned());
    let mut out = Vec::new();
    let mut chars = path.chars().peekable();
    let mut current = String::new();
    while let Some(c) = chars.next() {
        match c {
            '.' => {
                if !current.is_empty() {
                    out.push(Segment::Field(std::mem::take(&mut current)));
                }
            }
            '[' => {
                if !current.is_empty() {
                    out.push(Segment::Field(std::mem::take(&mut current)));
                }
                let mut inner = String::new();
                for c in chars.by_ref() {
                    if c == ']' {
                        break;
                    }
                    inner.push(c);
                }
                let inner = inner.trim();
                if let Some(q) = inner.strip_prefix('"').and_then(|s| s.strip_suffix('"')) {
                    out.push(Segment::Field(q.to_owned()));
                } else if let Some(q) = inner.strip_prefix('\'').and_then(|s| s.strip_suffix('\'')) {
                    out.push(Segment::Field(q.to_owned()));
                } else {
                    out.push(Segment::Index(inner.parse().map_err(|_| bad())?));
                }
            }
            c => current.push(c),
        }
    }
    if !current.is_empty() {
        out.push(Segment::Field(current));
    }
    if out.is_empty() {
        return Err(bad());
    }
    Ok(out)
}

/// The value at `path` in `value`.
pub fn get_path<'a>(value: &'a Value, path: &str) -> Result<Option<&'a Value>, ManifestError> {
    let mut v = value;
    for seg in parse_path(path)? {
        let next = match (&seg, v) {
            (Segment::Field(f), Value::Object(m)) => m.get(f),
            (Segment::Index(i), Value::Array(a)) => a.get(*i),
            _ => None,
        };
        match next {
            Some(n) => v = n,
            None => return Ok(None),
        }
    }
    Ok(Some(v))
}

/// Sets `path` in `value` to `new`, creating objects on the way.
pub fn set_path(value: &mut Value, path: &str, new: Value) -> Result<(), ManifestError> {
    let segs = parse_path(path)?;
    let mut v = value;
    for (i, seg) in segs.iter().enumerate() {
        let last = i + 1 == segs.len();
        match seg {
            Segment::Field(f) => {
                if !v.is_object() {
                    *v = Value::Object(Map::new());
                }
                let Value::Object(m) = v else {
                    return Err(ManifestError::BadPath(path.to_owned()));
                };
                if last {
                    m.insert(f.clone(), new);
                    return Ok(());
                }
                v = m.entry(f.clone()).or_insert(Value::Null);
            }
            Segment::Index(idx) => {
                let Value::Array(a) = v else {
                    return Err(ManifestError::BadPath(path.to_owned()));
                };
                let Some(slot) = a.get_mut(*idx) else {
                    return Err(ManifestError::BadPath(path.to_owned()));
                };
                if last {
                    *slot = new;
                    return Ok(());
                }
                v = slot;
            }
        }
    }
    Ok(())
}

/// Whether every field set in `desired` has the same value in `observed` (`status` is ignored): the
/// object is up to date when applying `desired` would change nothing we own.
pub fn is_subset(desired: &Value, observed: &Value) -> bool {
    match (desired, observed) {
        (Value::Object(d), Value::Object(o)) => d.iter().all(|(k, dv)| {
            if k == "status" {
                return true;
            }
            match o.get(k) {
                Some(ov) => is_subset(dv, ov),
                None => dv.is_null() || dv.as_object().is_some_and(Map::is_empty),
            }
        }),
        (Value::Array(d), Value::Array(o)) => {
            d.len() == o.len() && d.iter().zip(o).all(|(a, b)| is_subset(a, b))
        }
        (Value::Number(a), Value::Number(b)) => a.as_f64() == b.as_f64(),
        (a, b) => a == b,
    }
}

/// The observed object's conditions as (type, status) pairs.
fn conditions(observed: &Value) -> Vec<(String, String)> {
    observed
        .get("status")
        .and_then(|s| s.get("conditions"))
        .and_then(Value::as_array)
        .map(|cs| {
            cs.iter()
                .filter_map(|c| {
                    Some((
                        c.get("type")?.as_str()?.to_owned(),
                        c.get("status")?.as_str()?.to_owned(),
                    ))
                })
                .collect()
        })
        .unwrap_or_default()
}

/// `DeriveFromObject`: the object's own `Ready` condition is `True`.
pub fn derive_from_object(observed: &Value) -> bool {
    conditions(observed)
        .iter()
        .any(|(t, s)| t == "Ready" && s == "True")
}

/// `AllTrue`: the object has at least one condition and all are `True`.
pub fn all_true(observed: &Value) -> bool {
    let cs = conditions(observed);
    !cs.is_empty() && cs.iter().all(|(_, s)| s == "True")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn validates_and_defaults() {
        let d = desired(
            &json!({"apiVersion": "v1", "kind": "ConfigMap", "data": {"a": "1"}}),
            "obj",
            Some("ns"),
        )
        .expect("valid");
        assert_eq!((d.name.as_str(), d.namespace.as_deref()), ("obj", Some("ns")));
        assert_eq!(d.group(), "");
        assert_eq!(d.version(), "v1");
        assert_eq!(d.object["metadata"]["name"], "obj");
        let d = desired(
            &json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "x"}}),
            "obj",
            None,
        )
        .expect("valid");
        assert_eq!(
            (d.group(), d.name.as_str(), d.namespace.clone()),
            ("apps", "x", None)
        );
        let e = desired(&json!("hello"), "o", None).expect_err("string");
        assert!(e.to_string().contains("got a string"), "{e}");
        let e = desired(&json!({"kind": "ConfigMap"}), "o", None).expect_err("no apiVersion");
        assert!(e.to_string().contains("apiVersion"), "{e}");
    }

    #[test]
    fn field_paths() {
        let mut v = json!({"data": {"a.b": "1"}, "spec": {"items": [{"x": 1}]}});
        assert_eq!(get_path(&v, r#"data["a.b"]"#).expect("path"), Some(&json!("1")));
        assert_eq!(get_path(&v, "spec.items[0].x").expect("path"), Some(&json!(1)));
        assert_eq!(get_path(&v, "spec.missing").expect("path"), None);
        set_path(&mut v, "metadata.labels.foo", json!("bar")).expect("set");
        assert_eq!(v["metadata"]["labels"]["foo"], "bar");
        set_path(&mut v, "spec.items[0].x", json!(2)).expect("set");
        assert_eq!(v["spec"]["items"][0]["x"], 2);
        assert!(get_path(&v, "").is_err());
    }

    #[test]
    fn subset_is_the_up_to_date_check() {
        let desired = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x", "labels": {"a": "1"}}, "data": {"k": "v"}});
        let observed = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x", "uid": "u", "labels": {"a": "1", "b": "2"}}, "data": {"k": "v"}});
        assert!(is_subset(&desired, &observed));
        let changed =
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}, "data": {"k": "w"}});
        assert!(!is_subset(&changed, &observed));
        assert!(is_subset(
            &json!({"spec": {"replicas": 1}}),
            &json!({"spec": {"replicas": 1.0}})
        ));
    }

    #[test]
    fn readiness_policies() {
        let ready = json!({"status": {"conditions": [{"type": "Ready", "status": "True"}, {"type": "Other", "status": "False"}]}});
        assert!(derive_from_object(&ready));
        assert!(!all_true(&ready));
        let all = json!({"status": {"conditions": [{"type": "A", "status": "True"}, {"type": "B", "status": "True"}]}});
        assert!(all_true(&all));
        assert!(!derive_from_object(&all));
        assert!(!all_true(&json!({})));
    }
}
