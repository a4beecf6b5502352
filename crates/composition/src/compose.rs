//! The entry point: one run of the function over a composite resource (upstream
//! `fn.go`, `RunFunction`).
//!
//! Steps, as upstream:
//! 1. validate the input and inline patch sets (failures are fatal);
//! 2. run `environment.patches` (a missing optional source is skipped, anything else is
//!    fatal);
//! 3. for each template, in order: start from `base` (or from the desired resource a
//!    previous step produced); if the composed resource exists, keep its name and
//!    namespace, extract connection details and check readiness (failures are
//!    warnings); then run the patches in order.
//!
//! A missing source under `policy.fromFieldPath: Required` is a warning: for a patch
//! into a composed resource that does not exist yet, the resource is left out of the
//! desired state (the point of `Required` is to block its creation); otherwise the patch
//! is ignored. Any other patch failure is fatal and names the resource and patch index.

use std::collections::BTreeMap;

use serde_json::{Map, Value};

use crate::connection::{self, ConnectionDetails};
use crate::input::{ComposedTemplate, PatchType, Resources};
use crate::patch::{self, Targets, patchset};
use crate::readiness;
use crate::validate::{self, ValidationError};

/// A composed resource as observed, with its connection secret.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ObservedComposed {
    /// The resource.
    pub resource: Value,
    /// Its connection details (the data of its connection secret).
    pub connection_details: ConnectionDetails,
}

impl From<Value> for ObservedComposed {
    fn from(resource: Value) -> Self {
        Self {
            resource,
            connection_details: ConnectionDetails::new(),
        }
    }
}

/// Whether a desired composed resource is ready, as in the function protocol.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Ready {
    /// Not stated: the composed resource is not ready by this function's checks, or does
    /// not exist yet.
    #[default]
    Unspecified,
    /// Ready.
    True,
    /// Not ready.
    False,
}

/// A desired composed resource.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct DesiredComposed {
    /// The resource: the rendered base with patches applied, plus the observed name and
    /// namespace if it exists. Labels, owner references and `generateName` are the
    /// composer's business.
    pub resource: Value,
    /// Readiness from the observed resource.
    pub ready: Ready,
}

/// Everything one run needs. Only `input`, `observed_composite` and `observed` are
/// required; the rest carries state from previous pipeline steps.
#[derive(Debug, Clone, Copy)]
pub struct Request<'a> {
    /// The function input.
    pub input: &'a Resources,
    /// The composite resource as observed.
    pub observed_composite: &'a Value,
    /// The desired composite resource from previous steps, if any.
    pub desired_composite: Option<&'a Value>,
    /// Observed composed resources by template name (the
    /// `crossplane.io/composition-resource-name` annotation).
    pub observed: &'a BTreeMap<String, ObservedComposed>,
    /// Desired composed resources from previous steps, if any.
    pub desired: Option<&'a BTreeMap<String, DesiredComposed>>,
    /// The Composition environment from previous steps, if any.
    pub environment: Option<&'a Value>,
}

impl<'a> Request<'a> {
    /// A request for the first (or only) pipeline step.
    pub fn new(
        input: &'a Resources,
        observed_composite: &'a Value,
        observed: &'a BTreeMap<String, ObservedComposed>,
    ) -> Self {
        Self {
            input,
            observed_composite,
            desired_composite: None,
            observed,
            desired: None,
            environment: None,
        }
    }
}

/// The result of a run.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Composed {
    /// The desired composite resource: an overlay holding `apiVersion`, `kind` and what
    /// To* patches wrote (for example `status` fields), on top of what previous steps
    /// desired. Crossplane applies only its status.
    pub composite: Value,
    /// The desired composed resources by template name, including those from previous
    /// steps.
    pub resources: BTreeMap<String, DesiredComposed>,
    /// The composite's connection details gathered from observed composed resources.
    pub connection_details: ConnectionDetails,
    /// The Composition environment after the patches.
    pub environment: Value,
    /// Non-fatal problems, as upstream's warning results.
    pub warnings: Vec<String>,
}

