//! JSON-schema helpers for fields that Kubernetes must not prune.

use schemars::{Schema, SchemaGenerator, json_schema};

/// A free-form object: `type: object` with `x-kubernetes-preserve-unknown-fields: true`.
pub fn preserve_unknown_fields(_: &mut SchemaGenerator) -> Schema {
    json_schema!({
        "type": "object",
        "x-kubernetes-preserve-unknown-fields": true,
    })
}

/// An embedded Kubernetes object (`apiVersion`, `kind`, `metadata` validated by the apiserver), otherwise
/// free-form.
pub fn embedded_resource(_: &mut SchemaGenerator) -> Schema {
    json_schema!({
        "type": "object",
        "x-kubernetes-embedded-resource": true,
        "x-kubernetes-preserve-unknown-fields": true,
    })
}
