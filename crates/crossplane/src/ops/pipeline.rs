//! Running an Operation's function pipeline once, as upstream's operation reconciler does. Unlike a
//! composition's pipeline there is no observed state: each step gets the desired state and context the
//! previous step returned, its input, its credentials and its bootstrap requirements
//! (`requirements.requiredResources`, fetched before the first call; a WatchOperation's watched resource
//! arrives this way). A step may ask for more resources and is called again with them (the loop is the
//! composition pipeline's, [`crate::composite::pipeline`]).
//!
//! - Results: Normal and Warning become [`Event`]s (reason `RunPipelineStep`); a Fatal result stops
//!   the run ([`PipelineError::Fatal`]).
//! - Outputs: a step's `output` is kept under its step name, for `status.pipeline`.
//! - The desired resources of the last step are what the Operation applies.

use std::collections::BTreeMap;

use apis::ops::PipelineStep;
use function::proto::v1;
use function::structs;
use prost::Message;
use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

pub use crate::composite::pipeline::Event;
pub use crate::composite::pipeline::selector;
use crate::composite::pipeline::{Io, PipelineError, bootstrap, call_with_requirements};

/// The event reason of a step's results (upstream's).
pub const REASON_RUN_PIPELINE_STEP: &str = "RunPipelineStep";

/// What a successful run produced.
#[derive(Debug, Clone, Default)]
pub struct Outcome {
    /// The desired resources, by the names the functions gave them.
    pub resources: BTreeMap<String, Value>,
    /// Events from results.
    pub events: Vec<Event>,
    /// Step outputs, in pipeline order.
    pub outputs: Vec<(String, Value)>,
    /// Function calls made.
    pub calls: usize,
}

async fn credentials<I: Io>(
    io: &I,
    step: &PipelineStep,
) -> Result<BTreeMap<String, v1::Credentials>, PipelineError> {
    let mut out = BTreeMap::new();
    for c in &step.credentials {
        // Only Secrets are a source of credentials, as upstream.
        let (true, Some(r)) = (c.source == "Secret", &c.secret_ref) else {
            continue;
        };
        let data = io
            .secret(&r.namespace, &r.name)
            .await
            .map_err(|message| PipelineError::Prepare {
                step: step.step.clone(),
                message: format!("cannot get credentials {:?}: {message}", c.name),
            })?;
        out.insert(
            c.name.clone(),
            v1::Credentials {
                source: Some(v1::credentials::Source::CredentialData(v1::CredentialData {
                    data,
                })),
            },
        );
    }
    Ok(out)
}

/// A request's tag: a hash of the request, as upstream tags requests.
fn tag(req: &v1::RunFunctionRequest) -> String {
    let digest = Sha256::digest(req.encode_to_vec());
    digest.iter().map(|b| format!("{b:02x}")).collect()
}

/// `value` with whole numbers written as integers: protobuf has only doubles, but an output of `1`
/// should read back as `1`, as upstream's JSON encoding writes it.
fn integral(value: Value) -> Value {
    match value {
        Value::Number(n) => match n.as_f64() {
            Some(f) if f.fract() == 0.0 && f.abs() < 9.0e15 => Value::from(f as i64),
            _ => Value::Number(n),
        },
        Value::Array(a) => Value::Array(a.into_iter().map(integral).collect()),
        Value::Object(o) => Value::Object(o.into_iter().map(|(k, v)| (k, integral(v))).collect()),
        other => other,
    }
}

