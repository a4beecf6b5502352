//! Readiness: `/readyz` turns ready once every always-runnable has said it is synced.
//!
//! Each always-runnable gets a [`ReadyHandle`] and marks it when its cache has synced (or at once, if it
//! has nothing to sync). Readiness does not depend on leadership, so standbys turn ready too, and a
//! rolling update never waits on the Lease the old pod holds.

use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};

/// One registered runnable: its name and its flag.
type Entry = (String, Arc<AtomicBool>);

/// The set of runnables readiness waits for.
#[derive(Clone, Default, Debug)]
pub struct Readiness {
    pending: Arc<Mutex<Vec<Entry>>>,
}

/// One runnable's readiness flag. Cheap to clone.
#[derive(Clone, Debug)]
pub struct ReadyHandle {
    flag: Arc<AtomicBool>,
}

impl ReadyHandle {
    /// Marks the runnable synced. Idempotent.
    pub fn mark_ready(&self) {
        self.flag.store(true, Ordering::Release);
    }

    /// Whether [`mark_ready`](Self::mark_ready) was called.
    pub fn is_ready(&self) -> bool {
        self.flag.load(Ordering::Acquire)
    }
}

impl Readiness {
    /// Registers a runnable that readiness must wait for.
    pub fn register(&self, name: impl Into<String>) -> ReadyHandle {
        let flag = Arc::new(AtomicBool::new(false));
        self.lock().push((name.into(), flag.clone()));
        ReadyHandle { flag }
    }

    /// The names of runnables not yet synced; empty means ready.
    pub fn not_ready(&self) -> Vec<String> {
        self.lock()
            .iter()
            .filter(|(_, f)| !f.load(Ordering::Acquire))
            .map(|(n, _)| n.clone())
            .collect()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<Entry>> {
        // A poisoned lock only means a panic elsewhere while pushing; the data is still usable.
        self.pending
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ready_once_every_handle_is_marked() {
        let r = Readiness::default();
        assert!(r.not_ready().is_empty());
        let a = r.register("cache-a");
        let b = r.register("cache-b");
        assert_eq!(r.not_ready(), ["cache-a", "cache-b"]);
        a.mark_ready();
        assert_eq!(r.not_ready(), ["cache-b"]);
        b.clone().mark_ready();
        assert!(r.not_ready().is_empty());
        assert!(b.is_ready());
    }
}