/// A fatal failure of a run.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum Error {
    /// The input is invalid.
    #[error("invalid Function input: {0}")]
    InvalidInput(ValidationError),
    /// Patch sets cannot be inlined.
    #[error("cannot resolve PatchSets: {0}")]
    PatchSets(patchset::Error),
    /// The observed composite resource is not a JSON object.
    #[error("cannot get observed composite resource: not a JSON object")]
    CompositeNotObject,
    /// The environment is not a JSON object.
    #[error("cannot get Composition environment: not a JSON object")]
    EnvironmentNotObject,
    /// An environment patch failed.
    #[error("cannot apply the {:?} environment patch at index {index}: {source}", .patch_type.as_str())]
    EnvironmentPatch {
        /// The patch position in `environment.patches`.
        index: usize,
        /// The patch type.
        patch_type: PatchType,
        /// What went wrong.
        source: Box<patch::Error>,
    },
    /// A template has no base, and no previous step produced the resource.
    #[error(
        "composed resource {0:?} has no base template, and was not produced by a previous Function in the pipeline"
    )]
    NoBase(String),
    /// A base is not a JSON object.
    #[error("cannot parse base template of composed resource {0:?}: not a JSON object")]
    BadBase(String),
    /// A patch of a resource template failed.
    #[error("cannot render composed resource {resource:?} {:?} patch at index {index}: {source}", .patch_type.as_str())]
    Patch {
        /// The template name.
        resource: String,
        /// The patch position, after patch sets are inlined.
        index: usize,
        /// The patch type.
        patch_type: PatchType,
        /// What went wrong.
        source: Box<patch::Error>,
    },
}

/// Composes with no state from previous pipeline steps.
pub fn compose(
    input: &Resources,
    composite: &Value,
    observed: &BTreeMap<String, ObservedComposed>,
) -> Result<Composed, Error> {
    run(&Request::new(input, composite, observed))
}

/// Runs the function.
pub fn run(req: &Request<'_>) -> Result<Composed, Error> {
    validate::resources(req.input).map_err(Error::InvalidInput)?;
    if !req.observed_composite.is_object() {
        return Err(Error::CompositeNotObject);
    }
    let mut dxr = desired_composite(req);
    let templates =
        patchset::expand(&req.input.patch_sets, &req.input.resources).map_err(Error::PatchSets)?;
    let env = environment(req, &mut dxr)?;
    let mut out = Composed {
        composite: dxr,
        environment: env,
        resources: req.desired.cloned().unwrap_or_default(),
        ..Composed::default()
    };
    for t in &templates {
        compose_template(req, t, &mut out)?;
    }
    Ok(out)
}

/// The desired composite from previous steps (or an empty one), with the observed
/// composite's `apiVersion` and `kind`.
fn desired_composite(req: &Request<'_>) -> Value {
    let mut dxr = match req.desired_composite {
        Some(v @ Value::Object(_)) => v.clone(),
        _ => Value::Object(Map::new()),
    };
    if let Value::Object(m) = &mut dxr {
        for key in ["apiVersion", "kind"] {
            if let Some(v) = req.observed_composite.get(key) {
                m.insert(key.to_owned(), v.clone());
            }
        }
    }
    dxr
}

/// The environment from previous steps (or an empty one) after `environment.patches`, which
/// may also write the desired composite `dxr`.
fn environment(req: &Request<'_>, dxr: &mut Value) -> Result<Value, Error> {
    let mut env = match req.environment {
        None | Some(Value::Null) => Value::Object(Map::new()),
        Some(v @ Value::Object(_)) => v.clone(),
        Some(_) => return Err(Error::EnvironmentNotObject),
    };
    if let Some(environment) = &req.input.environment {
        for (index, p) in environment.patches.iter().enumerate() {
            patch::apply_environment(p, req.observed_composite, &mut env, dxr).map_err(|e| {
                Error::EnvironmentPatch {
                    index,
                    patch_type: p.type_,
                    source: Box::new(e),
                }
            })?;
        }
    }
    Ok(env)
}

