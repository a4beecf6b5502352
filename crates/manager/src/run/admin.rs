//! The admin server: `/healthz`, `/readyz` and `/metrics` over plain HTTP/1.
//!
//! `--metrics-bind-address` serves `/metrics`, `--health-probe-bind-address` serves `/healthz` and
//! `/readyz`; when both name the same address one listener serves all three. Listeners are bound when the
//! manager is built, so a taken port fails fast, and port 0 works (see [`Manager::admin_addrs`]).
//! It is an always-runnable: it runs on standbys too. Failures answer 500 with the reason in the body,
//! as controller-runtime's probes do.
//!
//! [`Manager::admin_addrs`]: crate::Manager::admin_addrs

use std::convert::Infallible;
use std::net::SocketAddr;

use http::{Method, Response, StatusCode, header};
use http_body_util::Full;
use hyper::body::Bytes;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use crate::config::bind::BindAddress;
use crate::metrics::Metrics;
use crate::run::health::Health;
use crate::run::readiness::Readiness;

/// A listener could not be bound.
#[derive(Debug, thiserror::Error)]
#[error("cannot listen on {addr} (--{flag}): {source}")]
pub struct BindError {
    /// The flag that named the address.
    pub flag: &'static str,
    /// The address.
    pub addr: SocketAddr,
    /// Why.
    pub source: std::io::Error,
}

/// Which endpoints a listener serves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Endpoints {
    /// `/metrics`.
    Metrics,
    /// `/healthz` and `/readyz`.
    Probes,
    /// All three.
    All,
}

impl Endpoints {
    fn serves(self, path: &str) -> bool {
        matches!(
            (self, path),
            (Self::All, _) | (Self::Metrics, "/metrics") | (Self::Probes, "/healthz" | "/readyz")
        )
    }
}

/// What the endpoints read.
#[derive(Clone)]
pub(crate) struct AdminState {
    pub(crate) health: Health,
    pub(crate) readiness: Readiness,
    pub(crate) metrics: Metrics,
}

/// Bound, not yet serving.
pub(crate) struct AdminServer {
    listeners: Vec<(TcpListener, Endpoints)>,
}

impl AdminServer {
    /// Binds the listeners (none for addresses set to `0`).
    pub(crate) async fn bind(metrics: BindAddress, probes: BindAddress) -> Result<Self, BindError> {
        let mut plan: Vec<(SocketAddr, Endpoints, &'static str)> = Vec::new();
        match (metrics.addr(), probes.addr()) {
            (Some(m), Some(p)) if m == p && m.port() != 0 => {
                plan.push((m, Endpoints::All, "metrics-bind-address"))
            }
            (m, p) => {
                plan.extend(m.map(|a| (a, Endpoints::Metrics, "metrics-bind-address")));
                plan.extend(p.map(|a| (a, Endpoints::Probes, "health-probe-bind-address")));
            }
        }
        let mut listeners = Vec::new();
        for (addr, endpoints, flag) in plan {
            let listener =
                TcpListener::bind(addr)
                    .await
                    .map_err(|source| BindError { flag, addr, source })?;
            listeners.push((listener, endpoints));
        }
        Ok(Self { listeners })
    }

    /// The bound addresses and what each serves.
    pub(crate) fn local_addrs(&self) -> Vec<(SocketAddr, Endpoints)> {
        self.listeners
            .iter()
            .filter_map(|(l, e)| l.local_addr().ok().map(|a| (a, *e)))
            .collect()
    }

    /// Serves until `stop` is cancelled.
    pub(crate) async fn serve(self, state: AdminState, stop: CancellationToken) {
        let mut servers = JoinSet::new();
        for (listener, endpoints) in self.listeners {
            if let Ok(addr) = listener.local_addr() {
                tracing::info!(%addr, ?endpoints, "admin server listening");
            }
            servers.spawn(accept_loop(listener, endpoints, state.clone(), stop.clone()));
        }
        while servers.join_next().await.is_some() {}
    }
}

async fn accept_loop(
    listener: TcpListener,
    endpoints: Endpoints,
    state: AdminState,
    stop: CancellationToken,
) {
    let mut connections = JoinSet::new();
    loop {
        let accepted = tokio::select! {
            () = stop.cancelled() => break,
            accepted = listener.accept() => accepted,
            Some(_) = connections.join_next(), if !connections.is_empty() => continue,
        };
        let stream = match accepted {
            Ok((stream, _)) => stream,
            Err(e) => {
                tracing::warn!(error = %e, "admin server accept failed");
                tokio::time::sleep(std::time::Duration::from_millis(100)).await;
                continue;
            }
        };
        let state = state.clone();
        connections.spawn(async move {
            let service = service_fn(move |req| {
                let state = state.clone();
                async move { Ok::<_, Infallible>(respond(&state, endpoints, req.method(), req.uri().path())) }
            });
            if let Err(e) = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service)
                .await
            {
                tracing::debug!(error = %e, "admin connection ended with an error");
            }
        });
    }
    // Dropping `connections` aborts open keep-alive connections.
}

