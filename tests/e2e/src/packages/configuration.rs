//! A Configuration on the node that depends on a Provider: its package (a meta Configuration, the XRD
//! and the Composition that compose through function-go) depends on provider-kubernetes's package,
//! which is not installed. Applying only the Configuration must install both: the Lock resolves the
//! dependency to the highest tag that meets the constraint, the package manager installs it as a
//! `Provider` whose runtime runs 2 Ready Pods, and the Configuration's XRD and Composition are
//! installed, controlled by its revision.

use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{Context, ensure};
use kube::Client;
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
    Ok(ConfigurationOutcome {
        package: package.to_string(),
        apply_to_healthy,
        dependency: (name, dependency_package),
        dependency_healthy,
        dependency_pods,
        objects,
    })
}
