//! The typed face of the term's client: [`FencedClient`] and [`FencedApi`].
//!
//! Writes are fenced in **one** place: the [`FenceLayer`](crate::gate::FenceLayer) in the client's
//! tower stack, which refuses a write once the term has ended, as the request is handed to the
//! transport. These types add no check of their own; they only tell a refusal apart from an apiserver
//! error ([`FencedError::NotLeader`]) so callers can stop quietly. A request already sent when the term
//! ends is what the Lease's stop margin (`lease − renew`) is there to cover.
//!
//! [`FencedClient::kube`] is the same client as a plain [`kube::Client`], for watches, caches, kube's
//! own event recorder and any API this module has no method for: its writes are fenced just the same.

use std::fmt::Debug;
use std::future::Future;

use either::Either;
use kube::api::{
    DeleteParams, ListParams, ObjectList, PartialObjectMeta, Patch, PatchParams, PostParams, Resource,
};
use kube::core::Status;
use kube::{Api, Client};
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::fence::{Fence, NotLeader};
use crate::gate::{fence_client, refusal};

/// The error of a call through the term's client.
#[derive(Debug, thiserror::Error)]
pub enum FencedError {
    /// The write was refused: this replica's term has ended. Nothing was sent.
    #[error(transparent)]
    NotLeader(#[from] NotLeader),
    /// The apiserver (or the transport) failed the request.
    #[error(transparent)]
    Kube(kube::Error),
}

impl From<kube::Error> for FencedError {
    /// A refusal by the fence layer becomes [`FencedError::NotLeader`]; anything else stays a kube error.
    fn from(e: kube::Error) -> Self {
        match refusal(&e) {
            Some(refused) => Self::NotLeader(refused.clone()),
            None => Self::Kube(e),
        }
    }
}

impl FencedError {
    /// True when the fence refused the write.
    pub fn is_not_leader(&self) -> bool {
        matches!(self, Self::NotLeader(_))
    }
}

/// A [`kube::Client`] whose writes pass the term's fence layer. Cheap to clone.
#[derive(Clone)]
pub struct FencedClient {
    client: Client,
    fence: Fence,
}

impl FencedClient {
    /// Fences `client` (for example one for another cluster) with `fence`: its requests pass a
    /// [`FenceLayer`](crate::gate::FenceLayer) first.
    pub fn new(client: Client, fence: Fence) -> Self {
        let client = fence_client(client, &fence);
        Self { client, fence }
    }

    /// A client whose stack already holds the fence layer (the term's client).
    pub(crate) fn layered(client: Client, fence: Fence) -> Self {
        Self { client, fence }
    }

    /// The fence (and through it the term's guard).
    pub fn fence(&self) -> &Fence {
        &self.fence
    }

    /// `Ok` while leader-only writes are allowed: for work that writes somewhere else than the
    /// apiserver (an external system), or that should not start once the term is over.
    pub fn check(&self) -> Result<(), NotLeader> {
        self.fence.check()
    }

    /// The same client as a plain [`kube::Client`], for watches, caches and reads. Its writes are fenced.
    pub fn kube(&self) -> &Client {
        &self.client
    }

    /// A fenced API for a namespaced resource in `ns`.
    pub fn namespaced<K>(&self, ns: &str) -> FencedApi<K>
    where
        K: Resource<Scope = k8s_openapi::NamespaceResourceScope>,
        K::DynamicType: Default,
    {
        self.wrap(Api::namespaced(self.client.clone(), ns))
    }

    /// A fenced API for a cluster-scoped resource, or a namespaced one across all namespaces.
    pub fn all<K>(&self) -> FencedApi<K>
    where
        K: Resource,
        K::DynamicType: Default,
    {
        self.wrap(Api::all(self.client.clone()))
    }

    /// Fences an existing [`Api`], e.g. one built with `Api::namespaced_with` for dynamic objects.
    pub fn wrap<K>(&self, api: Api<K>) -> FencedApi<K> {
        FencedApi {
            api,
            fence: self.fence.clone(),
        }
    }

