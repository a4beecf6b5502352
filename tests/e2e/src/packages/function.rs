//! A Function package on the node: function-go (our function on the official Go SDK, `tests/peers`) is
//! packed on its static image as an xpkg, pushed to the test bed's registry and installed with an
//! upstream-shaped `Function` manifest. The scenario waits for it to be Installed and Healthy, its
//! FunctionRevision Active with an endpoint and its 2 Pods Ready ([`install`]), and once a
//! Configuration has installed an XRD and a Composition, composes an XR through it ([`compose`]): the
//! core, in its Pod, resolves the headless Service through the cluster's DNS and calls the function over
//! mutual TLS (function-go serves only with the certificates the package manager mounts, and the
//! Function has no development annotation). The XR must become Ready, and the ConfigMap the function
//! composed must name the revision that served the call.

use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{Context, ensure};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{ApiResource, DynamicObject, GroupVersionKind, ListParams, PostParams};
use kube::{Api, Client};
use serde_json::{Value, json};

use super::{api, is_true, pkg_api, wait_for, wait_healthy, wait_runtime};

/// The Function's name, and so its package's.
pub const FUNCTION: &str = release::package::FUNCTION;
/// The repository of function-go's package in the registry.
pub const REPOSITORY: &str = "crossplane-rs/function-go";
/// The group of the XRD composed through the function.
const GROUP: &str = "fn.e2e.crossplane-rs.io";
/// The namespace of the XR.
const XR_NAMESPACE: &str = "default";
const XR_NAME: &str = "through-function-go";
/// The Composition's name.
const COMPOSITION: &str = "xfunctiontests-function-go";

/// What the Function's part showed.
#[derive(Debug, Clone)]
pub struct FunctionOutcome {
    /// The package's reference.
    pub package: String,
    /// Seconds from `kubectl apply` of the Function until it was Installed and Healthy.
    pub apply_to_healthy: f64,
    /// The active FunctionRevision.
    pub revision: String,
    /// Its `status.endpoint`.
    pub endpoint: String,
    /// Its Ready Pods.
    pub pods: Vec<String>,
    /// Seconds from the XR's creation until it was Ready.
    pub xr_ready: f64,
    /// The ConfigMap the function composed: its name and `data.revision`.
    pub composed: (String, String),
}

/// Installs the Function `package` with `kubectl apply` (the manifest is written under `dir`); returns
/// once it is Healthy, its revision Active with an endpoint and 2 Ready Pods ([`FunctionOutcome`]'s XR
/// fields are left for [`compose`]).
pub async fn install(
    client: &Client,
    kubeconfig: &Path,
    dir: &Path,
    package: &str,
    timeout: Duration,
) -> anyhow::Result<FunctionOutcome> {
    let file = dir.join("function.json");
    std::fs::write(&file, manifest(package).to_string())
        .with_context(|| format!("writing {}", file.display()))?;
    let applied = Instant::now();
    testenv::kubectl::run(kubeconfig, &["apply", "-f", &file.display().to_string()])
        .context("applying the Function")?;
    let (_, revision) = wait_healthy(&pkg_api(client, "Function"), FUNCTION, timeout).await?;
    let apply_to_healthy = applied.elapsed().as_secs_f64();
    eprintln!("[packages] Function Installed and Healthy {apply_to_healthy:.1}s after apply ({revision})");
    let revisions = pkg_api(client, "FunctionRevision");
    let endpoint = wait_for(
        "the FunctionRevision Active with an endpoint",
        timeout,
        async || {
            let r = revisions.get(&revision).await?;
            let active = r.data["spec"]["desiredState"] == "Active";
            Ok(match r.data["status"]["endpoint"].as_str() {
                Some(e) if active && !e.is_empty() => Ok(e.to_string()),
                _ => Err(format!(
                    "desiredState {}, status {}",
                    r.data["spec"]["desiredState"], r.data["status"]
                )),
            })
        },
    )
    .await?;
    let pods = wait_runtime(client, &revision, timeout).await?;
    eprintln!("[packages] FunctionRevision {revision} Active at {endpoint}, Pods {pods:?}");

    Ok(FunctionOutcome {
        package: package.to_string(),
        apply_to_healthy,
        revision,
        endpoint,
        pods,
        xr_ready: 0.0,
        composed: Default::default(),
    })
}

/// Composes an XR through the function, with the XRD and Composition that [`configuration`] installs;
/// fills in `function`'s XR fields. The composed ConfigMap must name the function's active revision.
///
/// [`configuration`]: super::configuration
pub async fn compose(
    client: &Client,
    function: &mut FunctionOutcome,
    timeout: Duration,
) -> anyhow::Result<()> {
    let (xr_ready, composed) = compose_xr(client, timeout).await?;
    ensure!(
        composed.1 == function.revision,
        "the ConfigMap the function composed names revision {:?}, not the active {}",
        composed.1,
        function.revision
    );
    eprintln!(
        "[packages] XR {XR_NAMESPACE}/{XR_NAME} Ready {xr_ready:.1}s after creation, composed through \
         {} over mutual TLS (ConfigMap {})",
        function.revision, composed.0
    );
    function.xr_ready = xr_ready;
    function.composed = composed;
    Ok(())
}

