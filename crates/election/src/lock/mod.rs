//! The lock: the object(s) that hold the record, their cached state, and the requests that read and
//! write them.
//!
//! The cache holds the last version seen of each lock object, from write responses, GETs and the watch.
//! A newer version replaces an older one; versions are ordered by `metadata.resourceVersion`, compared as
//! integers (kube-apiserver's resource versions are etcd revisions, which increase; KEP-5504 makes this
//! comparison official). A version whose resourceVersion cannot be read as an integer is taken as newer.
//! Ordering matters because the watch can deliver an event older than a write response already seen;
//! without it a leader would mistake its own previous write, or the previous holder's last renew, for a
//! foreign write.
//!
//! Every write is a conditional one: a replace carries the cached object's resourceVersion, so a write
//! based on a stale view fails with 409 instead of overwriting someone else's record. Each request is
//! wrapped in a timeout of `max(1 s, renew_deadline / 2)`.

pub(crate) mod configmap;
pub(crate) mod lease;
pub(crate) mod multi;

use std::{cmp::Ordering, collections::BTreeMap, future::Future, time::Duration};

use k8s_openapi::api::core::v1::ObjectReference;
use kube::api::{Api, DynamicObject, PostParams};

use crate::{
    config::{ElectionConfig, LockKind},
    error::error_chain,
    record::{LeaderRecord, Snapshot},
};

/// One kind of lock object.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Which {
    /// The Lease.
    Lease,
    /// The ConfigMap.
    ConfigMap,
}

impl Which {
    /// The plural resource name.
    pub(crate) fn resource(self) -> &'static str {
        match self {
            Which::Lease => "leases",
            Which::ConfigMap => "configmaps",
        }
    }

    /// The API group (`""` = core).
    pub(crate) fn group(self) -> &'static str {
        match self {
            Which::Lease => "coordination.k8s.io",
            Which::ConfigMap => "",
        }
    }

    fn snapshot(self, obj: &DynamicObject) -> Snapshot {
        match self {
            Which::Lease => lease::snapshot(obj),
            Which::ConfigMap => configmap::snapshot(obj),
        }
    }
}

/// What the cache says about the lock.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum View {
    /// Not read yet.
    Unknown,
    /// The lock does not exist (or, for a MultiLock, must be created).
    Missing,
    /// The lock holds this record.
    Present(Snapshot),
}

#[derive(Clone, Debug, Default)]
struct Slot {
    known: bool,
    obj: Option<DynamicObject>,
}

/// A request to the apiserver failed.
#[derive(Debug, thiserror::Error)]
pub(crate) enum RequestError {
    /// The request did not complete within the per-request timeout.
    #[error("cannot {verb} {resource} {namespace}/{name}: no answer within {timeout:?}")]
    Timeout {
        verb: &'static str,
        resource: &'static str,
        namespace: String,
        name: String,
        timeout: Duration,
    },
    /// RBAC denied the request.
    #[error(
        "forbidden to {verb} {resource} in namespace {namespace}: add an RBAC Role in namespace {namespace} \
         with the rule {{apiGroups: [\"{group}\"], resources: [\"{resource}\"], verbs: [\"get\", \"list\", \
         \"watch\", \"create\", \"update\"]}} and bind it to this process's service account ({message})"
    )]
    Forbidden {
        verb: &'static str,
        resource: &'static str,
        group: &'static str,
        namespace: String,
        message: String,
    },
    /// No answer from the apiserver at the transport level: connection refused, DNS, TLS.
    #[error(
        "cannot reach the Kubernetes API server to {verb} {resource} {namespace}/{name}: {detail}; check \
         the server address and credentials in the kubeconfig, and that the apiserver is running and \
         reachable from here"
    )]
    Unreachable {
        verb: &'static str,
        resource: &'static str,
        namespace: String,
        name: String,
        /// The error and its sources (kube's own text stops at "client error (Connect)").
        detail: String,
    },
    /// Any other failure.
    #[error("cannot {verb} {resource} {namespace}/{name}: {source}")]
    Api {
        verb: &'static str,
        resource: &'static str,
        namespace: String,
        name: String,
        #[source]
        source: kube::Error,
    },
}

impl RequestError {
    fn status(&self) -> Option<&kube::core::Status> {
        match self {
            RequestError::Api {
                source: kube::Error::Api(s),
                ..
            } => Some(s),
            _ => None,
        }
    }

    /// 409 Conflict (a replace with a stale resourceVersion).
    pub(crate) fn is_conflict(&self) -> bool {
        self.status().is_some_and(|s| s.is_conflict())
    }

