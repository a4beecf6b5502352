//! The client against real gRPC servers on loopback: a function that serves only v1beta1 is reached
//! through the fallback, and a function slower than the deadline fails the call with a clear error.

use std::time::Duration;

use function::proto::v1beta1;
use function::proto::v1beta1::function_runner_service_server::{
    FunctionRunnerService, FunctionRunnerServiceServer,
};
use function::{CallError, Client, RunFunctionRequest};
use tonic::transport::Server;
use tonic::transport::server::TcpIncoming;

/// Serves only v1beta1; echoes the request tag, after `delay`.
struct Beta {
    delay: Duration,
}

#[tonic::async_trait]
impl FunctionRunnerService for Beta {
    async fn run_function(
        &self,
        req: tonic::Request<v1beta1::RunFunctionRequest>,
    ) -> Result<tonic::Response<v1beta1::RunFunctionResponse>, tonic::Status> {
        tokio::time::sleep(self.delay).await;
        let tag = req.into_inner().meta.map(|m| m.tag).unwrap_or_default();
        Ok(tonic::Response::new(v1beta1::RunFunctionResponse {
            meta: Some(v1beta1::ResponseMeta { tag, ttl: None }),
            ..Default::default()
        }))
    }
}

async fn start(delay: Duration) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    tokio::spawn(
        Server::builder()
            .add_service(FunctionRunnerServiceServer::new(Beta { delay }))
            .serve_with_incoming(TcpIncoming::from(listener)),
    );
    addr.to_string()
}

fn req(tag: &str) -> RunFunctionRequest {
    RunFunctionRequest {
        meta: Some(function::proto::v1::RequestMeta {
            tag: tag.into(),
            ..Default::default()
        }),
        ..Default::default()
    }
}

#[tokio::test]
async fn a_v1beta1_only_function_is_reached_through_the_fallback() {
    let c = Client::insecure(&start(Duration::ZERO).await).expect("valid endpoint");
    for tag in ["first", "second"] {
        let rsp = c.run(req(tag), Duration::from_secs(10)).await.expect("answers");
        assert_eq!(rsp.meta.map(|m| m.tag).as_deref(), Some(tag));
    }
}

#[tokio::test]
async fn a_slow_function_fails_at_the_deadline() {
    let c = Client::insecure(&start(Duration::from_secs(30)).await).expect("valid endpoint");
    let started = std::time::Instant::now();
    let e = c
        .run(req("t"), Duration::from_millis(500))
        .await
        .expect_err("too slow");
    assert!(matches!(e, CallError::Deadline { .. }), "{e:?}");
    assert!(
        e.to_string()
            .contains("did not answer within its deadline of 500ms"),
        "{e}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "{:?}",
        started.elapsed()
    );
}
