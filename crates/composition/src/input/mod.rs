//! The function input: `pt.fn.crossplane.io/v1beta1`, kind `Resources`.
//!
//! These types follow the wire format of upstream function-patch-and-transform's
//! `input/v1beta1` package field for field (JSON names, optional fields, defaults), so a
//! Composition written for the Go function deserialises unchanged. Like the Go decoder,
//! unknown fields are ignored (for example `condition`, `writeConnectionSecretToRef`).
//!
//! Enumerations (patch, transform, readiness check types and so on) are Rust enums, so an
//! unknown value is rejected when the input is deserialised instead of by validation.
//! Everything else that upstream validates (required fields, regexps, ...) is checked by
//! [`crate::validate`].

mod connection;
mod patch;
mod readiness;
mod transform;

pub use connection::{ConnectionDetail, ConnectionDetailType};
pub use patch::{
    Combine, CombineStrategy, CombineVariable, FromFieldPathPolicy, Patch, PatchPolicy, PatchType,
    StringCombine, ToFieldPathPolicy,
};
pub use readiness::{MatchConditionReadinessCheck, ReadinessCheck, ReadinessCheckType};
pub use transform::{
    ConvertTransform, ConvertTransformFormat, MapTransform, MatchFallbackTo, MatchTransform,
    MatchTransformPattern, MatchTransformPatternType, MathTransform, MathTransformType, StringConversionType,
    StringTransform, StringTransformJoin, StringTransformRegexp, StringTransformReplace, StringTransformType,
    Transform, TransformIoType, TransformType,
};

use serde::{Deserialize, Deserializer, Serialize};
use serde_json::Value;

/// The API version of the function input.
pub const API_VERSION: &str = "pt.fn.crossplane.io/v1beta1";
/// The kind of the function input.
pub const KIND: &str = "Resources";

/// Patch & Transform resource templates: the input of a pipeline step whose function is
/// `function-patch-and-transform`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Resources {
    /// `pt.fn.crossplane.io/v1beta1`. Not checked, as upstream does not check it either.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_version: Option<String>,
    /// `Resources`. Not checked, as upstream does not check it either.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    /// Object metadata; carried but unused.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Value>,
    /// Named sets of patches that any resource template may include with a patch of
    /// type `PatchSet`. A patch set may not include another patch set.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub patch_sets: Vec<PatchSet>,
    /// Patches between the composite resource and the Composition environment.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub environment: Option<Environment>,
    /// The resource templates.
    #[serde(default)]
    pub resources: Vec<ComposedTemplate>,
}

impl Resources {
    /// Deserialises a pipeline step's `input` object.
    pub fn from_value(input: &Value) -> Result<Self, serde_json::Error> {
        Self::deserialize(input)
    }
}

/// A named set of patches that can be reused by all resource templates.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PatchSet {
    /// Name of this patch set.
    #[serde(default)]
    pub name: String,
    /// The patches in this set. None of them may be of type `PatchSet`.
    #[serde(default)]
    pub patches: Vec<Patch>,
}

/// The Composition environment patches (an alpha feature upstream).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Environment {
    /// Patches from the observed composite resource to the environment, or from the
    /// environment to the desired composite resource. They run before any resource
    /// template is rendered.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub patches: Vec<Patch>,
}

/// A template for one composed resource.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ComposedTemplate {
    /// Uniquely identifies this entry within the `resources` array; the composed
    /// resource's name in the function's desired state.
    #[serde(default)]
    pub name: String,
    /// The base of the composed resource, a Kubernetes object. When omitted, a previous
    /// pipeline step must have produced a desired resource of the same name, and the
    /// patches apply to that.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub base: Option<Value>,
    /// Patches to and from the composed resource.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub patches: Vec<Patch>,
    /// Connection details that this composed resource contributes to the composite's.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub connection_details: Vec<ConnectionDetail>,
    /// Checks that must all pass for the resource to be ready. None means the
    /// composed resource's `Ready` condition must be `True`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub readiness_checks: Vec<ReadinessCheck>,
}

/// Deserialises a present field, including an explicit `null`, as `Some`: upstream's
/// `extv1.JSON` fields tell "absent" from "null".
pub(crate) fn some_value<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Value>, D::Error> {
    Value::deserialize(d).map(Some)
}
