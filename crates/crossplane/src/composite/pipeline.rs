//! Running a Composition's pipeline as upstream's FunctionComposer does.
//!
//! Each step gets the observed composite and composed resources, the desired state and pipeline
//! context the previous step returned, its own input, its credentials and the resources it required.
//! A step whose function is [`PATCH_AND_TRANSFORM`] runs the built-in engine in process ([`super::builtin`]);
//! any other step calls its Function over gRPC through [`Io`].
//!
//! - Results: Normal and Warning become [`Event`]s; a Fatal result stops the pipeline with
//!   [`PipelineError::Fatal`] (the caller then deletes nothing).
//! - Requirements: the step is called again with the resources and schemas it asked for until its
//!   requirements stop changing, at most [`MAX_REQUIREMENTS_ITERATIONS`] calls; the desired state of earlier calls is
//!   discarded.
//! - Conditions set by functions are returned for the XR (the system types `Ready`, `Synced` and
//!   `Healthy` are refused, as upstream); the response TTL is the smallest non-zero one.

use std::collections::BTreeMap;
use std::future::Future;
use std::time::Duration;

use apis::apiextensions::PipelineStep;
use apis::ops::{FunctionRequirements, RequiredResourceSelector};
use apis::{Condition, ConditionStatus};
use composition::ObservedComposed;
use function::proto::v1;
use function::structs;
use serde_json::{Map, Value};

use super::builtin;

/// The function that runs in process.
pub const PATCH_AND_TRANSFORM: &str = "function-patch-and-transform";
/// Calls of one step while its requirements keep changing (upstream's MaxRequirementsIterations).
pub const MAX_REQUIREMENTS_ITERATIONS: usize = 5;
/// Condition types functions may not set.
const SYSTEM_CONDITIONS: &[&str] = &["Ready", "Synced", "Healthy"];

/// What the pipeline needs from outside: calling functions, and reading what steps require.
pub trait Io: Sync {
    /// Calls the Function `function` once.
    fn call(
        &self,
        function: &str,
        req: v1::RunFunctionRequest,
    ) -> impl Future<Output = Result<v1::RunFunctionResponse, String>> + Send;
    /// The resources a requirement selects.
    fn required(
        &self,
        selector: &v1::ResourceSelector,
    ) -> impl Future<Output = Result<Vec<Value>, String>> + Send;
    /// The OpenAPI v3 schema of the kind a schema requirement selects, its references inlined; `None`
    /// when the kind has none (or nothing can be looked up).
    fn schema(
        &self,
        _selector: &v1::SchemaSelector,
    ) -> impl Future<Output = Result<Option<Value>, String>> + Send {
        async { Ok(None) }
    }
    /// The data of a Secret, for step credentials.
    fn secret(
        &self,
        namespace: &str,
        name: &str,
    ) -> impl Future<Output = Result<BTreeMap<String, Vec<u8>>, String>> + Send;
}

/// Why the pipeline failed. Nothing is applied or deleted after a failure.
#[derive(Debug, thiserror::Error)]
pub enum PipelineError {
    /// The built-in step's input is invalid or the engine failed.
    #[error("pipeline step {step:?}: {source}")]
    Builtin {
        /// The step.
        step: String,
        /// The error.
        source: builtin::BuiltinError,
    },
    /// The step's input is not an object.
    #[error("pipeline step {step:?}: the Function input must be an object")]
    Input {
        /// The step.
        step: String,
    },
    /// Calling the Function failed.
    #[error("pipeline step {step:?} (Function {function:?}): {message}")]
    Call {
        /// The step.
        step: String,
        /// The Function.
        function: String,
        /// What failed.
        message: String,
    },
    /// The Function returned a Fatal result.
    #[error("pipeline step {step:?} (Function {function:?}) returned a fatal result: {message}")]
    Fatal {
        /// The step.
        step: String,
        /// The Function.
        function: String,
        /// The result's message.
        message: String,
        /// Events of earlier results, still worth reporting.
        events: Vec<Event>,
    },
    /// The step's requirements kept changing.
    #[error(
        "pipeline step {step:?} (Function {function:?}): its requirements for extra resources still changed after {MAX_REQUIREMENTS_ITERATIONS} calls"
    )]
    Requirements {
        /// The step.
        step: String,
        /// The Function.
        function: String,
    },
    /// Credentials or required resources could not be read.
    #[error("pipeline step {step:?}: {message}")]
    Prepare {
        /// The step.
        step: String,
        /// What failed.
        message: String,
    },
}