/// Renders template `t` into `out`: its base (or what a previous step desired), the
/// observed resource's identity, connection details and readiness, then its patches.
fn compose_template(req: &Request<'_>, t: &ComposedTemplate, out: &mut Composed) -> Result<(), Error> {
    let mut dcd = match &t.base {
        Some(base @ Value::Object(_)) => base.clone(),
        Some(_) => return Err(Error::BadBase(t.name.clone())),
        None => match out.resources.get(&t.name) {
            Some(previous) => previous.resource.clone(),
            None => return Err(Error::NoBase(t.name.clone())),
        },
    };
    let observed = req.observed.get(&t.name);
    let ready = match observed {
        Some(ocd) => observe(t, ocd, &mut dcd, out),
        None => Ready::Unspecified,
    };
    if apply_patches(req.observed_composite, t, observed, &mut dcd, out)? {
        out.resources
            .insert(t.name.clone(), DesiredComposed { resource: dcd, ready });
    }
    Ok(())
}

/// Takes what template `t` needs from its observed resource `ocd`: its name and namespace
/// into `dcd`, its connection details into `out`; returns its readiness. Failures are
/// warnings.
fn observe(t: &ComposedTemplate, ocd: &ObservedComposed, dcd: &mut Value, out: &mut Composed) -> Ready {
    let mut ready = Ready::Unspecified;
    keep_identity(dcd, &ocd.resource);
    match connection::extract(&ocd.resource, &ocd.connection_details, &t.connection_details) {
        Ok(details) => out.connection_details.extend(details),
        Err(e) => out.warnings.push(format!(
            "cannot extract composite resource connection details from composed resource {:?}: {e}",
            t.name
        )),
    }
    match readiness::is_ready(&ocd.resource, &t.readiness_checks) {
        Ok(true) => ready = Ready::True,
        Ok(false) => {}
        Err(e) => out.warnings.push(format!(
            "cannot check readiness of composed resource {:?}: {e}",
            t.name
        )),
    }
    ready
}

/// Runs template `t`'s patches on `dcd` (and `out`'s composite and environment). Returns
/// whether the resource stays in the desired state: not when a `Required` source is
/// missing for a resource that does not exist yet.
fn apply_patches(
    oxr: &Value,
    t: &ComposedTemplate,
    observed: Option<&ObservedComposed>,
    dcd: &mut Value,
    out: &mut Composed,
) -> Result<bool, Error> {
    for (index, p) in t.patches.iter().enumerate() {
        let mut targets = Targets {
            observed_composite: oxr,
            desired_composite: &mut out.composite,
            observed_composed: observed.map(|o| &o.resource),
            desired_composed: dcd,
            environment: &mut out.environment,
        };
        let Err(err) = patch::apply_composed(p, &mut targets) else {
            continue;
        };
        if !err.is_required_not_found() {
            return Err(Error::Patch {
                resource: t.name.clone(),
                index,
                patch_type: p.type_,
                source: Box::new(err),
            });
        }
        if p.type_.to_composed_resource() && observed.is_none() {
            out.warnings.push(format!(
                "not adding new composed resource {:?} to desired state because {:?} patch at index {index} has 'policy.fromFieldPath: Required': {err}",
                t.name,
                p.type_.as_str()
            ));
            return Ok(false);
        }
        out.warnings.push(format!(
            "cannot render composed resource {:?} {:?} patch at index {index}: ignoring 'policy.fromFieldPath: Required' because 'to' resource already exists: {err}",
            t.name,
            p.type_.as_str()
        ));
    }
    Ok(true)
}

/// Copies the observed resource's name and namespace into the desired one (removing
/// them when the observed has none), so that the two stay associated.
fn keep_identity(desired: &mut Value, observed: &Value) {
    let Value::Object(d) = desired else {
        return;
    };
    let meta = d.entry("metadata").or_insert_with(|| Value::Object(Map::new()));
    if !meta.is_object() {
        *meta = Value::Object(Map::new());
    }
    let Value::Object(meta) = meta else {
        return;
    };
    for key in ["name", "namespace"] {
        match observed
            .pointer(&format!("/metadata/{key}"))
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
        {
            Some(v) => {
                meta.insert(key.to_owned(), Value::String(v.to_owned()));
            }
            None => {
                meta.remove(key);
            }
        }
    }
}
