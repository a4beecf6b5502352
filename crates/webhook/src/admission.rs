//! One `AdmissionReview` (`admission.k8s.io/v1`): the request handed to an async validator, its
//! response sent back with the request's uid. A body that is not a review with a request gets a
//! refusal saying so.

use std::future::Future;
use std::pin::Pin;

use kube::core::DynamicObject;
use kube::core::admission::{AdmissionRequest, AdmissionResponse, AdmissionReview};

/// The future a [`Validate`] returns.
pub type Verdict = Pin<Box<dyn Future<Output = AdmissionResponse> + Send>>;

/// Decides one admission request. Build the answer from the request ([`AdmissionResponse::from`]),
/// then [`AdmissionResponse::deny`] or [`refuse`] to refuse.
pub type Validate = dyn Fn(AdmissionRequest<DynamicObject>) -> Verdict + Send + Sync;

/// A refusal of `request` with HTTP `code` and `message`, which the apiserver shows the client as
/// `admission webhook "<name>" denied the request: <message>`. The message goes in both `message` and
/// `reason`, as controller-runtime's webhooks that set only a reason are read by clients.
pub fn refuse(response: AdmissionResponse, code: u16, message: &str) -> AdmissionResponse {
    let mut r = response.deny(message);
    r.result.code = code;
    r.result.reason = message.to_owned();
    r
}

/// The review answering `body`.
pub async fn respond(body: &[u8], validate: &Validate) -> AdmissionReview<DynamicObject> {
    let review: AdmissionReview<DynamicObject> = match serde_json::from_slice(body) {
        Ok(r) => r,
        Err(e) => {
            return AdmissionResponse::invalid(format!("the request body is not an AdmissionReview: {e}"))
                .into_review();
        }
    };
    let request: AdmissionRequest<DynamicObject> = match review.try_into() {
        Ok(r) => r,
        Err(_) => return AdmissionResponse::invalid("the AdmissionReview has no request").into_review(),
    };
    validate(request).await.into_review()
}

#[cfg(test)]
mod tests {
    use kube::core::admission::Operation;
    use serde_json::{Value, json};

    use super::*;

    fn no_deletes(req: AdmissionRequest<DynamicObject>) -> Verdict {
        Box::pin(async move {
            let r = AdmissionResponse::from(&req);
            if req.operation == Operation::Delete {
                refuse(r, 409, &format!("{} may not go", req.name))
            } else {
                r
            }
        })
    }

    fn review(operation: &str) -> Vec<u8> {
        serde_json::to_vec(&json!({
            "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
            "request": {"uid": "u-1", "kind": {"group": "", "version": "v1", "kind": "ConfigMap"},
                        "resource": {"group": "", "version": "v1", "resource": "configmaps"},
                        "name": "cm", "namespace": "ns", "operation": operation, "userInfo": {},
                        "oldObject": {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cm"}}},
        }))
        .expect("json")
    }

    #[tokio::test]
    async fn a_refusal_carries_the_uid_code_and_message() {
        let v = serde_json::to_value(respond(&review("DELETE"), &no_deletes).await).expect("json");
        assert_eq!(v["apiVersion"], "admission.k8s.io/v1");
        assert_eq!(v["kind"], "AdmissionReview");
        assert_eq!(v["response"]["uid"], "u-1");
        assert_eq!(v["response"]["allowed"], false);
        assert_eq!(v["response"]["status"]["code"], 409);
        assert_eq!(v["response"]["status"]["message"], "cm may not go");
        assert_eq!(v["response"]["status"]["reason"], "cm may not go");
    }

    #[tokio::test]
    async fn an_allowed_request_is_allowed_and_garbage_is_refused() {
        let v = serde_json::to_value(respond(&review("UPDATE"), &no_deletes).await).expect("json");
        assert_eq!(v["response"]["allowed"], true);
        for body in [
            &b"not json"[..],
            br#"{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview"}"#,
        ] {
            let v: Value = serde_json::to_value(respond(body, &no_deletes).await).expect("json");
            assert_eq!(v["response"]["allowed"], false, "{v}");
        }
    }
}
