//! One `ConversionReview`: every object converted to the desired version, or a failure naming the first
//! object that could not be (the apiserver takes all or nothing).

use kube::core::Status;
use kube::core::conversion::{ConversionRequest, ConversionResponse, ConversionReview};

use crate::Convert;

/// The review to answer `body` with. A body that is not a `ConversionReview` with a request gets a
/// failed response saying so (the apiserver logs it and reports the conversion failure).
pub fn respond(body: &[u8], convert: &Convert) -> ConversionReview {
    let review: ConversionReview = match serde_json::from_slice(body) {
        Ok(r) => r,
        Err(e) => {
            return ConversionResponse::invalid(Status::failure(
                &format!("the request body is not a ConversionReview: {e}"),
                "BadRequest",
            ))
            .into_review();
        }
    };
    let request = match ConversionRequest::from_review(review) {
        Ok(r) => r,
        Err(e) => {
            return ConversionResponse::invalid(Status::failure(&e.to_string(), "BadRequest")).into_review();
        }
    };
    let desired = request.desired_api_version.clone();
    let objects = request.objects.clone();
    let response = ConversionResponse::for_request(request);
    let mut converted = Vec::with_capacity(objects.len());
    for object in objects {
        match convert(object, &desired) {
            Ok(o) => converted.push(o),
            Err(message) => {
                return response
                    .failure(Status::failure(&message, "Invalid"))
                    .into_review();
            }
        }
    }
    response.success(converted).into_review()
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::*;

    fn to_v2(mut o: Value, desired: &str) -> Result<Value, String> {
        if o["spec"]["bad"] == true {
            return Err(format!("{} is bad", o["metadata"]["name"]));
        }
        o["apiVersion"] = json!(desired);
        Ok(o)
    }

    fn review(objects: Value) -> Vec<u8> {
        serde_json::to_vec(&json!({
            "apiVersion": "apiextensions.k8s.io/v1",
            "kind": "ConversionReview",
            "request": {"uid": "r-1", "desiredAPIVersion": "x.example.org/v2", "objects": objects},
        }))
        .expect("json")
    }

    #[test]
    fn converts_every_object_in_order_and_echoes_the_uid() {
        let out = respond(
            &review(
                json!([{"apiVersion": "x.example.org/v1", "metadata": {"name": "a"}, "spec": {}},
                           {"apiVersion": "x.example.org/v1", "metadata": {"name": "b"}, "spec": {}}]),
            ),
            &to_v2,
        );
        let v = serde_json::to_value(&out).expect("json");
        assert_eq!(v["apiVersion"], "apiextensions.k8s.io/v1");
        assert_eq!(v["kind"], "ConversionReview");
        assert_eq!(v["response"]["uid"], "r-1");
        assert_eq!(v["response"]["result"]["status"], "Success");
        let names: Vec<&Value> = v["response"]["convertedObjects"]
            .as_array()
            .expect("objects")
            .iter()
            .map(|o| &o["metadata"]["name"])
            .collect();
        assert_eq!(names, [&json!("a"), &json!("b")]);
        assert_eq!(
            v["response"]["convertedObjects"][1]["apiVersion"],
            "x.example.org/v2"
        );
    }

    #[test]
    fn one_bad_object_fails_the_review_with_its_reason() {
        let out = respond(
            &review(
                json!([{"metadata": {"name": "a"}, "spec": {}}, {"metadata": {"name": "b"}, "spec": {"bad": true}}]),
            ),
            &to_v2,
        );
        let v = serde_json::to_value(&out).expect("json");
        assert_eq!(v["response"]["uid"], "r-1");
        assert_eq!(v["response"]["result"]["status"], "Failure");
        assert_eq!(v["response"]["result"]["message"], "\"b\" is bad");
        assert_eq!(v["response"]["convertedObjects"], json!([]));
    }

    #[test]
    fn garbage_gets_a_failed_review() {
        for body in [
            &b"not json"[..],
            br#"{"apiVersion":"apiextensions.k8s.io/v1","kind":"ConversionReview"}"#,
        ] {
            let v = serde_json::to_value(respond(body, &to_v2)).expect("json");
            assert_eq!(v["response"]["result"]["status"], "Failure", "{v}");
        }
    }
}
