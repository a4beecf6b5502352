//! Getting, setting and wildcard-expanding field paths in JSON values.

use serde_json::{Map, Value};

use super::{Error, FieldPath, MAX_GROWN_ARRAY_LEN, Segment, display};

static NULL: Value = Value::Null;

/// The value at `path`. An empty path yields `null`, as upstream's does.
pub fn get<'a>(root: &'a Value, path: &FieldPath) -> Result<&'a Value, Error> {
    get_segments(root, path.segments())
}

fn get_segments<'a>(root: &'a Value, segments: &[Segment]) -> Result<&'a Value, Error> {
    let mut it = root;
    for (i, segment) in segments.iter().enumerate() {
        let prefix = || display(segments.get(..i).unwrap_or_default());
        let through = || display(segments.get(..=i).unwrap_or_default());
        it = match segment {
            Segment::Index(index) => {
                let array = it.as_array().ok_or_else(|| Error::NotAnArray(prefix()))?;
                array.get(*index).ok_or_else(|| Error::NotFound {
                    path: through(),
                    element: true,
                })?
            }
            Segment::Field(name) => {
                let object = it.as_object().ok_or_else(|| Error::NotAnObject(prefix()))?;
                object.get(name).ok_or_else(|| Error::NotFound {
                    path: through(),
                    element: false,
                })?
            }
        };
    }
    if segments.is_empty() {
        return Ok(&NULL);
    }
    Ok(it)
}

/// Sets `value` at `path`, creating missing intermediate objects and arrays. An empty
/// path changes nothing, as upstream's does.
pub fn set(root: &mut Value, path: &FieldPath, value: Value) -> Result<(), Error> {
    let segments = path.segments();
    if segments.is_empty() {
        return Ok(());
    }
    set_at(root, segments, 0, value)
}

fn set_at(cur: &mut Value, segments: &[Segment], i: usize, value: Value) -> Result<(), Error> {
    let Some(segment) = segments.get(i) else {
        return Ok(());
    };
    let next = segments.get(i + 1);
    let prefix = || display(segments.get(..i).unwrap_or_default());
    let slot: &mut Value = match segment {
        Segment::Index(index) => {
            let array = cur.as_array_mut().ok_or_else(|| Error::SetNotAnArray(prefix()))?;
            grow(array, *index, || display(segments.get(..=i).unwrap_or_default()))?;
            match array.get_mut(*index) {
                Some(slot) => slot,
                None => return Ok(()),
            }
        }
        Segment::Field(name) => {
            let object = cur
                .as_object_mut()
                .ok_or_else(|| Error::SetNotAnObject(prefix()))?;
            if next.is_none() {
                object.insert(name.clone(), value);
                return Ok(());
            }
            object.entry(name.clone()).or_insert(Value::Null)
        }
    };
    let Some(next) = next else {
        *slot = value;
        return Ok(());
    };
    // Prepare the slot for the next segment: create it when missing (or null), and make
    // an existing array long enough for the next index.
    match next {
        Segment::Index(index) => {
            if slot.is_null() {
                *slot = Value::Array(Vec::new());
            }
            if let Some(array) = slot.as_array_mut() {
                grow(array, *index, || {
                    display(segments.get(..=i + 1).unwrap_or_default())
                })?;
            }
        }
        Segment::Field(_) => {
            if slot.is_null() {
                *slot = Value::Object(Map::new());
            }
        }
    }
    set_at(slot, segments, i + 1, value)
}

/// Grows `array` with nulls so that `index` is in bounds.
fn grow(array: &mut Vec<Value>, index: usize, path: impl Fn() -> String) -> Result<(), Error> {
    if index < array.len() {
        return Ok(());
    }
    if index >= MAX_GROWN_ARRAY_LEN {
        return Err(Error::ArrayTooLong { path: path(), index });
    }
    array.resize(index + 1, Value::Null);
    Ok(())
}

/// Expands every wildcard segment of `path` against the data in `root`: one path per
/// array element or object field (fields in sorted order). A path whose non-wildcard
/// prefix does not exist expands to nothing.
pub fn expand_wildcards(root: &Value, path: &FieldPath) -> Result<Vec<FieldPath>, Error> {
    Ok(expand(root, path.segments().to_vec())?
        .into_iter()
        .map(FieldPath::from_segments)
        .collect())
}