/// The XRD the Configuration installs: namespaced `XFunctionTest`s.
pub fn xrd() -> Value {
    json!({
        "apiVersion": "apiextensions.crossplane.io/v2", "kind": "CompositeResourceDefinition",
        "metadata": {"name": format!("xfunctiontests.{GROUP}")},
        "spec": {"scope": "Namespaced", "group": GROUP,
                 "names": {"kind": "XFunctionTest", "plural": "xfunctiontests"},
                 "versions": [{"name": "v1", "served": true, "referenceable": true,
                               "schema": {"openAPIV3Schema": {"type": "object",
                                   "properties": {"spec": {"type": "object"}}}}}]},
    })
}

/// The Composition the Configuration installs: one step, the function.
pub fn composition() -> Value {
    json!({
        "apiVersion": "apiextensions.crossplane.io/v1", "kind": "Composition",
        "metadata": {"name": COMPOSITION},
        "spec": {"compositeTypeRef": {"apiVersion": format!("{GROUP}/v1"), "kind": "XFunctionTest"},
                 "mode": "Pipeline",
                 "pipeline": [{"step": "compose", "functionRef": {"name": FUNCTION}}]},
    })
}

/// An XR of the Configuration's XRD; returns the seconds until it was Ready and the composed
/// ConfigMap's name and `data.revision`.
async fn compose_xr(client: &Client, timeout: Duration) -> anyhow::Result<(f64, (String, String))> {
    let pp = PostParams::default();
    let xrds = api(
        client,
        "apiextensions.crossplane.io",
        "v2",
        "CompositeResourceDefinition",
    );
    wait_for("the XRD Established", timeout, async || {
        let x = xrds.get(&format!("xfunctiontests.{GROUP}")).await?;
        Ok(if is_true(&x, "Established") {
            Ok(())
        } else {
            Err(x.data["status"].to_string())
        })
    })
    .await?;
    let gvk = GroupVersionKind::gvk(GROUP, "v1", "XFunctionTest");
    let xrs: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), XR_NAMESPACE, &ApiResource::from_gvk(&gvk));
    let xr: DynamicObject = serde_json::from_value(json!({
        "apiVersion": format!("{GROUP}/v1"), "kind": "XFunctionTest",
        "metadata": {"name": XR_NAME, "namespace": XR_NAMESPACE},
        "spec": {"crossplane": {"compositionRef": {"name": COMPOSITION}}},
    }))?;
    // The XR's CRD is served shortly after the XRD is Established.
    wait_for("the XR created", timeout, async || {
        Ok(match xrs.create(&pp, &xr).await {
            Ok(_) => Ok(()),
            Err(kube::Error::Api(s)) if s.code == 404 => Err("its kind is not served yet".to_string()),
            Err(e) => return Err(e).context("creating the XR"),
        })
    })
    .await?;
    let created = Instant::now();
    wait_for("the XR Ready", timeout, async || {
        let x = xrs.get(XR_NAME).await?;
        Ok(if is_true(&x, "Ready") {
            Ok(())
        } else {
            Err(x.data["status"]["conditions"].to_string())
        })
    })
    .await?;
    let ready = created.elapsed().as_secs_f64();
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), XR_NAMESPACE);
    let lp = ListParams::default().labels(&format!("crossplane.io/composite={XR_NAME}"));
    let composed = cms.list(&lp).await?.items;
    let cm = composed
        .first()
        .with_context(|| format!("no ConfigMap labelled crossplane.io/composite={XR_NAME}"))?;
    let data = cm.data.clone().unwrap_or_default();
    ensure!(
        data.get("xr").map(String::as_str) == Some(XR_NAME),
        "the composed ConfigMap does not name the XR: {data:?}"
    );
    // What the official Go SDK decoded of RequestMeta.capabilities, as upstream's v2.2 core sends them.
    let capabilities = data.get("capabilities").map(String::as_str).unwrap_or_default();
    ensure!(
        [
            "CAPABILITY_CAPABILITIES",
            "CAPABILITY_REQUIRED_RESOURCES",
            "CAPABILITY_REQUIRED_SCHEMAS"
        ]
        .iter()
        .all(|c| capabilities.split(',').any(|got| got == *c)),
        "the function did not get the core's capabilities in RequestMeta: {capabilities:?}"
    );
    let name = cm.metadata.name.clone().unwrap_or_default();
    let revision = data.get("revision").cloned().unwrap_or_default();
    Ok((ready, (name, revision)))
}

/// The `Function` manifest a user would apply for `package`.
pub fn manifest(package: &str) -> Value {
    json!({"apiVersion": "pkg.crossplane.io/v1", "kind": "Function",
           "metadata": {"name": FUNCTION}, "spec": {"package": package}})
}
