//! Realtime composition: the kinds an XR composes are watched, and a change to a composed resource
//! reconciles its XR at once instead of at the next poll.
//!
//! The first compose that meets a kind starts one metadata watch on it (objects labelled
//! `crossplane.io/composite`); each change is mapped to its controlling XR through the controller
//! owner reference. A watch that is refused (RBAC) or fails backs off and retries; polling still
//! covers its kind meanwhile ([`super::kind_watch`] counts and reports the failures). Each change goes through the XR's circuit breaker ([`super::circuit`]),
//! which drops changes while an XR's circuit is open; a composed resource being deleted always gets
//! through.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use apis::apiextensions::labels::LABEL_COMPOSITE;
use kube::Api;
use kube::api::DynamicObject;
use kube::core::{ApiResource, PartialObjectMeta};
use kube::runtime::reflector::ObjectRef;
use kube::runtime::watcher;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::circuit::{self, Breaker};
use super::kind_watch::{self, Flow};

/// The watches of one composite controller.
pub struct ComposedWatches {
    client: kube::Client,
    xr: ApiResource,
    namespaced: bool,
    token: CancellationToken,
    tx: mpsc::UnboundedSender<ObjectRef<DynamicObject>>,
    watched: Mutex<HashSet<(String, String)>>,
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
            watched: Mutex::new(HashSet::new()),
            breaker,
        };
        (w, rx)
    }

    /// Where changes that reconcile an XR go (shared with [`super::required::Required`]).
    pub fn sender(&self) -> mpsc::UnboundedSender<ObjectRef<DynamicObject>> {
        self.tx.clone()
    }

    /// Starts watching `kind` unless it is watched already.
    pub fn ensure(&self, kind: &ApiResource) {
        let key = (kind.api_version.clone(), kind.kind.clone());
        let new = self
            .watched
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .insert(key);
        if !new {
            return;
        }
        let api: Api<PartialObjectMeta<DynamicObject>> = Api::all_with(self.client.clone(), kind);
        let xr = self.xr.clone();
        let namespaced = self.namespaced;
        let tx = self.tx.clone();
        let breaker = self.breaker.clone();
        let composed_kind = kind.kind.clone();
        let what = format!("composed {}/{} of {}", kind.api_version, kind.kind, xr.kind);
        tracing::debug!("watching {what}");
        let cfg = watcher::Config::default().labels(LABEL_COMPOSITE);
        kind_watch::spawn(api, cfg, self.token.clone(), what, move |obj| {
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
    }
}

/// The XR that controls `obj`, if it is one of kind `xr`.
fn owner(
    obj: &PartialObjectMeta<DynamicObject>,
    xr: &ApiResource,
    namespaced: bool,
) -> Option<ObjectRef<DynamicObject>> {
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
