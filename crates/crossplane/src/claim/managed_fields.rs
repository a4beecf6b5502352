//! Upgrading an XR's managed fields from the client-side claim sync (`--enable-ssa-claims=false`) to
//! the server-side one (crossplane `internal/ssa`'s `PatchingManagedFieldsUpgrader`, matching the claim
//! controller's field manager exactly), as pure functions: which step an XR needs and the patch that
//! takes it.
//!
//! Why: a client-side sync writes the XR with merge patches, recorded as an `Update` by the client's
//! manager (`crossplane`). When the server-side sync later applies the claim's fields, the API server
//! shares each field between that old manager and ours, so a field the claim drops stays on the XR:
//! the old manager still owns it. The upgrade, in upstream's two steps:
//!
//! 1. the XR exists and no managed-fields entry is ours: clear all managed fields (`[{}]`). Our first
//!    apply then owns what it applies; every other field of the XR becomes the API server's
//!    synthetic manager `before-first-apply`'s, which also shares the fields we applied;
//! 2. our entry and `before-first-apply`'s both exist: remove `before-first-apply`'s. What we applied
//!    is now ours alone (a later apply without a field removes it); what nobody applied is nobody's
//!    and stays.
//!
//! Once our entry exists without `before-first-apply`'s, the XR is upgraded and nothing is done again.
//! Each patch carries the XR's `resourceVersion`, so a stale read is refused (409) and retried.
//! Unlike upstream, an XR without any managed fields is not "cleared" again (that write changes nothing).

use serde_json::{Value, json};

/// The API server's manager of the fields an object had before its first server-side apply.
pub const BEFORE_FIRST_APPLY: &str = "before-first-apply";

/// What an XR's managed fields need before the claim controller server-side applies it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// Nothing: upgraded already, or there is nothing to upgrade.
    Done,
    /// Clear all managed fields (step 1).
    Clear,
    /// Remove the `before-first-apply` entry at this index (step 2).
    DropBeforeFirstApply(usize),
}

fn entries(xr: &Value) -> &[Value] {
    xr.pointer("/metadata/managedFields")
        .and_then(Value::as_array)
        .map_or(&[], Vec::as_slice)
}

fn manager(entry: &Value) -> &str {
    entry.get("manager").and_then(Value::as_str).unwrap_or("")
}

/// The step `xr` (as read from the API server) needs, for the server-side field manager `ours`.
pub fn step(xr: &Value, ours: &str) -> Step {
    let fields = entries(xr);
    let found_ours = fields.iter().any(|e| manager(e) == ours);
    let before_first_apply = fields.iter().position(|e| manager(e) == BEFORE_FIRST_APPLY);
    match (found_ours, before_first_apply) {
        (true, None) => Step::Done,
        (true, Some(i)) => Step::DropBeforeFirstApply(i),
        (false, _) if fields.iter().all(|e| e.as_object().is_none_or(|m| m.is_empty())) => Step::Done,
        (false, _) => Step::Clear,
    }
}

/// The merge patch that takes `step` on `xr` (`None` for [`Step::Done`]): the new managed fields and
/// the `resourceVersion` read, so that the API server refuses it if the XR changed meanwhile.
pub fn patch(xr: &Value, step: &Step) -> Option<Value> {
    let managed = match step {
        Step::Done => return None,
        Step::Clear => json!([{}]),
        Step::DropBeforeFirstApply(i) => {
            let mut kept = entries(xr).to_vec();
            if *i < kept.len() {
                kept.remove(*i);
            }
            Value::Array(kept)
        }
    };
    Some(json!({
        "apiVersion": xr["apiVersion"],
        "kind": xr["kind"],
        "metadata": {"managedFields": managed, "resourceVersion": xr.pointer("/metadata/resourceVersion")},
    }))
}

#[cfg(test)]
mod tests {
    //! The steps, and a model of the API server's field ownership (`fieldsV1` as sets of paths) that
    //! shows what they are for: without the upgrade a label the claim drops stays on the XR (positive
    //! control), with it the label goes.

