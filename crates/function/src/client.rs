//! Calling a function: one channel per endpoint, every call with a deadline, and `v1beta1` when the
//! function answers `v1` with `Unimplemented` (remembered for the channel's life).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use tonic::Code;
use tonic::transport::{Certificate, Channel, ClientTlsConfig, Endpoint, Identity};

use crate::proto::{self, v1, v1beta1};

/// Why a call failed.
#[derive(Debug, Clone, thiserror::Error)]
pub enum CallError {
    /// The endpoint is not a usable address.
    #[error("invalid function endpoint {endpoint:?}: {message}")]
    InvalidEndpoint {
        /// The endpoint as given.
        endpoint: String,
        /// What is wrong.
        message: String,
    },
    /// Nothing answers at the endpoint.
    #[error("function at {endpoint} is unreachable: {message}")]
    Unreachable {
        /// The endpoint.
        endpoint: String,
        /// The transport's error.
        message: String,
    },
    /// The function did not answer within the deadline.
    #[error("function at {endpoint} did not answer within its deadline of {deadline:?}")]
    Deadline {
        /// The endpoint.
        endpoint: String,
        /// The deadline.
        deadline: Duration,
    },
    /// The function answered with an error status, or with bytes that are not a RunFunctionResponse.
    #[error("function at {endpoint} failed: {code:?}: {message}")]
    Status {
        /// The endpoint.
        endpoint: String,
        /// The gRPC status code.
        code: Code,
        /// The status message.
        message: String,
    },
}

/// PEM material for mutual TLS.
#[derive(Debug, Clone)]
pub struct Tls {
    /// The CA that signs function server certificates.
    pub ca: Vec<u8>,
    /// The client certificate.
    pub cert: Vec<u8>,
    /// The client key.
    pub key: Vec<u8>,
}

/// A client of one function endpoint. Cloning shares the channel.
#[derive(Debug, Clone)]
pub struct Client {
    endpoint: String,
    channel: Channel,
    beta: Arc<AtomicBool>,
}

/// The URI tonic dials for an endpoint: `host:port`, `http://host:port`, or upstream's
/// `dns:///host:port`.
fn uri(endpoint: &str) -> String {
    let bare = endpoint.strip_prefix("dns:///").unwrap_or(endpoint);
    if bare.contains("://") {
        bare.to_owned()
    } else {
        format!("http://{bare}")
    }
}

impl Client {
    /// A client of a function served without TLS at `endpoint` (development and tests). Connects on
    /// the first call.
    pub fn insecure(endpoint: &str) -> Result<Self, CallError> {
        let invalid = |message: String| CallError::InvalidEndpoint {
            endpoint: endpoint.to_owned(),
            message,
        };
        let uri = uri(endpoint);
        if uri.starts_with("https://") {
            return Err(invalid(
                "TLS endpoints are not supported by an insecure client".into(),
            ));
        }
        let ep = Endpoint::from_shared(uri).map_err(|e| invalid(e.to_string()))?;
        Ok(Self::lazy(endpoint, ep))
    }

    /// A client of a function served with mutual TLS at `endpoint`: the server's certificate must be
    /// signed by `tls.ca` and name the endpoint's host; the client presents `tls.cert`/`tls.key`.
    pub fn mtls(endpoint: &str, tls: &Tls) -> Result<Self, CallError> {
        let invalid = |message: String| CallError::InvalidEndpoint {
            endpoint: endpoint.to_owned(),
            message,
        };
        let uri = uri(endpoint).replacen("http://", "https://", 1);
        let host = uri
            .split("://")
            .nth(1)
            .and_then(|r| r.rsplit_once(':').map(|(h, _)| h).or(Some(r)))
            .unwrap_or_default()
            .trim_matches(|c| c == '[' || c == ']')
            .to_owned();
        let cfg = ClientTlsConfig::new()
            .ca_certificate(Certificate::from_pem(&tls.ca))
            .identity(Identity::from_pem(&tls.cert, &tls.key))
            .domain_name(host);
        let ep = Endpoint::from_shared(uri)
            .map_err(|e| invalid(e.to_string()))?
            .tls_config(cfg)
            .map_err(|e| invalid(e.to_string()))?;
        Ok(Self::lazy(endpoint, ep))
    }

