//! `crossplane core init` and `crossplane rbac init`, the init containers of upstream's chart.
//!
//! Upstream's `core init` installs the core's CRDs from the image, sets up webhook and TLS Secrets and
//! pre-installs packages; of that, the CRDs apply to crossplane-rs, and they are built into the binary
//! ([`crate::crds`]), so `core init` applies them with server-side apply and waits until each is
//! Established. Then, as upstream's initializer does, it creates the empty DeploymentRuntimeConfig
//! `default` that packages run with unless they name another (an existing one is left as it is).
//! Upstream's `rbac init` waits until the XRD CRD is served; so does this one. Both exit 0 when done,
//! so the chart's Pods start as upstream's do.

use std::time::{Duration, Instant};

use apis::pkg::{DEFAULT_RUNTIME_CONFIG, DeploymentRuntimeConfig};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::Api;
use kube::api::{Patch, PatchParams, PostParams};
use manager::BinaryInfo;
use manager::config::compat::Given;

/// The field manager of `core init`.
pub const FIELD_MANAGER: &str = "crossplane-init";

/// How long init waits for a CRD, as upstream's initializer.
const WAIT: Duration = Duration::from_secs(60);

/// `init` failed.
#[derive(Debug, thiserror::Error)]
pub enum InitError {
    /// No kubeconfig and no in-cluster config.
    #[error("{0}; set KUBECONFIG, or run in a Pod with a ServiceAccount")]
    Client(#[source] manager::config::client::ClientError),
    /// A CRD could not be applied.
    #[error(
        "cannot apply CRD {name}: {source}; the ServiceAccount needs create and patch on customresourcedefinitions"
    )]
    Apply {
        /// The CRD.
        name: String,
        /// Why.
        source: kube::Error,
    },
    /// A CRD did not become Established (or did not appear) in time.
    #[error(
        "CRD {0} is not established after {WAIT:?}; check `kubectl get crd {0} -o yaml` for its conditions"
    )]
    NotEstablished(String),
    /// The default DeploymentRuntimeConfig could not be created.
    #[error(
        "cannot create the default DeploymentRuntimeConfig: {0}; the ServiceAccount needs get and create on \
         deploymentruntimeconfigs.pkg.crossplane.io"
    )]
    RuntimeConfig(#[source] kube::Error),
    /// Logging could not be set up.
    #[error(transparent)]
    Logging(#[from] manager::config::logging::LoggingError),
}

/// Runs `core init` (`core` true) or `rbac init`.
pub async fn run(
    core: bool,
    debug: Option<&str>,
    upstream: &[Given],
    binary: BinaryInfo,
) -> Result<(), InitError> {
    manager::config::logging::init(manager::LogFormat::Text, debug.unwrap_or("info"))?;
    manager::config::compat::log_ignored(upstream);
    let identity = std::env::var("POD_NAME").unwrap_or_else(|_| "init".to_owned());
    let agent = manager::config::client::user_agent(&binary, &identity);
    let clients = manager::Clients::new(None, None, &agent)
        .await
        .map_err(InitError::Client)?;
    let crds: Api<CustomResourceDefinition> = Api::all(clients.main.clone());
    let names = if core {
        apply(&crds).await?
    } else {
        vec![format!(
            "compositeresourcedefinitions.{}",
            apis::apiextensions::GROUP
        )]
    };
    for name in &names {
        wait_established(&crds, name).await?;
    }
    if core {
        default_runtime_config(&Api::all(clients.main)).await?;
    }
    tracing::info!(crds = ?names, "initialization has been completed");
    Ok(())
}

async fn apply(crds: &Api<CustomResourceDefinition>) -> Result<Vec<String>, InitError> {
    let pp = PatchParams::apply(FIELD_MANAGER).force();
    let mut names = Vec::new();
    for crd in crate::crds() {
        let name = crd.metadata.name.clone().unwrap_or_default();
        crds.patch(&name, &pp, &Patch::Apply(&crd))
            .await
            .map_err(|source| InitError::Apply {
                name: name.clone(),
                source,
            })?;
        tracing::info!(crd = %name, "applied");
        names.push(name);
    }
    Ok(names)
}

/// Creates the empty DeploymentRuntimeConfig `default` unless one exists.
async fn default_runtime_config(api: &Api<DeploymentRuntimeConfig>) -> Result<(), InitError> {
    if api
        .get_opt(DEFAULT_RUNTIME_CONFIG)
        .await
        .map_err(InitError::RuntimeConfig)?
        .is_some()
    {
        return Ok(());
    }
    let drc = DeploymentRuntimeConfig::new(DEFAULT_RUNTIME_CONFIG, Default::default());
    match api.create(&PostParams::default(), &drc).await {
        Ok(_) => {
            tracing::info!(
                name = DEFAULT_RUNTIME_CONFIG,
                "created the default DeploymentRuntimeConfig"
            );
            Ok(())
        }
        // Another init got there first.
        Err(kube::Error::Api(s)) if s.code == 409 => Ok(()),
        Err(e) => Err(InitError::RuntimeConfig(e)),
    }
}

/// What `core init` needs beyond the CRDs: reading and creating the default DeploymentRuntimeConfig.
pub fn rbac_needs() -> Vec<manager::controller::rbac::Rule> {
    vec![manager::controller::rbac::Rule::kind::<DeploymentRuntimeConfig>(
        &[""],
        &["get", "create"],
    )]
}

async fn wait_established(crds: &Api<CustomResourceDefinition>, name: &str) -> Result<(), InitError> {
    let start = Instant::now();
    loop {
        let crd = crds.get_opt(name).await.ok().flatten();
        let established = crd
            .and_then(|c| c.status)
            .and_then(|s| s.conditions)
            .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Established" && c.status == "True"));
        if established {
            return Ok(());
        }
        if start.elapsed() > WAIT {
            return Err(InitError::NotEstablished(name.to_owned()));
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}
