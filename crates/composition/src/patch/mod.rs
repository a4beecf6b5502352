//! Applying patches (upstream `patches.go`).
//!
//! [`apply`] runs one patch from a source object to a destination object. The callers
//! choose the objects by patch type, as upstream does:
//!
//! | patch type | from | to |
//! |---|---|---|
//! | `FromCompositeFieldPath`, `CombineFromComposite` | observed composite | desired composed |
//! | `ToCompositeFieldPath`, `CombineToComposite` | observed composed | desired composite |
//! | `FromEnvironmentFieldPath`, `CombineFromEnvironment` | environment | desired composed |
//! | `ToEnvironmentFieldPath`, `CombineToEnvironment` | observed composed | environment |
//!
//! ([`apply_composed`]; [`apply_environment`] has its own table for
//! `environment.patches`.) Patches always read observed state (where status lives)
//! and write desired state. A patch reading a composed resource that does not exist yet
//! is skipped.
//!
//! `policy.fromFieldPath`: when a source field does not exist, an `Optional` patch (the
//! default) is [`Applied::Skipped`]; a `Required` one fails with [`Error::Required`]. A
//! combine patch needs all its variables. The value goes through the transforms, then
//! the JSON round trip upstream applies ([`crate::gojson::normalize`]), and is written
//! under `policy.toFieldPath` ([`merge`]). A destination path containing `[*]` is
//! expanded against the destination (every segment must already exist) and written to
//! every match; no match is an error.

pub mod merge;
pub mod patchset;

use serde_json::Value;

use crate::fieldpath::{self, FieldPath};
use crate::gofmt::sprintf;
use crate::gojson;
use crate::input::{CombineStrategy, FromFieldPathPolicy, Patch, PatchType};
use crate::transform;

/// What a patch did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Applied {
    /// The destination was written.
    Patched,
    /// Nothing was written: an optional source field is missing, the patch reads a
    /// composed resource that does not exist yet, or the patch does not apply here.
    Skipped,
}

/// A patch failure.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum Error {
    /// A source field is missing and the patch has `policy.fromFieldPath: Required`.
    #[error("{0}")]
    Required(fieldpath::Error),
    /// A source field path is invalid or cannot be read.
    #[error("{0}")]
    FromFieldPath(fieldpath::Error),
    /// A field the patch type needs is not set.
    #[error("{field} is required by type {type_}")]
    MissingField {
        /// The field, e.g. `FromFieldPath`.
        field: &'static str,
        /// The patch type.
        type_: PatchType,
    },
    /// A combine patch has no variables.
    #[error("combine patch types require at least one variable")]
    NoVariables,
    /// A combine patch has no strategy.
    #[error("combine strategy  is not supported")]
    NoStrategy,
    /// A combine strategy lacks its configuration.
    #[error("given combine strategy {} requires configuration", .0.as_str())]
    StrategyConfigMissing(CombineStrategy),
    /// A transform failed.
    #[error(transparent)]
    Transform(#[from] transform::Error),
    /// The destination could not be written.
    #[error("cannot patch to object: {0}")]
    ToObject(merge::Error),
    /// A wildcard destination path matched nothing.
    #[error("cannot expand ToFieldPath {0}")]
    ExpandToFieldPath(String),
}

impl Error {
    /// Whether this is a missing source field under `policy.fromFieldPath: Required`.
    pub fn is_required_not_found(&self) -> bool {
        matches!(self, Self::Required(_))
    }
}

/// Applies one patch from `from` to `to`, whatever its direction: field path types copy
/// one field, combine types combine several, `PatchSet` (already inlined) is skipped.
pub fn apply(p: &Patch, from: &Value, to: &mut Value) -> Result<Applied, Error> {
    if p.type_.is_field_path() {
        apply_field_path(p, from, to)
    } else if p.type_.is_combine() {
        apply_combine(p, from, to)
    } else {
        Ok(Applied::Skipped)
    }
}

/// The objects a resource template's patches read and write.
#[derive(Debug)]
pub struct Targets<'a> {
    /// The composite resource as observed.
    pub observed_composite: &'a Value,
    /// The desired composite resource (an overlay; To* patches write here).
    pub desired_composite: &'a mut Value,
    /// The composed resource as observed, if it exists.
    pub observed_composed: Option<&'a Value>,
    /// The desired composed resource (From* patches write here).
    pub desired_composed: &'a mut Value,
    /// The Composition environment.
    pub environment: &'a mut Value,
}