    /// A raw request; a write is fenced like any other.
    pub async fn request<T>(&self, request: http::Request<Vec<u8>>) -> Result<T, FencedError>
    where
        T: DeserializeOwned,
    {
        Ok(self.client.request(request).await?)
    }
}

/// A [`kube::Api`] over the term's client, whose errors tell a refusal by the fence apart. Cheap to clone.
#[derive(Clone)]
pub struct FencedApi<K> {
    api: Api<K>,
    fence: Fence,
}

impl<K> FencedApi<K> {
    /// The fence (and through it the term's guard).
    pub fn fence(&self) -> &Fence {
        &self.fence
    }
}

impl<K> FencedApi<K>
where
    K: Clone + DeserializeOwned + Debug,
{
    /// Runs any other write, e.g. a subresource this type has no method for:
    /// `api.write(|a| async move { a.evict(name, &params).await }).await`.
    pub async fn write<T, F, Fut>(&self, f: F) -> Result<T, FencedError>
    where
        F: FnOnce(Api<K>) -> Fut,
        Fut: Future<Output = kube::Result<T>>,
    {
        Ok(f(self.api.clone()).await?)
    }

    /// Reads one object (not fenced).
    pub async fn get(&self, name: &str) -> kube::Result<K> {
        self.api.get(name).await
    }

    /// Reads one object, `None` when missing (not fenced).
    pub async fn get_opt(&self, name: &str) -> kube::Result<Option<K>> {
        self.api.get_opt(name).await
    }

    /// Reads one object's metadata (not fenced).
    pub async fn get_metadata(&self, name: &str) -> kube::Result<PartialObjectMeta<K>> {
        self.api.get_metadata(name).await
    }

    /// Lists objects (not fenced).
    pub async fn list(&self, lp: &ListParams) -> kube::Result<ObjectList<K>> {
        self.api.list(lp).await
    }

    /// Lists objects' metadata (not fenced).
    pub async fn list_metadata(&self, lp: &ListParams) -> kube::Result<ObjectList<PartialObjectMeta<K>>> {
        self.api.list_metadata(lp).await
    }

    /// Reads the status subresource (not fenced).
    pub async fn get_status(&self, name: &str) -> kube::Result<K> {
        self.api.get_status(name).await
    }

    /// Creates an object (fenced by the layer).
    pub async fn create(&self, pp: &PostParams, data: &K) -> Result<K, FencedError>
    where
        K: Serialize,
    {
        Ok(self.api.create(pp, data).await?)
    }

    /// Replaces an object (fenced by the layer).
    pub async fn replace(&self, name: &str, pp: &PostParams, data: &K) -> Result<K, FencedError>
    where
        K: Serialize,
    {
        Ok(self.api.replace(name, pp, data).await?)
    }

    /// Patches an object (fenced by the layer).
    pub async fn patch<P: Serialize + Debug>(
        &self,
        name: &str,
        pp: &PatchParams,
        patch: &Patch<P>,
    ) -> Result<K, FencedError> {
        Ok(self.api.patch(name, pp, patch).await?)
    }

    /// Patches an object's metadata (fenced by the layer).
    pub async fn patch_metadata<P: Serialize + Debug>(
        &self,
        name: &str,
        pp: &PatchParams,
        patch: &Patch<P>,
    ) -> Result<PartialObjectMeta<K>, FencedError> {
        Ok(self.api.patch_metadata(name, pp, patch).await?)
    }

    /// Deletes an object (fenced by the layer).
    pub async fn delete(&self, name: &str, dp: &DeleteParams) -> Result<Either<K, Status>, FencedError> {
        Ok(self.api.delete(name, dp).await?)
    }

    /// Deletes a collection of objects (fenced by the layer).
    pub async fn delete_collection(
        &self,
        dp: &DeleteParams,
        lp: &ListParams,
    ) -> Result<Either<ObjectList<K>, Status>, FencedError> {
        Ok(self.api.delete_collection(dp, lp).await?)
    }

    /// Patches the status subresource (fenced by the layer).
    pub async fn patch_status<P: Serialize + Debug>(
        &self,
        name: &str,
        pp: &PatchParams,
        patch: &Patch<P>,
    ) -> Result<K, FencedError> {
        Ok(self.api.patch_status(name, pp, patch).await?)
    }

    /// Replaces the status subresource (fenced by the layer).
    pub async fn replace_status(&self, name: &str, pp: &PostParams, data: &K) -> Result<K, FencedError>
    where
        K: Serialize,
    {
        Ok(self.api.replace_status(name, pp, data).await?)
    }

    /// Creates an instance of a subresource (fenced by the layer).
    pub async fn create_subresource<I, T>(
        &self,
        subresource: &str,
        name: &str,
        pp: &PostParams,
        data: &I,
    ) -> Result<T, FencedError>
    where
        I: Serialize,
        T: DeserializeOwned,
    {
        Ok(self.api.create_subresource(subresource, name, pp, data).await?)
    }

    /// Patches a subresource (fenced by the layer).
    pub async fn patch_subresource<P: Serialize + Debug>(
        &self,
        subresource: &str,
        name: &str,
        pp: &PatchParams,
        patch: &Patch<P>,
    ) -> Result<K, FencedError> {
        Ok(self.api.patch_subresource(subresource, name, pp, patch).await?)
    }

    /// Replaces a subresource (fenced by the layer).
    pub async fn replace_subresource<I>(
        &self,
        subresource: &str,
        name: &str,
        pp: &PostParams,
        data: &I,
    ) -> Result<K, FencedError>
    where
        I: Serialize,
    {
        Ok(self.api.replace_subresource(subresource, name, pp, data).await?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::ConfigMap;

    /// A client pointing at a port nothing listens on: any request that is actually sent fails with a
    /// transport error, so a `NotLeader` proves the fence layer stopped the write before sending.
    fn dead_client() -> Client {
        let uri: http::Uri = "http://127.0.0.1:9".parse().expect("uri");
        let config = kube::Config::new(uri);
        Client::try_from(config).expect("client")
    }

    #[tokio::test]
    async fn writes_are_refused_after_revocation_and_reads_pass_through() {
        let fence = Fence::never_lapsing("replica-a");
        let client = FencedClient::new(dead_client(), fence.clone());
        let api: FencedApi<ConfigMap> = client.namespaced("ns");
        let cm = ConfigMap::default();

        // While valid, the write is sent (and fails in transport, not at the fence).
        let e = api
            .create(&PostParams::default(), &cm)
            .await
            .expect_err("no server");
        assert!(!e.is_not_leader(), "{e}");

        fence.revoke("lost the lease");
        let pp = PatchParams::apply("test");
        let patch = Patch::Apply(&cm);
        let refusals = [
            api.create(&PostParams::default(), &cm).await.err(),
            api.replace("x", &PostParams::default(), &cm).await.err(),
            api.patch("x", &pp, &patch).await.err(),
            api.patch_metadata("x", &pp, &patch).await.err(),
            api.delete("x", &DeleteParams::default()).await.err(),
            api.delete_collection(&DeleteParams::default(), &ListParams::default())
                .await
                .err(),
            api.patch_status("x", &pp, &patch).await.err(),
            api.replace_status("x", &PostParams::default(), &cm).await.err(),
            api.patch_subresource("scale", "x", &pp, &patch).await.err(),
            api.replace_subresource("scale", "x", &PostParams::default(), &cm)
                .await
                .err(),
            api.create_subresource::<_, ConfigMap>("eviction", "x", &PostParams::default(), &cm)
                .await
                .err(),
            api.write(|a| async move { a.delete("x", &DeleteParams::default()).await })
                .await
                .err(),
        ];
        for (i, e) in refusals.into_iter().enumerate() {
            let e = e.expect("refused");
            assert!(e.is_not_leader(), "call {i}: {e}");
            let msg = e.to_string();
            assert!(
                msg.starts_with("not the leader: term of replica-a on lease"),
                "{msg}"
            );
            assert!(msg.contains("write refused"), "{msg}");
        }

        // Reads are not fenced: they reach the (dead) transport.
        let e = api.get("x").await.expect_err("no server");
        assert!(!matches!(e, kube::Error::Api(_)));

        // Raw requests: GET passes, POST is fenced.
        let get = http::Request::get("/api/v1/namespaces")
            .body(Vec::new())
            .expect("req");
        let e = client
            .request::<serde_json::Value>(get)
            .await
            .expect_err("no server");
        assert!(!e.is_not_leader());
        let post = http::Request::post("/api/v1/namespaces")
            .body(Vec::new())
            .expect("req");
        let e = client
            .request::<serde_json::Value>(post)
            .await
            .expect_err("fenced");
        assert!(e.is_not_leader());
    }
}
