//! The leader leaves on its own Pod's deletion, before the kubelet's SIGTERM arrives.
//!
//! Deleting a Pod reaches a replica late: the kubelet sees the deletion through its own watch, asks the
//! container runtime to stop the container, and the runtime sends SIGTERM. A replica that knows its Pod
//! (`POD_NAME` and `POD_NAMESPACE` from the downward API) watches that one Pod with a `metadata.name`
//! field selector, and learns of the deletion straight from the apiserver. When the Pod gets a
//! `deletionTimestamp` (a `kubectl delete`, an eviction, a rolling update) or a `DisruptionTarget`
//! condition, or is gone, a *leading* replica shuts down as on SIGTERM: it stops its leader work and
//! releases the Lease at once. A standby does nothing: it has nothing to hand over, and it must not
//! stand for the Lease again, so a standby that becomes leader while its Pod is going away leaves at
//! once too. Either way the process then waits for the signal before it exits, so that the kubelet,
//! which may not have seen the deletion yet, has no exited container to restart.
//!
//! If the watch is not allowed (401, 403), the replica logs it once and
//! behaves as without the watch: it leaves on SIGTERM. Other errors are retried with kube's backoff. A Pod
//! that does not exist (yet) is simply never seen going away.
//!
//! Cost while idle: one watch connection, renewed by the apiserver's watch timeout; no polling.

use futures::StreamExt;
use k8s_openapi::api::core::v1::Pod;
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, Event};
use kube::{Api, Client};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use election::Leadership;

/// The Pod this replica runs in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OwnPod {
    /// Its namespace (`POD_NAMESPACE`).
    pub namespace: String,
    /// Its name (`POD_NAME`).
    pub name: String,
}

impl OwnPod {
    /// `POD_NAMESPACE` and `POD_NAME` from the environment, when both are set and not empty.
    pub fn from_env() -> Option<Self> {
        Self::from_values(
            std::env::var("POD_NAMESPACE").ok().as_deref(),
            std::env::var("POD_NAME").ok().as_deref(),
        )
    }

    fn from_values(namespace: Option<&str>, name: Option<&str>) -> Option<Self> {
        let namespace = namespace.map(str::trim).filter(|s| !s.is_empty())?;
        let name = name.map(str::trim).filter(|s| !s.is_empty())?;
        Some(Self {
            namespace: namespace.to_owned(),
            name: name.to_owned(),
        })
    }
}

/// Whether a Pod is going away: it has a `deletionTimestamp`, or a `DisruptionTarget` condition that
/// is `True` (an eviction or a preemption on its way).
pub fn is_going_away(pod: &Pod) -> bool {
    pod.metadata.deletion_timestamp.is_some()
        || pod
            .status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .is_some_and(|cs| {
                cs.iter()
                    .any(|c| c.type_ == "DisruptionTarget" && c.status == "True")
            })
}

/// What the watch concluded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Outcome {
    /// The Pod is going away and this replica was leading (or came to lead): shutdown was asked for.
    LeftOnDeletion,
    /// The watch is not possible (forbidden, no such Pod): the replica leaves on SIGTERM as before.
    Unavailable,
    /// The manager stopped first.
    Stopped,
}

/// Watches `pod` until it goes away, then cancels `shutdown` once `leadership` says Leading.
pub(crate) async fn watch_own_pod(
    client: Client,
    pod: OwnPod,
    mut leadership: watch::Receiver<Leadership>,
    shutdown: CancellationToken,
) -> Outcome {
    let api: Api<Pod> = Api::namespaced(client, &pod.namespace);
    let config = watcher::Config::default().fields(&format!("metadata.name={}", pod.name));
    let mut events = watcher::watcher(api, config).default_backoff().boxed();
    let going_away = loop {
        let next = tokio::select! {
            () = shutdown.cancelled() => return Outcome::Stopped,
            next = events.next() => next,
        };
        match next {
            None => return Outcome::Stopped,
            Some(Ok(Event::Apply(p) | Event::InitApply(p))) if is_going_away(&p) => break "being deleted",
            Some(Ok(Event::Delete(_))) => break "deleted",
            Some(Ok(_)) => {}
            Some(Err(e)) => {
                if let Some(why) = unavailable(&e) {
                    tracing::info!(
                        pod = %pod.name,
                        namespace = %pod.namespace,
                        "cannot watch this replica's own Pod ({why}); the leader will leave on SIGTERM only. \
                         Grant get, list and watch on pods in its namespace to let it leave as soon as its Pod is deleted"
                    );
                    return Outcome::Unavailable;
                }
                tracing::debug!(error = %e, "watching this replica's own Pod; retrying");
            }
        }
    };
    tracing::info!(pod = %pod.name, namespace = %pod.namespace, state = going_away, "this replica's Pod is going away");
    let leading = tokio::select! {
        () = shutdown.cancelled() => return Outcome::Stopped,
        r = leadership.wait_for(|l| matches!(l, Leadership::Leading { .. })) => r.is_ok(),
    };
    if !leading {
        return Outcome::Stopped;
    }
    tracing::info!(
        pod = %pod.name,
        "leaving: this replica leads and its Pod is going away; stopping leader work and releasing the lease before SIGTERM"
    );
    shutdown.cancel();
    Outcome::LeftOnDeletion
}

/// Why a watch error means the watch is not possible at all, or `None` when it is worth retrying.
fn unavailable(e: &watcher::Error) -> Option<&'static str> {
    let api = match e {
        watcher::Error::InitialListFailed(kube::Error::Api(s))
        | watcher::Error::WatchStartFailed(kube::Error::Api(s)) => s,
        watcher::Error::WatchError(s) => s,
        _ => return None,
    };
    match api.code {
        403 => Some("forbidden"),
        401 => Some("unauthorized"),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{PodCondition, PodStatus};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

    #[test]
    fn own_pod_needs_both_values() {
        assert_eq!(OwnPod::from_values(Some("ns"), None), None);
        assert_eq!(OwnPod::from_values(None, Some("p")), None);
        assert_eq!(OwnPod::from_values(Some(" "), Some("p")), None);
        assert_eq!(
            OwnPod::from_values(Some("ns"), Some("p")),
            Some(OwnPod {
                namespace: "ns".into(),
                name: "p".into()
            })
        );
    }

    #[test]
    fn a_pod_goes_away_on_deletion_or_disruption() {
        let mut pod = Pod::default();
        assert!(!is_going_away(&pod));
        pod.metadata.deletion_timestamp = Some(Time(jiff::Timestamp::UNIX_EPOCH));
        assert!(is_going_away(&pod));

        let condition = |status: &str| PodCondition {
            type_: "DisruptionTarget".into(),
            status: status.into(),
            ..PodCondition::default()
        };
        let mut evicted = Pod {
            status: Some(PodStatus {
                conditions: Some(vec![condition("False")]),
                ..PodStatus::default()
            }),
            ..Pod::default()
        };
        assert!(!is_going_away(&evicted));
        evicted.status = Some(PodStatus {
            conditions: Some(vec![condition("True")]),
            ..PodStatus::default()
        });
        assert!(is_going_away(&evicted));
    }
}
