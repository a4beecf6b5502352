//! `crossplane render XR COMPOSITION FUNCTIONS`: runs a Composition's pipeline over an XR without a
//! cluster and prints the desired XR and composed resources as YAML documents.
//!
//! Functions are the ones already running: each Function in FUNCTIONS must carry
//! `render.crossplane.io/runtime: Development` and `render.crossplane.io/runtime-development-target:
//! host:port` (upstream render's annotations). `function-patch-and-transform` runs built in and needs
//! no Function. Requirements are answered from `--extra-resources`; credentials are not available.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use apis::apiextensions::Composition;
use apis::pkg::{ANNOTATION_RUNTIME, ANNOTATION_RUNTIME_DEVELOPMENT_TARGET, RUNTIME_DEVELOPMENT};
use function::proto::v1;
use serde_json::{Value, json};

use crate::composite::builtin;
use crate::composite::pipeline::{self, Io, Observed};
use crate::composite::render::{Owner, decorate};

/// Flags of `render`.
#[derive(Debug, clap::Args)]
pub struct RenderArgs {
    /// A YAML file with the composite resource (XR).
    pub composite_resource: PathBuf,
    /// A YAML file with the Composition.
    pub composition: PathBuf,
    /// A YAML file with the Functions (one or more documents), annotated with their running endpoint.
    pub functions: PathBuf,
    /// A YAML file with resources that function requirements may select (one or more documents).
    #[arg(long, value_name = "FILE")]
    pub extra_resources: Option<PathBuf>,
    /// The deadline of one function call.
    #[arg(long, value_parser = manager::duration::parse_duration, default_value = "20s", value_name = "DURATION")]
    pub timeout: Duration,
}

/// Why render failed: bad input (exit 2) or a failing pipeline (exit 1).
#[derive(Debug, thiserror::Error)]
enum RenderError {
    #[error("{0}")]
    Input(String),
    #[error("{0}")]
    Pipeline(String),
}

fn read_docs(path: &Path) -> Result<Vec<Value>, RenderError> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| RenderError::Input(format!("cannot read {}: {e}", path.display())))?;
    let docs: Vec<Value> = serde_saphyr::from_multiple(&text)
        .map_err(|e| RenderError::Input(format!("cannot parse {} as YAML: {e}", path.display())))?;
    Ok(docs.into_iter().filter(|d| !d.is_null()).collect())
}

fn read_one(path: &Path, what: &str) -> Result<Value, RenderError> {
    let mut docs = read_docs(path)?;
    match docs.len() {
        1 => Ok(docs.remove(0)),
        n => Err(RenderError::Input(format!(
            "{} must hold exactly one {what}, found {n} documents",
            path.display()
        ))),
    }
}

/// Functions and extra resources from files; calls go to the Development endpoints.
struct FileIo {
    endpoints: BTreeMap<String, String>,
    extra: Vec<Value>,
    timeout: Duration,
}

impl Io for FileIo {
    async fn call(
        &self,
        function: &str,
        req: v1::RunFunctionRequest,
    ) -> Result<v1::RunFunctionResponse, String> {
        let ep = self.endpoints.get(function).ok_or_else(|| {
            format!(
                "Function {function:?} is not in the functions file (with {ANNOTATION_RUNTIME}: {RUNTIME_DEVELOPMENT} \
                 and {ANNOTATION_RUNTIME_DEVELOPMENT_TARGET}: host:port)"
            )
        })?;
        let c = function::Client::insecure(ep).map_err(|e| e.to_string())?;
        c.run(req, self.timeout).await.map_err(|e| e.to_string())
    }

    async fn required(&self, sel: &v1::ResourceSelector) -> Result<Vec<Value>, String> {
        Ok(self
            .extra
            .iter()
            .filter(|r| r["apiVersion"] == sel.api_version.as_str() && r["kind"] == sel.kind.as_str())
            .filter(|r| match &sel.r#match {
                Some(v1::resource_selector::Match::MatchName(n)) => r["metadata"]["name"] == n.as_str(),
                Some(v1::resource_selector::Match::MatchLabels(l)) => l
                    .labels
                    .iter()
                    .all(|(k, v)| r["metadata"]["labels"][k] == v.as_str()),
                None => false,
            })
            .cloned()
            .collect())
    }

    async fn secret(&self, namespace: &str, name: &str) -> Result<BTreeMap<String, Vec<u8>>, String> {
        Err(format!(
            "render runs without a cluster and cannot read Secret {namespace}/{name} for credentials"
        ))
    }
}

