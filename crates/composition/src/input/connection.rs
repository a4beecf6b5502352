//! Connection detail types (upstream `resources_common.go`).

use serde::{Deserialize, Serialize};

/// Where a connection detail's value comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum ConnectionDetailType {
    /// A key of the composed resource's connection secret.
    FromConnectionSecretKey,
    /// A field of the observed composed resource.
    FromFieldPath,
    /// A fixed value.
    FromValue,
}

impl ConnectionDetailType {
    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::FromConnectionSecretKey => "FromConnectionSecretKey",
            Self::FromFieldPath => "FromFieldPath",
            Self::FromValue => "FromValue",
        }
    }
}

/// One connection detail a composed resource contributes to the composite's.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ConnectionDetail {
    /// The key in the composite's connection details; required.
    #[serde(default)]
    pub name: String,
    /// The type; required.
    #[serde(default, rename = "type", skip_serializing_if = "Option::is_none")]
    pub type_: Option<ConnectionDetailType>,
    /// The secret key of `FromConnectionSecretKey`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from_connection_secret_key: Option<String>,
    /// The field of `FromFieldPath`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from_field_path: Option<String>,
    /// The value of `FromValue`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<String>,
}
