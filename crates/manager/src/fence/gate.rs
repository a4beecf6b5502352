//! The one place writes are fenced: a tower layer in the client.
//!
//! Every term gets its own client whose stack holds a [`FenceLayer`] directly under kube's request
//! buffer: it checks the term's [`Fence`] as each write is handed to the transport and refuses it once
//! the term has ended, so a write that waited in the buffer (or in a process frozen by SIGSTOP or a VM
//! pause) past the end of the term is not sent. Everything built on that client is fenced by it: typed
//! APIs, raw requests, kube's own event recorder. Only a server-side precondition (`resourceVersion`) or
//! the admission policy closes the remaining gap of the transport's own hops.
//!
//! A client made elsewhere (another cluster's) is fenced with [`fence_client`], which puts the same layer
//! in front of it. A refusal reaches the caller as a [`kube::Error`]; [`refusal`] finds the
//! [`NotLeader`] in it.
//!
//! Reviews (`SelfSubjectAccessReview` and friends) are POSTs that change nothing, and pass.

use std::task::{Context, Poll};

use futures::FutureExt;
use futures::future::BoxFuture;
use http::{Method, Request};
use tower::{BoxError, Layer, Service};

use crate::fence::{Fence, NotLeader};

/// Wraps an existing client so that its writes pass `fence` first (a client for another cluster, say).
/// The term's own client holds the layer under kube's buffer instead (see the module docs).
pub fn fence_client(client: kube::Client, fence: &Fence) -> kube::Client {
    let namespace = client.default_namespace().to_owned();
    kube::Client::new(
        FenceLayer::new(fence.clone()).layer(ClientService(client)),
        namespace,
    )
}

/// The fence's refusal inside a client error, if that is what it is.
pub fn refusal(e: &kube::Error) -> Option<&NotLeader> {
    let mut current: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(err) = current {
        if let Some(refused) = err.downcast_ref::<NotLeader>() {
            return Some(refused);
        }
        current = match err.downcast_ref::<kube::Error>() {
            Some(kube::Error::Service(inner)) => Some(inner.as_ref()),
            _ => err.source(),
        };
    }
    None
}

/// A [`kube::Client`] as a tower service, for [`fence_client`] and
/// [`RestClientMetrics::wrap`](crate::metrics::rest::RestClientMetrics::wrap).
#[derive(Clone)]
pub(crate) struct ClientService(pub(crate) kube::Client);

impl tower::Service<Request<kube::client::Body>> for ClientService {
    type Response = http::Response<kube::client::Body>;
    type Error = kube::Error;
    type Future = BoxFuture<'static, Result<Self::Response, kube::Error>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: Request<kube::client::Body>) -> Self::Future {
        let client = self.0.clone();
        async move { client.send(req).await }.boxed()
    }
}

/// A tower layer that refuses writes once `fence` has closed.
#[derive(Clone, Debug)]
pub struct FenceLayer {
    fence: Fence,
}

impl FenceLayer {
    /// A layer checking `fence`.
    pub fn new(fence: Fence) -> Self {
        Self { fence }
    }
}

impl<S> Layer<S> for FenceLayer {
    type Service = FencedService<S>;

    fn layer(&self, inner: S) -> Self::Service {
        FencedService {
            inner,
            fence: self.fence.clone(),
        }
    }
}

/// The service [`FenceLayer`] makes.
#[derive(Clone, Debug)]
pub struct FencedService<S> {
    inner: S,
    fence: Fence,
}

/// Whether a request changes state on the apiserver.
fn is_write<B>(req: &Request<B>) -> bool {
    let mutating = matches!(
        *req.method(),
        Method::POST | Method::PUT | Method::PATCH | Method::DELETE
    );
    let path = req.uri().path();
    let review =
        path.starts_with("/apis/authorization.k8s.io/") || path.starts_with("/apis/authentication.k8s.io/");
    mutating && !review
}