/// The address of each Function in `--functions`, which must all be development runtimes.
fn function_endpoints(args: &RenderArgs) -> Result<BTreeMap<String, String>, RenderError> {
    let mut endpoints = BTreeMap::new();
    for f in read_docs(&args.functions)? {
        let name = f["metadata"]["name"].as_str().unwrap_or_default().to_owned();
        let ann = &f["metadata"]["annotations"];
        if ann[ANNOTATION_RUNTIME] != RUNTIME_DEVELOPMENT {
            return Err(RenderError::Input(format!(
                "{}: Function {name:?} must be annotated {ANNOTATION_RUNTIME}: {RUNTIME_DEVELOPMENT} \
                 (render only dials functions that are already running)",
                args.functions.display()
            )));
        }
        let target = ann[ANNOTATION_RUNTIME_DEVELOPMENT_TARGET]
            .as_str()
            .unwrap_or("localhost:9443")
            .to_owned();
        endpoints.insert(name, target);
    }
    Ok(endpoints)
}

/// The XR (its name, namespace, and the status and conditions the functions gave it), then each
/// composed resource, decorated as the core would.
fn documents(xr: &Value, run: &pipeline::Outcome) -> Vec<Value> {
    let name = xr["metadata"]["name"].as_str().unwrap_or_default().to_owned();
    let owner = Owner {
        api_version: xr["apiVersion"].as_str().unwrap_or_default().to_owned(),
        kind: xr["kind"].as_str().unwrap_or_default().to_owned(),
        name: name.clone(),
        uid: xr["metadata"]["uid"].as_str().unwrap_or_default().to_owned(),
        namespace: xr["metadata"]["namespace"].as_str().map(str::to_owned),
        labels: BTreeMap::new(),
    };
    let mut out_xr = json!({"apiVersion": owner.api_version, "kind": owner.kind, "metadata": {"name": name}});
    if let Some(ns) = &owner.namespace {
        out_xr["metadata"]["namespace"] = json!(ns);
    }
    if let Some(status) = builtin::json_of(run.desired.composite.as_ref()).get("status") {
        out_xr["status"] = status.clone();
    }
    if !run.conditions.is_empty() {
        out_xr["status"]["conditions"] = serde_json::to_value(&run.conditions).unwrap_or(Value::Null);
    }
    let mut docs = vec![out_xr];
    for (template, r) in &run.desired.resources {
        let mut res = builtin::json_of(Some(r));
        let existing = res["metadata"]["name"].as_str().map(str::to_owned);
        // Without a cluster the kind's scope is unknown: a namespaced XR's namespace, else whatever
        // namespace the template gives (as a cluster-scoped XR keeps it).
        let namespace = owner.namespace.clone().or_else(|| {
            res.pointer("/metadata/namespace")
                .and_then(Value::as_str)
                .map(str::to_owned)
        });
        decorate(
            &mut res,
            &owner,
            template,
            existing.as_deref().unwrap_or(""),
            namespace.as_deref(),
            existing.is_none(),
        );
        if existing.is_none()
            && let Some(m) = res["metadata"].as_object_mut()
        {
            m.remove("name");
        }
        docs.push(res);
    }
    docs
}

async fn render(args: &RenderArgs) -> Result<String, RenderError> {
    let xr = read_one(&args.composite_resource, "composite resource")?;
    if !xr.is_object() || xr["apiVersion"].as_str().is_none() || xr["kind"].as_str().is_none() {
        return Err(RenderError::Input(format!(
            "{}: the composite resource needs apiVersion and kind",
            args.composite_resource.display()
        )));
    }
    let comp: Composition = serde_json::from_value(read_one(&args.composition, "Composition")?)
        .map_err(|e| RenderError::Input(format!("{}: not a Composition: {e}", args.composition.display())))?;
    let endpoints = function_endpoints(args)?;
    let extra = match &args.extra_resources {
        Some(p) => read_docs(p)?,
        None => vec![],
    };
    let io = FileIo {
        endpoints,
        extra,
        timeout: args.timeout,
    };
    let observed = Observed {
        composite: xr.clone(),
        ..Observed::default()
    };
    let run = pipeline::run(&io, &comp.spec.pipeline, &observed, "render")
        .await
        .map_err(|e| RenderError::Pipeline(e.to_string()))?;

    let docs = documents(&xr, &run);
    let mut text = String::new();
    for d in docs {
        text.push_str("---\n");
        let y = serde_saphyr::to_string(&d)
            .map_err(|e| RenderError::Pipeline(format!("cannot print YAML: {e}")))?;
        text.push_str(&y);
    }
    for e in &run.events {
        eprintln!("{}: {}", if e.warning { "Warning" } else { "Normal" }, e.message);
    }
    Ok(text)
}

/// Runs `crossplane render`: prints the YAML, exits 2 on bad input and 1 when the pipeline fails.
pub fn main(args: &RenderArgs) -> ExitCode {
    manager::run::exit::block_on(async {
        let text = render(args).await?;
        print!("{text}");
        Ok::<(), RenderError>(())
    })
}

impl manager::run::exit::Failure for RenderError {
    fn exit_code(&self) -> u8 {
        match self {
            RenderError::Input(_) => 2,
            RenderError::Pipeline(_) => 1,
        }
    }
}