    use std::collections::{BTreeMap, BTreeSet};

    use super::*;

    const OURS: &str = "apiextensions.crossplane.io/claim";

    /// A managed-fields entry owning `paths` (each a `/`-separated path of field names).
    fn entry(manager: &str, operation: &str, paths: &[&str]) -> Value {
        let mut fields = json!({});
        for p in paths {
            let mut at = &mut fields;
            for part in p.split('/') {
                at = &mut at[format!("f:{part}")];
                if at.is_null() {
                    *at = json!({});
                }
            }
        }
        json!({"manager": manager, "operation": operation, "fieldsType": "FieldsV1", "fieldsV1": fields})
    }

    fn xr(entries: Vec<Value>) -> Value {
        json!({"apiVersion": "example.org/v1", "kind": "XThing",
               "metadata": {"name": "x", "resourceVersion": "42", "managedFields": entries}})
    }

    #[test]
    fn steps_follow_upstream() {
        let csa = entry("crossplane", "Update", &["metadata/labels/bar", "spec/coolField"]);
        let composite = entry(
            "apiextensions.crossplane.io/composite",
            "Apply",
            &["spec/resourceRefs"],
        );
        let ssa = entry(OURS, "Apply", &["spec/coolField"]);
        let bfa = entry(BEFORE_FIRST_APPLY, "Update", &["metadata/labels/bar"]);

        // Written client-side (our entry missing): clear everything.
        let written = xr(vec![csa.clone(), composite.clone()]);
        assert_eq!(step(&written, OURS), Step::Clear);
        assert_eq!(
            patch(&written, &Step::Clear),
            Some(json!({"apiVersion": "example.org/v1", "kind": "XThing",
                        "metadata": {"managedFields": [{}], "resourceVersion": "42"}}))
        );
        // Cleared, before our first apply: nothing to do (no write that changes nothing).
        assert_eq!(step(&xr(vec![]), OURS), Step::Done);
        assert_eq!(step(&xr(vec![json!({})]), OURS), Step::Done);
        // After our first apply: drop before-first-apply, keep the rest in order.
        let applied = xr(vec![ssa.clone(), bfa, composite.clone()]);
        assert_eq!(step(&applied, OURS), Step::DropBeforeFirstApply(1));
        let p = patch(&applied, &Step::DropBeforeFirstApply(1)).expect("a patch");
        assert_eq!(p["metadata"]["managedFields"], json!([ssa, composite]));
        assert_eq!(p["metadata"]["resourceVersion"], "42");
        // Upgraded: never again, whatever else writes client-side later.
        let upgraded = xr(vec![ssa, composite, csa]);
        assert_eq!(step(&upgraded, OURS), Step::Done);
        assert_eq!(patch(&upgraded, &Step::Done), None);
    }

    /// The API server's ownership, modelled: manager → owned paths (operation and subresource folded
    /// into the name, as they are distinct entries).
    #[derive(Debug, Default)]
    struct Server {
        live: BTreeSet<String>,
        owners: BTreeMap<String, BTreeSet<String>>,
    }

    fn paths(fields: &Value, prefix: &str, out: &mut BTreeSet<String>) {
        if let Some(m) = fields.as_object() {
            for (k, v) in m {
                let p = format!("{prefix}/{}", k.trim_start_matches("f:"));
                if v.as_object().is_some_and(|m| m.is_empty()) {
                    out.insert(p);
                } else {
                    paths(v, &p, out);
                }
            }
        }
    }

    impl Server {
        fn from(xr: &Value) -> Server {
            let mut s = Server::default();
            for e in entries(xr) {
                let mut owned = BTreeSet::new();
                paths(&e["fieldsV1"], "", &mut owned);
                s.live.extend(owned.iter().cloned());
                s.owners.insert(manager(e).to_owned(), owned);
            }
            s
        }