    /// A client of `endpoint` over `ep` (TLS or not), connecting on the first call.
    fn lazy(endpoint: &str, ep: Endpoint) -> Self {
        let ep = ep.connect_timeout(Duration::from_secs(5)).tcp_nodelay(true);
        Self {
            endpoint: endpoint.to_owned(),
            channel: ep.connect_lazy(),
            beta: Arc::new(AtomicBool::new(false)),
        }
    }

    /// The endpoint this client dials.
    pub fn endpoint(&self) -> &str {
        &self.endpoint
    }

    /// Runs the function once; the call fails after `deadline`.
    pub async fn run(
        &self,
        req: v1::RunFunctionRequest,
        deadline: Duration,
    ) -> Result<v1::RunFunctionResponse, CallError> {
        let call = async {
            if !self.beta.load(Ordering::Relaxed) {
                match self.run_v1(req.clone(), deadline).await {
                    Err(s) if s.code() == Code::Unimplemented => {
                        self.beta.store(true, Ordering::Relaxed);
                    }
                    other => return other,
                }
            }
            self.run_v1beta1(&req, deadline).await
        };
        match tokio::time::timeout(deadline, call).await {
            Err(_) => Err(CallError::Deadline {
                endpoint: self.endpoint.clone(),
                deadline,
            }),
            Ok(Ok(rsp)) => Ok(rsp),
            Ok(Err(s)) => Err(self.error(&s, deadline)),
        }
    }

    async fn run_v1(
        &self,
        req: v1::RunFunctionRequest,
        deadline: Duration,
    ) -> Result<v1::RunFunctionResponse, tonic::Status> {
        let mut client =
            v1::function_runner_service_client::FunctionRunnerServiceClient::new(self.channel.clone());
        let mut req = tonic::Request::new(req);
        req.set_timeout(deadline);
        Ok(client.run_function(req).await?.into_inner())
    }

    async fn run_v1beta1(
        &self,
        req: &v1::RunFunctionRequest,
        deadline: Duration,
    ) -> Result<v1::RunFunctionResponse, tonic::Status> {
        let beta = proto::to_v1beta1(req).map_err(|e| tonic::Status::internal(e.to_string()))?;
        let mut client =
            v1beta1::function_runner_service_client::FunctionRunnerServiceClient::new(self.channel.clone());
        let mut req = tonic::Request::new(beta);
        req.set_timeout(deadline);
        let rsp = client.run_function(req).await?.into_inner();
        proto::from_v1beta1(&rsp).map_err(|e| tonic::Status::internal(e.to_string()))
    }

    fn error(&self, s: &tonic::Status, deadline: Duration) -> CallError {
        let endpoint = self.endpoint.clone();
        match s.code() {
            Code::Unavailable => CallError::Unreachable {
                endpoint,
                message: s.message().to_owned(),
            },
            Code::DeadlineExceeded | Code::Cancelled => CallError::Deadline { endpoint, deadline },
            code => CallError::Status {
                endpoint,
                code,
                message: s.message().to_owned(),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoints_become_uris() {
        assert_eq!(uri("127.0.0.1:9443"), "http://127.0.0.1:9443");
        assert_eq!(
            uri("dns:///fn.crossplane-system:9443"),
            "http://fn.crossplane-system:9443"
        );
        assert_eq!(uri("http://a:1"), "http://a:1");
    }

    #[tokio::test]
    async fn an_unreachable_function_is_named() {
        // A port that was just free: bind, read it, close.
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map(|a| a.port())
            .expect("a free port");
        let c = Client::insecure(&format!("127.0.0.1:{port}")).expect("valid");
        let e = c
            .run(v1::RunFunctionRequest::default(), Duration::from_secs(10))
            .await
            .expect_err("nothing listens");
        assert!(matches!(e, CallError::Unreachable { .. }), "{e:?}");
    }
}
