//! Writing a patched value under a `policy.toFieldPath`.
//!
//! `Replace` (the default) sets the value. The merge policies follow crossplane-runtime's
//! `MergeValue` (mergo under the hood), for objects and arrays as JSON decodes them:
//!
//! | policy | objects | existing values | arrays |
//! |---|---|---|---|
//! | `MergeObjects` (`MergeObject`) | merged recursively | kept (only empty ones filled) | kept unless empty |
//! | `MergeObjectsAppendArrays` | merged recursively | kept | appended |
//! | `ForceMergeObjects` | merged recursively | overwritten | replaced |
//! | `ForceMergeObjectsAppendArrays` (`AppendArray`) | merged recursively | overwritten | appended |
//!
//! Details kept from mergo: "empty" means `null`, `false`, `0`, `""`, `[]` or `{}`; a
//! `null` source field overwrites only when forcing; appending to the destination field
//! itself skips elements it already has. Deviation: when forcing, a source object
//! replaces a non-object destination value (mergo silently keeps it).

use serde_json::{Map, Value};

use crate::fieldpath::{self, FieldPath};
use crate::input::ToFieldPathPolicy;

/// A failure to write the patched value.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// The destination path cannot be read or written.
    #[error("{0}")]
    FieldPath(#[from] fieldpath::Error),
    /// Appending to a value that is not an array.
    #[error("failed to merge values: cannot append an array to a non-array value")]
    AppendToNonArray,
}

#[derive(Debug, Clone, Copy)]
struct Options {
    keep_existing: bool,
    append_arrays: bool,
}

fn options(policy: ToFieldPathPolicy) -> Option<Options> {
    use ToFieldPathPolicy as P;
    let (keep_existing, append_arrays) = match policy {
        P::Replace => return None,
        P::MergeObjects | P::MergeObject => (true, false),
        P::MergeObjectsAppendArrays => (true, true),
        P::ForceMergeObjects => (false, false),
        P::ForceMergeObjectsAppendArrays | P::AppendArray => (false, true),
    };
    Some(Options {
        keep_existing,
        append_arrays,
    })
}

/// Writes `src` at `path` under the policy.
pub fn merge_value(
    root: &mut Value,
    path: &FieldPath,
    src: Value,
    policy: ToFieldPathPolicy,
) -> Result<(), Error> {
    let Some(opts) = options(policy) else {
        return Ok(fieldpath::set(root, path, src)?);
    };
    let dst = match fieldpath::get(root, path) {
        Ok(v) => v.clone(),
        Err(e) if e.is_not_found() => Value::Null,
        Err(e) => return Err(e.into()),
    };
    let merged = merge(dst, src, opts)?;
    Ok(fieldpath::set(root, path, merged)?)
}

fn merge(dst: Value, src: Value, opts: Options) -> Result<Value, Error> {
    if dst.is_null() || src.is_null() {
        return Ok(src);
    }
    let src = match (&dst, src) {
        (Value::Array(d), Value::Array(s)) if opts.append_arrays => {
            Value::Array(s.into_iter().filter(|item| !d.contains(item)).collect())
        }
        (_, s) => s,
    };
    let key = String::new();
    let mut wrapper = Map::new();
    wrapper.insert(key.clone(), dst);
    merge_entry(&mut wrapper, key.clone(), src, opts)?;
    Ok(wrapper.remove(&key).unwrap_or(Value::Null))
}

fn merge_maps(dst: &mut Map<String, Value>, src: Map<String, Value>, opts: Options) -> Result<(), Error> {
    for (key, value) in src {
        merge_entry(dst, key, value, opts)?;
    }
    Ok(())
}

