//! Validation of the function input (upstream `validate.go`), run before anything is
//! composed. The function input is opaque to the API server, so nothing else checks it.
//!
//! Errors name the offending field like Kubernetes field errors do, for example
//! `resources[0].patches[1].fromFieldPath: Required value: fromFieldPath must be set for
//! patch type FromCompositeFieldPath`. Unknown enumeration values never get here: they
//! fail deserialisation.

use std::fmt;

use regex::Regex;

use crate::input::{
    Combine, ComposedTemplate, ConnectionDetail, ConnectionDetailType, Environment, MapTransform,
    MatchTransform, MatchTransformPattern, MatchTransformPatternType, MathTransform, MathTransformType,
    Patch, PatchSet, PatchType, ReadinessCheck, ReadinessCheckType, Resources, StringTransform,
    StringTransformType, Transform, TransformType,
};

/// An invalid field of the function input.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ValidationError {
    /// The field, for example `resources[0].name`.
    pub field: String,
    /// `Some(value)` for an invalid value, `None` for a missing required one.
    pub invalid_value: Option<String>,
    /// What is wrong.
    pub detail: String,
}

impl ValidationError {
    /// A required field is missing.
    pub fn required(field: &str, detail: impl Into<String>) -> Self {
        Self {
            field: field.to_owned(),
            invalid_value: None,
            detail: detail.into(),
        }
    }

    /// A field has an invalid value.
    pub fn invalid(field: &str, value: &str, detail: impl Into<String>) -> Self {
        Self {
            field: field.to_owned(),
            invalid_value: Some(value.to_owned()),
            detail: detail.into(),
        }
    }

    /// Puts the field under `prefix`, e.g. `name` under `resources[0]`.
    fn under(mut self, prefix: &str) -> Self {
        self.field = if self.field.starts_with('[') || self.field.is_empty() {
            format!("{prefix}{}", self.field)
        } else {
            format!("{prefix}.{}", self.field)
        };
        self
    }
}

impl fmt::Display for ValidationError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.invalid_value {
            None => write!(f, "{}: Required value: {}", self.field, self.detail),
            Some(v) => write!(f, "{}: Invalid value: {v:?}: {}", self.field, self.detail),
        }
    }
}

impl std::error::Error for ValidationError {}

type Result = std::result::Result<(), ValidationError>;

/// Validates the whole input.
pub fn resources(r: &Resources) -> Result {
    for (i, ps) in r.patch_sets.iter().enumerate() {
        patch_set(ps).map_err(|e| e.under(&format!("patchSets[{i}]")))?;
    }
    let env_patches = r.environment.as_ref().map_or(0, |e| e.patches.len());
    if r.resources.is_empty() && env_patches == 0 {
        return Err(ValidationError::required(
            "resources",
            "resources or environment patches are required",
        ));
    }
    for (i, t) in r.resources.iter().enumerate() {
        composed_template(t).map_err(|e| e.under(&format!("resources[{i}]")))?;
    }
    if let Some(env) = &r.environment {
        environment(env).map_err(|e| e.under("environment"))?;
    }
    Ok(())
}

/// Validates a resource template.
pub fn composed_template(t: &ComposedTemplate) -> Result {
    if t.name.is_empty() {
        return Err(ValidationError::required("name", "name is required"));
    }
    for (i, p) in t.patches.iter().enumerate() {
        patch(p).map_err(|e| e.under(&format!("patches[{i}]")))?;
    }
    for (i, cd) in t.connection_details.iter().enumerate() {
        connection_detail(cd).map_err(|e| e.under(&format!("connectionDetails[{i}]")))?;
    }
    for (i, rc) in t.readiness_checks.iter().enumerate() {
        readiness_check(rc).map_err(|e| e.under(&format!("readinessChecks[{i}]")))?;
    }
    Ok(())
}

/// Validates a patch set; its patches may not be of type `PatchSet`.
pub fn patch_set(ps: &PatchSet) -> Result {
    if ps.name.is_empty() {
        return Err(ValidationError::required("name", "name is required"));
    }
    for (i, p) in ps.patches.iter().enumerate() {
        if p.type_ == PatchType::PatchSet {
            return Err(ValidationError::invalid(
                &format!("patches[{i}].type"),
                p.type_.as_str(),
                "a patch in a PatchSet cannot be of type PatchSet",
            ));
        }
        patch(p).map_err(|e| e.under(&format!("patches[{i}]")))?;
    }
    Ok(())
}