/// Answers one request; bodies are ignored (every endpoint is a GET).
fn respond(state: &AdminState, endpoints: Endpoints, method: &Method, path: &str) -> Response<Full<Bytes>> {
    if !endpoints.serves(path) {
        return text(StatusCode::NOT_FOUND, "not found\n".to_owned());
    }
    if method != Method::GET && method != Method::HEAD {
        return text(StatusCode::METHOD_NOT_ALLOWED, "method not allowed\n".to_owned());
    }
    match path {
        "/healthz" => match state.health.check() {
            Ok(()) => text(StatusCode::OK, "ok\n".to_owned()),
            Err(reason) => text(
                StatusCode::INTERNAL_SERVER_ERROR,
                format!("unhealthy: {reason}\n"),
            ),
        },
        "/readyz" => {
            let waiting = state.readiness.not_ready();
            if waiting.is_empty() {
                text(StatusCode::OK, "ok\n".to_owned())
            } else {
                text(
                    StatusCode::INTERNAL_SERVER_ERROR,
                    format!("not ready: waiting for {}\n", waiting.join(", ")),
                )
            }
        }
        "/metrics" => {
            let mut r = text(StatusCode::OK, state.metrics.render());
            r.headers_mut().insert(
                header::CONTENT_TYPE,
                header::HeaderValue::from_static("text/plain; version=0.0.4; charset=utf-8"),
            );
            r
        }
        _ => text(StatusCode::NOT_FOUND, "not found\n".to_owned()),
    }
}

fn text(status: StatusCode, body: String) -> Response<Full<Bytes>> {
    let mut r = Response::new(Full::new(Bytes::from(body)));
    *r.status_mut() = status;
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        header::HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    r
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    async fn get(addr: SocketAddr, path: &str) -> (u16, String) {
        let mut s = tokio::net::TcpStream::connect(addr).await.expect("connect");
        let req = format!("GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
        s.write_all(req.as_bytes()).await.expect("write");
        let mut buf = String::new();
        s.read_to_string(&mut buf).await.expect("read");
        let status = buf.split(' ').nth(1).and_then(|c| c.parse().ok()).unwrap_or(0);
        let body = buf
            .split_once("\r\n\r\n")
            .map(|(_, b)| b.to_owned())
            .unwrap_or_default();
        (status, body)
    }

    #[tokio::test]
    async fn serves_probes_and_metrics_on_their_listeners() {
        let loopback: BindAddress = "127.0.0.1:0".parse().expect("addr");
        let server = AdminServer::bind(loopback, loopback).await.expect("bind");
        let addrs = server.local_addrs();
        let metrics_addr = addrs
            .iter()
            .find(|(_, e)| *e == Endpoints::Metrics)
            .expect("metrics")
            .0;
        let probes_addr = addrs
            .iter()
            .find(|(_, e)| *e == Endpoints::Probes)
            .expect("probes")
            .0;

        let health = Health::without_election();
        let readiness = Readiness::default();
        let cache = readiness.register("cache");
        let metrics = Metrics::new().expect("metrics");
        metrics.reconcile().register_controller("c");
        let state = AdminState {
            health: health.clone(),
            readiness,
            metrics,
        };
        let stop = CancellationToken::new();
        let task = tokio::spawn(server.serve(state, stop.clone()));

        assert_eq!(get(probes_addr, "/healthz").await.0, 200);
        let (code, body) = get(probes_addr, "/readyz").await;
        assert_eq!((code, body.as_str()), (500, "not ready: waiting for cache\n"));
        cache.mark_ready();
        assert_eq!(get(probes_addr, "/readyz").await.0, 200);
        assert_eq!(get(probes_addr, "/metrics").await.0, 404);
        let (code, body) = get(metrics_addr, "/metrics").await;
        assert_eq!(code, 200);
        assert!(body.contains("controller_runtime_reconcile_total"), "{body}");
        assert_eq!(get(metrics_addr, "/healthz").await.0, 404);

        health.elector_stopped();
        let (code, body) = get(probes_addr, "/healthz").await;
        assert_eq!(code, 500);
        assert!(body.contains("elector"), "{body}");

        stop.cancel();
        task.await.expect("server stops");
    }

    #[tokio::test]
    async fn disabled_listeners_bind_nothing() {
        let server = AdminServer::bind(BindAddress::Disabled, BindAddress::Disabled)
            .await
            .expect("bind");
        assert!(server.local_addrs().is_empty());
    }
}