/// Applies one patch of a resource template, choosing source and destination by type.
pub fn apply_composed(p: &Patch, t: &mut Targets<'_>) -> Result<Applied, Error> {
    use PatchType as P;
    match p.type_ {
        P::FromCompositeFieldPath | P::CombineFromComposite => {
            apply(p, t.observed_composite, t.desired_composed)
        }
        P::FromEnvironmentFieldPath | P::CombineFromEnvironment => {
            apply(p, t.environment, t.desired_composed)
        }
        P::ToCompositeFieldPath | P::CombineToComposite => match t.observed_composed {
            Some(observed) => apply(p, observed, t.desired_composite),
            None => Ok(Applied::Skipped),
        },
        P::ToEnvironmentFieldPath | P::CombineToEnvironment => match t.observed_composed {
            Some(observed) => apply(p, observed, t.environment),
            None => Ok(Applied::Skipped),
        },
        P::PatchSet => Ok(Applied::Skipped),
    }
}

/// Applies one `environment.patches` patch: `FromCompositeFieldPath`,
/// `ToEnvironmentFieldPath` and `CombineFromComposite` read the observed composite and
/// write the environment; `ToCompositeFieldPath`, `FromEnvironmentFieldPath` and
/// `CombineToComposite` read the environment and write the desired composite. Other
/// types do nothing.
pub fn apply_environment(
    p: &Patch,
    observed_composite: &Value,
    environment: &mut Value,
    desired_composite: &mut Value,
) -> Result<Applied, Error> {
    use PatchType as P;
    match p.type_ {
        P::FromCompositeFieldPath | P::ToEnvironmentFieldPath | P::CombineFromComposite => {
            apply(p, observed_composite, environment)
        }
        P::ToCompositeFieldPath | P::FromEnvironmentFieldPath | P::CombineToComposite => {
            apply(p, environment, desired_composite)
        }
        P::CombineFromEnvironment | P::CombineToEnvironment | P::PatchSet => Ok(Applied::Skipped),
    }
}

/// Reads a source field; `None` when it is missing and optional.
fn read<'a>(p: &Patch, from: &'a Value, path: &str) -> Result<Option<&'a Value>, Error> {
    let path = FieldPath::parse(path).map_err(Error::FromFieldPath)?;
    match fieldpath::get(from, &path) {
        Ok(v) => Ok(Some(v)),
        Err(e) if e.is_not_found() => match p.from_field_path_policy() {
            FromFieldPathPolicy::Optional => Ok(None),
            FromFieldPathPolicy::Required => Err(Error::Required(e)),
        },
        Err(e) => Err(Error::FromFieldPath(e)),
    }
}

fn apply_field_path(p: &Patch, from: &Value, to: &mut Value) -> Result<Applied, Error> {
    let from_path = p.from_field_path();
    if from_path.is_empty() {
        return Err(Error::MissingField {
            field: "FromFieldPath",
            type_: p.type_,
        });
    }
    let Some(input) = read(p, from, from_path)? else {
        return Ok(Applied::Skipped);
    };
    let out = transform::resolve_all(&p.transforms, input.clone())?;
    write(p, to, p.to_field_path(), out)?;
    Ok(Applied::Patched)
}

fn apply_combine(p: &Patch, from: &Value, to: &mut Value) -> Result<Applied, Error> {
    let combine = p.combine.as_ref().ok_or(Error::MissingField {
        field: "Combine",
        type_: p.type_,
    })?;
    let to_path = p.to_field_path.as_deref().unwrap_or_default();
    if to_path.is_empty() {
        return Err(Error::MissingField {
            field: "ToFieldPath",
            type_: p.type_,
        });
    }
    if combine.variables.is_empty() {
        return Err(Error::NoVariables);
    }
    // Every variable must exist: a format expecting three inputs must not get two.
    let mut inputs = Vec::with_capacity(combine.variables.len());
    for v in &combine.variables {
        match read(p, from, &v.from_field_path)? {
            Some(value) => inputs.push(value),
            None => return Ok(Applied::Skipped),
        }
    }
    let combined = match combine.strategy {
        Some(CombineStrategy::String) => {
            let s = combine
                .string
                .as_ref()
                .ok_or(Error::StrategyConfigMissing(CombineStrategy::String))?;
            Value::String(sprintf(&s.format, &inputs))
        }
        None => return Err(Error::NoStrategy),
    };
    let out = transform::resolve_all(&p.transforms, combined)?;
    write(p, to, to_path, out)?;
    Ok(Applied::Patched)
}

