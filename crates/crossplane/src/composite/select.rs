//! Choosing the Composition (enforced → ref → default → selector) and its revision (Manual pin or the
//! latest, optionally filtered by a revision selector).

use apis::apiextensions::labels::LABEL_COMPOSITION_NAME;
use apis::apiextensions::{
    CompositeResourceDefinitionSpec, Composition, CompositionRevision, CompositionUpdatePolicy,
};
use kube::ResourceExt;

use super::cache::Caches;
use super::fields::Fields;
use crate::error::Error;

/// The XR type: `apiVersion` and `kind`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct XrType {
    /// `<group>/<version>`.
    pub api_version: String,
    /// The kind.
    pub kind: String,
}

/// Whether `comp` composes XRs of type `t`: the candidates a selector chooses among.
pub fn compatible(comp: &Composition, t: &XrType) -> bool {
    comp.spec.composite_type_ref.api_version == t.api_version && comp.spec.composite_type_ref.kind == t.kind
}

/// Whether `comp` composes the same XRs as type `t` at any version: same group and kind. An XR's
/// versions are one object, so a Composition chosen while another version was referenceable still
/// composes it.
pub fn same_kind(comp: &Composition, t: &XrType) -> bool {
    let group = |api_version: &str| api_version.rsplit_once('/').map_or("", |(g, _)| g).to_owned();
    comp.spec.composite_type_ref.kind == t.kind
        && group(&comp.spec.composite_type_ref.api_version) == group(&t.api_version)
}

/// Whether an XR of type `t` may use `comp`, which it names (or its XRD enforces or defaults). As
/// upstream: a legacy XR only a Composition for exactly its type (upstream's configurator refuses any
/// other), a modern XR also one chosen while another version of the XRD was referenceable (upstream
/// keeps composing it with the Composition it selected, whose type the XRD's referenceable version
/// changed under it). A Composition for another kind altogether is refused either way.
pub fn usable(comp: &Composition, t: &XrType, legacy: bool) -> bool {
    if legacy {
        compatible(comp, t)
    } else {
        same_kind(comp, t)
    }
}

/// The Composition name to use, without listing: enforced, then the XR's ref, then the XRD default.
pub fn named(fields: &Fields<'_>, xrd: &CompositeResourceDefinitionSpec) -> Option<String> {
    xrd.enforced_composition_ref
        .as_ref()
        .map(|r| r.name.clone())
        .or_else(|| fields.composition_ref().map(str::to_owned))
        .or_else(|| xrd.default_composition_ref.as_ref().map(|r| r.name.clone()))
}

/// Selects and fetches the Composition, from the caches ([`Caches`]; a miss is confirmed live).
pub async fn composition(
    caches: &Caches,
    fields: &Fields<'_>,
    xrd: &CompositeResourceDefinitionSpec,
    t: &XrType,
) -> Result<Composition, Error> {
    let name = match named(fields, xrd) {
        Some(n) => n,
        None => {
            let selector = fields.composition_selector().unwrap_or_default();
            let mut matches: Vec<String> = caches
                .compositions
                .list(&selector)
                .await?
                .iter()
                .filter(|c| compatible(c, t))
                .map(ResourceExt::name_any)
                .collect();
            if matches.is_empty() {
                return Err(Error::Message(format!(
                    "cannot select a Composition: no compatible Compositions found for {}, Kind={}",
                    t.api_version, t.kind
                )));
            }
            matches.sort();
            // Upstream picks at random among the matches; the choice is then persisted.
            matches.swap_remove(fastrand::usize(..matches.len()))
        }
    };
    let Some(comp) = caches.compositions.get(&name).await? else {
        return Err(Error::Message(format!(
            "cannot get Composition {name:?}: not found"
        )));
    };
    if !usable(&comp, t, xrd.scope.is_legacy()) {
        return Err(Error::Message(format!(
            "Composition {name:?} is for {}, Kind={}, not {}, Kind={}",
            comp.spec.composite_type_ref.api_version,
            comp.spec.composite_type_ref.kind,
            t.api_version,
            t.kind
        )));
    }
    Ok(comp)
}

/// The update policy in force: the XR's, else the XRD's default, else Automatic.
pub fn policy(fields: &Fields<'_>, xrd: &CompositeResourceDefinitionSpec) -> CompositionUpdatePolicy {
    match fields.update_policy() {
        Some("Manual") => CompositionUpdatePolicy::Manual,
        Some(_) => CompositionUpdatePolicy::Automatic,
        None => xrd.default_composition_update_policy.unwrap_or_default(),
    }
}