fn merge_entry(dst: &mut Map<String, Value>, key: String, src: Value, opts: Options) -> Result<(), Error> {
    let Some(existing) = dst.get_mut(&key) else {
        if !src.is_null() || !opts.keep_existing {
            dst.insert(key, src);
        }
        return Ok(());
    };
    match (existing, src) {
        (existing, Value::Null) => {
            if !opts.keep_existing {
                *existing = Value::Null;
            }
        }
        (Value::Object(d), Value::Object(s)) => merge_maps(d, s, opts)?,
        (existing, Value::Array(s)) if opts.append_arrays => match existing {
            Value::Array(d) => d.extend(s),
            Value::Null => *existing = Value::Array(s),
            _ => return Err(Error::AppendToNonArray),
        },
        (existing, src) => {
            if !opts.keep_existing || crate::gojson::is_zero(existing) {
                *existing = src;
            }
        }
    }
    Ok(())
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use serde_json::json;

    use super::*;

    fn run(dst: Value, src: Value, policy: ToFieldPathPolicy) -> Value {
        let mut root = json!({"spec": {"x": dst}});
        merge_value(&mut root, &FieldPath::parse("spec.x").unwrap(), src, policy).unwrap();
        root.pointer("/spec/x").cloned().unwrap()
    }

    fn dst() -> Value {
        json!({"keep": "old", "over": "old", "empty": "", "list": ["a"], "nested": {"a": 1}})
    }

    fn src() -> Value {
        json!({"over": "new", "empty": "filled", "list": ["a", "b"], "nested": {"b": 2}, "added": true})
    }

    // Crossplane docs, patch policy `toFieldPath`: Replace replaces the destination.
    #[test]
    fn replace() {
        assert_eq!(run(dst(), src(), ToFieldPathPolicy::Replace), src());
    }

    // Docs: MergeObjects merges objects and keeps existing values.
    #[test]
    fn merge_objects() {
        assert_eq!(
            run(dst(), src(), ToFieldPathPolicy::MergeObjects),
            json!({"keep": "old", "over": "old", "empty": "filled", "list": ["a"],
                   "nested": {"a": 1, "b": 2}, "added": true})
        );
    }

    // Docs: MergeObjectsAppendArrays also appends arrays.
    #[test]
    fn merge_objects_append_arrays() {
        assert_eq!(
            run(dst(), src(), ToFieldPathPolicy::MergeObjectsAppendArrays),
            json!({"keep": "old", "over": "old", "empty": "filled", "list": ["a", "a", "b"],
                   "nested": {"a": 1, "b": 2}, "added": true})
        );
    }

    // Docs: ForceMergeObjects merges objects and overwrites existing values.
    #[test]
    fn force_merge_objects() {
        assert_eq!(
            run(dst(), src(), ToFieldPathPolicy::ForceMergeObjects),
            json!({"keep": "old", "over": "new", "empty": "filled", "list": ["a", "b"],
                   "nested": {"a": 1, "b": 2}, "added": true})
        );
    }

    // Docs: ForceMergeObjectsAppendArrays overwrites values and appends arrays.
    #[test]
    fn force_merge_objects_append_arrays() {
        assert_eq!(
            run(dst(), src(), ToFieldPathPolicy::ForceMergeObjectsAppendArrays),
            json!({"keep": "old", "over": "new", "empty": "filled", "list": ["a", "a", "b"],
                   "nested": {"a": 1, "b": 2}, "added": true})
        );
    }

    // Appending to the destination array itself skips elements it already has.
    #[test]
    fn append_to_array_dedups() {
        assert_eq!(
            run(
                json!(["a", "b"]),
                json!(["b", "c"]),
                ToFieldPathPolicy::ForceMergeObjectsAppendArrays
            ),
            json!(["a", "b", "c"])
        );
        assert_eq!(
            run(json!(null), json!(["x"]), ToFieldPathPolicy::MergeObjects),
            json!(["x"])
        );
    }

    #[test]
    fn append_to_non_array_is_an_error() {
        let mut root = json!({"x": {"l": "s"}});
        let err = merge_value(
            &mut root,
            &FieldPath::parse("x").unwrap(),
            json!({"l": [1]}),
            ToFieldPathPolicy::MergeObjectsAppendArrays,
        )
        .unwrap_err();
        assert_eq!(err, Error::AppendToNonArray);
    }
}
