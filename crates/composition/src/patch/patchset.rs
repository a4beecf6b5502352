//! Inlining `PatchSet` patches into resource templates (upstream `ComposedTemplates`).

use std::collections::BTreeMap;

use crate::input::{ComposedTemplate, Patch, PatchSet, PatchType};

/// A failure to inline patch sets.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// A patch set contains a patch of type `PatchSet`.
    #[error("a patch in a PatchSet cannot be of type PatchSet")]
    Nested,
    /// A `PatchSet` patch has no `patchSetName`.
    #[error("PatchSetName is required by type PatchSet")]
    MissingName,
    /// No patch set has the name.
    #[error("cannot find PatchSet by name {0}")]
    Undefined(String),
}

/// The templates with every `PatchSet` patch replaced, in place, by the patches of the
/// named set. A later set of the same name wins.
pub fn expand(
    patch_sets: &[PatchSet],
    templates: &[ComposedTemplate],
) -> Result<Vec<ComposedTemplate>, Error> {
    let mut by_name: BTreeMap<&str, &[Patch]> = BTreeMap::new();
    for ps in patch_sets {
        if ps.patches.iter().any(|p| p.type_ == PatchType::PatchSet) {
            return Err(Error::Nested);
        }
        by_name.insert(&ps.name, &ps.patches);
    }
    templates
        .iter()
        .map(|t| {
            let mut patches = Vec::with_capacity(t.patches.len());
            for p in &t.patches {
                if p.type_ != PatchType::PatchSet {
                    patches.push(p.clone());
                    continue;
                }
                let name = p.patch_set_name.as_deref().ok_or(Error::MissingName)?;
                let set = by_name
                    .get(name)
                    .ok_or_else(|| Error::Undefined(name.to_owned()))?;
                patches.extend(set.iter().cloned());
            }
            Ok(ComposedTemplate { patches, ..t.clone() })
        })
        .collect()
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::input::Resources;

    // Crossplane docs, "Reuse a patch": a PatchSet patch is replaced, in its position,
    // by the named set's patches.
    #[test]
    fn inlines_patch_sets_in_place() {
        let r: Resources = serde_json::from_value(json!({
            "patchSets": [{"name": "common", "patches": [
                {"fromFieldPath": "metadata.labels"},
                {"fromFieldPath": "metadata.annotations"}
            ]}],
            "resources": [{"name": "a", "patches": [
                {"fromFieldPath": "spec.first"},
                {"type": "PatchSet", "patchSetName": "common"},
                {"fromFieldPath": "spec.last"}
            ]}]
        }))
        .unwrap();
        let got = expand(&r.patch_sets, &r.resources).unwrap();
        let paths: Vec<&str> = got[0].patches.iter().map(Patch::from_field_path).collect();
        assert_eq!(
            paths,
            [
                "spec.first",
                "metadata.labels",
                "metadata.annotations",
                "spec.last"
            ]
        );
    }

    #[test]
    fn errors() {
        let r: Resources = serde_json::from_value(json!({
            "resources": [{"name": "a", "patches": [{"type": "PatchSet", "patchSetName": "nope"}]}]
        }))
        .unwrap();
        assert_eq!(
            expand(&r.patch_sets, &r.resources).unwrap_err().to_string(),
            "cannot find PatchSet by name nope"
        );
        let nested: Vec<PatchSet> = serde_json::from_value(json!([
            {"name": "x", "patches": [{"type": "PatchSet", "patchSetName": "y"}]}
        ]))
        .unwrap();
        assert_eq!(expand(&nested, &[]).unwrap_err(), Error::Nested);
    }
}
