//! One watch on one kind: [`events`], a watch's events with its failures counted and logged in words,
//! which the composed-resource watches ([`super::watch`]), the required-resource watches
//! ([`super::required`]) and the WatchOperation watches ([`crate::ops::watched`]) read; [`reflected`],
//! the same with each event applied to a cache first (the composite controllers' caches); and
//! [`spawn`] / [`spawn_cached`], the watch loops of the composed and required resources.
//!
//! A failed watch backs off and retries (kube's default backoff). No failure is dropped silently: the
//! first one of a run of failures is logged as a warning that names the watch and what happens meanwhile
//! (for an XR's watches, polling covers the kind), later ones are counted, and the recovery reports how
//! many there were.

use std::fmt::Debug;

use futures::{Stream, StreamExt};
use kube::api::DynamicObject;
use kube::core::PartialObjectMeta;
use kube::runtime::WatchStreamExt;
use kube::runtime::reflector::store::Writer;
use kube::runtime::watcher::{self, watcher};
use kube::{Api, Resource};
use manager::controller::api_error::explain_watch;
use serde::de::DeserializeOwned;
use tokio_util::sync::CancellationToken;

/// What happens while an XR's watch fails.
const XR_MEANWHILE: &str = "its changes reach XRs only at their next poll";

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
    on_change: impl FnMut(PartialObjectMeta<DynamicObject>) -> Flow + Send + 'static,
) {
    spawn_events(events(api, cfg, what, XR_MEANWHILE), token, on_change);
}

/// As [`spawn`], the objects of full `kind` kept in the cache `writer` fills ([`reflected`]): each
/// object reaches `on_change` once the cache holds it.
pub fn spawn_cached(
    api: Api<DynamicObject>,
    cfg: watcher::Config,
    writer: Writer<DynamicObject>,
    token: CancellationToken,
    what: String,
    on_change: impl FnMut(DynamicObject) -> Flow + Send + 'static,
) {
    spawn_events(reflected(api, cfg, writer, what, XR_MEANWHILE), token, on_change);
}

/// Drives `events` until `token` is cancelled or `on_change` stops, giving it each object applied or
/// deleted.
fn spawn_events<K: Send + 'static>(
    events: impl Stream<Item = watcher::Event<K>> + Send + 'static,
    token: CancellationToken,
    mut on_change: impl FnMut(K) -> Flow + Send + 'static,
) {
    tokio::spawn(async move {
        let mut events = events.boxed();
        loop {
            let ev = tokio::select! {
                () = token.cancelled() => return,
                ev = events.next() => ev,
            };
            let obj = match ev {
                None => return,
                Some(watcher::Event::Apply(o) | watcher::Event::Delete(o)) => o,
                Some(_) => continue,
            };
            if on_change(obj) == Flow::Stop {
                return;
            }
        }
    });
}

/// The events of a watch of `api` with `cfg`, retried with kube's default backoff. Its failures are
/// not yielded but logged and counted ([`Failures`]) under `what` (the watch's name in the logs), with
/// `meanwhile` saying what happens until it works again.
pub fn events<K>(
    api: Api<K>,
    cfg: watcher::Config,
    what: String,
    meanwhile: &'static str,
) -> impl Stream<Item = watcher::Event<K>> + Send
where
    K: Resource + Clone + DeserializeOwned + Debug + Send + 'static,
{
    counted(watcher(api, cfg).default_backoff(), what, meanwhile)
}

/// As [`events`], each event applied to the cache `writer` fills before it is yielded: whoever hears
/// of a change finds it in the cache.
pub fn reflected<K>(
    api: Api<K>,
    cfg: watcher::Config,
    writer: Writer<K>,
    what: String,
    meanwhile: &'static str,
) -> impl Stream<Item = watcher::Event<K>> + Send
where
    K: Resource + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
    K::DynamicType: Eq + std::hash::Hash + Clone + Send + Sync,
{
    counted(
        watcher(api, cfg).default_backoff().reflect(writer),
        what,
        meanwhile,
    )
}

/// A watch's events, its failures logged and counted instead of yielded.
fn counted<K: Send>(
    watch: impl Stream<Item = Result<watcher::Event<K>, watcher::Error>> + Send,
    what: String,
    meanwhile: &'static str,
) -> impl Stream<Item = watcher::Event<K>> + Send {
    let mut failures = Failures::default();
    watch.filter_map(move |ev| {
        futures::future::ready(match ev {
            Err(e) => {
                failures.failed(&what, meanwhile, &e);
                None
            }
            Ok(ev) => {
                failures.recovered(&what);
                Some(ev)
            }
        })
    })
}

/// A watch's failures: how many in all, and how many in the current run of failures.
#[derive(Debug, Default)]
struct Failures {
    total: u64,
    run: u64,
}

impl Failures {
    fn failed(&mut self, what: &str, meanwhile: &str, e: &watcher::Error) {
        let e = explain_watch(e);
        self.total += 1;
        self.run += 1;
        let total = self.total;
        if self.run == 1 {
            tracing::warn!(
                "watching {what} failed ({e}); retrying with backoff, and until it works {meanwhile} \
                 (failure {total} of this watch)"
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
pub fn source<K: Resource>(kind: &str, obj: &K) -> String {
    let name = obj.meta().name.as_deref().unwrap_or_default();
    match obj.meta().namespace.as_deref() {
        Some(ns) if !ns.is_empty() => format!("{kind}/{name} ({ns})"),
        _ => format!("{kind}/{name}"),
    }
}
