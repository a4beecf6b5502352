//! What the XRD controller last read of each CRD it renders, so that a reconcile that finds the CRD at
//! the same `resourceVersion` needs no read.
//!
//! The controller's watch of CRDs is metadata-only (a full watch would cost the apiserver the
//! serialization of every CRD in the cluster, providers' included, on every change), so its cache knows
//! a CRD's `resourceVersion` but not its spec or status. An object at a given `resourceVersion` never
//! changes, so what a read (or an apply's answer) showed at that version still holds while the cache
//! shows the same version: whether the rendered configuration held on it, and whether it was
//! Established. Only a change to the CRD, or another rendered configuration, needs a read again.

use std::collections::HashMap;
use std::sync::Mutex;

/// One CRD as last read.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Reading {
    /// The CRD's `resourceVersion` when read.
    resource_version: String,
    /// The stamp (hash) of the rendered configuration found holding on it.
    stamp: String,
    /// Whether it was `Established=True`.
    established: bool,
}

/// The CRDs read, by name.
#[derive(Debug, Default)]
pub struct Seen {
    readings: Mutex<HashMap<String, Reading>>,
}

impl Seen {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Reading>> {
        self.readings
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Records that CRD `name`, at `resource_version`, held the configuration stamped `stamp`, and
    /// whether it was Established.
    pub fn held(&self, name: &str, resource_version: &str, stamp: &str, established: bool) {
        self.lock().insert(
            name.to_owned(),
            Reading {
                resource_version: resource_version.to_owned(),
                stamp: stamp.to_owned(),
                established,
            },
        );
    }

    /// Forgets CRD `name`: its configuration did not hold when last read, or it is going away.
    pub fn forget(&self, name: &str) {
        self.lock().remove(name);
    }

    /// Whether CRD `name` was Established, when it was last read at `resource_version` holding the
    /// configuration stamped `stamp`; `None` when that is not known (not read at that version, or
    /// read holding another configuration), and the CRD must be read.
    pub fn established(&self, name: &str, resource_version: &str, stamp: &str) -> Option<bool> {
        self.lock()
            .get(name)
            .filter(|r| r.resource_version == resource_version && r.stamp == stamp)
            .map(|r| r.established)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reading_answers_only_for_its_version_and_configuration() {
        let seen = Seen::default();
        assert_eq!(seen.established("a", "1", "s"), None);
        seen.held("a", "1", "s", false);
        assert_eq!(seen.established("a", "1", "s"), Some(false));
        // The CRD changed (its status, say): read again.
        assert_eq!(seen.established("a", "2", "s"), None);
        // Another rendered configuration: read again.
        assert_eq!(seen.established("a", "1", "t"), None);
        seen.held("a", "2", "s", true);
        assert_eq!(seen.established("a", "2", "s"), Some(true));
        assert_eq!(seen.established("a", "1", "s"), None);
        seen.forget("a");
        assert_eq!(seen.established("a", "2", "s"), None);
    }
}