/// Validates the environment patches, which are between the composite and the
/// environment only.
pub fn environment(e: &Environment) -> Result {
    for (i, p) in e.patches.iter().enumerate() {
        match p.type_ {
            PatchType::FromCompositeFieldPath
            | PatchType::ToCompositeFieldPath
            | PatchType::CombineFromComposite
            | PatchType::CombineToComposite
            | PatchType::FromEnvironmentFieldPath
            | PatchType::ToEnvironmentFieldPath => {}
            other => {
                return Err(ValidationError::invalid(
                    &format!("patches[{i}].type"),
                    other.as_str(),
                    "invalid environment patch type",
                ));
            }
        }
        patch(p).map_err(|e| e.under(&format!("patches[{i}]")))?;
    }
    Ok(())
}

/// Validates one patch.
pub fn patch(p: &Patch) -> Result {
    let t = p.type_;
    if t.is_field_path() && p.from_field_path().is_empty() {
        return Err(ValidationError::required(
            "fromFieldPath",
            format!("fromFieldPath must be set for patch type {t}"),
        ));
    }
    if t == PatchType::PatchSet && p.patch_set_name.as_deref().unwrap_or_default().is_empty() {
        return Err(ValidationError::required(
            "patchSetName",
            format!("patchSetName must be set for patch type {t}"),
        ));
    }
    if t.is_combine() {
        let Some(c) = &p.combine else {
            return Err(ValidationError::required(
                "combine",
                format!("combine must be set for patch type {t}"),
            ));
        };
        if p.to_field_path.as_deref().unwrap_or_default().is_empty() {
            return Err(ValidationError::required(
                "toFieldPath",
                format!("toFieldPath must be set for patch type {t}"),
            ));
        }
        return combine(c).map_err(|e| e.under("combine"));
    }
    for (i, tr) in p.transforms.iter().enumerate() {
        transform(tr).map_err(|e| e.under(&format!("transforms[{i}]")))?;
    }
    Ok(())
}

/// Validates a combine configuration.
pub fn combine(c: &Combine) -> Result {
    match c.strategy {
        None => {
            return Err(ValidationError::required(
                "strategy",
                "a combine strategy must be provided",
            ));
        }
        Some(s) if c.string.is_none() => {
            return Err(ValidationError::required(
                "string",
                format!("string must be set for combine strategy {}", s.as_str()),
            ));
        }
        Some(_) => {}
    }
    if c.variables.is_empty() {
        return Err(ValidationError::required(
            "variables",
            "at least one variable must be provided",
        ));
    }
    for (i, v) in c.variables.iter().enumerate() {
        if v.from_field_path.is_empty() {
            return Err(ValidationError::required(
                &format!("variables[{i}].fromFieldPath"),
                "fromFieldPath must be set for each combine variable",
            ));
        }
    }
    Ok(())
}

/// Validates a transform.
pub fn transform(t: &Transform) -> Result {
    let required = |field: &str| {
        ValidationError::required(
            field,
            format!("given transform type {} requires configuration", t.type_),
        )
    };
    match t.type_ {
        TransformType::Math => {
            math_transform(t.math.as_ref().ok_or_else(|| required("math"))?).map_err(|e| e.under("math"))
        }
        TransformType::Map => {
            map_transform(t.map.as_ref().ok_or_else(|| required("map"))?).map_err(|e| e.under("map"))
        }
        TransformType::Match => {
            match_transform(t.match_.as_ref().ok_or_else(|| required("match"))?).map_err(|e| e.under("match"))
        }
        TransformType::String => string_transform(t.string.as_ref().ok_or_else(|| required("string"))?)
            .map_err(|e| e.under("string")),
        TransformType::Convert => t.convert.map(|_| ()).ok_or_else(|| required("convert")),
    }
}

/// Validates a `math` transform.
pub fn math_transform(m: &MathTransform) -> Result {
    match m.type_ {
        None => Err(ValidationError::required(
            "type",
            "math transform type is required",
        )),
        Some(MathTransformType::Multiply) if m.multiply.is_none() => Err(ValidationError::required(
            "multiply",
            "must specify a value if a multiply math transform is specified",
        )),
        Some(MathTransformType::ClampMin) if m.clamp_min.is_none() => Err(ValidationError::required(
            "clampMin",
            "must specify a value if a clamp min math transform is specified",
        )),
        Some(MathTransformType::ClampMax) if m.clamp_max.is_none() => Err(ValidationError::required(
            "clampMax",
            "must specify a value if a clamp max math transform is specified",
        )),
        Some(_) => Ok(()),
    }
}

