//! One metadata watch on one kind, the loop that both the composed-resource watches ([`super::watch`]) and
//! the required-resource watches ([`super::required`]) run.
//!
//! A failed watch backs off and retries (kube's default backoff); polling covers the kind meanwhile. No
//! failure is dropped silently: the first one of a run of failures is logged as a warning that names the
//! kind and what happens meanwhile, later ones are counted, and the recovery reports how many there were.

use futures::StreamExt;
use kube::Api;
use kube::api::DynamicObject;
use kube::core::PartialObjectMeta;
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, watcher};
use manager::controller::api_error::explain_watch;
use tokio_util::sync::CancellationToken;

/// What the handler of a change wants next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flow {
    /// Keep watching.
    Continue,
    /// Stop the watch (its receiver is gone).
    Stop,
}

/// Spawns a watch of `api` with `cfg` until `token` is cancelled, giving each object that is applied or
/// deleted to `on_change`. `what` names the watch in its logs (`composed ConfigMap`, for example).
pub fn spawn(
    api: Api<PartialObjectMeta<DynamicObject>>,
    cfg: watcher::Config,
    token: CancellationToken,
    what: String,
    mut on_change: impl FnMut(PartialObjectMeta<DynamicObject>) -> Flow + Send + 'static,
) {
    tokio::spawn(async move {
        let mut events = watcher(api, cfg).default_backoff().boxed();
        let mut failures = Failures::default();
        loop {
            let ev = tokio::select! {
                () = token.cancelled() => return,
                ev = events.next() => ev,
            };
            let obj = match ev {
                None => return,
                Some(Err(e)) => {
                    failures.failed(&what, &e);
                    continue;
                }
                Some(Ok(ev)) => {
                    failures.recovered(&what);
                    match ev {
                        watcher::Event::Apply(o) | watcher::Event::Delete(o) => o,
                        _ => continue,
                    }
                }
            };
            if on_change(obj) == Flow::Stop {
                return;
            }
        }
    });
}

/// A watch's failures: how many in all, and how many in the current run of failures.
#[derive(Debug, Default)]
struct Failures {
    total: u64,
    run: u64,
}

impl Failures {
    fn failed(&mut self, what: &str, e: &watcher::Error) {
        let e = explain_watch(e);
        self.total += 1;
        self.run += 1;
        let total = self.total;
        if self.run == 1 {
            tracing::warn!(
                "watching {what} failed ({e}); retrying with backoff, and until it works its changes reach \
                 XRs only at their next poll (failure {total} of this watch)"
            );
        } else {
            tracing::debug!("watching {what} failed again ({e}); failure {total} of this watch");
        }
    }

    fn recovered(&mut self, what: &str) {
        if self.run > 0 {
            tracing::info!("watching {what} works again after {} failed attempts", self.run);
            self.run = 0;
        }
    }
}

/// An object as the circuit breaker and the logs name it: `Kind/name (namespace)`, as upstream's.
pub fn source(kind: &str, obj: &PartialObjectMeta<DynamicObject>) -> String {
    let name = obj.metadata.name.as_deref().unwrap_or_default();
    match obj.metadata.namespace.as_deref() {
        Some(ns) if !ns.is_empty() => format!("{kind}/{name} ({ns})"),
        _ => format!("{kind}/{name}"),
    }
}