    /// 404 Not Found.
    pub(crate) fn is_not_found(&self) -> bool {
        self.status().is_some_and(|s| s.is_not_found())
    }

    /// 409 AlreadyExists (a create that lost a race).
    pub(crate) fn is_already_exists(&self) -> bool {
        self.status().is_some_and(|s| s.is_already_exists())
    }

    /// 403 Forbidden.
    pub(crate) fn is_forbidden(&self) -> bool {
        matches!(self, RequestError::Forbidden { .. })
    }

    /// The apiserver could not be reached at all.
    pub(crate) fn is_unreachable(&self) -> bool {
        matches!(self, RequestError::Unreachable { .. })
    }
}

/// Why a write did not succeed.
#[derive(Debug, thiserror::Error)]
pub(crate) enum WriteError {
    /// Someone else wrote (or created) the lock since it was last seen.
    #[error("the lock changed since it was last read: {0}")]
    Conflict(#[source] RequestError),
    /// The lock object was deleted.
    #[error("the lock object was deleted: {0}")]
    NotFound(#[source] RequestError),
    /// The request failed for another reason.
    #[error(transparent)]
    Request(#[from] RequestError),
}

impl WriteError {
    fn classify(e: RequestError) -> Self {
        if e.is_conflict() || e.is_already_exists() {
            WriteError::Conflict(e)
        } else if e.is_not_found() {
            WriteError::NotFound(e)
        } else {
            WriteError::Request(e)
        }
    }
}

/// The lock object(s), cached, with their API clients.
pub(crate) struct Lock {
    kind: LockKind,
    namespace: String,
    name: String,
    identity: String,
    labels: BTreeMap<String, String>,
    timeout: Duration,
    leases: Api<DynamicObject>,
    configmaps: Api<DynamicObject>,
    lease: Slot,
    configmap: Slot,
}

impl Lock {
    /// A lock with an empty cache.
    pub(crate) fn new(client: kube::Client, config: &ElectionConfig) -> Self {
        Self {
            kind: config.lock_kind,
            namespace: config.namespace.clone(),
            name: config.name.clone(),
            identity: config.identity.clone(),
            labels: config.labels.clone(),
            timeout: config.timings.request_timeout(),
            leases: Api::namespaced_with(client.clone(), &config.namespace, &lease::resource()),
            configmaps: Api::namespaced_with(client, &config.namespace, &configmap::resource()),
            lease: Slot::default(),
            configmap: Slot::default(),
        }
    }

    /// The objects this lock reads, primary first.
    pub(crate) fn objects(&self) -> &'static [Which] {
        match self.kind {
            LockKind::Lease => &[Which::Lease],
            LockKind::ConfigMap => &[Which::ConfigMap],
            LockKind::ConfigMapAndLease => &[Which::ConfigMap, Which::Lease],
        }
    }

    /// The API for one kind of lock object.
    pub(crate) fn api(&self, which: Which) -> Api<DynamicObject> {
        match which {
            Which::Lease => self.leases.clone(),
            Which::ConfigMap => self.configmaps.clone(),
        }
    }

    fn slot(&self, which: Which) -> &Slot {
        match which {
            Which::Lease => &self.lease,
            Which::ConfigMap => &self.configmap,
        }
    }

    fn slot_mut(&mut self, which: Which) -> &mut Slot {
        match which {
            Which::Lease => &mut self.lease,
            Which::ConfigMap => &mut self.configmap,
        }
    }

    fn snapshot_of(&self, which: Which) -> Option<Snapshot> {
        self.slot(which).obj.as_ref().map(|o| which.snapshot(o))
    }

    /// The record as the cache shows it.
    pub(crate) fn view(&self) -> View {
        if self.objects().iter().any(|w| !self.slot(*w).known) {
            return View::Unknown;
        }
        let snapshot = match self.kind {
            LockKind::Lease => self.snapshot_of(Which::Lease),
            LockKind::ConfigMap => self.snapshot_of(Which::ConfigMap),
            LockKind::ConfigMapAndLease => multi::merge(
                self.snapshot_of(Which::ConfigMap),
                self.snapshot_of(Which::Lease),
                &self.identity,
            ),
        };
        snapshot.map_or(View::Missing, View::Present)
    }

    /// Takes a version of an object seen somewhere (write response, GET, watch). Older versions than the
    /// cached one are ignored. Returns whether the cache changed.
    pub(crate) fn accept(&mut self, which: Which, obj: DynamicObject) -> bool {
        let slot = self.slot_mut(which);
        slot.known = true;
        if let Some(current) = &slot.obj
            && rv_order(&obj, current) != Ordering::Greater
        {
            return false;
        }
        slot.obj = Some(obj);
        true
    }

    /// Takes a deletion seen on the watch; ignored when the cached object is newer than the deleted
    /// one (it was re-created). Returns whether the cache changed.
    pub(crate) fn accept_deleted(&mut self, which: Which, deleted: &DynamicObject) -> bool {
        let slot = self.slot_mut(which);
        slot.known = true;
        match &slot.obj {
            Some(current) if rv_order(current, deleted) == Ordering::Greater => false,
            Some(_) => {
                slot.obj = None;
                true
            }
            None => false,
        }
    }

    /// Takes an authoritative "absent" (a list or GET that found nothing). Returns whether the cache
    /// changed.
    pub(crate) fn accept_absent(&mut self, which: Which) -> bool {
        let slot = self.slot_mut(which);
        slot.known = true;
        slot.obj.take().is_some()
    }

    /// References to the cached lock objects, for Events (the Lease when there is one; the ConfigMap
    /// too for a MultiLock, as client-go's MultiLock records on both).
    pub(crate) fn object_refs(&self) -> Vec<ObjectReference> {
        self.objects()
            .iter()
            .filter_map(|w| self.slot(*w).obj.as_ref().map(|o| (w, o)))
            .map(|(w, o)| ObjectReference {
                api_version: Some(if w.group().is_empty() {
                    "v1".into()
                } else {
                    format!("{}/v1", w.group())
                }),
                kind: Some(match w {
                    Which::Lease => "Lease".into(),
                    Which::ConfigMap => "ConfigMap".into(),
                }),
                name: o.metadata.name.clone(),
                namespace: o
                    .metadata
                    .namespace
                    .clone()
                    .or_else(|| Some(self.namespace.clone())),
                uid: o.metadata.uid.clone(),
                resource_version: o.metadata.resource_version.clone(),
                field_path: None,
            })
            .collect()
    }

    async fn call<T>(
        &self,
        verb: &'static str,
        which: Which,
        request: impl Future<Output = kube::Result<T>>,
    ) -> Result<T, RequestError> {
        let resource = which.resource();
        match tokio::time::timeout(self.timeout, request).await {
            Err(_) => Err(RequestError::Timeout {
                verb,
                resource,
                namespace: self.namespace.clone(),
                name: self.name.clone(),
                timeout: self.timeout,
            }),
            Ok(Ok(v)) => Ok(v),
            Ok(Err(kube::Error::Api(status))) if status.is_forbidden() => Err(RequestError::Forbidden {
                verb,
                resource,
                group: which.group(),
                namespace: self.namespace.clone(),
                message: status.message.clone(),
            }),
            Ok(Err(e @ (kube::Error::HyperError(_) | kube::Error::Service(_)))) => {
                Err(RequestError::Unreachable {
                    verb,
                    resource,
                    namespace: self.namespace.clone(),
                    name: self.name.clone(),
                    detail: error_chain(&e),
                })
            }
            Ok(Err(source)) => Err(RequestError::Api {
                verb,
                resource,
                namespace: self.namespace.clone(),
                name: self.name.clone(),
                source,
            }),
        }
    }

    async fn get(&self, which: Which) -> Result<Option<DynamicObject>, RequestError> {
        let api = self.api(which);
        self.call("get", which, api.get_opt(&self.name)).await
    }

    /// Reads one object fresh and takes it into the cache.
    async fn refresh_one(&mut self, which: Which) -> Result<(), RequestError> {
        match self.get(which).await? {
            Some(obj) => self.accept(which, obj),
            None => self.accept_absent(which),
        };
        Ok(())
    }

    /// Reads the lock fresh (primary first) and takes it into the cache.
    pub(crate) async fn refresh(&mut self) -> Result<(), RequestError> {
        for which in self.objects() {
            self.refresh_one(*which).await?;
        }
        Ok(())
    }

    /// Writes `record` to one object: create when the cache says it is missing, else a replace carrying
    /// the cached resourceVersion.
    async fn put(&mut self, which: Which, record: &LeaderRecord) -> Result<(), WriteError> {
        let api = self.api(which);
        let pp = PostParams::default();
        let written = match self.slot(which).obj.clone() {
            None => {
                let obj = match which {
                    Which::Lease => lease::new_object(&self.namespace, &self.name, record, &self.labels),
                    Which::ConfigMap => {
                        configmap::new_object(&self.namespace, &self.name, record, &self.labels)
                    }
                };
                self.call("create", which, api.create(&pp, &obj)).await
            }
            Some(mut obj) => {
                match which {
                    Which::Lease => lease::apply(&mut obj, record, &self.labels),
                    Which::ConfigMap => configmap::apply(&mut obj, record, &self.labels),
                }
                self.call("update", which, api.replace(&self.name, &pp, &obj))
                    .await
            }
        };
        match written {
            Ok(obj) => {
                self.accept(which, obj);
                Ok(())
            }
            Err(e) => Err(WriteError::classify(e)),
        }
    }

    /// Writes `record` to the lock. For a MultiLock: the primary, then the secondary; when the
    /// secondary changed since it was read, it is re-read and written again only if its record is the
    /// one this write was based on (only metadata changed); a different record there is a conflict.
    pub(crate) async fn write(&mut self, record: &LeaderRecord) -> Result<(), WriteError> {
        match self.kind {
            LockKind::Lease => self.put(Which::Lease, record).await,
            LockKind::ConfigMap => self.put(Which::ConfigMap, record).await,
            LockKind::ConfigMapAndLease => {
                let basis = self.snapshot_of(Which::Lease).map(|s| s.raw);
                self.put(Which::ConfigMap, record).await?;
                match self.put(Which::Lease, record).await {
                    Err(WriteError::Conflict(_) | WriteError::NotFound(_)) => {
                        self.refresh_one(Which::Lease).await?;
                        let fresh = self.snapshot_of(Which::Lease).map(|s| s.raw);
                        if fresh.is_some() && fresh != basis {
                            return Err(WriteError::Conflict(RequestError::Api {
                                verb: "update",
                                resource: "leases",
                                namespace: self.namespace.clone(),
                                name: self.name.clone(),
                                source: kube::Error::Api(Box::new(kube::core::Status::failure(
                                    "the secondary Lease holds a different record than when it was read",
                                    "Conflict",
                                ))),
                            }));
                        }
                        self.put(Which::Lease, record).await
                    }
                    other => other,
                }
            }
        }
    }
}

/// Orders two versions of the same object by resourceVersion (see the module docs). Unreadable
/// versions make `a` count as newer.
pub(crate) fn rv_order(a: &DynamicObject, b: &DynamicObject) -> Ordering {
    let parse = |o: &DynamicObject| {
        o.metadata
            .resource_version
            .as_deref()
            .and_then(|v| v.parse::<u64>().ok())
    };
    match (parse(a), parse(b)) {
        (Some(x), Some(y)) => x.cmp(&y),
        _ => Ordering::Greater,
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn obj(rv: Option<&str>, holder: &str) -> DynamicObject {
        serde_json::from_value(json!({
            "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
            "metadata": {"name": "l", "namespace": "ns", "resourceVersion": rv},
            "spec": {"holderIdentity": holder, "leaseDurationSeconds": 15},
        }))
        .expect("lease")
    }

    #[test]
    fn resource_versions_order_numerically() {
        assert_eq!(
            rv_order(&obj(Some("10"), "a"), &obj(Some("9"), "a")),
            Ordering::Greater
        );
        assert_eq!(
            rv_order(&obj(Some("9"), "a"), &obj(Some("10"), "a")),
            Ordering::Less
        );
        assert_eq!(
            rv_order(&obj(Some("9"), "a"), &obj(Some("9"), "a")),
            Ordering::Equal
        );
        assert_eq!(
            rv_order(&obj(Some("x"), "a"), &obj(Some("9"), "a")),
            Ordering::Greater
        );
        assert_eq!(rv_order(&obj(None, "a"), &obj(Some("9"), "a")), Ordering::Greater);
    }

    #[test]
    fn forbidden_message_names_verb_resource_namespace_and_rule() {
        let e = RequestError::Forbidden {
            verb: "update",
            resource: "leases",
            group: "coordination.k8s.io",
            namespace: "crossplane-system".into(),
            message: "user cannot update".into(),
        };
        let m = e.to_string();
        assert!(
            m.starts_with("forbidden to update leases in namespace crossplane-system"),
            "{m}"
        );
        assert!(
            m.contains(r#"apiGroups: ["coordination.k8s.io"], resources: ["leases"]"#),
            "{m}"
        );
        assert!(m.contains(r#""watch""#), "{m}");
        assert!(e.is_forbidden());
    }
}