/// An event for the XR from a function result.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Event {
    /// Warning (else Normal).
    pub warning: bool,
    /// The reason (upstream: the result's reason, default `ComposeResources`).
    pub reason: String,
    /// `step: message`.
    pub message: String,
}

/// What the pipeline observed.
#[derive(Debug, Clone, Default)]
pub struct Observed {
    /// The composite resource.
    pub composite: Value,
    /// Its connection details.
    pub composite_connection: BTreeMap<String, Vec<u8>>,
    /// Composed resources by template name, with their connection details.
    pub resources: BTreeMap<String, ObservedComposed>,
}

/// What a successful pipeline desires.
#[derive(Debug, Clone, Default)]
pub struct Outcome {
    /// The desired state: composite (overlay, connection details, readiness) and composed resources.
    pub desired: v1::State,
    /// Events from results.
    pub events: Vec<Event>,
    /// Conditions functions set on the XR.
    pub conditions: Vec<Condition>,
    /// The smallest non-zero response TTL.
    pub ttl: Option<Duration>,
    /// Function calls made (requirement iterations count; the built-in step does not).
    pub calls: usize,
    /// The resources the steps required (their final requirements), for the watch that reconciles the
    /// XR when one of them changes.
    pub required: Vec<v1::ResourceSelector>,
}

fn protocol_state(o: &Observed) -> v1::State {
    v1::State {
        composite: Some(v1::Resource {
            resource: structs::struct_of(&o.composite),
            connection_details: o.composite_connection.clone(),
            ready: 0,
        }),
        resources: o
            .resources
            .iter()
            .map(|(k, r)| {
                (
                    k.clone(),
                    v1::Resource {
                        resource: structs::struct_of(&r.resource),
                        connection_details: r.connection_details.clone(),
                        ready: 0,
                    },
                )
            })
            .collect(),
    }
}