/// Selects and fetches the revision of `composition`, from the caches ([`Caches`]; a miss is
/// confirmed live). A cached list may lack a revision created a moment ago: the XR is then composed
/// with the latest one the cache holds, and the new revision reconciles it again once the cache holds
/// it (the composite controller hears of revisions from the same cache).
pub async fn revision(
    caches: &Caches,
    fields: &Fields<'_>,
    xrd: &CompositeResourceDefinitionSpec,
    composition: &str,
) -> Result<CompositionRevision, Error> {
    let policy = policy(fields, xrd);
    if policy == CompositionUpdatePolicy::Manual
        && let Some(name) = fields.composition_revision_ref()
    {
        // A pinned revision of another Composition is not used.
        match caches.revisions.get(name).await? {
            Some(r) if r.labels().get(LABEL_COMPOSITION_NAME).map(String::as_str) == Some(composition) => {
                return Ok(r);
            }
            _ => {}
        }
    }
    let mut selector = format!("{LABEL_COMPOSITION_NAME}={composition}");
    if policy == CompositionUpdatePolicy::Automatic
        && let Some(s) = fields.composition_revision_selector().filter(|s| !s.is_empty())
    {
        selector = format!("{selector},{s}");
    }
    let revs = caches.revisions.list(&selector).await?;
    latest(revs).ok_or_else(|| {
        Error::Message(format!(
            "cannot select a CompositionRevision: Composition {composition:?} has no matching revision yet"
        ))
    })
}

/// The revision with the highest number (of equals, the last in `revs`, which lists them by name).
pub fn latest(revs: Vec<CompositionRevision>) -> Option<CompositionRevision> {
    revs.into_iter().max_by_key(|r| r.spec.revision)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn xrd(default: Option<CompositionUpdatePolicy>) -> CompositeResourceDefinitionSpec {
        let mut spec: CompositeResourceDefinitionSpec = serde_json::from_value(json!({
            "group": "example.org", "names": {"kind": "X", "plural": "xs"},
            "versions": [{"name": "v1", "referenceable": true, "served": true}],
            "defaultCompositionRef": {"name": "default"}
        }))
        .expect("spec");
        spec.default_composition_update_policy = default;
        spec
    }

    #[test]
    fn policy_falls_back_to_the_xrd_default_then_automatic() {
        let manual = json!({"spec": {"crossplane": {"compositionUpdatePolicy": "Manual"}}});
        let none = json!({"spec": {}});
        assert_eq!(
            policy(&Fields::new(&manual, false), &xrd(None)),
            CompositionUpdatePolicy::Manual
        );
        assert_eq!(
            policy(&Fields::new(&none, false), &xrd(None)),
            CompositionUpdatePolicy::Automatic
        );
        assert_eq!(
            policy(
                &Fields::new(&none, false),
                &xrd(Some(CompositionUpdatePolicy::Manual))
            ),
            CompositionUpdatePolicy::Manual
        );
    }

    fn comp(api_version: &str, kind: &str) -> Composition {
        serde_json::from_value(json!({
            "apiVersion": "apiextensions.crossplane.io/v1", "kind": "Composition",
            "metadata": {"name": "c"},
            "spec": {"compositeTypeRef": {"apiVersion": api_version, "kind": kind}}
        }))
        .expect("composition")
    }

    #[test]
    fn a_modern_xr_keeps_a_composition_of_another_version_a_legacy_one_does_not() {
        let t = XrType {
            api_version: "test.example.org/v2".into(),
            kind: "TestResource".into(),
        };
        let v1 = comp("test.example.org/v1", "TestResource");
        let v2 = comp("test.example.org/v2", "TestResource");
        let other = comp("other.example.org/v2", "TestResource");
        let kind = comp("test.example.org/v2", "Other");
        // Selection only chooses among Compositions of exactly the referenceable version.
        assert!(!compatible(&v1, &t) && compatible(&v2, &t));
        assert!(usable(&v1, &t, false) && usable(&v2, &t, false));
        assert!(!usable(&v1, &t, true) && usable(&v2, &t, true));
        for bad in [&other, &kind] {
            assert!(!usable(bad, &t, false) && !usable(bad, &t, true));
        }
    }

    #[test]
    fn enforced_then_ref_then_default() {
        let with_ref = json!({"spec": {"crossplane": {"compositionRef": {"name": "mine"}}}});
        let none = json!({"spec": {}});
        let mut spec = xrd(None);
        assert_eq!(
            named(&Fields::new(&with_ref, false), &spec).as_deref(),
            Some("mine")
        );
        assert_eq!(
            named(&Fields::new(&none, false), &spec).as_deref(),
            Some("default")
        );
        spec.enforced_composition_ref = Some(apis::apiextensions::NameReference {
            name: "forced".into(),
        });
        assert_eq!(
            named(&Fields::new(&with_ref, false), &spec).as_deref(),
            Some("forced")
        );
    }
}
