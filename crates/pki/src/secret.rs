//! `kubernetes.io/tls` Secrets that are created once: whoever creates first wins, everyone else reads
//! what it stored.

use std::collections::BTreeMap;

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use kube::Api;
use kube::api::{ObjectMeta, PostParams};

/// A `kubernetes.io/tls` Secret `namespace/name` holding `data`.
pub fn tls(namespace: &str, name: &str, data: BTreeMap<String, Vec<u8>>) -> Secret {
    Secret {
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            namespace: Some(namespace.to_owned()),
            ..Default::default()
        },
        type_: Some("kubernetes.io/tls".into()),
        data: Some(data.into_iter().map(|(k, v)| (k, ByteString(v))).collect()),
        ..Default::default()
    }
}

/// Creates `secret` unless one of its name exists; returns what is stored (someone else's if it won the
/// race).
pub async fn create_or_get(api: &Api<Secret>, secret: &Secret) -> Result<Secret, kube::Error> {
    let name = secret.metadata.name.clone().unwrap_or_default();
    match api.create(&PostParams::default(), secret).await {
        Ok(s) => Ok(s),
        Err(kube::Error::Api(e)) if e.code == 409 => api.get(&name).await,
        Err(e) => Err(e),
    }
}

/// The UTF-8 value of `key` in `secret`, if present.
pub fn text(secret: &Secret, key: &str) -> Option<String> {
    let bytes = secret.data.as_ref()?.get(key)?;
    String::from_utf8(bytes.0.clone()).ok()
}
