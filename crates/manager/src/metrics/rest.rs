//! client-go's `rest_client_requests_total{code,host,method}`, counted by a tower layer in the client.
//!
//! controller-runtime registers client-go's request metrics in its registry; this is the same counter
//! with the same labels: `code` is the HTTP status (`<error>` when no response came back), `method` the
//! HTTP verb in upper case and `host` the apiserver's `host:port`. The layer sits inside each term's
//! client under the fence (see [`client`](crate::config::client)), so it counts every request the term sends,
//! the fenced refusals excepted (they never reach the wire); the manager's main and Lease clients are
//! wrapped with [`RestClientMetrics::wrap`]. `host` is the main config's for all of them, also when
//! `--leader-election-kubeconfig` points the Lease client elsewhere.

use std::task::{Context, Poll};

use futures::FutureExt;
use futures::future::BoxFuture;
use http::{Request, Response};
use prometheus::{IntCounterVec, Opts, Registry};
use tower::{BoxError, Layer, Service};

use crate::metrics::MetricsError;

/// `rest_client_requests_total{code,host,method}`. Cheap to clone.
#[derive(Clone)]
pub struct RestClientMetrics {
    requests: IntCounterVec,
}

impl RestClientMetrics {
    /// Creates the counter and registers it in `registry`.
    pub fn new(registry: &Registry) -> Result<Self, MetricsError> {
        let requests = IntCounterVec::new(
            Opts::new(
                "rest_client_requests_total",
                "Number of HTTP requests, partitioned by status code, method, and host.",
            ),
            &["code", "host", "method"],
        )?;
        registry.register(Box::new(requests.clone()))?;
        Ok(Self { requests })
    }

    /// Counts one request to `host` with `method` that ended with `code`.
    pub fn observe(&self, code: &str, host: &str, method: &str) {
        self.requests.with_label_values(&[code, host, method]).inc();
    }

    /// Wraps an existing client so that its requests are counted, as talking to `host`.
    pub fn wrap(&self, client: kube::Client, host: &str) -> kube::Client {
        let namespace = client.default_namespace().to_owned();
        kube::Client::new(
            self.layer(host).layer(crate::fence::gate::ClientService(client)),
            namespace,
        )
    }

    /// A layer counting the requests of a client talking to `host` (`host:port`).
    pub fn layer(&self, host: impl Into<String>) -> RestClientLayer {
        RestClientLayer {
            metrics: self.clone(),
            host: host.into(),
        }
    }
}

/// The `host` label of a cluster URL: `host:port`, as client-go's `url.Host`.
pub fn host_of(url: &http::Uri) -> String {
    url.authority().map(|a| a.as_str().to_owned()).unwrap_or_default()
}

/// A tower layer counting requests in [`RestClientMetrics`].
#[derive(Clone)]
pub struct RestClientLayer {
    metrics: RestClientMetrics,
    host: String,
}

impl<S> Layer<S> for RestClientLayer {
    type Service = RestClientService<S>;

    fn layer(&self, inner: S) -> Self::Service {
        RestClientService {
            inner,
            layer: self.clone(),
        }
    }
}

/// The service [`RestClientLayer`] makes.
#[derive(Clone)]
pub struct RestClientService<S> {
    inner: S,
    layer: RestClientLayer,
}

impl<S, B, RB> Service<Request<B>> for RestClientService<S>
where
    S: Service<Request<B>, Response = Response<RB>>,
    S::Error: Into<BoxError>,
    S::Future: Send + 'static,
    RB: Send + 'static,
{
    type Response = Response<RB>;
    type Error = BoxError;
    type Future = BoxFuture<'static, Result<Response<RB>, BoxError>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, req: Request<B>) -> Self::Future {
        let method = req.method().as_str().to_owned();
        let layer = self.layer.clone();
        let fut = self.inner.call(req);
        async move {
            let result = fut.await.map_err(Into::into);
            let code = match &result {
                Ok(resp) => resp.status().as_u16().to_string(),
                Err(_) => "<error>".to_owned(),
            };
            layer.metrics.observe(&code, &layer.host, &method);
            result
        }
        .boxed()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Answers 404 for `/missing`, 200 otherwise.
    struct Fake;

    impl Service<Request<()>> for Fake {
        type Response = Response<()>;
        type Error = std::io::Error;
        type Future = futures::future::Ready<Result<Response<()>, std::io::Error>>;

        fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
            Poll::Ready(Ok(()))
        }

        fn call(&mut self, req: Request<()>) -> Self::Future {
            let status = if req.uri().path() == "/missing" { 404 } else { 200 };
            futures::future::ready(Ok(Response::builder().status(status).body(()).expect("response")))
        }
    }

    #[tokio::test]
    async fn counts_status_method_and_host() {
        let registry = Registry::new();
        let m = RestClientMetrics::new(&registry).expect("metrics");
        let mut svc = m.layer("10.0.0.1:6443").layer(Fake);
        for path in ["/api", "/missing", "/api"] {
            let req = Request::get(path).body(()).expect("request");
            svc.call(req).await.expect("response");
        }
        let get = |code: &str| {
            m.requests
                .with_label_values(&[code, "10.0.0.1:6443", "GET"])
                .get()
        };
        assert_eq!(get("200"), 2);
        assert_eq!(get("404"), 1);
        assert_eq!(
            host_of(&"https://10.0.0.1:6443".parse().expect("uri")),
            "10.0.0.1:6443"
        );
    }
}
