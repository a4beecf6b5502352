//! Watching the lock object(s).
//!
//! Standbys and the leader watch their one object with a field selector on `metadata.name`, using
//! `kube::runtime::watcher`: an initial list, then one long-running watch that the watcher resumes from
//! the last resourceVersion when the server closes it, and re-lists after a `410 Gone`. In steady state
//! that is the only request a standby makes of its lock; besides it, only the keep-warm `GET /version`
//! every 80 s (`warm`). When the watch breaks (apiserver down, RBAC), the task logs
//! the error (Forbidden with the RBAC rule to add), backs off (250 ms doubling to 30 s) and re-lists.
//!
//! For a ConfigMap lock the ConfigMap is watched. For a MultiLock both objects are watched — more than
//! the primary alone — so that a standby also sees renewals by Lease-only candidates during the last
//! migration step, where a Lease-only leader never touches the ConfigMap.

use std::time::Duration;

use futures::StreamExt;
use kube::{
    api::{Api, DynamicObject},
    runtime::watcher::{self, Event},
};
use tokio::sync::mpsc;

use crate::lock::Which;

/// What the watch saw.
#[derive(Debug)]
pub(crate) enum Seen {
    /// The object as it is now.
    Applied(Box<DynamicObject>),
    /// The object was deleted.
    Deleted(Box<DynamicObject>),
    /// A (re-)list found no object.
    Absent,
}

/// One message from a watch task.
#[derive(Debug)]
pub(crate) struct WatchMsg {
    pub which: Which,
    pub seen: Seen,
}

/// Aborts the watch task when dropped.
#[derive(Debug)]
pub(crate) struct WatchTask(tokio::task::JoinHandle<()>);

impl Drop for WatchTask {
    fn drop(&mut self) {
        self.0.abort();
    }
}

const BACKOFF_START: Duration = Duration::from_millis(250);
const BACKOFF_MAX: Duration = Duration::from_secs(30);

/// Spawns a task watching the object `name` through `api`, sending what it sees to `tx`.
pub(crate) fn spawn(
    api: Api<DynamicObject>,
    which: Which,
    namespace: String,
    name: String,
    tx: mpsc::Sender<WatchMsg>,
) -> WatchTask {
    WatchTask(tokio::spawn(async move {
        let config = watcher::Config::default().fields(&format!("metadata.name={name}"));
        let mut stream = std::pin::pin!(watcher::watcher(api, config));
        let mut listed: Option<DynamicObject> = None;
        let mut backoff = BACKOFF_START;
        while let Some(item) = stream.next().await {
            let seen = match item {
                Ok(event) => {
                    // `Init` opens every re-list, including the ones after an error, so only what the
                    // apiserver actually answered proves the watch healthy again.
                    if !matches!(event, Event::Init) {
                        backoff = BACKOFF_START;
                    }
                    match event {
                        Event::Init => {
                            listed = None;
                            continue;
                        }
                        Event::InitApply(obj) => {
                            listed = Some(obj);
                            continue;
                        }
                        Event::InitDone => match listed.take() {
                            Some(obj) => Seen::Applied(Box::new(obj)),
                            None => Seen::Absent,
                        },
                        Event::Apply(obj) => Seen::Applied(Box::new(obj)),
                        Event::Delete(obj) => Seen::Deleted(Box::new(obj)),
                    }
                }
                Err(e) => {
                    // One clear message per streak of failures; the retries are logged at debug.
                    if backoff == BACKOFF_START {
                        log_error(&e, which, &namespace, &name, backoff);
                    } else {
                        tracing::debug!(error = %e, retry_in = ?backoff, "lock watch failed again; retrying");
                    }
                    tokio::time::sleep(backoff).await;
                    backoff = (backoff * 2).min(BACKOFF_MAX);
                    continue;
                }
            };
            if tx.send(WatchMsg { which, seen }).await.is_err() {
                return; // the elector is gone
            }
        }
    }))
}

fn log_error(e: &watcher::Error, which: Which, namespace: &str, name: &str, retry_in: Duration) {
    let status = match e {
        watcher::Error::InitialListFailed(kube::Error::Api(s))
        | watcher::Error::WatchStartFailed(kube::Error::Api(s))
        | watcher::Error::WatchFailed(kube::Error::Api(s)) => Some(s.as_ref()),
        watcher::Error::WatchError(s) => Some(s.as_ref()),
        _ => None,
    };
    let resource = which.resource();
    if status.is_some_and(|s| s.is_forbidden()) {
        let verb = if matches!(e, watcher::Error::InitialListFailed(_)) {
            "list"
        } else {
            "watch"
        };
        tracing::error!(
            verb,
            resource,
            namespace,
            retry_in = ?retry_in,
            "forbidden to {verb} {resource} in namespace {namespace}: add an RBAC Role in namespace {namespace} \
             with the rule {{apiGroups: [\"{group}\"], resources: [\"{resource}\"], verbs: [\"get\", \"list\", \
             \"watch\", \"create\", \"update\"]}} and bind it to this process's service account",
            group = which.group(),
        );
    } else if let watcher::Error::InitialListFailed(k)
    | watcher::Error::WatchStartFailed(k)
    | watcher::Error::WatchFailed(k) = e
        && matches!(k, kube::Error::HyperError(_) | kube::Error::Service(_))
    {
        let verb = if matches!(e, watcher::Error::InitialListFailed(_)) {
            "list"
        } else {
            "watch"
        };
        tracing::error!(
            verb,
            resource,
            namespace,
            name,
            retry_in = ?retry_in,
            "cannot reach the Kubernetes API server to {verb} {resource} {namespace}/{name}: {}; check the \
             server address and credentials in the kubeconfig, and that the apiserver is running and \
             reachable from here; retrying with backoff",
            crate::error::error_chain(k),
        );
    } else {
        tracing::warn!(error = %e, resource, namespace, name, retry_in = ?retry_in, "lock watch failed; re-listing");
    }
}
