//! `managementPolicies` and `deletionPolicy`: what the provider may do to the external resource.

use std::collections::BTreeSet;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// One action the provider may take (Crossplane's `ManagementAction`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, JsonSchema)]
pub enum ManagementAction {
    /// Read the external resource.
    Observe,
    /// Create it.
    Create,
    /// Update it.
    Update,
    /// Delete it.
    Delete,
    /// Copy unset fields from it into the spec.
    LateInitialize,
    /// All of the above.
    #[serde(rename = "*")]
    All,
}

/// The default `managementPolicies`: `["*"]`.
pub fn default_management_policies() -> Vec<ManagementAction> {
    vec![ManagementAction::All]
}

/// What happens to the external resource when the managed resource is deleted (cluster-scoped, legacy).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum DeletionPolicy {
    /// Delete the external resource (the default).
    #[default]
    Delete,
    /// Leave it.
    Orphan,
}

/// The management policies of one resource, with its `deletionPolicy` if its kind has one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ManagementPolicies {
    actions: BTreeSet<ManagementAction>,
    deletion_policy: Option<DeletionPolicy>,
}

impl ManagementPolicies {
    /// The policies `actions`, with the resource's `deletionPolicy` (`None` for namespaced kinds).
    pub fn new(actions: &[ManagementAction], deletion_policy: Option<DeletionPolicy>) -> Self {
        Self {
            actions: actions.iter().copied().collect(),
            deletion_policy,
        }
    }

    fn has(&self, action: ManagementAction) -> bool {
        self.actions.contains(&ManagementAction::All) || self.actions.contains(&action)
    }

    fn is_default(&self) -> bool {
        self.actions.len() == 1 && self.actions.contains(&ManagementAction::All)
    }

    /// `managementPolicies: []` pauses the resource.
    pub fn is_paused(&self) -> bool {
        self.actions.is_empty()
    }

    /// Whether the combination is one Crossplane supports: `[]`, `["*"]`, or any set of the five explicit
    /// actions that includes `Observe` (crossplane-runtime's list of supported policies is exactly
    /// these). `*` mixed with other actions is not supported.
    pub fn is_supported(&self) -> bool {
        if self.actions.is_empty() || self.is_default() {
            return true;
        }
        !self.actions.contains(&ManagementAction::All) && self.actions.contains(&ManagementAction::Observe)
    }

    /// Whether the provider may only observe (no create, update, delete or late-init).
    pub fn is_observe_only(&self) -> bool {
        self.actions.len() == 1 && self.actions.contains(&ManagementAction::Observe)
    }

    /// May create.
    pub fn should_create(&self) -> bool {
        self.has(ManagementAction::Create)
    }

    /// May update.
    pub fn should_update(&self) -> bool {
        self.has(ManagementAction::Update)
    }

    /// May late-initialize.
    pub fn should_late_initialize(&self) -> bool {
        self.has(ManagementAction::LateInitialize)
    }

    /// May delete the external resource when the managed resource is deleted. With a `deletionPolicy`
    /// this is crossplane-runtime's legacy resolution: `Delete` needs `Delete` or `*`; `Orphan` with the
    /// default `["*"]` orphans, and with an explicit list deletes only if the list has `Delete`.
    pub fn should_delete(&self) -> bool {
        match self.deletion_policy {
            None | Some(DeletionPolicy::Delete) => self.has(ManagementAction::Delete),
            Some(DeletionPolicy::Orphan) => {
                !self.is_default() && self.actions.contains(&ManagementAction::Delete)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::ManagementAction::*;
    use super::*;

    #[test]
    fn serializes_star() {
        assert_eq!(serde_json::to_string(&All).expect("json"), "\"*\"");
        let v: Vec<ManagementAction> = serde_json::from_str(r#"["Observe","LateInitialize"]"#).expect("json");
        assert_eq!(v, vec![Observe, LateInitialize]);
    }

    #[test]
    fn supported_combinations() {
        assert!(ManagementPolicies::new(&[], None).is_supported());
        assert!(ManagementPolicies::new(&[All], None).is_supported());
        assert!(ManagementPolicies::new(&[Observe], None).is_supported());
        assert!(ManagementPolicies::new(&[Observe, Create, Update, LateInitialize], None).is_supported());
        assert!(!ManagementPolicies::new(&[All, Observe], None).is_supported());
        assert!(!ManagementPolicies::new(&[Create, Delete], None).is_supported());
    }

    #[test]
    fn delete_resolution() {
        let p = |a: &[ManagementAction], d| ManagementPolicies::new(a, d).should_delete();
        assert!(p(&[All], None));
        assert!(!p(&[Observe, Create, Update], None));
        assert!(p(&[All], Some(DeletionPolicy::Delete)));
        assert!(!p(&[All], Some(DeletionPolicy::Orphan)));
        assert!(!p(&[Observe, Create], Some(DeletionPolicy::Delete)));
        assert!(p(&[Observe, Delete], Some(DeletionPolicy::Orphan)));
        assert!(!p(&[Observe, Create], Some(DeletionPolicy::Orphan)));
    }

    #[test]
    fn pause_and_observe_only() {
        assert!(ManagementPolicies::new(&[], None).is_paused());
        assert!(ManagementPolicies::new(&[Observe], None).is_observe_only());
        assert!(!ManagementPolicies::new(&[Observe], None).should_create());
        assert!(ManagementPolicies::new(&[All], None).should_late_initialize());
    }
}