fn expand(root: &Value, segments: Vec<Segment>) -> Result<Vec<Vec<Segment>>, Error> {
    let mut it = root;
    for (i, segment) in segments.iter().enumerate() {
        if segment.is_wildcard() {
            let replacements: Vec<Segment> = match it {
                Value::Array(a) => (0..a.len()).map(Segment::Index).collect(),
                Value::Object(o) => {
                    let mut keys: Vec<&String> = o.keys().collect();
                    keys.sort();
                    keys.into_iter().map(|k| Segment::Field(k.clone())).collect()
                }
                _ => {
                    return Err(Error::Wildcard(display(segments.get(..i).unwrap_or_default())));
                }
            };
            let mut out = Vec::new();
            for replacement in replacements {
                let mut expanded = segments.clone();
                if let Some(slot) = expanded.get_mut(i) {
                    *slot = replacement;
                }
                out.extend(expand(root, expanded)?);
            }
            return Ok(out);
        }
        match get_segments(root, segments.get(..=i).unwrap_or_default()) {
            Ok(v) => it = v,
            Err(e) if e.is_not_found() => return Ok(Vec::new()),
            Err(e) => return Err(e),
        }
    }
    Ok(vec![segments])
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use serde_json::json;

    use super::*;

    fn p(s: &str) -> FieldPath {
        FieldPath::parse(s).unwrap()
    }

    #[test]
    fn gets_values() {
        let v = json!({
            "metadata": {"labels": {"crossplane.io/claim-name": "claim"}},
            "spec": {"forProvider": {"tags": ["a", "b"]}, "a": {"b.c": 1}}
        });
        assert_eq!(get(&v, &p("spec.forProvider.tags[1]")).unwrap(), "b");
        assert_eq!(
            get(&v, &p("metadata.labels[crossplane.io/claim-name]")).unwrap(),
            "claim"
        );
        assert_eq!(get(&v, &p("spec.a[\"b.c\"]")).unwrap(), 1);
        assert_eq!(get(&v, &p("")).unwrap(), &Value::Null);
    }

    // crossplane-runtime paved.go: a missing field or element is "not found"; a type
    // mismatch along the way is a different error.
    #[test]
    fn get_errors() {
        let v = json!({"spec": {"list": [1], "s": "x"}});
        let e = get(&v, &p("spec.missing.deeper")).unwrap_err();
        assert!(e.is_not_found());
        assert_eq!(e.to_string(), "spec.missing: no such field");
        let e = get(&v, &p("spec.list[3]")).unwrap_err();
        assert!(e.is_not_found());
        assert_eq!(e.to_string(), "spec.list[3]: no such element");
        let e = get(&v, &p("spec.s.x")).unwrap_err();
        assert!(!e.is_not_found());
        assert_eq!(e.to_string(), "spec.s: not an object");
        let e = get(&v, &p("spec.s[0]")).unwrap_err();
        assert_eq!(e.to_string(), "spec.s: not an array");
    }

    #[test]
    fn sets_creating_intermediates() {
        let mut v = json!({});
        set(&mut v, &p("spec.forProvider.tags[2]"), json!("c")).unwrap();
        set(
            &mut v,
            &p("metadata.labels[crossplane.io/claim-name]"),
            json!("n"),
        )
        .unwrap();
        set(&mut v, &p("spec.a[\"b.c\"]"), json!(true)).unwrap();
        set(&mut v, &p("spec.matrix[1][1].x"), json!(1)).unwrap();
        assert_eq!(
            v,
            json!({
                "metadata": {"labels": {"crossplane.io/claim-name": "n"}},
                "spec": {
                    "forProvider": {"tags": [null, null, "c"]},
                    "a": {"b.c": true},
                    "matrix": [null, [null, {"x": 1}]]
                }
            })
        );
    }

    #[test]
    fn set_grows_existing_arrays_and_replaces_null() {
        let mut v = json!({"a": [1], "b": null});
        set(&mut v, &p("a[2]"), json!(3)).unwrap();
        set(&mut v, &p("b.c"), json!(1)).unwrap();
        assert_eq!(v, json!({"a": [1, null, 3], "b": {"c": 1}}));
    }

    #[test]
    fn set_errors() {
        let mut v = json!({"s": "x", "o": {}});
        assert_eq!(
            set(&mut v, &p("s.x"), json!(1)).unwrap_err().to_string(),
            "s is not an object"
        );
        assert_eq!(
            set(&mut v, &p("o[0]"), json!(1)).unwrap_err().to_string(),
            "o is not an array"
        );
        assert!(matches!(
            set(&mut v, &p("big[4000000000]"), json!(1)),
            Err(Error::ArrayTooLong { .. })
        ));
    }

    #[test]
    fn expands_wildcards() {
        let v = json!({"spec": {"containers": [
            {"name": "a", "args": ["x", "y"]},
            {"name": "b", "args": ["z"]}
        ], "m": {"k2": 1, "k1": 2}}});
        let got: Vec<String> = expand_wildcards(&v, &p("spec.containers[*].args[*]"))
            .unwrap()
            .iter()
            .map(ToString::to_string)
            .collect();
        assert_eq!(
            got,
            [
                "spec.containers[0].args[0]",
                "spec.containers[0].args[1]",
                "spec.containers[1].args[0]"
            ]
        );
        let got: Vec<String> = expand_wildcards(&v, &p("spec.m[*]"))
            .unwrap()
            .iter()
            .map(ToString::to_string)
            .collect();
        assert_eq!(got, ["spec.m.k1", "spec.m.k2"]);
        assert!(expand_wildcards(&v, &p("spec.nope[*]")).unwrap().is_empty());
        assert_eq!(
            expand_wildcards(&v, &p("spec.containers[0].name[*]"))
                .unwrap_err()
                .to_string(),
            "\"spec.containers[0].name\": unexpected wildcard usage"
        );
    }
}
