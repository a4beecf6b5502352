//! Our Rust types and the official Python SDK's generated code (crossplane-function-sdk-python,
//! `run_function_pb2`) decode what the other encodes: Rust encodes a request that Python checks field by
//! field (as v1 and as v1beta1), and Python encodes a response that Rust checks.
//!
//! Needs the function virtualenv (`target/function-venv`) that `cargo xtask test` installs.

use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Stdio};

use function::proto::v1;
use function::structs;
use prost::Message;
use serde_json::json;

fn python() -> PathBuf {
    let py = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../target/function-venv/bin/python");
    assert!(
        py.is_file(),
        "{} is missing: run `cargo xtask test` once (it installs the function virtualenv with the \
         Python SDK), then run this test again",
        py.display()
    );
    py
}

fn resource(v: serde_json::Value) -> v1::Resource {
    v1::Resource {
        resource: structs::struct_of(&v),
        ..Default::default()
    }
}

#[test]
fn rust_and_the_python_sdk_decode_each_other() {
    let mut xr = resource(json!({"apiVersion": "example.org/v1", "kind": "XBucket",
        "spec": {"replicas": 3, "zones": ["a", "b"]}}));
    xr.connection_details
        .insert("password".into(), b"s3cr3t\x00\xff".to_vec());
    let mut desired = resource(json!({"apiVersion": "example.org/v1", "kind": "Bucket"}));
    desired.ready = v1::Ready::True as i32;
    let items = |kind: &str| v1::Resources {
        items: vec![resource(json!({"apiVersion": "v1", "kind": kind}))],
    };
    #[allow(deprecated)]
    let req = v1::RunFunctionRequest {
        meta: Some(v1::RequestMeta {
            tag: "rust-tag".into(),
            // The installed SDK (0.9.0) predates capabilities (field 2): it must still decode the
            // request, skipping the field as protobuf does with unknown ones.
            capabilities: vec![
                v1::Capability::Capabilities as i32,
                v1::Capability::RequiredSchemas as i32,
            ],
        }),
        observed: Some(v1::State {
            composite: Some(xr),
            resources: [(
                "bucket".to_owned(),
                resource(
                    json!({"apiVersion": "example.org/v1", "kind": "Bucket", "metadata": {"name": "b-1"}}),
                ),
            )]
            .into(),
        }),
        desired: Some(v1::State {
            composite: None,
            resources: [("bucket".to_owned(), desired)].into(),
        }),
        input: structs::struct_of(&json!({"greeting": "hi"})),
        context: structs::struct_of(&json!({"apiextensions.crossplane.io/environment": {"x": 1.5}})),
        extra_resources: [("old".to_owned(), items("Secret"))].into(),
        credentials: [(
            "creds".to_owned(),
            v1::Credentials {
                source: Some(v1::credentials::Source::CredentialData(v1::CredentialData {
                    data: [("key".to_owned(), b"k".to_vec())].into(),
                })),
            },
        )]
        .into(),
        required_resources: [("cfg".to_owned(), items("ConfigMap"))].into(),
        // The installed SDK (0.9.0) predates required schemas (field 9): left empty here; the
        // conformance suite's function-python reads them through descriptors of its own.
        required_schemas: Default::default(),
    };
    let mut child = Command::new(python())
        .arg(PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/interop.py"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("python starts");
    let hex: String = req.encode_to_vec().iter().map(|b| format!("{b:02x}")).collect();
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(hex.as_bytes())
        .expect("write");
    let out = child.wait_with_output().expect("python ends");
    assert!(
        out.status.success(),
        "the Python SDK rejected what Rust encoded: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).expect("utf-8");
    let text = text.trim();
    let bytes: Vec<u8> = (0..text.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&text[i..i + 2], 16).expect("hex"))
        .collect();
    let rsp = v1::RunFunctionResponse::decode(bytes.as_slice()).expect("Rust decodes what Python encoded");

    let meta = rsp.meta.as_ref().expect("meta");
    assert_eq!(meta.tag, "py-tag");
    let ttl = meta.ttl.expect("ttl");
    assert_eq!((ttl.seconds, ttl.nanos), (60, 5));
    let state = rsp.desired.as_ref().expect("desired");
    let db = &state.resources["db"];
    assert_eq!(db.ready(), v1::Ready::False);
    assert_eq!(db.connection_details["url"], b"pg://");
    assert_eq!(
        serde_json::Value::Object(structs::from_struct(db.resource.as_ref().expect("resource"))),
        json!({"apiVersion": "example.org/v1", "kind": "DB", "spec": {"size": 10, "tags": ["x"]}})
    );
    let composite = state
        .composite
        .as_ref()
        .and_then(|c| c.resource.as_ref())
        .expect("composite");
    assert_eq!(structs::from_struct(composite)["status"]["phase"], "ok");
    assert_eq!(rsp.results.len(), 2);
    assert_eq!(rsp.results[0].severity(), v1::Severity::Warning);
    assert_eq!(rsp.results[0].reason.as_deref(), Some("Why"));
    assert_eq!(rsp.results[0].target(), v1::Target::CompositeAndClaim);
    assert_eq!(rsp.results[1].severity(), v1::Severity::Fatal);
    assert_eq!(rsp.results[1].message, "stop");
    let ctx = rsp.context.as_ref().expect("context");
    assert_eq!(structs::from_struct(ctx)["k"], "v");
    let reqs = rsp.requirements.as_ref().expect("requirements");
    let cfg = &reqs.resources["cfg"];
    assert_eq!((cfg.api_version.as_str(), cfg.kind.as_str()), ("v1", "ConfigMap"));
    assert_eq!(cfg.namespace.as_deref(), Some("ns"));
    match &cfg.r#match {
        Some(v1::resource_selector::Match::MatchLabels(l)) => assert_eq!(l.labels["app"], "a"),
        other => panic!("match labels expected, got {other:?}"),
    }
    assert_eq!(
        reqs.resources["one"].r#match,
        Some(v1::resource_selector::Match::MatchName("s".into()))
    );
    let c = &rsp.conditions[0];
    assert_eq!(
        (c.r#type.as_str(), c.status(), c.reason.as_str()),
        ("DatabaseReady", v1::Status::ConditionFalse, "Waiting")
    );
    assert_eq!(c.message.as_deref(), Some("m"));
    assert_eq!(c.target(), v1::Target::Composite);
    assert_eq!(structs::from_struct(rsp.output.as_ref().expect("output"))["n"], 2);
}