        /// The object as entries, for [`step`] and [`patch`].
        fn object(&self) -> Value {
            let list: Vec<Value> = self
                .owners
                .iter()
                .map(|(m, owned)| {
                    let p: Vec<&str> = owned.iter().map(|p| p.trim_start_matches('/')).collect();
                    entry(m, "Apply", &p)
                })
                .collect();
            xr(list)
        }

        /// Takes a patch of the managed fields, as the API server does.
        fn take(&mut self, patch: &Value) {
            let managed = &patch["metadata"]["managedFields"];
            if managed == &json!([{}]) {
                self.owners.clear();
            } else {
                *self = Server {
                    live: self.live.clone(),
                    ..Server::from(&xr(managed.as_array().cloned().unwrap_or_default()))
                };
            }
        }

        /// A forced server-side apply of `applied` by `by`: the first apply to an object without
        /// managed fields hands every live field to `before-first-apply`; fields `by` owned and no
        /// longer applies are removed unless another manager owns them.
        fn apply(&mut self, by: &str, applied: &[&str]) {
            if self.owners.is_empty() {
                self.owners.insert(BEFORE_FIRST_APPLY.into(), self.live.clone());
            }
            let applied: BTreeSet<String> = applied.iter().map(|p| format!("/{p}")).collect();
            let before = self.owners.remove(by).unwrap_or_default();
            for dropped in before.difference(&applied) {
                if !self.owners.values().any(|o| o.contains(dropped)) {
                    self.live.remove(dropped);
                }
            }
            self.live.extend(applied.iter().cloned());
            self.owners.insert(by.into(), applied);
        }

        fn upgrade(&mut self) {
            let s = step(&self.object(), OURS);
            if let Some(p) = patch(&self.object(), &s) {
                self.take(&p);
            }
        }
    }

    /// An XR the client-side sync created with labels foo and bar.
    fn written_client_side() -> Server {
        Server::from(&xr(vec![
            entry(
                "crossplane",
                "Update",
                &["metadata/labels/foo", "metadata/labels/bar", "spec/coolField"],
            ),
            entry(
                "apiextensions.crossplane.io/composite",
                "Apply",
                &["spec/resourceRefs"],
            ),
        ]))
    }

    #[test]
    fn without_the_upgrade_a_dropped_label_stays() {
        let mut s = written_client_side();
        s.apply(
            OURS,
            &["metadata/labels/foo", "metadata/labels/bar", "spec/coolField"],
        );
        s.apply(OURS, &["metadata/labels/foo", "spec/coolField"]);
        assert!(s.live.contains("/metadata/labels/bar"), "{s:?}");
    }

    #[test]
    fn with_the_upgrade_a_dropped_label_goes_and_nothing_else() {
        let mut s = written_client_side();
        // The server-side sync's reconciles: upgrade, apply; upgrade, apply; the claim drops bar.
        s.upgrade();
        s.apply(
            OURS,
            &["metadata/labels/foo", "metadata/labels/bar", "spec/coolField"],
        );
        assert!(s.owners.contains_key(BEFORE_FIRST_APPLY), "{s:?}");
        s.upgrade();
        assert!(!s.owners.contains_key(BEFORE_FIRST_APPLY), "{s:?}");
        s.apply(
            OURS,
            &["metadata/labels/foo", "metadata/labels/bar", "spec/coolField"],
        );
        s.upgrade();
        s.apply(OURS, &["metadata/labels/foo", "spec/coolField"]);
        assert!(!s.live.contains("/metadata/labels/bar"), "{s:?}");
        for kept in ["/metadata/labels/foo", "/spec/coolField", "/spec/resourceRefs"] {
            assert!(s.live.contains(kept), "{kept} lost: {s:?}");
        }
        // The composite controller's field, unowned since the upgrade, stays until it applies again.
        assert_eq!(step(&s.object(), OURS), Step::Done);
    }
}