async fn credentials<I: Io>(
    io: &I,
    step: &PipelineStep,
) -> Result<BTreeMap<String, v1::Credentials>, PipelineError> {
    let mut out = BTreeMap::new();
    for c in &step.credentials {
        if c.source != "Secret" {
            continue;
        }
        let Some(r) = &c.secret_ref else {
            return Err(PipelineError::Prepare {
                step: step.step.clone(),
                message: format!("credentials {:?} have source Secret but no secretRef", c.name),
            });
        };
        let data = io
            .secret(&r.namespace, &r.name)
            .await
            .map_err(|message| PipelineError::Prepare {
                step: step.step.clone(),
                message: format!("credentials {:?}: {message}", c.name),
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

/// The protocol's selector for a bootstrap requirement.
pub fn selector(sel: &RequiredResourceSelector) -> Result<v1::ResourceSelector, String> {
    let r#match = match (&sel.name, &sel.match_labels) {
        (Some(n), _) => v1::resource_selector::Match::MatchName(n.clone()),
        (None, Some(l)) => v1::resource_selector::Match::MatchLabels(v1::MatchLabels {
            labels: l.clone().into_iter().collect(),
        }),
        (None, None) => {
            return Err(format!(
                "requirement {:?} names neither a resource (name) nor labels (matchLabels)",
                sel.requirement_name
            ));
        }
    };
    Ok(v1::ResourceSelector {
        api_version: sel.api_version.clone(),
        kind: sel.kind.clone(),
        r#match: Some(r#match),
        namespace: sel.namespace.clone(),
    })
}

/// What a step is given before its first call (its `requirements`): resources and schemas by
/// requirement name, and the resource selectors (for the watch on what the XR required).
#[derive(Debug, Clone, Default)]
pub struct Bootstrap {
    /// Required resources, by requirement name.
    pub resources: BTreeMap<String, v1::Resources>,
    /// Required schemas, by requirement name (an empty Schema when the kind has none).
    pub schemas: BTreeMap<String, v1::Schema>,
    /// The selectors of `resources`.
    pub selectors: Vec<v1::ResourceSelector>,
}

/// Fetches step `step`'s bootstrap requirements, as upstream does before the first call.
pub(crate) async fn bootstrap<I: Io>(
    io: &I,
    step: &str,
    reqs: Option<&FunctionRequirements>,
) -> Result<Bootstrap, PipelineError> {
    let mut out = Bootstrap::default();
    let Some(reqs) = reqs else {
        return Ok(out);
    };
    let prepare = |message: String| PipelineError::Prepare {
        step: step.to_owned(),
        message,
    };
    for sel in &reqs.required_resources {
        let s = selector(sel).map_err(prepare)?;
        let found = io.required(&s).await.map_err(|m| {
            prepare(format!(
                "cannot fetch the required resources of requirement {:?}: {m}",
                sel.requirement_name
            ))
        })?;
        let items = found
            .iter()
            .map(|v| v1::Resource {
                resource: structs::struct_of(v),
                ..Default::default()
            })
            .collect();
        out.resources
            .insert(sel.requirement_name.clone(), v1::Resources { items });
        out.selectors.push(s);
    }
    for sel in &reqs.required_schemas {
        let s = v1::SchemaSelector {
            api_version: sel.api_version.clone(),
            kind: sel.kind.clone(),
        };
        let schema = io.schema(&s).await.map_err(|m| {
            prepare(format!(
                "cannot fetch the required schema of requirement {:?} ({} {}): {m}",
                sel.requirement_name, sel.api_version, sel.kind
            ))
        })?;
        out.schemas.insert(
            sel.requirement_name.clone(),
            v1::Schema {
                openapi_v3: schema.as_ref().and_then(structs::struct_of),
            },
        );
    }
    Ok(out)
}

/// Everything a response requires, old (`extra_resources`) and new (`resources`) fields together.
#[allow(deprecated)]
fn requirements(rsp: &v1::RunFunctionResponse) -> BTreeMap<String, v1::ResourceSelector> {
    let mut all = BTreeMap::new();
    if let Some(r) = &rsp.requirements {
        all.extend(r.extra_resources.clone());
        all.extend(r.resources.clone());
    }
    all
}

/// Calls one external step, looping over its requirements.
async fn call_step<I: Io>(
    io: &I,
    step: &PipelineStep,
    req: v1::RunFunctionRequest,
    calls: &mut usize,
) -> Result<v1::RunFunctionResponse, PipelineError> {
    call_with_requirements(io, &step.step, &step.function_ref.name, req, calls).await
}

/// Calls Function `function` for step `step`, again with the resources it requires until its
/// requirements stop changing (at most [`MAX_REQUIREMENTS_ITERATIONS`] calls; `calls` counts them). The
/// request's own `requiredResources` (an operation step's bootstrap requirements) stay beside the ones
/// the function asks for. Composition and operation pipelines share this loop.
pub(crate) async fn call_with_requirements<I: Io>(
    io: &I,
    step: &str,
    function: &str,
    mut req: v1::RunFunctionRequest,
    calls: &mut usize,
) -> Result<v1::RunFunctionResponse, PipelineError> {
    let bootstrap = req.required_resources.clone();
    let bootstrap_schemas = req.required_schemas.clone();
    type Asked = (
        BTreeMap<String, v1::ResourceSelector>,
        BTreeMap<String, v1::SchemaSelector>,
    );
    let mut asked: Option<Asked> = None;
    for _ in 0..MAX_REQUIREMENTS_ITERATIONS {
        *calls += 1;
        let rsp = io
            .call(function, req.clone())
            .await
            .map_err(|message| PipelineError::Call {
                step: step.to_owned(),
                function: function.to_owned(),
                message,
            })?;
        let wants = requirements(&rsp);
        let wants_schemas = rsp
            .requirements
            .as_ref()
            .map(|r| r.schemas.clone())
            .unwrap_or_default();
        let now = (wants, wants_schemas);
        if (now.0.is_empty() && now.1.is_empty()) || asked.as_ref() == Some(&now) {
            return Ok(rsp);
        }
        let (wants, wants_schemas) = &now;
        let mut schemas = bootstrap_schemas.clone();
        for (name, sel) in wants_schemas {
            let schema = io.schema(sel).await.map_err(|message| PipelineError::Prepare {
                step: step.to_owned(),
                message: format!(
                    "required schema {name:?} ({} {}): {message}",
                    sel.api_version, sel.kind
                ),
            })?;
            schemas.insert(
                name.clone(),
                v1::Schema {
                    openapi_v3: schema.as_ref().and_then(structs::struct_of),
                },
            );
        }
        req.required_schemas = schemas;
        let mut found = BTreeMap::new();
        for (name, sel) in wants {
            let items = io.required(sel).await.map_err(|message| PipelineError::Prepare {
                step: step.to_owned(),
                message: format!("required resources {name:?}: {message}"),
            })?;
            let items = items
                .iter()
                .map(|v| v1::Resource {
                    resource: structs::struct_of(v),
                    ..Default::default()
                })
                .collect();
            found.insert(name.clone(), v1::Resources { items });
        }
        #[allow(deprecated)]
        {
            req.extra_resources = found.clone();
        }
        let mut all = bootstrap.clone();
        all.extend(found);
        req.required_resources = all;
        asked = Some(now);
    }
    Err(PipelineError::Requirements {
        step: step.to_owned(),
        function: function.to_owned(),
    })
}

fn condition(c: &v1::Condition) -> Condition {
    let status = match c.status() {
        v1::Status::ConditionTrue => ConditionStatus::True,
        v1::Status::ConditionFalse => ConditionStatus::False,
        _ => ConditionStatus::Unknown,
    };
    let mut out = Condition::new(&c.r#type, status, &c.reason);
    if let Some(m) = &c.message {
        out = out.with_message(m.clone());
    }
    out
}

/// The built-in patch-and-transform step: the desired state and context it leaves; its warnings
/// become events.
fn run_builtin(
    s: &PipelineStep,
    observed: &Observed,
    desired: &v1::State,
    context: &Map<String, Value>,
    out: &mut Outcome,
) -> Result<(v1::State, Map<String, Value>), PipelineError> {
    let step = builtin::run(
        s.input.as_ref(),
        &observed.composite,
        &observed.resources,
        desired,
        context,
    )
    .map_err(|source| PipelineError::Builtin {
        step: s.step.clone(),
        source,
    })?;
    out.events.extend(step.warnings.into_iter().map(|w| Event {
        warning: true,
        reason: "ComposeResources".into(),
        message: format!("{}: {w}", s.step),
    }));
    Ok((step.desired, step.context))
}

/// Takes a function's results (events; a fatal one ends the pipeline), conditions (never the system's
/// own) and response TTL into `out`.
fn absorb(s: &PipelineStep, rsp: &v1::RunFunctionResponse, out: &mut Outcome) -> Result<(), PipelineError> {
    for r in &rsp.results {
        let message = format!("{}: {}", s.step, r.message);
        let reason = r.reason.clone().unwrap_or_else(|| "ComposeResources".into());
        match r.severity() {
            v1::Severity::Fatal => {
                return Err(PipelineError::Fatal {
                    step: s.step.clone(),
                    function: s.function_ref.name.clone(),
                    message: r.message.clone(),
                    events: std::mem::take(&mut out.events),
                });
            }
            v1::Severity::Normal => out.events.push(Event {
                warning: false,
                reason,
                message,
            }),
            v1::Severity::Warning | v1::Severity::Unspecified => out.events.push(Event {
                warning: true,
                reason,
                message,
            }),
        }
    }
    for c in &rsp.conditions {
        if SYSTEM_CONDITIONS.contains(&c.r#type.as_str()) {
            out.events.push(Event {
                warning: true,
                reason: "ComposeResources".into(),
                message: format!("{}: refusing to set system condition {:?}", s.step, c.r#type),
            });
            continue;
        }
        out.conditions.retain(|o| o.type_ != c.r#type);
        out.conditions.push(condition(c));
    }
    if let Some(ttl) = rsp.meta.as_ref().and_then(|m| m.ttl) {
        let d = Duration::new(
            u64::try_from(ttl.seconds).unwrap_or(0),
            u32::try_from(ttl.nanos).unwrap_or(0),
        );
        if !d.is_zero() {
            out.ttl = Some(out.ttl.map_or(d, |t| t.min(d)));
        }
    }
    Ok(())
}

/// Runs `steps` over `observed`.
pub async fn run<I: Io>(
    io: &I,
    steps: &[PipelineStep],
    observed: &Observed,
    tag: &str,
) -> Result<Outcome, PipelineError> {
    let observed_state = protocol_state(observed);
    let mut desired = v1::State::default();
    let mut context: Map<String, Value> = Map::new();
    let mut out = Outcome::default();
    for s in steps {
        let function = &s.function_ref.name;
        if function == PATCH_AND_TRANSFORM {
            (desired, context) = run_builtin(s, observed, &desired, &context, &mut out)?;
            continue;
        }
        let input = match &s.input {
            None => None,
            Some(v) => {
                Some(structs::struct_of(v).ok_or_else(|| PipelineError::Input { step: s.step.clone() })?)
            }
        };
        let boot = bootstrap(io, &s.step, s.requirements.as_ref()).await?;
        out.required.extend(boot.selectors);
        let req = v1::RunFunctionRequest {
            meta: Some(super::capabilities::request_meta(tag.to_owned())),
            observed: Some(observed_state.clone()),
            desired: Some(desired.clone()),
            input,
            context: Some(structs::to_struct(&context)),
            credentials: credentials(io, s).await?.into_iter().collect(),
            required_resources: boot.resources,
            required_schemas: boot.schemas,
            ..Default::default()
        };
        let rsp = call_step(io, s, req, &mut out.calls).await?;
        out.required.extend(requirements(&rsp).into_values());
        absorb(s, &rsp, &mut out)?;
        desired = rsp.desired.unwrap_or_default();
        context = rsp.context.as_ref().map(structs::from_struct).unwrap_or_default();
    }
    out.desired = desired;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use apis::apiextensions::{FunctionCredentials, FunctionReference, SecretNamespacedReference};
    use serde_json::json;
    use std::sync::Mutex;

    /// A function that answers from a closure and records the requests it got.
    struct Fake<F> {
        answer: F,
        seen: Mutex<Vec<v1::RunFunctionRequest>>,
    }

    impl<F: Fn(&v1::RunFunctionRequest, usize) -> v1::RunFunctionResponse + Sync> Io for Fake<F> {
        async fn call(
            &self,
            _: &str,
            req: v1::RunFunctionRequest,
        ) -> Result<v1::RunFunctionResponse, String> {
            let mut seen = self.seen.lock().expect("lock");
            seen.push(req.clone());
            Ok((self.answer)(&req, seen.len()))
        }
        async fn required(&self, sel: &v1::ResourceSelector) -> Result<Vec<Value>, String> {
            Ok(vec![json!({"apiVersion": sel.api_version, "kind": sel.kind})])
        }
        async fn secret(&self, ns: &str, name: &str) -> Result<BTreeMap<String, Vec<u8>>, String> {
            Ok([("id".to_owned(), format!("{ns}/{name}").into_bytes())].into())
        }
    }

    fn fake<F: Fn(&v1::RunFunctionRequest, usize) -> v1::RunFunctionResponse + Sync>(answer: F) -> Fake<F> {
        Fake {
            answer,
            seen: Mutex::new(vec![]),
        }
    }

    fn step(name: &str, function: &str, input: Value) -> PipelineStep {
        PipelineStep {
            step: name.into(),
            function_ref: FunctionReference {
                name: function.into(),
            },
            input: Some(input),
            credentials: vec![],
            requirements: None,
        }
    }

    #[tokio::test]
    async fn step_requirements_arrive_with_the_first_call_and_are_kept_for_the_watch() {
        let io = fake(|_, _| v1::RunFunctionResponse::default());
        let mut s = step("a", "f", json!({}));
        s.requirements = Some(FunctionRequirements {
            required_resources: vec![RequiredResourceSelector {
                requirement_name: "cfg".into(),
                api_version: "v1".into(),
                kind: "ConfigMap".into(),
                name: Some("c".into()),
                ..Default::default()
            }],
            required_schemas: vec![apis::ops::RequiredSchemaSelector {
                requirement_name: "cm".into(),
                api_version: "v1".into(),
                kind: "ConfigMap".into(),
            }],
        });
        let out = run(&io, &[s], &observed(), "t").await.expect("runs");
        assert_eq!(out.calls, 1, "nothing more asked: one call");
        assert_eq!(out.required.len(), 1, "the bootstrap resource is watched");
        let seen = io.seen.lock().expect("lock");
        assert_eq!(seen[0].required_resources["cfg"].items.len(), 1);
        assert!(seen[0].required_schemas.contains_key("cm"));
    }

    fn observed() -> Observed {
        Observed {
            composite: json!({"apiVersion": "example.org/v1", "kind": "X", "spec": {"x": "hi"}}),
            ..Observed::default()
        }
    }

    fn desired_cm(ready: v1::Ready) -> v1::State {
        v1::State {
            composite: None,
            resources: [(
                "cm".to_owned(),
                v1::Resource {
                    resource: structs::struct_of(
                        &json!({"apiVersion": "v1", "kind": "ConfigMap", "data": {"a": "1"}}),
                    ),
                    ready: ready as i32,
                    ..Default::default()
                },
            )]
            .into(),
        }
    }

    #[tokio::test]
    async fn an_external_step_then_the_builtin_one() {
        let io = fake(|req, _| v1::RunFunctionResponse {
            desired: Some(desired_cm(v1::Ready::True)),
            context: structs::struct_of(&json!({"from": req.input.as_ref().map(structs::from_struct)})),
            results: vec![v1::Result {
                severity: v1::Severity::Normal as i32,
                message: "composed".into(),
                ..Default::default()
            }],
            conditions: vec![v1::Condition {
                r#type: "DatabaseReady".into(),
                status: v1::Status::ConditionTrue as i32,
                reason: "Done".into(),
                ..Default::default()
            }],
            meta: Some(v1::ResponseMeta {
                tag: String::new(),
                ttl: Some(function::prost_types::Duration {
                    seconds: 30,
                    nanos: 0,
                }),
            }),
            ..Default::default()
        });
        let pt = json!({"apiVersion": "pt.fn.crossplane.io/v1beta1", "kind": "Resources", "resources": [{
            "name": "s", "base": {"apiVersion": "v1", "kind": "Secret"},
            "patches": [{"type": "FromCompositeFieldPath", "fromFieldPath": "spec.x", "toFieldPath": "metadata.labels.x"}]}]});
        let mut first = step("one", "function-x", json!({"k": "v"}));
        first.credentials = vec![FunctionCredentials {
            name: "c".into(),
            source: "Secret".into(),
            secret_ref: Some(SecretNamespacedReference {
                namespace: "ns".into(),
                name: "s".into(),
            }),
        }];
        let out = run(
            &io,
            &[first, step("two", PATCH_AND_TRANSFORM, pt)],
            &observed(),
            "t",
        )
        .await
        .expect("runs");
        assert_eq!(out.calls, 1);
        assert_eq!(out.desired.resources["cm"].ready(), v1::Ready::True);
        assert_eq!(
            builtin::json_of(out.desired.resources.get("s"))["metadata"]["labels"]["x"],
            "hi"
        );
        assert_eq!(
            out.events,
            vec![Event {
                warning: false,
                reason: "ComposeResources".into(),
                message: "one: composed".into()
            }]
        );
        assert_eq!(out.conditions[0].type_, "DatabaseReady");
        assert_eq!(out.ttl, Some(Duration::from_secs(30)));
        let seen = io.seen.lock().expect("lock");
        let req = &seen[0];
        assert_eq!(structs::from_struct(req.input.as_ref().expect("input"))["k"], "v");
        assert_eq!(req.meta.as_ref().expect("meta").tag, "t");
        match &req.credentials["c"].source {
            Some(v1::credentials::Source::CredentialData(d)) => assert_eq!(d.data["id"], b"ns/s"),
            other => panic!("credentials expected, got {other:?}"),
        }
        let xr = req.observed.as_ref().and_then(|o| o.composite.as_ref());
        assert_eq!(builtin::json_of(xr)["spec"]["x"], "hi");
    }

    #[tokio::test]
    async fn context_flows_from_step_to_step() {
        let io = fake(|req, n| {
            let mut ctx = req.context.as_ref().map(structs::from_struct).unwrap_or_default();
            ctx.insert(format!("step{n}"), json!(n));
            v1::RunFunctionResponse {
                context: Some(structs::to_struct(&ctx)),
                desired: req.desired.clone(),
                ..Default::default()
            }
        });
        run(
            &io,
            &[step("a", "f", json!({})), step("b", "f", json!({}))],
            &observed(),
            "t",
        )
        .await
        .expect("runs");
        let seen = io.seen.lock().expect("lock");
        let ctx = structs::from_struct(seen[1].context.as_ref().expect("context"));
        assert_eq!(ctx["step1"], 1);
    }

    #[tokio::test]
    async fn a_fatal_result_stops_the_pipeline() {
        let io = fake(|_, _| v1::RunFunctionResponse {
            results: vec![v1::Result {
                severity: v1::Severity::Fatal as i32,
                message: "no".into(),
                ..Default::default()
            }],
            ..Default::default()
        });
        let e = run(
            &io,
            &[step("a", "f", json!({})), step("b", "f", json!({}))],
            &observed(),
            "t",
        )
        .await
        .expect_err("fatal");
        assert!(matches!(e, PipelineError::Fatal { .. }), "{e}");
        assert!(e.to_string().contains("fatal result: no"), "{e}");
        assert_eq!(
            io.seen.lock().expect("lock").len(),
            1,
            "the second step never ran"
        );
    }

    fn wants(name: &str) -> v1::RunFunctionResponse {
        v1::RunFunctionResponse {
            requirements: Some(v1::Requirements {
                resources: [(
                    "cfg".to_owned(),
                    v1::ResourceSelector {
                        api_version: "v1".into(),
                        kind: "ConfigMap".into(),
                        r#match: Some(v1::resource_selector::Match::MatchName(name.into())),
                        namespace: None,
                    },
                )]
                .into(),
                ..Default::default()
            }),
            desired: Some(desired_cm(v1::Ready::Unspecified)),
            ..Default::default()
        }
    }

    #[tokio::test]
    async fn a_required_schema_is_answered_even_when_none_is_known() {
        let io = fake(|_, _| v1::RunFunctionResponse {
            requirements: Some(v1::Requirements {
                schemas: [(
                    "cm".to_owned(),
                    v1::SchemaSelector {
                        api_version: "v1".into(),
                        kind: "ConfigMap".into(),
                    },
                )]
                .into(),
                ..Default::default()
            }),
            ..Default::default()
        });
        let out = run(&io, &[step("a", "f", json!({}))], &observed(), "t")
            .await
            .expect("runs");
        assert_eq!(out.calls, 2, "called again with the schema, then stable");
        let seen = io.seen.lock().expect("lock");
        assert!(seen[0].required_schemas.is_empty());
        // The fake knows no schema: the key is there, empty, as upstream says it tried.
        assert_eq!(seen[1].required_schemas["cm"], v1::Schema::default());
    }

    #[tokio::test]
    async fn requirements_are_met_then_the_step_runs_again() {
        let io = fake(|_, _| wants("c"));
        let out = run(&io, &[step("a", "f", json!({}))], &observed(), "t")
            .await
            .expect("runs");
        assert_eq!(out.calls, 2, "called again with what it required, then stable");
        assert_eq!(out.required.len(), 1, "what it required is kept for the watch");
        let seen = io.seen.lock().expect("lock");
        assert_eq!(seen[1].required_resources["cfg"].items.len(), 1);
    }

    #[tokio::test]
    async fn requirements_that_never_settle_fail_after_five_calls() {
        let io = fake(|_, n| wants(&format!("c{n}")));
        let e = run(&io, &[step("a", "f", json!({}))], &observed(), "t")
            .await
            .expect_err("never settles");
        assert!(matches!(e, PipelineError::Requirements { .. }), "{e}");
        assert_eq!(io.seen.lock().expect("lock").len(), MAX_REQUIREMENTS_ITERATIONS);
    }

    #[tokio::test]
    async fn system_conditions_are_refused() {
        let io = fake(|_, _| v1::RunFunctionResponse {
            conditions: vec![v1::Condition {
                r#type: "Ready".into(),
                status: v1::Status::ConditionTrue as i32,
                reason: "X".into(),
                ..Default::default()
            }],
            ..Default::default()
        });
        let out = run(&io, &[step("a", "f", json!({}))], &observed(), "t")
            .await
            .expect("runs");
        assert!(out.conditions.is_empty());
        assert!(out.events[0].warning);
    }
}
