//! Realtime composition: the kinds an XR composes are watched, and a change to a composed resource
//! reconciles its XR at once instead of at the next poll.
//!
//! The first compose that meets a kind starts one watch on it (objects labelled
//! `crossplane.io/composite`); each change is mapped to its controlling XR through the controller
//! owner reference. The watch keeps a cache of the objects it sees, which the compose reads its
//! composed resources from ([`ComposedWatches::cached`]) instead of getting each one from the apiserver;
//! a change reaches the XR only once the cache holds it. A watch that is refused (RBAC) or fails backs off and retries; polling still
//! covers its kind meanwhile ([`super::kind_watch`] counts and reports the failures). Each change goes through the XR's circuit breaker ([`super::circuit`]),
//! which drops changes while an XR's circuit is open; a composed resource being deleted always gets
//! through.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use apis::apiextensions::labels::LABEL_COMPOSITE;
use futures::FutureExt;
use kube::Api;
use kube::api::DynamicObject;
use kube::core::ApiResource;
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::watcher;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::circuit::{self, Breaker};
use super::kind_watch::{self, Flow};

/// The cache of one composed kind, with the kind's resource (the key of its objects).
type KindCache = (ApiResource, Store<DynamicObject>);

/// The watches of one composite controller.
pub struct ComposedWatches {
    client: kube::Client,
    xr: ApiResource,
    namespaced: bool,
    token: CancellationToken,
    tx: mpsc::UnboundedSender<ObjectRef<DynamicObject>>,
    /// The cache of each watched kind, by apiVersion and kind, with the kind's resource (its key).
    watched: Mutex<HashMap<(String, String), KindCache>>,
    breaker: Arc<Breaker>,
}

impl ComposedWatches {
    /// Watches for XRs of kind `xr` (namespaced or not), stopping with `token`, each change admitted by
    /// `breaker`; the receiver yields the XRs to reconcile.
    pub fn new(
        client: kube::Client,
        xr: ApiResource,
        namespaced: bool,
        token: CancellationToken,
        breaker: Arc<Breaker>,
    ) -> (Self, mpsc::UnboundedReceiver<ObjectRef<DynamicObject>>) {
        let (tx, rx) = mpsc::unbounded_channel();
        let w = Self {
            client,
            xr,
            namespaced,
            token,
            tx,
            watched: Mutex::new(HashMap::new()),
            breaker,
        };
        (w, rx)
    }

    /// Where changes that reconcile an XR go (shared with [`super::required::Required`]).
    pub fn sender(&self) -> mpsc::UnboundedSender<ObjectRef<DynamicObject>> {
        self.tx.clone()
    }

    /// The composed resource `name` (in `namespace`, for a namespaced kind) as the cache of its kind
    /// holds it, watching the kind first if it is not watched yet. `None` says nothing about the
    /// object: the cache has not synced yet (it is not waited for: a kind first met, or one whose watch
    /// RBAC does not allow yet, is read from the apiserver meanwhile), or it does not hold the object
    /// (not created yet, or created a moment ago and not seen yet, or gone): the caller asks the
    /// apiserver then, so that no object is taken for absent on the cache's word.
    pub fn cached(
        &self,
        kind: &ApiResource,
        namespace: Option<&str>,
        name: &str,
    ) -> Option<Arc<DynamicObject>> {
        let (resource, store) = self.ensure(kind);
        store.wait_until_ready().now_or_never()?.ok()?;
        let mut key = ObjectRef::new_with(name, resource);
        if let Some(ns) = namespace {
            key = key.within(ns);
        }
        store.get(&key)
    }

    /// Starts watching `kind` unless it is watched already; returns the kind's cache and its key.
    pub fn ensure(&self, kind: &ApiResource) -> KindCache {
        let key = (kind.api_version.clone(), kind.kind.clone());
        let mut watched = self
            .watched
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(cache) = watched.get(&key) {
            return cache.clone();
        }
        let writer = reflector::store::Writer::new(kind.clone());
        let store = writer.as_reader();
        watched.insert(key, (kind.clone(), store.clone()));
        drop(watched);
        let api: Api<DynamicObject> = Api::all_with(self.client.clone(), kind);
        let xr = self.xr.clone();
        let namespaced = self.namespaced;
        let tx = self.tx.clone();
        let breaker = self.breaker.clone();
        let composed_kind = kind.kind.clone();
        let what = format!("composed {}/{} of {}", kind.api_version, kind.kind, xr.kind);
        tracing::debug!("watching {what}");
        let cfg = watcher::Config::default().labels(LABEL_COMPOSITE);
        kind_watch::spawn_cached(api, cfg, writer, self.token.clone(), what, move |obj| {
            let Some(r) = owner(&obj, &xr, namespaced) else {
                return Flow::Continue;
            };
            let deleting = obj.metadata.deletion_timestamp.is_some();
            let source = kind_watch::source(&composed_kind, &obj);
            let target = circuit::key(r.namespace.as_deref(), &r.name);
            if !deleting && !breaker.admit(&target, &source, Instant::now()) {
                tracing::debug!(xr = %target, source = %source, "watch event dropped: the XR's circuit is open");
                return Flow::Continue;
            }
            if tx.send(r).is_err() {
                Flow::Stop
            } else {
                Flow::Continue
            }
        });
        (kind.clone(), store)
    }
}

/// The XR that controls `obj`, if it is one of kind `xr`.
fn owner(obj: &DynamicObject, xr: &ApiResource, namespaced: bool) -> Option<ObjectRef<DynamicObject>> {
    let o = obj
        .metadata
        .owner_references
        .as_ref()?
        .iter()
        .find(|o| o.controller == Some(true) && o.kind == xr.kind && o.api_version == xr.api_version)?;
    let r = ObjectRef::new_with(&o.name, xr.clone());
    Some(match (&obj.metadata.namespace, namespaced) {
        (Some(ns), true) => r.within(ns),
        _ => r,
    })
}