/// Runs `steps` once.
pub async fn run<I: Io>(io: &I, steps: &[PipelineStep]) -> Result<Outcome, PipelineError> {
    let mut desired = v1::State::default();
    let mut context: Map<String, Value> = Map::new();
    let mut out = Outcome::default();
    for s in steps {
        let function = &s.function_ref.name;
        let input = match &s.input {
            None => None,
            Some(v) => {
                Some(structs::struct_of(v).ok_or_else(|| PipelineError::Input { step: s.step.clone() })?)
            }
        };
        let mut req = v1::RunFunctionRequest {
            desired: Some(desired.clone()),
            input,
            context: Some(structs::to_struct(&context)),
            credentials: credentials(io, s).await?.into_iter().collect(),
            ..Default::default()
        };
        let boot = bootstrap(io, &s.step, s.requirements.as_ref()).await?;
        req.required_resources = boot.resources;
        req.required_schemas = boot.schemas;
        req.meta = Some(crate::composite::capabilities::request_meta(tag(&req)));
        let rsp = call_with_requirements(io, &s.step, function, req, &mut out.calls).await?;
        for r in &rsp.results {
            let event = |warning: bool, message: String| Event {
                warning,
                reason: REASON_RUN_PIPELINE_STEP.into(),
                message,
            };
            match r.severity() {
                v1::Severity::Fatal => {
                    return Err(PipelineError::Fatal {
                        step: s.step.clone(),
                        function: function.clone(),
                        message: r.message.clone(),
                        events: std::mem::take(&mut out.events),
                    });
                }
                v1::Severity::Normal => out
                    .events
                    .push(event(false, format!("Pipeline step {:?}: {}", s.step, r.message))),
                v1::Severity::Warning => out
                    .events
                    .push(event(true, format!("Pipeline step {:?}: {}", s.step, r.message))),
                v1::Severity::Unspecified => out.events.push(event(
                    true,
                    format!(
                        "Pipeline step {:?} returned a result of unknown severity (assuming warning): {}",
                        s.step, r.message
                    ),
                )),
            }
        }
        if let Some(o) = &rsp.output {
            let value = integral(Value::Object(structs::from_struct(o)));
            match out.outputs.iter_mut().find(|(step, _)| *step == s.step) {
                Some((_, v)) => *v = value,
                None => out.outputs.push((s.step.clone(), value)),
            }
        }
        desired = rsp.desired.unwrap_or_default();
        context = rsp.context.as_ref().map(structs::from_struct).unwrap_or_default();
    }
    out.resources = desired
        .resources
        .iter()
        .map(|(name, r)| {
            let v = r
                .resource
                .as_ref()
                .map(|s| Value::Object(structs::from_struct(s)))
                .unwrap_or(Value::Null);
            (name.clone(), v)
        })
        .collect();
    Ok(out)
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use apis::apiextensions::FunctionReference;
    use apis::ops::{FunctionRequirements, RequiredResourceSelector};
    use serde_json::json;

    use super::*;

    /// Answers each call with the step input's `response` overlaid on the desired state (function-dummy's
    /// contract, simplified), and records the requests.
    #[derive(Default)]
    struct Dummy {
        seen: Mutex<Vec<v1::RunFunctionRequest>>,
    }

    impl Io for Dummy {
        async fn call(
            &self,
            _: &str,
            req: v1::RunFunctionRequest,
        ) -> Result<v1::RunFunctionResponse, String> {
            self.seen.lock().map_err(|e| e.to_string())?.push(req.clone());
            let input = req.input.as_ref().map(structs::from_struct).unwrap_or_default();
            let given = &input["response"];
            let mut desired = req.desired.clone().unwrap_or_default();
            if let Some(rs) = given.pointer("/desired/resources").and_then(Value::as_object) {
                for (k, v) in rs {
                    desired.resources.insert(
                        k.clone(),
                        v1::Resource {
                            resource: structs::struct_of(&v["resource"]),
                            ..Default::default()
                        },
                    );
                }
            }
            let results = given["results"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|r| v1::Result {
                    severity: if r["severity"] == "SEVERITY_FATAL" {
                        v1::Severity::Fatal as i32
                    } else {
                        v1::Severity::Normal as i32
                    },
                    message: r["message"].as_str().unwrap_or_default().into(),
                    ..Default::default()
                })
                .collect();
            Ok(v1::RunFunctionResponse {
                desired: Some(desired),
                results,
                output: given.get("output").and_then(structs::struct_of),
                ..Default::default()
            })
        }
        async fn required(&self, sel: &v1::ResourceSelector) -> Result<Vec<Value>, String> {
            Ok(vec![
                json!({"apiVersion": sel.api_version, "kind": sel.kind, "metadata": {"name": "watched"}}),
            ])
        }
        async fn secret(&self, ns: &str, name: &str) -> Result<BTreeMap<String, Vec<u8>>, String> {
            Ok([("id".to_owned(), format!("{ns}/{name}").into_bytes())].into())
        }
    }

    fn step(name: &str, response: Value) -> PipelineStep {
        PipelineStep {
            step: name.into(),
            function_ref: FunctionReference {
                name: "function-dummy".into(),
            },
            input: Some(
                json!({"apiVersion": "dummy.fn.crossplane.io/v1beta1", "kind": "Response", "response": response}),
            ),
            ..Default::default()
        }
    }

    #[tokio::test]
    async fn two_steps_build_on_each_other_and_keep_their_outputs() {
        let io = Dummy::default();
        let steps = [
            step(
                "a",
                json!({"desired": {"resources": {"cm-a": {"resource": {"apiVersion": "v1", "kind": "ConfigMap"}}}},
                             "output": {"stepName": "a", "n": 1},
                             "results": [{"severity": "SEVERITY_NORMAL", "message": "made A"}]}),
            ),
            step(
                "b",
                json!({"desired": {"resources": {"cm-b": {"resource": {"apiVersion": "v1", "kind": "ConfigMap"}}}},
                             "output": {"stepName": "b", "total": 2}}),
            ),
        ];
        let out = run(&io, &steps).await.expect("runs");
        assert_eq!(out.resources.keys().collect::<Vec<_>>(), ["cm-a", "cm-b"]);
        assert_eq!(out.outputs[0], ("a".to_owned(), json!({"stepName": "a", "n": 1})));
        assert_eq!(out.outputs[1].1["total"], json!(2));
        assert_eq!(out.events.len(), 1);
        assert_eq!(out.events[0].message, "Pipeline step \"a\": made A");
        let seen = io.seen.lock().expect("lock");
        assert!(
            seen[1]
                .desired
                .as_ref()
                .is_some_and(|d| d.resources.contains_key("cm-a"))
        );
        assert!(
            seen.iter().all(|r| r.observed.is_none()),
            "an operation observes nothing"
        );
        assert!(seen[0].meta.as_ref().is_some_and(|m| m.tag.len() == 64));
    }

    #[tokio::test]
    async fn a_fatal_result_fails_the_run_in_words() {
        let io = Dummy::default();
        let steps = [step(
            "always-fail",
            json!({"results": [{"severity": "SEVERITY_FATAL", "message": "Simulated failure"}]}),
        )];
        let e = run(&io, &steps).await.expect_err("fatal");
        assert_eq!(
            e.to_string(),
            "pipeline step \"always-fail\" (Function \"function-dummy\") returned a fatal result: Simulated failure"
        );
    }

    #[tokio::test]
    async fn bootstrap_requirements_and_credentials_reach_the_first_call() {
        let io = Dummy::default();
        let mut s = step("watch", json!({}));
        s.requirements = Some(FunctionRequirements {
            required_resources: vec![RequiredResourceSelector {
                requirement_name: apis::ops::REQUIREMENT_WATCHED_RESOURCE.into(),
                api_version: "v1".into(),
                kind: "ConfigMap".into(),
                name: Some("watched".into()),
                namespace: Some("default".into()),
                ..Default::default()
            }],
            ..Default::default()
        });
        s.credentials = vec![apis::apiextensions::FunctionCredentials {
            name: "important".into(),
            source: "Secret".into(),
            secret_ref: Some(apis::apiextensions::SecretNamespacedReference {
                namespace: "system".into(),
                name: "super-secret".into(),
            }),
        }];
        run(&io, &[s]).await.expect("runs");
        let seen = io.seen.lock().expect("lock");
        let watched = &seen[0].required_resources[apis::ops::REQUIREMENT_WATCHED_RESOURCE];
        assert_eq!(watched.items.len(), 1);
        assert!(seen[0].credentials.contains_key("important"));
        let bad = RequiredResourceSelector {
            requirement_name: "x".into(),
            ..Default::default()
        };
        assert!(
            selector(&bad)
                .expect_err("neither")
                .contains("neither a resource")
        );
    }
}
