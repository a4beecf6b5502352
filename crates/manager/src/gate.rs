//! The fence again, at the last point a write passes inside the client.
//!
//! [`FencedClient`](crate::FencedClient) checks the term's [`Fence`] before it hands a write to kube. Between
//! that check and the socket the request still crosses kube's request buffer (a task of its own) and
//! the layers below it; a process frozen (SIGSTOP, a VM pause) in that gap would send the write when it
//! runs again, after its term. Each term therefore gets its own client whose stack holds a
//! [`FenceLayer`] directly under the buffer: it checks the fence again as the request is handed to the
//! transport, which narrows that gap to the transport's own hops. Only a server-side precondition
//! (`resourceVersion`) closes it entirely.
//!
//! Reviews (`SelfSubjectAccessReview` and friends) are POSTs that change nothing, and pass.

use std::task::{Context, Poll};

use futures::FutureExt;
use futures::future::BoxFuture;
use http::{Method, Request};
use tower::{BoxError, Layer, Service};

use crate::fence::Fence;

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
}
