//! The generated protocol code. `v1` is the one the core speaks; `v1beta1` is wire-identical and used
//! only to reach functions that serve nothing newer ([`to_v1beta1`], [`from_v1beta1`]).

/// `apiextensions.fn.proto.v1`.
#[allow(missing_docs, clippy::all, clippy::pedantic)]
pub mod v1 {
    // `fn` is a Rust keyword, so prost names the file with a raw identifier.
    tonic::include_proto!("apiextensions.r#fn.proto.v1");
}

/// `apiextensions.fn.proto.v1beta1`.
#[allow(missing_docs, clippy::all, clippy::pedantic)]
pub mod v1beta1 {
    tonic::include_proto!("apiextensions.r#fn.proto.v1beta1");
}

use prost::Message;

/// The same request under the v1beta1 package (the two contracts share every field number).
pub fn to_v1beta1(req: &v1::RunFunctionRequest) -> Result<v1beta1::RunFunctionRequest, prost::DecodeError> {
    v1beta1::RunFunctionRequest::decode(req.encode_to_vec().as_slice())
}

/// A v1beta1 response as a v1 response.
pub fn from_v1beta1(
    rsp: &v1beta1::RunFunctionResponse,
) -> Result<v1::RunFunctionResponse, prost::DecodeError> {
    v1::RunFunctionResponse::decode(rsp.encode_to_vec().as_slice())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn v1beta1_round_trips_through_the_wire() {
        let req = v1::RunFunctionRequest {
            meta: Some(v1::RequestMeta {
                tag: "t".into(),
                capabilities: vec![v1::Capability::Capabilities as i32],
            }),
            input: Some(prost_types::Struct::default()),
            ..Default::default()
        };
        let beta = to_v1beta1(&req).expect("decodes");
        let meta = beta.meta.expect("meta");
        assert_eq!(meta.tag, "t");
        assert_eq!(
            meta.capabilities().collect::<Vec<_>>(),
            [v1beta1::Capability::Capabilities]
        );
        assert!(beta.input.is_some());
        let rsp = v1beta1::RunFunctionResponse {
            results: vec![v1beta1::Result {
                severity: v1beta1::Severity::Fatal as i32,
                message: "m".into(),
                ..Default::default()
            }],
            ..Default::default()
        };
        let v1 = from_v1beta1(&rsp).expect("decodes");
        assert_eq!(v1.results[0].severity(), v1::Severity::Fatal);
    }
}
