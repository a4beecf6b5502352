//! Kubernetes Events about the objects controllers reconcile (crossplane-runtime's `event` package),
//! written through the term's client, whose fence layer refuses them once the term has ended, so a
//! deposed leader emits none.
//!
//! Identical events (same object, reason and message) are emitted at most once per [`DEDUPE_WINDOW`], so
//! an error retried with backoff does not flood the API. Which reasons a controller uses is its own
//! (the managed reconciler's are `managed::reason`).

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use jiff::Timestamp;
use k8s_openapi::api::core::v1::{Event, EventSource, ObjectReference};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use kube::Api;
use kube::api::PostParams;
use tokio::time::Instant;

/// Identical events within this window are emitted once.
pub const DEDUPE_WINDOW: Duration = Duration::from_secs(60);

/// `Normal` or `Warning`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventType {
    /// Something happened as intended.
    Normal,
    /// Something went wrong.
    Warning,
}

impl EventType {
    fn as_str(self) -> &'static str {
        match self {
            Self::Normal => "Normal",
            Self::Warning => "Warning",
        }
    }
}

/// Writes Events about reconciled objects.
#[derive(Debug)]
pub struct Recorder {
    component: String,
    instance: String,
    recent: Mutex<HashMap<(String, String, String), Instant>>,
}

impl Recorder {
    /// A recorder reporting as `component` (the controller) from `instance` (this replica).
    pub fn new(component: impl Into<String>, instance: impl Into<String>) -> Self {
        Self {
            component: component.into(),
            instance: instance.into(),
            recent: Mutex::new(HashMap::new()),
        }
    }

    /// Whether an identical event was emitted within the window; records this one if not.
    fn is_duplicate(&self, key: (String, String, String)) -> bool {
        let now = Instant::now();
        let mut recent = self
            .recent
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if recent.len() > 10_000 {
            recent.retain(|_, t| now.duration_since(*t) < DEDUPE_WINDOW);
        }
        match recent.get(&key) {
            Some(t) if now.duration_since(*t) < DEDUPE_WINDOW => true,
            _ => {
                recent.insert(key, now);
                false
            }
        }
    }

    /// Emits an event about `regarding`. Failures are logged, never returned: events are best effort.
    pub async fn publish(
        &self,
        client: &kube::Client,
        regarding: &ObjectReference,
        type_: EventType,
        reason: &str,
        message: &str,
    ) {
        let uid = regarding.uid.clone().unwrap_or_default();
        if self.is_duplicate((uid, reason.to_owned(), message.to_owned())) {
            return;
        }
        let namespace = regarding
            .namespace
            .clone()
            .unwrap_or_else(|| "default".to_owned());
        let name = regarding.name.clone().unwrap_or_default();
        let now = Time(Timestamp::now());
        let event = Event {
            metadata: ObjectMeta {
                name: Some(format!("{name}.{:016x}", fastrand::u64(..))),
                namespace: Some(namespace.clone()),
                ..ObjectMeta::default()
            },
            involved_object: regarding.clone(),
            reason: Some(reason.to_owned()),
            message: Some(message.to_owned()),
            type_: Some(type_.as_str().to_owned()),
            count: Some(1),
            first_timestamp: Some(now.clone()),
            last_timestamp: Some(now),
            source: Some(EventSource {
                component: Some(self.component.clone()),
                host: None,
            }),
            reporting_component: Some(self.component.clone()),
            reporting_instance: Some(self.instance.clone()),
            ..Event::default()
        };
        let api = Api::<Event>::namespaced(client.clone(), &namespace);
        if let Err(e) = api.create(&PostParams::default(), &event).await {
            tracing::debug!(error = %e, reason, object = %name, "cannot emit event");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn dedupes_within_window() {
        let r = Recorder::new("c", "i");
        let k = || ("u".to_owned(), "R".to_owned(), "m".to_owned());
        assert!(!r.is_duplicate(k()));
        assert!(r.is_duplicate(k()));
        tokio::time::advance(DEDUPE_WINDOW).await;
        assert!(!r.is_duplicate(k()));
    }
}
