//! The HTTPS server: each path of its [`Routes`] answers a `ConversionReview` ([`crate::review`]) or an
//! `AdmissionReview` ([`crate::admission`]) posted to it; anything else is 404 or 405. HTTP/1.1 on
//! rustls. It is meant to run on every replica, leader or not, as
//! controller-runtime's webhook server does: conversion must work while a replica stands by.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;

use http::{Method, Request, Response, StatusCode, header};
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::{Bytes, Incoming};
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;
use tokio::task::JoinSet;
use tokio_rustls::TlsAcceptor;
use tokio_util::sync::CancellationToken;

use crate::admission::Validate;
use crate::{Convert, Error};

/// The path the apiserver posts reviews to (`clientConfig.service.path` / the URL's path).
pub const PATH: &str = "/convert";
/// The largest review body accepted (the apiserver's own request limit is 3 MiB per object).
const MAX_BODY: usize = 64 << 20;

/// What one path answers.
#[derive(Clone)]
enum Route {
    Convert(Arc<Convert>),
    Validate(Arc<Validate>),
}

/// The paths a [`Server`] answers, each with its handler.
#[derive(Clone, Default)]
pub struct Routes {
    routes: Vec<(String, Route)>,
}

impl std::fmt::Debug for Routes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list()
            .entries(self.routes.iter().map(|(p, _)| p))
            .finish()
    }
}

impl Routes {
    /// No paths yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// `path` answers ConversionReviews with `convert`.
    pub fn convert(mut self, path: &str, convert: Arc<Convert>) -> Self {
        self.routes.push((path.to_owned(), Route::Convert(convert)));
        self
    }

    /// `path` answers AdmissionReviews with `validate`.
    pub fn validate(mut self, path: &str, validate: Arc<Validate>) -> Self {
        self.routes.push((path.to_owned(), Route::Validate(validate)));
        self
    }

    fn get(&self, path: &str) -> Option<&Route> {
        self.routes.iter().find(|(p, _)| p == path).map(|(_, r)| r)
    }
}

/// A bound webhook listener.
pub struct Server {
    listener: TcpListener,
}

impl Server {
    /// Binds `addr` now, so a taken port fails at start-up (port 0 picks one; see [`Server::local_addr`]).
    pub async fn bind(addr: SocketAddr) -> Result<Self, Error> {
        let listener = TcpListener::bind(addr)
            .await
            .map_err(|source| Error::Bind { addr, source })?;
        Ok(Self { listener })
    }

    /// The bound address.
    pub fn local_addr(&self) -> std::io::Result<SocketAddr> {
        self.listener.local_addr()
    }

    /// Serves conversion on [`PATH`] until `cancel` ([`Server::serve_routes`]).
    pub async fn serve(
        self,
        tls: Arc<rustls::ServerConfig>,
        convert: Arc<Convert>,
        cancel: CancellationToken,
    ) {
        self.serve_routes(tls, Routes::new().convert(PATH, convert), cancel)
            .await;
    }

    /// Serves `routes` until `cancel`: each connection's TLS handshake and requests on a task of its own.
    pub async fn serve_routes(
        self,
        tls: Arc<rustls::ServerConfig>,
        routes: Routes,
        cancel: CancellationToken,
    ) {
        let routes = Arc::new(routes);
        let acceptor = TlsAcceptor::from(tls);
        let mut conns = JoinSet::new();
        loop {
            let (stream, peer) = tokio::select! {
                () = cancel.cancelled() => break,
                Some(_) = conns.join_next(), if !conns.is_empty() => continue,
                accepted = self.listener.accept() => match accepted {
                    Ok(a) => a,
                    Err(e) => {
                        tracing::warn!(error = %e, "webhook: accept failed");
                        continue;
                    }
                },
            };
            let acceptor = acceptor.clone();
            let routes = routes.clone();
            conns.spawn(async move {
                let tls = match acceptor.accept(stream).await {
                    Ok(t) => t,
                    Err(e) => {
                        tracing::debug!(%peer, error = %e, "webhook: TLS handshake failed");
                        return;
                    }
                };
                let service = service_fn(move |req| handle(req, routes.clone()));
                if let Err(e) = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(tls), service)
                    .await
                {
                    tracing::debug!(%peer, error = %e, "webhook: connection ended with an error");
                }
            });
        }
        conns.shutdown().await;
    }
}

fn reply(status: StatusCode, content_type: &str, body: impl Into<Bytes>) -> Response<Full<Bytes>> {
    let mut r = Response::new(Full::new(body.into()));
    *r.status_mut() = status;
    if let Ok(v) = content_type.parse() {
        r.headers_mut().insert(header::CONTENT_TYPE, v);
    }
    r
}

async fn handle(req: Request<Incoming>, routes: Arc<Routes>) -> Result<Response<Full<Bytes>>, Infallible> {
    let Some(route) = routes.get(req.uri().path()).cloned() else {
        return Ok(reply(StatusCode::NOT_FOUND, "text/plain", "not found\n"));
    };
    if req.method() != Method::POST {
        let what = match route {
            Route::Convert(_) => "POST a ConversionReview\n",
            Route::Validate(_) => "POST an AdmissionReview\n",
        };
        return Ok(reply(StatusCode::METHOD_NOT_ALLOWED, "text/plain", what));
    }
    let body = match Limited::new(req.into_body(), MAX_BODY).collect().await {
        Ok(b) => b.to_bytes(),
        Err(e) => {
            return Ok(reply(
                StatusCode::BAD_REQUEST,
                "text/plain",
                format!("cannot read the body: {e}\n"),
            ));
        }
    };
    let json = match route {
        Route::Convert(convert) => {
            let review = crate::review::respond(&body, convert.as_ref());
            if let Some(r) = &review.response
                && r.result.status == Some(kube::core::response::StatusSummary::Failure)
            {
                tracing::warn!(uid = %r.uid, message = %r.result.message, "webhook: conversion failed");
            }
            serde_json::to_vec(&review)
        }
        Route::Validate(validate) => {
            let review = crate::admission::respond(&body, validate.as_ref()).await;
            if let Some(r) = review.response.as_ref().filter(|r| !r.allowed) {
                tracing::debug!(uid = %r.uid, message = %r.result.message, "webhook: request refused");
            }
            serde_json::to_vec(&review)
        }
    };
    Ok(match json {
        Ok(json) => reply(StatusCode::OK, "application/json", json),
        Err(e) => reply(StatusCode::INTERNAL_SERVER_ERROR, "text/plain", format!("{e}\n")),
    })
}
