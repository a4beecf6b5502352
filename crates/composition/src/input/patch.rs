//! Patch types: `resources[].patches[]`, `patchSets[].patches[]` and
//! `environment.patches[]` (upstream `resources_patches.go`).

use std::fmt;

use serde::{Deserialize, Serialize};

use super::Transform;

/// How a patch behaves: where it reads and where it writes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum PatchType {
    /// Composite field → composed field (the default).
    #[default]
    FromCompositeFieldPath,
    /// Includes the patches of a named patch set.
    PatchSet,
    /// Observed composed field → composite field.
    ToCompositeFieldPath,
    /// Several composite fields → one composed field.
    CombineFromComposite,
    /// Several observed composed fields → one composite field.
    CombineToComposite,
    /// Environment field → composed field (alpha upstream).
    FromEnvironmentFieldPath,
    /// Observed composed field → environment field (alpha upstream).
    ToEnvironmentFieldPath,
    /// Several environment fields → one composed field (alpha upstream).
    CombineFromEnvironment,
    /// Several observed composed fields → one environment field (alpha upstream).
    CombineToEnvironment,
}

impl PatchType {
    /// The wire name, for example `FromCompositeFieldPath`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::FromCompositeFieldPath => "FromCompositeFieldPath",
            Self::PatchSet => "PatchSet",
            Self::ToCompositeFieldPath => "ToCompositeFieldPath",
            Self::CombineFromComposite => "CombineFromComposite",
            Self::CombineToComposite => "CombineToComposite",
            Self::FromEnvironmentFieldPath => "FromEnvironmentFieldPath",
            Self::ToEnvironmentFieldPath => "ToEnvironmentFieldPath",
            Self::CombineFromEnvironment => "CombineFromEnvironment",
            Self::CombineToEnvironment => "CombineToEnvironment",
        }
    }

    /// Whether the patch copies one field (as opposed to combining several).
    pub fn is_field_path(self) -> bool {
        matches!(
            self,
            Self::FromCompositeFieldPath
                | Self::ToCompositeFieldPath
                | Self::FromEnvironmentFieldPath
                | Self::ToEnvironmentFieldPath
        )
    }

    /// Whether the patch combines several fields into one.
    pub fn is_combine(self) -> bool {
        matches!(
            self,
            Self::CombineFromComposite
                | Self::CombineToComposite
                | Self::CombineFromEnvironment
                | Self::CombineToEnvironment
        )
    }

    /// Whether the patch writes to the desired composed resource (rather than reading
    /// from the observed one).
    pub fn to_composed_resource(self) -> bool {
        matches!(
            self,
            Self::FromCompositeFieldPath
                | Self::CombineFromComposite
                | Self::FromEnvironmentFieldPath
                | Self::CombineFromEnvironment
        )
    }
}

impl fmt::Display for PatchType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What to do when a patch's source field does not exist.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum FromFieldPathPolicy {
    /// The patch is skipped (the default).
    #[default]
    Optional,
    /// The patch fails; a new composed resource is then not created.
    Required,
}

/// How a patch writes its value to the destination field.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum ToFieldPathPolicy {
    /// Replace the destination (the default).
    #[default]
    Replace,
    /// Merge objects recursively, keeping values already in the destination.
    MergeObjects,
    /// Like `MergeObjects`, and append arrays.
    MergeObjectsAppendArrays,
    /// Merge objects recursively, overwriting values in the destination.
    ForceMergeObjects,
    /// Like `ForceMergeObjects`, and append arrays.
    ForceMergeObjectsAppendArrays,
    /// Deprecated upstream; same as `MergeObjects`.
    MergeObject,
    /// Deprecated upstream; same as `ForceMergeObjectsAppendArrays`.
    AppendArray,
}

/// Patch policies.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PatchPolicy {
    /// Missing source field behaviour; `Optional` when unset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from_field_path: Option<FromFieldPathPolicy>,
    /// Destination write behaviour; `Replace` when unset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub to_field_path: Option<ToFieldPathPolicy>,
}

/// One patch. The same shape serves resource templates, patch sets and the environment;
/// [`crate::validate`] checks which types each place allows.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Patch {
    /// The patch type; `FromCompositeFieldPath` when unset.
    #[serde(default, rename = "type")]
    pub type_: PatchType,
    /// The source field. Required by the field path types.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from_field_path: Option<String>,
    /// Combine configuration. Required by the combine types.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub combine: Option<Combine>,
    /// The destination field; defaults to `fromFieldPath`. Required by the combine types.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub to_field_path: Option<String>,
    /// The patch set to include. Required by type `PatchSet`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub patch_set_name: Option<String>,
    /// Transforms applied in order to the value.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub transforms: Vec<Transform>,
    /// Patch policies.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub policy: Option<PatchPolicy>,
}

impl Patch {
    /// The source field path, or `""` when unset.
    pub fn from_field_path(&self) -> &str {
        self.from_field_path.as_deref().unwrap_or_default()
    }

    /// The destination field path: `toFieldPath`, else `fromFieldPath`, else `""`.
    pub fn to_field_path(&self) -> &str {
        self.to_field_path
            .as_deref()
            .unwrap_or_else(|| self.from_field_path())
    }

    /// The effective `policy.fromFieldPath`.
    pub fn from_field_path_policy(&self) -> FromFieldPathPolicy {
        self.policy.and_then(|p| p.from_field_path).unwrap_or_default()
    }

    /// The effective `policy.toFieldPath`.
    pub fn to_field_path_policy(&self) -> ToFieldPathPolicy {
        self.policy.and_then(|p| p.to_field_path).unwrap_or_default()
    }
}

/// One input of a combine patch.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CombineVariable {
    /// The field whose value is used.
    #[serde(default)]
    pub from_field_path: String,
}

/// The combine strategies.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum CombineStrategy {
    /// Format the variables with a Go format string.
    #[serde(rename = "string")]
    String,
}

impl CombineStrategy {
    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::String => "string",
        }
    }
}

/// Configuration of a combine patch.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Combine {
    /// The variables; at least one.
    #[serde(default)]
    pub variables: Vec<CombineVariable>,
    /// The strategy; required.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub strategy: Option<CombineStrategy>,
    /// Configuration of the `string` strategy.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub string: Option<StringCombine>,
}

/// Configuration of the `string` combine strategy.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct StringCombine {
    /// A Go format string, given the variables in order.
    #[serde(default, rename = "fmt")]
    pub format: String,
}