/// Validates a `map` transform.
pub fn map_transform(m: &MapTransform) -> Result {
    if m.pairs.is_empty() {
        return Err(ValidationError::required(
            "pairs",
            "at least one pair must be specified if a map transform is specified",
        ));
    }
    Ok(())
}

/// Validates a `match` transform.
pub fn match_transform(m: &MatchTransform) -> Result {
    if m.patterns.is_empty() {
        return Err(ValidationError::required(
            "patterns",
            "at least one pattern must be specified if a match transform is specified",
        ));
    }
    for (i, p) in m.patterns.iter().enumerate() {
        match_pattern(p).map_err(|e| e.under(&format!("patterns[{i}]")))?;
    }
    Ok(())
}

/// Validates one `match` pattern.
pub fn match_pattern(p: &MatchTransformPattern) -> Result {
    match p.type_ {
        MatchTransformPatternType::Literal if p.literal.is_none() => Err(ValidationError::required(
            "literal",
            "literal pattern type requires a literal",
        )),
        MatchTransformPatternType::Regexp => {
            let re = p.regexp.as_deref().ok_or_else(|| {
                ValidationError::required("regexp", "regexp pattern type requires a regexp")
            })?;
            Regex::new(re)
                .map(|_| ())
                .map_err(|_| ValidationError::invalid("regexp", re, "invalid regexp"))
        }
        MatchTransformPatternType::Literal => Ok(()),
    }
}

/// Validates a `string` transform.
pub fn string_transform(s: &StringTransform) -> Result {
    let Some(t) = s.type_ else {
        return Err(ValidationError::required(
            "type",
            "string transform type is required",
        ));
    };
    match t {
        StringTransformType::Format if s.format.is_none() => Err(ValidationError::required(
            "fmt",
            "format transform requires a format",
        )),
        StringTransformType::Convert if s.convert.is_none() => Err(ValidationError::required(
            "convert",
            "convert transform requires a conversion type",
        )),
        StringTransformType::TrimPrefix | StringTransformType::TrimSuffix if s.trim.is_none() => Err(
            ValidationError::required("trim", "trim transform requires a trim value"),
        ),
        StringTransformType::Regexp => {
            let r = s
                .regexp
                .as_ref()
                .ok_or_else(|| ValidationError::required("regexp", "regexp transform requires a regexp"))?;
            if r.match_.is_empty() {
                return Err(ValidationError::required(
                    "regexp.match",
                    "regexp transform requires a match",
                ));
            }
            Regex::new(&r.match_)
                .map(|_| ())
                .map_err(|_| ValidationError::invalid("regexp.match", &r.match_, "invalid regexp"))
        }
        StringTransformType::Join if s.join.is_none() => Err(ValidationError::required(
            "join",
            "join transform requires a join",
        )),
        StringTransformType::Replace => match &s.replace {
            None => Err(ValidationError::required(
                "replace",
                "replace transform requires a replace",
            )),
            Some(r) if r.search.is_empty() => Err(ValidationError::required(
                "replace.search",
                "replace transform requires a search",
            )),
            Some(_) => Ok(()),
        },
        _ => Ok(()),
    }
}

/// Validates a connection detail.
pub fn connection_detail(cd: &ConnectionDetail) -> Result {
    let Some(t) = cd.type_ else {
        return Err(ValidationError::required(
            "type",
            "connection detail type is required",
        ));
    };
    if cd.name.is_empty() {
        return Err(ValidationError::required("name", "name is required"));
    }
    match t {
        ConnectionDetailType::FromValue if cd.value.is_none() => Err(ValidationError::required(
            "value",
            "value connection detail requires a value",
        )),
        ConnectionDetailType::FromConnectionSecretKey if cd.from_connection_secret_key.is_none() => {
            Err(ValidationError::required(
                "fromConnectionSecretKey",
                "from connection secret key connection detail requires a key",
            ))
        }
        ConnectionDetailType::FromFieldPath if cd.from_field_path.is_none() => {
            Err(ValidationError::required(
                "fromFieldPath",
                "from field path connection detail requires a field path",
            ))
        }
        _ => Ok(()),
    }
}