/// Writes the value at the destination path under the patch's `policy.toFieldPath`.
fn write(p: &Patch, to: &mut Value, to_path: &str, value: Value) -> Result<(), Error> {
    let value = gojson::normalize(value);
    let policy = p.to_field_path_policy();
    let path = FieldPath::parse(to_path).map_err(|e| Error::ToObject(e.into()))?;
    if !to_path.contains("[*]") {
        return merge::merge_value(to, &path, value, policy).map_err(Error::ToObject);
    }
    let paths = fieldpath::expand_wildcards(to, &path).map_err(|e| Error::ToObject(e.into()))?;
    if paths.is_empty() {
        return Err(Error::ExpandToFieldPath(to_path.to_owned()));
    }
    for path in paths {
        merge::merge_value(to, &path, value.clone(), policy).map_err(Error::ToObject)?;
    }
    Ok(())
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use serde_json::json;

    use super::*;

    fn patch(v: Value) -> Patch {
        serde_json::from_value(v).unwrap()
    }

    fn xr() -> Value {
        json!({
            "apiVersion": "example.org/v1", "kind": "XBucket",
            "metadata": {"name": "my-xr", "uid": "1234", "labels": {"crossplane.io/claim-name": "claim"}},
            "spec": {"location": "EU", "size": 10, "tags": {"team": "a"}, "names": ["x", "y"]}
        })
    }

    // Crossplane docs, FromCompositeFieldPath: copies an XR field to the composed
    // resource; toFieldPath defaults to fromFieldPath.
    #[test]
    fn from_composite_field_path() {
        let mut cd = json!({"apiVersion": "s3/v1", "kind": "Bucket"});
        let p = patch(
            json!({"type": "FromCompositeFieldPath", "fromFieldPath": "spec.location",
            "toFieldPath": "spec.forProvider.region",
            "transforms": [{"type": "map", "map": {"EU": "eu-north-1", "US": "us-east-2"}}]}),
        );
        assert_eq!(apply(&p, &xr(), &mut cd).unwrap(), Applied::Patched);
        let p = patch(json!({"fromFieldPath": "metadata.labels[crossplane.io/claim-name]"}));
        assert_eq!(apply(&p, &xr(), &mut cd).unwrap(), Applied::Patched);
        assert_eq!(
            cd,
            json!({"apiVersion": "s3/v1", "kind": "Bucket",
                "metadata": {"labels": {"crossplane.io/claim-name": "claim"}},
                "spec": {"forProvider": {"region": "eu-north-1"}}})
        );
    }

    // Docs, ToCompositeFieldPath: copies a composed field back to the XR.
    #[test]
    fn to_composite_field_path() {
        let observed = json!({"status": {"atProvider": {"arn": "arn:aws:s3:::b"}}});
        let mut dxr = json!({"apiVersion": "example.org/v1", "kind": "XBucket"});
        let mut desired = json!({});
        let mut env = json!({});
        let p = patch(
            json!({"type": "ToCompositeFieldPath", "fromFieldPath": "status.atProvider.arn",
            "toFieldPath": "status.arn"}),
        );
        let mut t = Targets {
            observed_composite: &xr(),
            desired_composite: &mut dxr,
            observed_composed: Some(&observed),
            desired_composed: &mut desired,
            environment: &mut env,
        };
        assert_eq!(apply_composed(&p, &mut t).unwrap(), Applied::Patched);
        assert_eq!(dxr["status"]["arn"], json!("arn:aws:s3:::b"));
        assert_eq!(desired, json!({}));
    }

    // Upstream: a patch from a composed resource that does not exist yet is skipped.
    #[test]
    fn to_composite_without_observed_is_skipped() {
        let (mut dxr, mut desired, mut env) = (json!({}), json!({}), json!({}));
        let p = patch(
            json!({"type": "ToCompositeFieldPath", "fromFieldPath": "status.x",
            "policy": {"fromFieldPath": "Required"}}),
        );
        let mut t = Targets {
            observed_composite: &xr(),
            desired_composite: &mut dxr,
            observed_composed: None,
            desired_composed: &mut desired,
            environment: &mut env,
        };
        assert_eq!(apply_composed(&p, &mut t).unwrap(), Applied::Skipped);
    }

    // Docs, CombineFromComposite: several XR fields formatted into one string.
    #[test]
    fn combine_from_composite() {
        let mut cd = json!({});
        let p = patch(
            json!({"type": "CombineFromComposite", "toFieldPath": "metadata.annotations[name]",
            "combine": {"strategy": "string", "variables": [
                {"fromFieldPath": "metadata.uid"}, {"fromFieldPath": "spec.size"}],
                "string": {"fmt": "%s-%d"}}}),
        );
        apply(&p, &xr(), &mut cd).unwrap();
        assert_eq!(cd, json!({"metadata": {"annotations": {"name": "1234-10"}}}));
    }

    // Docs, CombineToComposite: several composed fields into one XR field.
    #[test]
    fn combine_to_composite() {
        let observed = json!({"status": {"atProvider": {"host": "db", "port": 5432}}});
        let (mut dxr, mut desired, mut env) = (json!({}), json!({}), json!({}));
        let p = patch(json!({"type": "CombineToComposite", "toFieldPath": "status.url",
            "combine": {"strategy": "string", "variables": [
                {"fromFieldPath": "status.atProvider.host"}, {"fromFieldPath": "status.atProvider.port"}],
                "string": {"fmt": "postgres://%s:%v"}}}));
        let mut t = Targets {
            observed_composite: &xr(),
            desired_composite: &mut dxr,
            observed_composed: Some(&observed),
            desired_composed: &mut desired,
            environment: &mut env,
        };
        apply_composed(&p, &mut t).unwrap();
        assert_eq!(dxr, json!({"status": {"url": "postgres://db:5432"}}));
    }

    // Docs, environment patches: From/ToEnvironmentFieldPath between environment and
    // composed resources.
    #[test]
    fn environment_field_paths() {
        let observed = json!({"status": {"id": "abc"}});
        let (mut dxr, mut desired) = (json!({}), json!({}));
        let mut env = json!({"region": "eu"});
        let from = patch(
            json!({"type": "FromEnvironmentFieldPath", "fromFieldPath": "region",
            "toFieldPath": "spec.region"}),
        );
        let to = patch(
            json!({"type": "ToEnvironmentFieldPath", "fromFieldPath": "status.id",
            "toFieldPath": "ids.bucket"}),
        );
        let mut t = Targets {
            observed_composite: &xr(),
            desired_composite: &mut dxr,
            observed_composed: Some(&observed),
            desired_composed: &mut desired,
            environment: &mut env,
        };
        apply_composed(&from, &mut t).unwrap();
        apply_composed(&to, &mut t).unwrap();
        assert_eq!(desired, json!({"spec": {"region": "eu"}}));
        assert_eq!(env, json!({"region": "eu", "ids": {"bucket": "abc"}}));
    }

    // Docs, environment patches: CombineFromEnvironment and CombineToEnvironment
    // combine like their composite counterparts.
    #[test]
    fn environment_combines() {
        let observed = json!({"status": {"a": "x", "b": 2}});
        let (mut dxr, mut desired) = (json!({}), json!({}));
        let mut env = json!({"p": "eu", "q": 1});
        let from = patch(json!({"type": "CombineFromEnvironment", "toFieldPath": "spec.id",
            "combine": {"strategy": "string", "variables": [{"fromFieldPath": "p"}, {"fromFieldPath": "q"}],
                "string": {"fmt": "%s-%d"}}}));
        let to = patch(json!({"type": "CombineToEnvironment", "toFieldPath": "ab",
            "combine": {"strategy": "string", "variables": [{"fromFieldPath": "status.a"}, {"fromFieldPath": "status.b"}],
                "string": {"fmt": "%s%v"}}}));
        let mut t = Targets {
            observed_composite: &xr(),
            desired_composite: &mut dxr,
            observed_composed: Some(&observed),
            desired_composed: &mut desired,
            environment: &mut env,
        };
        apply_composed(&from, &mut t).unwrap();
        apply_composed(&to, &mut t).unwrap();
        assert_eq!(desired, json!({"spec": {"id": "eu-1"}}));
        assert_eq!(env["ab"], json!("x2"));
        assert_eq!(dxr, json!({}));
    }

    // Docs, patch policy fromFieldPath: Optional (default) skips the patch when the
    // source is missing; Required makes it an error.
    #[test]
    fn missing_source_under_each_policy() {
        let mut cd = json!({"spec": {"keep": 1}});
        for policy in [json!(null), json!({}), json!({"fromFieldPath": "Optional"})] {
            let mut p = json!({"fromFieldPath": "spec.missing", "toFieldPath": "spec.x"});
            if !policy.is_null() {
                p["policy"] = policy;
            }
            assert_eq!(apply(&patch(p), &xr(), &mut cd).unwrap(), Applied::Skipped);
        }
        let p = patch(json!({"fromFieldPath": "spec.missing", "policy": {"fromFieldPath": "Required"}}));
        let err = apply(&p, &xr(), &mut cd).unwrap_err();
        assert!(err.is_required_not_found());
        assert_eq!(err.to_string(), "spec.missing: no such field");
        assert_eq!(cd, json!({"spec": {"keep": 1}}));
    }

    // Upstream: a combine patch is skipped when any variable is missing (Optional) and
    // fails (Required).
    #[test]
    fn combine_missing_variable_under_each_policy() {
        let mut cd = json!({});
        let mut v = json!({"type": "CombineFromComposite", "toFieldPath": "x",
            "combine": {"strategy": "string", "variables": [
                {"fromFieldPath": "metadata.uid"}, {"fromFieldPath": "spec.nope"}],
                "string": {"fmt": "%s-%s"}}});
        assert_eq!(
            apply(&patch(v.clone()), &xr(), &mut cd).unwrap(),
            Applied::Skipped
        );
        v["policy"] = json!({"fromFieldPath": "Required"});
        assert!(
            apply(&patch(v), &xr(), &mut cd)
                .unwrap_err()
                .is_required_not_found()
        );
        assert_eq!(cd, json!({}));
    }

    // Upstream: a wildcard toFieldPath patches every matching element.
    #[test]
    fn wildcard_destination() {
        let mut cd = json!({"spec": {"rules": [{"port": 1, "size": 0}, {"port": 2, "size": 0}]}});
        let p = patch(json!({"fromFieldPath": "spec.size", "toFieldPath": "spec.rules[*].size"}));
        apply(&p, &xr(), &mut cd).unwrap();
        assert_eq!(
            cd,
            json!({"spec": {"rules": [{"port": 1, "size": 10}, {"port": 2, "size": 10}]}})
        );
        // As upstream, the expansion only finds fields that exist.
        for to in ["spec.none[*].size", "spec.rules[*].missing"] {
            let p = patch(json!({"fromFieldPath": "spec.size", "toFieldPath": to}));
            assert_eq!(
                apply(&p, &xr(), &mut cd).unwrap_err().to_string(),
                format!("cannot expand ToFieldPath {to}")
            );
        }
    }

    // Docs, toFieldPath policy: MergeObjects keeps existing keys of the destination.
    #[test]
    fn to_field_path_policy() {
        let mut cd = json!({"spec": {"tags": {"team": "b", "env": "prod"}}});
        let p = patch(json!({"fromFieldPath": "spec.tags", "policy": {"toFieldPath": "MergeObjects"}}));
        apply(&p, &xr(), &mut cd).unwrap();
        assert_eq!(cd, json!({"spec": {"tags": {"team": "b", "env": "prod"}}}));
        let p = patch(json!({"fromFieldPath": "spec.tags", "policy": {"toFieldPath": "ForceMergeObjects"}}));
        apply(&p, &xr(), &mut cd).unwrap();
        assert_eq!(cd, json!({"spec": {"tags": {"team": "a", "env": "prod"}}}));
        let p = patch(json!({"fromFieldPath": "spec.names", "toFieldPath": "spec.list",
            "policy": {"toFieldPath": "ForceMergeObjectsAppendArrays"}}));
        cd["spec"]["list"] = json!(["w", "x"]);
        apply(&p, &xr(), &mut cd).unwrap();
        assert_eq!(cd["spec"]["list"], json!(["w", "x", "y"]));
    }

    #[test]
    fn errors_are_reported() {
        let mut cd = json!({"spec": "not an object"});
        let p = patch(json!({"fromFieldPath": "spec.location", "toFieldPath": "spec.region"}));
        assert_eq!(
            apply(&p, &xr(), &mut cd).unwrap_err().to_string(),
            "cannot patch to object: spec is not an object"
        );
        let p = patch(json!({"fromFieldPath": "spec..location"}));
        assert!(matches!(apply(&p, &xr(), &mut cd), Err(Error::FromFieldPath(_))));
        let p = patch(json!({"fromFieldPath": "spec.location",
            "transforms": [{"type": "map", "map": {"US": "us-east-2"}}]}));
        assert_eq!(
            apply(&p, &xr(), &mut json!({})).unwrap_err().to_string(),
            "transform at index 0 returned error: map transform could not resolve: key EU is not found in map"
        );
    }

    // Upstream round-trips patched values through JSON: integral floats become ints.
    #[test]
    fn patched_values_are_normalized() {
        let mut cd = json!({});
        let p = patch(json!({"fromFieldPath": "spec.size",
            "transforms": [{"type": "convert", "convert": {"toType": "float64"}}]}));
        apply(&p, &xr(), &mut cd).unwrap();
        assert_eq!(cd, json!({"spec": {"size": 10}}));
    }
}
