//! A Configuration on the node that depends on a Provider: its package (a meta Configuration, the XRD
//! and the Composition that compose through function-go) depends on provider-kubernetes's package,
//! which is not installed. Applying only the Configuration must install both: the Lock resolves the
//! dependency to the highest tag that meets the constraint, the package manager installs it as a
//! `Provider` whose runtime runs 2 Ready Pods, and the Configuration's XRD and Composition are
//! installed, controlled by its revision.

use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{Context, ensure};
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::{Api, Client};
use serde_json::json;

use super::{function, pkg_api, wait_healthy, wait_runtime};

/// The Configuration's name, and its package's.
pub const CONFIGURATION: &str = "configuration-function-go";
/// The repository of its package in the registry.
pub const REPOSITORY: &str = "crossplane-rs/configuration-function-go";
/// The repository of provider-kubernetes's package, the dependency.
pub const DEPENDENCY_REPOSITORY: &str = "crossplane-rs/provider-kubernetes";
/// The dependency's tag in the registry, and the constraint the Configuration puts on it.
pub const DEPENDENCY_TAG: &str = "v0.1.0";
const CONSTRAINT: &str = ">=v0.1.0";
/// provider-kubernetes's CRD that converts through its webhook.
const CONVERTED_CRD: &str = "objects.kubernetes.crossplane.io";

/// What the Configuration's part showed.
#[derive(Debug, Clone)]
pub struct ConfigurationOutcome {
    /// The package's reference.
    pub package: String,
    /// Seconds from `kubectl apply` until it was Installed and Healthy.
    pub apply_to_healthy: f64,
    /// The Provider the dependency became, and its package.
    pub dependency: (String, String),
    /// Seconds from `kubectl apply` of the Configuration until the dependency was Healthy.
    pub dependency_healthy: f64,
    /// The dependency's Ready Pods.
    pub dependency_pods: Vec<String>,
    /// The objects the revision installed, as `Kind/name`.
    pub objects: Vec<String>,
    /// Where the dependency's CRD with a conversion webhook sends conversions, as the package manager
    /// set it: `<crd> -> <service>.<namespace>:<port><path>`, trusting the core's CA.
    pub conversion: String,
}

/// The Configuration's package: its meta object (depending on provider-kubernetes at
/// `provider_source`), the XRD and the Composition.
pub fn package(provider_source: &str) -> anyhow::Result<xpkg::Package> {
    let meta = json!({
        "apiVersion": "meta.pkg.crossplane.io/v1",
        "kind": "Configuration",
        "metadata": {"name": CONFIGURATION},
        "spec": {"dependsOn": [{"apiVersion": "pkg.crossplane.io/v1", "kind": "Provider",
                                "package": provider_source, "version": CONSTRAINT}]},
    });
    Ok(xpkg::Package::new(
        meta,
        vec![function::xrd(), function::composition()],
    )?)
}