/// Validates a readiness check.
pub fn readiness_check(r: &ReadinessCheck) -> Result {
    match r.type_ {
        ReadinessCheckType::None => return Ok(()),
        ReadinessCheckType::MatchString if r.match_string.is_none() => {
            return Err(ValidationError::required(
                "matchString",
                "cannot be nil for type MatchString",
            ));
        }
        ReadinessCheckType::MatchInteger if r.match_integer.is_none() => {
            return Err(ValidationError::required(
                "matchInteger",
                "cannot be nil for type MatchInteger",
            ));
        }
        ReadinessCheckType::MatchCondition => {
            if let Some(m) = &r.match_condition {
                if m.type_.is_empty() {
                    return Err(ValidationError::required(
                        "matchCondition.type",
                        "cannot be empty for type MatchCondition",
                    ));
                }
                if m.status.is_empty() {
                    return Err(ValidationError::required(
                        "matchCondition.status",
                        "cannot be empty for type MatchCondition",
                    ));
                }
            }
            return Ok(());
        }
        _ => {}
    }
    if r.field_path.is_none() {
        return Err(ValidationError::required("fieldPath", "cannot be empty"));
    }
    Ok(())
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use serde_json::json;

    use super::*;

    fn input(v: serde_json::Value) -> Resources {
        serde_json::from_value(v).unwrap()
    }

    // Upstream validate.go: required fields are named with their path.
    #[test]
    fn names_the_invalid_field() {
        let cases = [
            (
                json!({"resources": []}),
                "resources: Required value: resources or environment patches are required",
            ),
            (
                json!({"resources": [{"name": ""}]}),
                "resources[0].name: Required value: name is required",
            ),
            (
                json!({"resources": [{"name": "a", "patches": [{"type": "FromCompositeFieldPath"}]}]}),
                "resources[0].patches[0].fromFieldPath: Required value: fromFieldPath must be set for patch type FromCompositeFieldPath",
            ),
            (
                json!({"resources": [{"name": "a", "patches": [{"type": "CombineFromComposite", "toFieldPath": "x",
                    "combine": {"strategy": "string", "variables": []}}]}]}),
                "resources[0].patches[0].combine.string: Required value: string must be set for combine strategy string",
            ),
            (
                json!({"resources": [{"name": "a", "patches": [{"fromFieldPath": "a",
                    "transforms": [{"type": "map", "map": {}}]}]}]}),
                "resources[0].patches[0].transforms[0].map.pairs: Required value: at least one pair must be specified if a map transform is specified",
            ),
            (
                json!({"resources": [{"name": "a", "patches": [{"fromFieldPath": "a",
                    "transforms": [{"type": "string", "string": {"type": "Regexp", "regexp": {"match": "("}}}]}]}]}),
                "resources[0].patches[0].transforms[0].string.regexp.match: Invalid value: \"(\": invalid regexp",
            ),
            (
                json!({"patchSets": [{"name": "p", "patches": [{"type": "PatchSet", "patchSetName": "q"}]}], "resources": [{"name": "a"}]}),
                "patchSets[0].patches[0].type: Invalid value: \"PatchSet\": a patch in a PatchSet cannot be of type PatchSet",
            ),
            (
                json!({"environment": {"patches": [{"type": "CombineFromEnvironment"}]}}),
                "environment.patches[0].type: Invalid value: \"CombineFromEnvironment\": invalid environment patch type",
            ),
            (
                json!({"resources": [{"name": "a", "readinessChecks": [{"type": "NonEmpty"}]}]}),
                "resources[0].readinessChecks[0].fieldPath: Required value: cannot be empty",
            ),
            (
                json!({"resources": [{"name": "a", "connectionDetails": [{"name": "x", "type": "FromFieldPath"}]}]}),
                "resources[0].connectionDetails[0].fromFieldPath: Required value: from field path connection detail requires a field path",
            ),
        ];
        for (v, want) in cases {
            assert_eq!(resources(&input(v)).unwrap_err().to_string(), want);
        }
    }

    #[test]
    fn accepts_valid_input() {
        let v = json!({
            "patchSets": [{"name": "common", "patches": [{"fromFieldPath": "metadata.labels"}]}],
            "environment": {"patches": [{"type": "ToEnvironmentFieldPath", "fromFieldPath": "spec.x"}]},
            "resources": [{
                "name": "bucket",
                "base": {"apiVersion": "v1", "kind": "ConfigMap"},
                "patches": [
                    {"type": "PatchSet", "patchSetName": "common"},
                    {"fromFieldPath": "spec.region", "toFieldPath": "data.region",
                     "transforms": [{"type": "match", "match": {"patterns": [{"type": "regexp", "regexp": "^eu", "result": "eu"}]}}]}
                ],
                "readinessChecks": [{"type": "MatchCondition", "matchCondition": {"type": "Ready", "status": "True"}}]
            }]
        });
        resources(&input(v)).unwrap();
    }
}