impl<S, B> Service<Request<B>> for FencedService<S>
where
    S: Service<Request<B>>,
    S::Error: Into<BoxError>,
    S::Future: Send + 'static,
    S::Response: Send + 'static,
{
    type Response = S::Response;
    type Error = BoxError;
    type Future = BoxFuture<'static, Result<S::Response, BoxError>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, req: Request<B>) -> Self::Future {
        if is_write(&req)
            && let Err(refused) = self.fence.check()
        {
            return futures::future::ready(Err(Box::new(refused) as BoxError)).boxed();
        }
        let fut = self.inner.call(req);
        async move { fut.await.map_err(Into::into) }.boxed()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(method: Method, path: &str) -> Request<()> {
        Request::builder()
            .method(method)
            .uri(path)
            .body(())
            .expect("valid request")
    }

    #[derive(Clone)]
    struct Echo;

    impl Service<Request<()>> for Echo {
        type Response = &'static str;
        type Error = BoxError;
        type Future = futures::future::Ready<Result<&'static str, BoxError>>;

        fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
            Poll::Ready(Ok(()))
        }

        fn call(&mut self, _: Request<()>) -> Self::Future {
            futures::future::ready(Ok("sent"))
        }
    }

    #[tokio::test]
    async fn a_closed_fence_stops_writes_but_not_reads_or_reviews() {
        let fence = Fence::never_lapsing("me");
        let mut svc = FenceLayer::new(fence.clone()).layer(Echo);
        let path = "/api/v1/namespaces/ns/configmaps/x";
        assert!(svc.call(req(Method::PUT, path)).await.is_ok());
        fence.revoke("the term ended");
        for m in [Method::POST, Method::PUT, Method::PATCH, Method::DELETE] {
            let e = svc.call(req(m, path)).await.expect_err("refused");
            assert!(e.to_string().starts_with("not the leader"), "{e}");
        }
        assert!(svc.call(req(Method::GET, path)).await.is_ok());
        let review = "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews";
        assert!(svc.call(req(Method::POST, review)).await.is_ok());
    }

    #[tokio::test]
    async fn a_fenced_client_refuses_writes_with_a_findable_refusal() {
        let uri: http::Uri = "http://127.0.0.1:9".parse().expect("uri");
        let inner = kube::Client::try_from(kube::Config::new(uri)).expect("client");
        let fence = Fence::never_lapsing("me");
        let client = fence_client(inner, &fence);
        let api: kube::Api<k8s_openapi::api::core::v1::ConfigMap> = kube::Api::namespaced(client, "ns");
        let cm = k8s_openapi::api::core::v1::ConfigMap::default();
        let sent = api
            .create(&Default::default(), &cm)
            .await
            .expect_err("nothing listens");
        assert!(refusal(&sent).is_none(), "{sent}");
        assert!(!crate::fence::is_not_leader(&sent));
        fence.revoke("the term ended");
        let refused = api.create(&Default::default(), &cm).await.expect_err("refused");
        assert!(crate::fence::is_not_leader(&refused), "{refused}");
        let not_leader = refusal(&refused).expect("a refusal");
        assert_eq!(not_leader.reason, "the term ended");
        // Reads still reach the transport.
        let read = api.get("x").await.expect_err("nothing listens");
        assert!(refusal(&read).is_none());
    }

    #[tokio::test]
    async fn kubes_own_event_recorder_is_fenced_by_the_same_layer() {
        use kube::runtime::events::{Event, EventType, Recorder, Reporter};
        let uri: http::Uri = "http://127.0.0.1:9".parse().expect("uri");
        let inner = kube::Client::try_from(kube::Config::new(uri)).expect("client");
        let fence = Fence::never_lapsing("me");
        let recorder = Recorder::new(fence_client(inner, &fence), Reporter::from("test"));
        let regarding = k8s_openapi::api::core::v1::ObjectReference {
            name: Some("x".into()),
            namespace: Some("ns".into()),
            ..Default::default()
        };
        let event = Event {
            type_: EventType::Normal,
            reason: "Tested".into(),
            note: None,
            action: "Test".into(),
            secondary: None,
        };
        fence.revoke("the term ended");
        let refused = recorder.publish(&event, &regarding).await.expect_err("refused");
        assert_eq!(
            refusal(&refused).map(|r| r.reason.as_str()),
            Some("the term ended")
        );
    }
}
