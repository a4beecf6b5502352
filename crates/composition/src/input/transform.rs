//! Transform types (upstream `resources_transforms.go`).

use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::some_value;

/// The kind of a transform.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TransformType {
    /// Look the input up in a map.
    Map,
    /// Match the input against patterns.
    Match,
    /// Arithmetic.
    Math,
    /// String operations.
    String,
    /// Type conversion.
    Convert,
}

impl TransformType {
    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Map => "map",
            Self::Match => "match",
            Self::Math => "math",
            Self::String => "string",
            Self::Convert => "convert",
        }
    }
}

impl fmt::Display for TransformType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One transform: a type and the configuration of that type.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Transform {
    /// The transform type; its configuration field must be set.
    #[serde(rename = "type")]
    pub type_: TransformType,
    /// Configuration of `math`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub math: Option<MathTransform>,
    /// Configuration of `map`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub map: Option<MapTransform>,
    /// Configuration of `match`.
    #[serde(default, rename = "match", skip_serializing_if = "Option::is_none")]
    pub match_: Option<MatchTransform>,
    /// Configuration of `string`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub string: Option<StringTransform>,
    /// Configuration of `convert`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub convert: Option<ConvertTransform>,
}

/// The math operations.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum MathTransformType {
    /// Multiply by `multiply`.
    Multiply,
    /// Raise to at least `clampMin`.
    ClampMin,
    /// Lower to at most `clampMax`.
    ClampMax,
}

impl MathTransformType {
    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Multiply => "Multiply",
            Self::ClampMin => "ClampMin",
            Self::ClampMax => "ClampMax",
        }
    }
}

/// Configuration of a `math` transform.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MathTransform {
    /// The operation. Required, as in upstream function-patch-and-transform.
    #[serde(default, rename = "type", skip_serializing_if = "Option::is_none")]
    pub type_: Option<MathTransformType>,
    /// The factor of `Multiply`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub multiply: Option<i64>,
    /// The lower bound of `ClampMin`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clamp_min: Option<i64>,
    /// The upper bound of `ClampMax`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clamp_max: Option<i64>,
}

/// Configuration of a `map` transform: string keys to arbitrary JSON values.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct MapTransform {
    /// The pairs.
    pub pairs: BTreeMap<String, Value>,
}

/// What a `match` transform returns when no pattern matches.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum MatchFallbackTo {
    /// `fallbackValue` (the default).
    #[default]
    Value,
    /// The input itself.
    Input,
}

/// Configuration of a `match` transform.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MatchTransform {
    /// Patterns tested in order; the first match's result is the output.
    #[serde(default)]
    pub patterns: Vec<MatchTransformPattern>,
    /// Output when no pattern matches (and `fallbackTo` is `Value`); `null` if unset.
    #[serde(
        default,
        deserialize_with = "some_value",
        skip_serializing_if = "Option::is_none"
    )]
    pub fallback_value: Option<Value>,
    /// Fallback behaviour; `Value` when unset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fallback_to: Option<MatchFallbackTo>,
}

/// How a match pattern is compared with the input.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum MatchTransformPatternType {
    /// Exact, case-sensitive string equality (the default).
    #[default]
    Literal,
    /// An unanchored regular expression search.
    Regexp,
}

impl MatchTransformPatternType {
    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Literal => "literal",
            Self::Regexp => "regexp",
        }
    }
}

/// One pattern of a `match` transform.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MatchTransformPattern {
    /// The pattern type; `literal` when unset.
    #[serde(default, rename = "type")]
    pub type_: MatchTransformPatternType,
    /// The literal; required by `literal`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub literal: Option<String>,
    /// The regular expression; required by `regexp`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub regexp: Option<String>,
    /// The output when this pattern matches; `null` if unset.
    #[serde(
        default,
        deserialize_with = "some_value",
        skip_serializing_if = "Option::is_none"
    )]
    pub result: Option<Value>,
}

/// The string operations.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum StringTransformType {
    /// Go `fmt.Sprintf(fmt, input)`.
    Format,
    /// A conversion named by `convert`.
    Convert,
    /// Remove the prefix `trim`.
    TrimPrefix,
    /// Remove the suffix `trim`.
    TrimSuffix,
    /// Extract a regexp match or group.
    Regexp,
    /// Join an array with a separator.
    Join,
    /// Replace all occurrences of a string.
    Replace,
}

