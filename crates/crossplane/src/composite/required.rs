//! Watches on what functions required: a change to a resource a step asked for (`requirements.resources`)
//! reconciles the XRs whose last compose required it at once, instead of at the next poll or response
//! TTL (upstream's dependency tracker).
//!
//! After each compose the controller records, per XR, the selectors its steps required ([`Required::track`]);
//! the first selector of a kind starts one metadata watch on that kind (every object, every namespace).
//! A change is matched against each XR's selectors (by name and namespace, or by labels within the
//! selector's namespace or all namespaces) and the matching XRs are sent to the controller, through the
//! XR's circuit breaker as composed-resource changes are. The watch loop is [`super::kind_watch`]'s: a
//! watch that is refused (RBAC) backs off and retries, counted and reported, and the poll still covers
//! its kind meanwhile.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use kube::Api;
use kube::api::DynamicObject;
use kube::core::{ApiResource, PartialObjectMeta};
use kube::runtime::reflector::ObjectRef;
use kube::runtime::watcher;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::circuit::{self, Breaker};
use super::kind_watch::{self, Flow};

/// One required resource, or set of resources, of a known kind.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Dependency {
    /// The kind's `apiVersion`.
    pub api_version: String,
    /// The kind.
    pub kind: String,
    /// The namespace (none: cluster-scoped by name, or every namespace by labels).
    pub namespace: Option<String>,
    /// The name it matches, or else the labels.
    pub name: Option<String>,
    /// The labels it matches (when it matches no name).
    pub labels: BTreeMap<String, String>,
}

impl Dependency {
    /// Whether the object `(namespace, name, labels)` of this dependency's kind is one it selects.
    pub fn matches(&self, namespace: Option<&str>, name: &str, labels: &BTreeMap<String, String>) -> bool {
        let ns = namespace.filter(|n| !n.is_empty());
        match &self.name {
            Some(n) => n == name && self.namespace.as_deref() == ns,
            None => {
                (self.namespace.is_none() || self.namespace.as_deref() == ns)
                    && self.labels.iter().all(|(k, v)| labels.get(k) == Some(v))
            }
        }
    }
}

type Deps = HashMap<String, (ObjectRef<DynamicObject>, Vec<Dependency>)>;

/// The required-resource watches of one composite controller.
pub struct Required {
    client: kube::Client,
    token: CancellationToken,
    tx: mpsc::UnboundedSender<ObjectRef<DynamicObject>>,
    watched: Mutex<HashSet<(String, String)>>,
    deps: Arc<Mutex<Deps>>,
    breaker: Arc<Breaker>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl Required {
    /// Watches stopping with `token` that send the XRs to reconcile on `tx`, each change admitted by
    /// `breaker`.
    pub fn new(
        client: kube::Client,
        token: CancellationToken,
        tx: mpsc::UnboundedSender<ObjectRef<DynamicObject>>,
        breaker: Arc<Breaker>,
    ) -> Self {
        Self {
            client,
            token,
            tx,
            watched: Mutex::new(HashSet::new()),
            deps: Arc::new(Mutex::new(HashMap::new())),
            breaker,
        }
    }

    /// Records what XR `xr` required in its last compose (replacing what it required before), and
    /// watches each kind in `kinds` (the API resources of `deps`' kinds).
    pub fn track(&self, xr: ObjectRef<DynamicObject>, deps: Vec<Dependency>, kinds: &[ApiResource]) {
        let key = circuit::key(xr.namespace.as_deref(), &xr.name);
        {
            let mut all = lock(&self.deps);
            if deps.is_empty() {
                all.remove(&key);
            } else {
                all.insert(key, (xr, deps));
            }
        }
        for k in kinds {
            self.ensure(k);
        }
    }

    /// Forgets what XR `namespace/name` required (it is gone).
    pub fn forget(&self, namespace: Option<&str>, name: &str) {
        lock(&self.deps).remove(&circuit::key(namespace, name));
    }

    fn ensure(&self, kind: &ApiResource) {
        let key = (kind.api_version.clone(), kind.kind.clone());
        if !lock(&self.watched).insert(key) {
            return;
        }
        let api: Api<PartialObjectMeta<DynamicObject>> = Api::all_with(self.client.clone(), kind);
        let (tx, deps, breaker) = (self.tx.clone(), self.deps.clone(), self.breaker.clone());
        let (api_version, kind_name) = (kind.api_version.clone(), kind.kind.clone());
        let what = format!("required {api_version}/{kind_name}");
        tracing::debug!("watching {what}");
        kind_watch::spawn(
            api,
            watcher::Config::default(),
            self.token.clone(),
            what,
            move |obj| {
                let name = obj.metadata.name.clone().unwrap_or_default();
                let ns = obj.metadata.namespace.clone();
                let labels = obj.metadata.labels.clone().unwrap_or_default();
                let targets: Vec<(String, ObjectRef<DynamicObject>)> = lock(&deps)
                    .iter()
                    .filter(|(_, (_, ds))| {
                        ds.iter().any(|d| {
                            d.api_version == api_version
                                && d.kind == kind_name
                                && d.matches(ns.as_deref(), &name, &labels)
                        })
                    })
                    .map(|(k, (r, _))| (k.clone(), r.clone()))
                    .collect();
                let source = kind_watch::source(&kind_name, &obj);
                for (target, r) in targets {
                    if !breaker.admit(&target, &source, Instant::now()) {
                        tracing::debug!(xr = %target, source = %source, "watch event dropped: the XR's circuit is open");
                        continue;
                    }
                    if tx.send(r).is_err() {
                        return Flow::Stop;
                    }
                }
                Flow::Continue
            },
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dep(namespace: Option<&str>, name: Option<&str>, labels: &[(&str, &str)]) -> Dependency {
        Dependency {
            api_version: "v1".into(),
            kind: "ConfigMap".into(),
            namespace: namespace.map(str::to_owned),
            name: name.map(str::to_owned),
            labels: labels
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect(),
        }
    }

    #[test]
    fn by_name_in_its_namespace_or_by_labels() {
        let none = BTreeMap::new();
        let labelled: BTreeMap<String, String> = [("app".to_owned(), "a".to_owned())].into();
        let by_name = dep(Some("default"), Some("cfg"), &[]);
        assert!(by_name.matches(Some("default"), "cfg", &none));
        assert!(!by_name.matches(Some("other"), "cfg", &none));
        assert!(!by_name.matches(Some("default"), "other", &none));
        let cluster = dep(None, Some("cfg"), &[]);
        assert!(cluster.matches(None, "cfg", &none) && !cluster.matches(Some("default"), "cfg", &none));
        let anywhere = dep(None, None, &[("app", "a")]);
        assert!(anywhere.matches(Some("x"), "any", &labelled) && !anywhere.matches(Some("x"), "any", &none));
        let within = dep(Some("default"), None, &[("app", "a")]);
        assert!(within.matches(Some("default"), "any", &labelled));
        assert!(!within.matches(Some("x"), "any", &labelled));
    }
}
