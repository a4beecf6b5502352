//! `crossplane core init` and `crossplane rbac init`, the init containers of upstream's chart.
//!
//! Upstream's `core init` installs the core's CRDs from the image, sets up webhook and TLS Secrets and
//! pre-installs packages; of that, the CRDs apply to crossplane-rs, and they are built into the binary
//! ([`crate::crds`]), so `core init` applies them with server-side apply and waits until each is
//! Established. Then, as upstream's initializer does, it creates the empty DeploymentRuntimeConfig
//! `default` that packages run with unless they name another (an existing one is left as it is), and,
//! given `--activation` (repeatable; upstream's chart passes `--activation=*` from
//! `provider.defaultActivations`), the ManagedResourceActivationPolicy `default` activating those MRD
//! names (an existing one is left as it is).
//! Upstream's `rbac init` waits until the XRD CRD is served; so does this one. Both exit 0 when done,
//! so the chart's Pods start as upstream's do.

use std::time::{Duration, Instant};

use apis::apiextensions::activation::{ManagedResourceActivationPolicy, ManagedResourceActivationPolicySpec};
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
    /// The default ManagedResourceActivationPolicy could not be created.
    #[error(
        "cannot create the ManagedResourceActivationPolicy \"default\" (--activation): {0}; the ServiceAccount \
         needs get and create on managedresourceactivationpolicies.apiextensions.crossplane.io"
    )]
    ActivationPolicy(#[source] kube::Error),
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
        default_runtime_config(&Api::all(clients.main.clone())).await?;
        let activations = activations(upstream);
        if !activations.is_empty() {
            default_activation_policy(&Api::all(clients.main), activations).await?;
        }
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

/// The name of the policy `--activation` creates (upstream's).
pub const DEFAULT_ACTIVATION_POLICY: &str = "default";

/// The MRD name patterns given with `--activation` (each time it is given; a value is never a list).
pub fn activations(upstream: &[Given]) -> Vec<String> {
    upstream
        .iter()
        .filter(|g| g.name == "activation")
        .flat_map(|g| g.value.split(','))
        .map(str::trim)
        .filter(|v| !v.is_empty())
        .map(str::to_owned)
        .collect()
}

/// Creates the ManagedResourceActivationPolicy `default` activating `activate`, unless one exists.
async fn default_activation_policy(
    api: &Api<ManagedResourceActivationPolicy>,
    activate: Vec<String>,
) -> Result<(), InitError> {
    if api
        .get_opt(DEFAULT_ACTIVATION_POLICY)
        .await
        .map_err(InitError::ActivationPolicy)?
        .is_some()
    {
        return Ok(());
    }
    let policy = ManagedResourceActivationPolicy::new(
        DEFAULT_ACTIVATION_POLICY,
        ManagedResourceActivationPolicySpec {
            activate: activate.clone(),
        },
    );
    match api.create(&PostParams::default(), &policy).await {
        Ok(_) => {
            tracing::info!(
                name = DEFAULT_ACTIVATION_POLICY,
                ?activate,
                "created the default ManagedResourceActivationPolicy"
            );
            Ok(())
        }
        Err(kube::Error::Api(s)) if s.code == 409 => Ok(()),
        Err(e) => Err(InitError::ActivationPolicy(e)),
    }
}

/// What `core init` needs beyond the CRDs: reading and creating the default DeploymentRuntimeConfig
/// and ManagedResourceActivationPolicy.
pub fn rbac_needs() -> Vec<manager::controller::rbac::Rule> {
    vec![
        manager::controller::rbac::Rule::kind::<DeploymentRuntimeConfig>(&[""], &["get", "create"]),
        manager::controller::rbac::Rule::kind::<ManagedResourceActivationPolicy>(&[""], &["get", "create"]),
    ]
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_activation_given_is_one_pattern() {
        let given = |v: &str| Given {
            name: "activation",
            value: v.into(),
            ignored: None,
        };
        assert!(
            activations(&[]).is_empty(),
            "no --activation: no policy, as upstream"
        );
        // Given twice, clap joins the values with commas.
        assert_eq!(
            activations(&[given("*.nop.crossplane.io,*.aws.crossplane.io")]),
            ["*.nop.crossplane.io", "*.aws.crossplane.io"]
        );
        assert_eq!(activations(&[given("*")]), ["*"]);
    }
}
