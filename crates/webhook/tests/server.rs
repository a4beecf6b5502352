//! The HTTPS server on a real socket: a client that trusts the self-signed CA posts a ConversionReview
//! to `/convert` and gets the converted objects; other paths and methods are refused.

use std::sync::Arc;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio_util::sync::CancellationToken;
use webhook::{Server, ServingCert};

/// Sends one HTTP/1.1 request over TLS to `port`, trusting `ca`; returns the status line and the body.
async fn request(port: u16, ca: &str, method: &str, path: &str, body: &str) -> (String, String) {
    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(ca.as_bytes()) {
        roots.add(cert.expect("CA PEM")).expect("CA");
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .expect("protocols")
        .with_root_certificates(roots)
        .with_no_client_auth();
    let tcp = tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .expect("connect");
    let name = ServerName::try_from("127.0.0.1").expect("name");
    let mut tls = tokio_rustls::TlsConnector::from(Arc::new(config))
        .connect(name, tcp)
        .await
        .expect("TLS handshake with a certificate for 127.0.0.1");
    let req = format!(
        "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    tls.write_all(req.as_bytes()).await.expect("write");
    let mut out = String::new();
    tls.read_to_string(&mut out).await.expect("read");
    let (head, body) = out.split_once("\r\n\r\n").unwrap_or((&out, ""));
    (
        head.lines().next().unwrap_or_default().to_owned(),
        body.to_owned(),
    )
}

#[tokio::test]
async fn converts_over_https_and_refuses_other_requests() {
    let cert = ServingCert::self_signed("test-ca", &["127.0.0.1".to_owned()]).expect("certificate");
    let ca = cert.ca_pem.clone().expect("a CA");
    let server = Server::bind("127.0.0.1:0".parse().expect("addr"))
        .await
        .expect("bind");
    let port = server.local_addr().expect("addr").port();
    let cancel = CancellationToken::new();
    let convert: Arc<webhook::Convert> = Arc::new(|mut o: Value, desired: &str| {
        o["apiVersion"] = json!(desired);
        Ok(o)
    });
    let tls = cert.server_config("test").expect("config");
    let serving = tokio::spawn(server.serve(tls, convert, cancel.clone()));

    let review = json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "ConversionReview",
        "request": {"uid": "u", "desiredAPIVersion": "x.example.org/v2",
                    "objects": [{"apiVersion": "x.example.org/v1", "kind": "X", "metadata": {"name": "a"}}]},
    });
    let (status, body) = request(port, &ca, "POST", "/convert", &review.to_string()).await;
    assert!(status.contains("200"), "{status}");
    let v: Value = serde_json::from_str(&body).expect("a review");
    assert_eq!(v["response"]["uid"], "u");
    assert_eq!(
        v["response"]["convertedObjects"][0]["apiVersion"],
        "x.example.org/v2"
    );

    let (status, _) = request(port, &ca, "GET", "/convert", "").await;
    assert!(status.contains("405"), "{status}");
    let (status, _) = request(port, &ca, "POST", "/other", "{}").await;
    assert!(status.contains("404"), "{status}");

    cancel.cancel();
    serving.await.expect("the server stops when cancelled");
}
