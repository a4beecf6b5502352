//! Connection secrets: type `connection.crossplane.io/v1alpha1`, controller-owned by the managed
//! resource, written additively (keys are added or changed, never removed), and only when something
//! changed.

use std::collections::BTreeMap;

use apis::SecretRef;
use apis::meta::SECRET_TYPE_CONNECTION;
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use kube::api::PostParams;
use kube::{Resource, ResourceExt};

use crate::external::ConnectionDetails;

/// Publishing failed.
#[derive(Debug, thiserror::Error)]
pub enum PublishError {
    /// The managed resource has no UID or name yet.
    #[error("the managed resource has no uid")]
    NoUid,
    /// The Secret exists and another object controls it.
    #[error("refusing to write Secret {namespace}/{name}: it is controlled by another object")]
    NotControlled {
        /// Secret namespace.
        namespace: String,
        /// Secret name.
        name: String,
    },
    /// Reading the Secret failed.
    #[error("cannot get Secret {0}: {1}")]
    Get(String, #[source] kube::Error),
    /// Writing the Secret failed.
    #[error("cannot write Secret {0}: {1}")]
    Write(String, #[source] kube::Error),
}

impl PublishError {
    /// True when the fence refused the write.
    pub fn is_not_leader(&self) -> bool {
        matches!(self, Self::Write(_, e) if manager::fence::is_not_leader(e))
    }
}

/// A controller owner reference to `owner`.
pub fn controller_ref<K: Resource<DynamicType = ()>>(owner: &K) -> Option<OwnerReference> {
    Some(OwnerReference {
        api_version: K::api_version(&()).into_owned(),
        kind: K::kind(&()).into_owned(),
        name: owner.meta().name.clone()?,
        uid: owner.meta().uid.clone()?,
        controller: Some(true),
        block_owner_deletion: Some(true),
    })
}

/// Merges `details` into the existing data; returns the new data if anything changed.
pub fn merge(
    existing: Option<&BTreeMap<String, ByteString>>,
    details: &ConnectionDetails,
) -> Option<BTreeMap<String, ByteString>> {
    let mut data = existing.cloned().unwrap_or_default();
    let mut changed = false;
    for (k, v) in details {
        if data.get(k).map(|b| &b.0) != Some(v) {
            data.insert(k.clone(), ByteString(v.clone()));
            changed = true;
        }
    }
    changed.then_some(data)
}

/// Writes `details` to the connection secret `target` of `owner`. Returns whether a write was made.
pub async fn publish<K: Resource<DynamicType = ()>>(
    client: &kube::Client,
    owner: &K,
    target: &SecretRef,
    details: &ConnectionDetails,
) -> Result<bool, PublishError> {
    let owner_ref = controller_ref(owner).ok_or(PublishError::NoUid)?;
    let api = kube::Api::<Secret>::namespaced(client.clone(), &target.namespace);
    let shown = format!("{}/{}", target.namespace, target.name);
    let existing = api
        .get_opt(&target.name)
        .await
        .map_err(|e| PublishError::Get(shown.clone(), e))?;
    match existing {
        None => {
            let secret = Secret {
                metadata: ObjectMeta {
                    name: Some(target.name.clone()),
                    namespace: Some(target.namespace.clone()),
                    owner_references: Some(vec![owner_ref]),
                    ..ObjectMeta::default()
                },
                type_: Some(SECRET_TYPE_CONNECTION.to_owned()),
                data: Some(merge(None, details).unwrap_or_default()),
                ..Secret::default()
            };
            api.create(&PostParams::default(), &secret)
                .await
                .map_err(|e| PublishError::Write(shown, e))?;
            Ok(true)
        }
        Some(mut secret) => {
            let controller = secret
                .owner_references()
                .iter()
                .find(|o| o.controller == Some(true));
            if controller.is_some_and(|c| c.uid != owner_ref.uid) {
                return Err(PublishError::NotControlled {
                    namespace: target.namespace.clone(),
                    name: target.name.clone(),
                });
            }
            let mut changed = false;
            if controller.is_none() {
                secret.owner_references_mut().push(owner_ref);
                changed = true;
            }
            if let Some(data) = merge(secret.data.as_ref(), details) {
                secret.data = Some(data);
                changed = true;
            }
            if !changed {
                return Ok(false);
            }
            api.replace(&target.name, &PostParams::default(), &secret)
                .await
                .map_err(|e| PublishError::Write(shown, e))?;
            Ok(true)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn merge_is_additive_and_detects_no_change() {
        let details: ConnectionDetails = [("a".to_owned(), b"1".to_vec())].into();
        let first = merge(None, &details).expect("changed");
        assert_eq!(first["a"].0, b"1");
        assert_eq!(merge(Some(&first), &details), None);
        let mut existing = first.clone();
        existing.insert("b".into(), ByteString(b"2".to_vec()));
        let more: ConnectionDetails = [("a".to_owned(), b"3".to_vec())].into();
        let merged = merge(Some(&existing), &more).expect("changed");
        assert_eq!(merged["a"].0, b"3");
        assert_eq!(merged["b"].0, b"2");
    }
}
