//! Running a Composition's pipeline. A step whose function is `function-patch-and-transform` runs the
//! built-in engine (crate `composition`); any other function is refused until external functions exist.

use std::collections::BTreeMap;

use apis::apiextensions::PipelineStep;
use composition::input::Resources;
use composition::{Composed, DesiredComposed, ObservedComposed, Request};
use serde_json::Value;

/// The function that runs in process.
pub const PATCH_AND_TRANSFORM: &str = "function-patch-and-transform";

/// Why the pipeline failed.
#[derive(Debug, thiserror::Error)]
pub enum PipelineError {
    /// A step names a function other than the built-in one.
    #[error("pipeline step {step:?} uses Function {function:?}: external functions are not supported yet")]
    External {
        /// The step.
        step: String,
        /// The function.
        function: String,
    },
    /// The step's input is missing or does not parse.
    #[error("pipeline step {step:?}: invalid Function input: {message}")]
    Input {
        /// The step.
        step: String,
        /// What is wrong.
        message: String,
    },
    /// The engine failed.
    #[error("pipeline step {step:?}: {source}")]
    Engine {
        /// The step.
        step: String,
        /// The engine's error.
        source: composition::Error,
    },
}

/// Runs `steps` over the observed XR and composed resources; the result accumulates every step's output.
pub fn run(
    steps: &[PipelineStep],
    observed_xr: &Value,
    observed: &BTreeMap<String, ObservedComposed>,
) -> Result<Composed, PipelineError> {
    let mut acc: Option<Composed> = None;
    for s in steps {
        if s.function_ref.name != PATCH_AND_TRANSFORM {
            return Err(PipelineError::External {
                step: s.step.clone(),
                function: s.function_ref.name.clone(),
            });
        }
        let input = s.input.as_ref().ok_or_else(|| PipelineError::Input {
            step: s.step.clone(),
            message: "no input".into(),
        })?;
        let input = Resources::from_value(input).map_err(|e| PipelineError::Input {
            step: s.step.clone(),
            message: e.to_string(),
        })?;
        let prev_desired: Option<&BTreeMap<String, DesiredComposed>> = acc.as_ref().map(|c| &c.resources);
        let req = Request {
            input: &input,
            observed_composite: observed_xr,
            desired_composite: acc.as_ref().map(|c| &c.composite),
            observed,
            desired: prev_desired,
            environment: acc.as_ref().map(|c| &c.environment),
        };
        let out = composition::run(&req).map_err(|source| PipelineError::Engine {
            step: s.step.clone(),
            source,
        })?;
        let warnings = acc.map(|a| a.warnings).unwrap_or_default();
        let mut out = out;
        let mut all = warnings;
        all.append(&mut out.warnings);
        out.warnings = all;
        acc = Some(out);
    }
    Ok(acc.unwrap_or_default())
}

#[cfg(test)]
mod tests {
    use super::*;
    use apis::apiextensions::FunctionReference;
    use serde_json::json;

    fn step(function: &str, input: Value) -> PipelineStep {
        PipelineStep {
            step: "s".into(),
            function_ref: FunctionReference {
                name: function.into(),
            },
            input: Some(input),
            credentials: vec![],
        }
    }

    #[test]
    fn runs_the_builtin_engine() {
        let input = json!({"apiVersion": "pt.fn.crossplane.io/v1beta1", "kind": "Resources", "resources": [{
            "name": "a", "base": {"apiVersion": "v1", "kind": "ConfigMap"},
            "patches": [{"type": "FromCompositeFieldPath", "fromFieldPath": "spec.x", "toFieldPath": "data.x"}]}]});
        let xr = json!({"apiVersion": "example.org/v1", "kind": "X", "spec": {"x": "hi"}});
        let out = run(&[step(PATCH_AND_TRANSFORM, input)], &xr, &BTreeMap::new()).expect("runs");
        assert_eq!(out.resources["a"].resource["data"]["x"], "hi");
    }

    #[test]
    fn refuses_external_functions() {
        let e = run(
            &[step("function-go-templating", json!({}))],
            &json!({}),
            &BTreeMap::new(),
        )
        .expect_err("refused");
        assert!(
            e.to_string().contains("external functions are not supported yet"),
            "{e}"
        );
    }
}
