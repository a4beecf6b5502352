//! Kubernetes Events on the lock object(s), as client-go records them: type Normal, reason
//! `LeaderElection`, note `<identity> became leader` or `<identity> stopped leading`.
//!
//! Events go through `kube::runtime::events::Recorder` (events.k8s.io/v1). The reporting controller is
//! the identity when it is a valid qualified name (the apiserver requires one), else `leader-election`;
//! the reporting instance is always the identity. Posting runs in its own task with the request timeout,
//! so it never delays the election; a failure (for example no RBAC for events) is logged at debug level.

use std::time::Duration;

use k8s_openapi::api::core::v1::ObjectReference;
use kube::runtime::events::{Event, EventType, Recorder, Reporter};
use tokio::task::JoinHandle;

/// Posts leadership events.
#[derive(Clone)]
pub(crate) struct Events {
    recorder: Recorder,
    identity: String,
    timeout: Duration,
}

/// Which event.
#[derive(Clone, Copy, Debug)]
pub(crate) enum LeaderEvent {
    BecameLeader,
    StoppedLeading,
}

impl Events {
    pub(crate) fn new(client: kube::Client, identity: &str, timeout: Duration) -> Self {
        let controller = if is_qualified_name(identity) {
            identity.to_string()
        } else {
            "leader-election".to_string()
        };
        let instance: String = identity.chars().take(128).collect();
        let recorder = Recorder::new(
            client,
            Reporter {
                controller,
                instance: Some(instance),
            },
        );
        Self {
            recorder,
            identity: identity.to_string(),
            timeout,
        }
    }

    /// Posts `event` on every object in `refs`, in the background.
    pub(crate) fn post(&self, event: LeaderEvent, refs: Vec<ObjectReference>) -> JoinHandle<()> {
        let (note, action) = match event {
            LeaderEvent::BecameLeader => (format!("{} became leader", self.identity), "BecameLeader"),
            LeaderEvent::StoppedLeading => (format!("{} stopped leading", self.identity), "StoppedLeading"),
        };
        let ev = Event {
            type_: EventType::Normal,
            reason: "LeaderElection".into(),
            note: Some(note),
            action: action.into(),
            secondary: None,
        };
        let recorder = self.recorder.clone();
        let timeout = self.timeout;
        tokio::spawn(async move {
            for reference in refs {
                match tokio::time::timeout(timeout, recorder.publish(&ev, &reference)).await {
                    Ok(Ok(())) => {}
                    Ok(Err(e)) => tracing::debug!(error = %e, "cannot post leader election event"),
                    Err(_) => tracing::debug!("posting leader election event timed out"),
                }
            }
        })
    }
}

/// A Kubernetes qualified name without prefix: 1–63 characters, alphanumerics, `-`, `_`, `.`, starting
/// and ending alphanumeric.
fn is_qualified_name(s: &str) -> bool {
    let ok_char = |c: char| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.');
    !s.is_empty()
        && s.len() <= 63
        && s.chars().all(ok_char)
        && s.starts_with(|c: char| c.is_ascii_alphanumeric())
        && s.ends_with(|c: char| c.is_ascii_alphanumeric())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn qualified_names() {
        assert!(is_qualified_name("provider-nop-7d9f-x2k4"));
        assert!(is_qualified_name("host_0b9e.x"));
        assert!(!is_qualified_name("a/b"));
        assert!(!is_qualified_name("-a"));
        assert!(!is_qualified_name(""));
        assert!(!is_qualified_name(&"a".repeat(64)));
    }
}