/// Installs the Configuration `package` with `kubectl apply` (the manifest is written under `dir`), and
/// waits for it and its dependency (provider-kubernetes from `provider_source`) to be Healthy.
pub async fn install(
    client: &Client,
    kubeconfig: &Path,
    dir: &Path,
    package: &str,
    provider_source: &str,
    timeout: Duration,
) -> anyhow::Result<ConfigurationOutcome> {
    let manifest = json!({"apiVersion": "pkg.crossplane.io/v1", "kind": "Configuration",
                          "metadata": {"name": CONFIGURATION}, "spec": {"package": package}});
    let file = dir.join("configuration.json");
    std::fs::write(&file, manifest.to_string()).with_context(|| format!("writing {}", file.display()))?;
    let applied = Instant::now();
    testenv::kubectl::run(kubeconfig, &["apply", "-f", &file.display().to_string()])
        .context("applying the Configuration")?;
    let (_, revision) = wait_healthy(&pkg_api(client, "Configuration"), CONFIGURATION, timeout).await?;
    let apply_to_healthy = applied.elapsed().as_secs_f64();
    let rev = pkg_api(client, "ConfigurationRevision").get(&revision).await?;
    let objects: Vec<String> = rev.data["status"]["objectRefs"]
        .as_array()
        .map(|refs| {
            refs.iter()
                .map(|r| {
                    format!(
                        "{}/{}",
                        r["kind"].as_str().unwrap_or("?"),
                        r["name"].as_str().unwrap_or("?")
                    )
                })
                .collect()
        })
        .unwrap_or_default();
    eprintln!(
        "[packages] Configuration Installed and Healthy {apply_to_healthy:.1}s after apply ({revision}: {})",
        objects.join(", ")
    );

    let name = crossplane::pkg::resolver::dependency_name(provider_source);
    let (provider, provider_revision) = wait_healthy(&pkg_api(client, "Provider"), &name, timeout).await?;
    let dependency_healthy = applied.elapsed().as_secs_f64();
    let dependency_package = provider.data["spec"]["package"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    ensure!(
        dependency_package == format!("{provider_source}:{DEPENDENCY_TAG}"),
        "the dependency was installed from {dependency_package:?}, not the one tag meeting {CONSTRAINT}"
    );
    let dependency_pods = wait_runtime(client, &provider_revision, timeout).await?;
    eprintln!(
        "[packages] its dependency, Provider {name} ({dependency_package}), Healthy {dependency_healthy:.1}s \
         after the Configuration's apply, Pods {dependency_pods:?}"
    );
    let conversion = conversion(client, &name).await?;
    eprintln!("[packages] its conversion webhook: {conversion}");
    Ok(ConfigurationOutcome {
        package: package.to_string(),
        apply_to_healthy,
        dependency: (name, dependency_package),
        dependency_healthy,
        dependency_pods,
        objects,
        conversion,
    })
}

/// provider-kubernetes's CRD that converts through a webhook must point at the runtime's Service of
/// package `service` and trust the core's CA (`crossplane-root-ca`): the package manager injects both,
/// so the provider, which has no rights on CRDs, writes nothing there.
async fn conversion(client: &Client, service: &str) -> anyhow::Result<String> {
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let crd = crds
        .get(CONVERTED_CRD)
        .await
        .with_context(|| format!("reading CustomResourceDefinition {CONVERTED_CRD}"))?;
    let config = crd
        .spec
        .conversion
        .and_then(|c| c.webhook)
        .and_then(|w| w.client_config)
        .with_context(|| format!("{CONVERTED_CRD} has no conversion webhook clientConfig"))?;
    let svc = config
        .service
        .with_context(|| format!("{CONVERTED_CRD}'s conversion webhook names no Service"))?;
    ensure!(
        svc.name == service && svc.namespace == super::NAMESPACE,
        "{CONVERTED_CRD}'s conversion webhook points at Service {}/{}, not the runtime's {}/{service}",
        svc.namespace,
        svc.name,
        super::NAMESPACE
    );
    let secrets: Api<Secret> = Api::namespaced(client.clone(), super::NAMESPACE);
    let ca = secrets
        .get(crossplane::composite::pki::ROOT_CA_SECRET)
        .await
        .context("reading the core's CA Secret")?
        .data
        .and_then(|d| d.get("tls.crt").cloned())
        .context("the core's CA Secret has no tls.crt")?;
    ensure!(
        config.ca_bundle.as_ref() == Some(&ca),
        "{CONVERTED_CRD}'s conversion webhook caBundle is not the core's CA"
    );
    Ok(format!(
        "{CONVERTED_CRD} -> {}.{}:{}{}, caBundle = the core's CA ({})",
        svc.name,
        svc.namespace,
        svc.port.unwrap_or(443),
        svc.path.unwrap_or_default(),
        crossplane::composite::pki::ROOT_CA_SECRET
    ))
}