impl StringTransformType {
    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Format => "Format",
            Self::Convert => "Convert",
            Self::TrimPrefix => "TrimPrefix",
            Self::TrimSuffix => "TrimSuffix",
            Self::Regexp => "Regexp",
            Self::Join => "Join",
            Self::Replace => "Replace",
        }
    }
}

/// The string conversions of a `Convert` string transform.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum StringConversionType {
    /// Upper case.
    ToUpper,
    /// Lower case.
    ToLower,
    /// The JSON encoding of the input.
    #[serde(rename = "ToJson")]
    ToJson,
    /// Standard base64 with padding.
    ToBase64,
    /// Decode standard base64.
    FromBase64,
    /// Hex SHA-1 of the string, or of the JSON of a non-string.
    ToSha1,
    /// Hex SHA-256, as `ToSha1`.
    ToSha256,
    /// Hex SHA-512, as `ToSha1`.
    ToSha512,
    /// Decimal Adler-32, as `ToSha1`.
    ToAdler32,
}

impl StringConversionType {
    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::ToUpper => "ToUpper",
            Self::ToLower => "ToLower",
            Self::ToJson => "ToJson",
            Self::ToBase64 => "ToBase64",
            Self::FromBase64 => "FromBase64",
            Self::ToSha1 => "ToSha1",
            Self::ToSha256 => "ToSha256",
            Self::ToSha512 => "ToSha512",
            Self::ToAdler32 => "ToAdler32",
        }
    }
}

/// Configuration of a `string` transform.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StringTransform {
    /// The operation. Required, as in upstream function-patch-and-transform.
    #[serde(default, rename = "type", skip_serializing_if = "Option::is_none")]
    pub type_: Option<StringTransformType>,
    /// The Go format string of `Format`.
    #[serde(default, rename = "fmt", skip_serializing_if = "Option::is_none")]
    pub format: Option<String>,
    /// The conversion of `Convert`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub convert: Option<StringConversionType>,
    /// The prefix or suffix of `TrimPrefix` and `TrimSuffix`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trim: Option<String>,
    /// Configuration of `Regexp`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub regexp: Option<StringTransformRegexp>,
    /// Configuration of `Join`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub join: Option<StringTransformJoin>,
    /// Configuration of `Replace`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replace: Option<StringTransformReplace>,
}

/// Configuration of a `Regexp` string transform.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StringTransformRegexp {
    /// The regular expression (RE2 syntax upstream; the `regex` crate's here).
    #[serde(default, rename = "match")]
    pub match_: String,
    /// The capture group to return; 0 (the whole match) when unset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group: Option<i64>,
}

/// Configuration of a `Join` string transform.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StringTransformJoin {
    /// The separator.
    #[serde(default)]
    pub separator: String,
}

/// Configuration of a `Replace` string transform.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StringTransformReplace {
    /// The string to search for; must not be empty.
    #[serde(default)]
    pub search: String,
    /// Replaces every occurrence of `search`.
    #[serde(default)]
    pub replace: String,
}

/// The value types of the `convert` transform.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TransformIoType {
    /// A string.
    String,
    /// A boolean.
    Bool,
    /// An integer (treated as `int64`).
    Int,
    /// A 64-bit integer.
    Int64,
    /// A 64-bit float.
    Float64,
    /// A JSON object.
    Object,
    /// A JSON array.
    Array,
}

impl TransformIoType {
    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::String => "string",
            Self::Bool => "bool",
            Self::Int => "int",
            Self::Int64 => "int64",
            Self::Float64 => "float64",
            Self::Object => "object",
            Self::Array => "array",
        }
    }
}

impl fmt::Display for TransformIoType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// How the `convert` transform reads its input.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ConvertTransformFormat {
    /// Plain conversion (the default).
    #[default]
    None,
    /// A Kubernetes quantity such as `1Gi` or `500m`; string → float64 only.
    Quantity,
    /// JSON text; string → object or array only.
    Json,
}

impl ConvertTransformFormat {
    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::None => "none",
            Self::Quantity => "quantity",
            Self::Json => "json",
        }
    }
}

impl fmt::Display for ConvertTransformFormat {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Configuration of a `convert` transform.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ConvertTransform {
    /// The output type.
    pub to_type: TransformIoType,
    /// The input format; `none` when unset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub format: Option<ConvertTransformFormat>,
}
