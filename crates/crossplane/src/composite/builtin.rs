//! The built-in function-patch-and-transform as a pipeline step: the protocol state in, the engine
//! (crate `composition`) run in process, the protocol state out. The Composition environment travels in
//! the pipeline context under [`CONTEXT_KEY_ENVIRONMENT`], as upstream.

use std::collections::BTreeMap;

use composition::input::Resources;
use composition::{DesiredComposed, ObservedComposed, Ready, Request};
use function::proto::v1;
use function::structs;
use serde_json::{Map, Value};

/// The context key of the Composition environment.
pub const CONTEXT_KEY_ENVIRONMENT: &str = "apiextensions.crossplane.io/environment";

/// Why the built-in step failed.
#[derive(Debug, thiserror::Error)]
pub enum BuiltinError {
    /// The input is missing or does not parse.
    #[error("invalid Function input: {0}")]
    Input(String),
    /// The engine failed.
    #[error("{0}")]
    Engine(#[from] composition::Error),
}

/// Readiness, protocol to engine.
pub fn ready_from(r: i32) -> Ready {
    match v1::Ready::try_from(r) {
        Ok(v1::Ready::True) => Ready::True,
        Ok(v1::Ready::False) => Ready::False,
        _ => Ready::Unspecified,
    }
}

/// Readiness, engine to protocol.
pub fn ready_to(r: Ready) -> v1::Ready {
    match r {
        Ready::True => v1::Ready::True,
        Ready::False => v1::Ready::False,
        Ready::Unspecified => v1::Ready::Unspecified,
    }
}

/// A protocol resource's JSON object (`{}` when absent).
pub fn json_of(r: Option<&v1::Resource>) -> Value {
    r.and_then(|r| r.resource.as_ref()).map_or_else(
        || Value::Object(Map::new()),
        |s| Value::Object(structs::from_struct(s)),
    )
}

/// What one built-in step returns.
#[derive(Debug, Clone)]
pub struct StepOutput {
    /// The new desired state.
    pub desired: v1::State,
    /// The new pipeline context.
    pub context: Map<String, Value>,
    /// The engine's warnings.
    pub warnings: Vec<String>,
}

/// Runs the engine as one step.
pub fn run(
    input: Option<&Value>,
    observed_xr: &Value,
    observed: &BTreeMap<String, ObservedComposed>,
    desired: &v1::State,
    context: &Map<String, Value>,
) -> Result<StepOutput, BuiltinError> {
    let input = input.ok_or_else(|| BuiltinError::Input("no input".into()))?;
    let input = Resources::from_value(input).map_err(|e| BuiltinError::Input(e.to_string()))?;
    let desired_xr = desired.composite.as_ref().map(|c| json_of(Some(c)));
    let prev: BTreeMap<String, DesiredComposed> = desired
        .resources
        .iter()
        .map(|(k, r)| {
            (
                k.clone(),
                DesiredComposed {
                    resource: json_of(Some(r)),
                    ready: ready_from(r.ready),
                },
            )
        })
        .collect();
    let env = context.get(CONTEXT_KEY_ENVIRONMENT);
    let req = Request {
        input: &input,
        observed_composite: observed_xr,
        desired_composite: desired_xr.as_ref(),
        observed,
        desired: (!prev.is_empty()).then_some(&prev),
        environment: env,
    };
    let out = composition::run(&req)?;
    let mut composite = desired.composite.clone().unwrap_or_default();
    composite.resource = structs::struct_of(&out.composite);
    composite.connection_details.extend(out.connection_details);
    let resources = out
        .resources
        .into_iter()
        .map(|(k, d)| {
            let mut r = desired.resources.get(&k).cloned().unwrap_or_default();
            r.resource = structs::struct_of(&d.resource);
            r.ready = ready_to(d.ready) as i32;
            (k, r)
        })
        .collect();
    let mut context = context.clone();
    if out.environment.as_object().is_some_and(|m| !m.is_empty()) || env.is_some() {
        context.insert(CONTEXT_KEY_ENVIRONMENT.into(), out.environment);
    }
    Ok(StepOutput {
        desired: v1::State {
            composite: Some(composite),
            resources,
        },
        context,
        warnings: out.warnings,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn keeps_what_earlier_steps_desired() {
        let earlier = v1::State {
            composite: None,
            resources: [(
                "cm".to_owned(),
                v1::Resource {
                    resource: structs::struct_of(&json!({"apiVersion": "v1", "kind": "ConfigMap"})),
                    ready: v1::Ready::True as i32,
                    ..Default::default()
                },
            )]
            .into(),
        };
        let input = json!({"apiVersion": "pt.fn.crossplane.io/v1beta1", "kind": "Resources", "resources": [{
            "name": "s", "base": {"apiVersion": "v1", "kind": "Secret"},
            "patches": [{"type": "FromCompositeFieldPath", "fromFieldPath": "spec.x", "toFieldPath": "data.x"}]}]});
        let xr = json!({"apiVersion": "example.org/v1", "kind": "X", "spec": {"x": "eA=="}});
        let StepOutput {
            desired: state,
            warnings,
            ..
        } = run(Some(&input), &xr, &BTreeMap::new(), &earlier, &Map::new()).expect("runs");
        assert!(warnings.is_empty(), "{warnings:?}");
        assert_eq!(state.resources["cm"].ready(), v1::Ready::True);
        assert_eq!(json_of(state.resources.get("s"))["data"]["x"], "eA==");
        assert_eq!(json_of(state.composite.as_ref())["kind"], "X");
    }
}
