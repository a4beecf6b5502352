//! The node demo installs by package, as a Crossplane user does: the core's image and the packages of
//! provider-nop (`v1`, and `v2`: its second build, reporting `<version>+next`) and function-go (our
//! composition function on the official Go SDK) are pushed to the test bed's OCI registry; the core
//! and the RBAC manager are applied from deploy/ with deploy/fencing/ through an overlay that names the
//! registry's image; then an upstream-shaped `Provider` and `Function` are applied with kubectl, and
//! the package manager runs each as a Deployment of 2 Pods pulled from the registry. An XR composes
//! through the function over mutual TLS, with no development annotation. The upgrade of provider-nop
//! from `v1` to `v2` hands its Lease from the old revision's leader to the new one's.

use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use kube::Client;
use testenv::kubectl::run as kubectl;

use crate::checker::{self, Lock};
use crate::packages::{self, Archives, LEASE, PROVIDER, Way, function};

/// What installing by package showed.
pub(super) struct Installed {
    /// provider-nop's `v2` reference, for the upgrade.
    pub v2: String,
    /// Seconds from `kubectl apply` of the Provider until it was Installed and Healthy.
    pub provider_healthy: f64,
    /// Seconds from `kubectl apply` of the Function until it was Installed and Healthy.
    pub function_healthy: f64,
    /// Seconds from the XR's creation until it was Ready.
    pub xr_ready: f64,
    /// The Provider's active revision.
    pub revision: String,
}

/// What the upgrade showed.
pub(super) struct Upgraded {
    /// The new revision.
    pub revision: String,
    /// The longest time nobody held the Lease during the upgrade, in ms (from the audit log).
    pub gap_ms: f64,
    /// The leader before and after.
    pub leaders: (String, String),
}

/// Pushes the images and packages, applies the core, installs the Provider and the Function, and
/// composes an XR through the function. `say` narrates.
pub(super) async fn install(
    cluster: &testenv::Cluster,
    archives: &Archives,
    dir: &Path,
    timeout: Duration,
    say: &impl Fn(String),
) -> Result<Installed> {
    let registry = cluster.registry().map_err(|e| anyhow::anyhow!("{e}"))?.clone();
    let (v1, v2) = packages::push(&registry, archives).await?;
    let function_package = packages::push_function(&registry, &archives.function).await?;
    say(format!(
        "pushed the core's image and the packages {v1}, {v2} and {function_package} to the test bed's \
         OCI registry; the node's containerd pulls every image from it"
    ));
    let kubeconfig = cluster.kubeconfig();
    let overlay = packages::write_overlay(&dir.join("overlay"), registry.host(), true)?;
    testenv::kubectl::apply(kubeconfig, &overlay)?;
    say("kubectl apply -k: the core and the RBAC manager from deploy/, and deploy/fencing/".into());
    let client = cluster.client().await?;
    let core: Vec<String> = ["crossplane", "crossplane-rbac-manager"]
        .map(String::from)
        .to_vec();
    let pods = testenv::workload::wait_deployments(&client, packages::NAMESPACE, &core, 2, timeout).await?;
    testenv::workload::wait_one_leader_each(&client, packages::NAMESPACE, &pods, timeout).await?;
    say("the core and the RBAC manager run 2 Pods each, one leader each".into());

    let file = dir.join("provider.json");
    std::fs::write(&file, packages::provider_manifest(&v1).to_string())
        .with_context(|| format!("writing {}", file.display()))?;
    let applied = Instant::now();
    kubectl(kubeconfig, &["apply", "-f", &file.display().to_string()]).context("applying the Provider")?;
    let (_, revision) = packages::wait_healthy(&packages::provider_api(&client), PROVIDER, timeout).await?;
    let provider_healthy = applied.elapsed().as_secs_f64();
    let provider_pods = packages::wait_runtime(&client, &revision, timeout).await?;
    let leader = packages::wait_leader_among(&client, &provider_pods, timeout).await?;
    say(format!(
        "kubectl apply -f provider.json (kind: Provider, spec.package: {v1}): Installed and Healthy \
         {provider_healthy:.1} s later; revision {revision} runs 2 Ready Pods, {leader} leads"
    ));

    let mut function = function::install(&client, kubeconfig, dir, &function_package, timeout).await?;
    say(format!(
        "kubectl apply -f function.json (kind: Function): Installed and Healthy {:.1} s later; revision {} \
         is Active at {} with 2 Ready Pods",
        function.apply_to_healthy, function.revision, function.endpoint
    ));
    print!(
        "{}",
        kubectl(
            kubeconfig,
            &["get", "providers.pkg.crossplane.io,functions.pkg.crossplane.io"]
        )?
    );
    print!(
        "{}",
        kubectl(
            kubeconfig,
            &["get", "pods", "-n", packages::NAMESPACE, "-o", "wide"]
        )?
    );

    for object in [function::xrd(), function::composition()] {
        let file = dir.join("composition.json");
        std::fs::write(&file, object.to_string()).with_context(|| format!("writing {}", file.display()))?;
        kubectl(kubeconfig, &["apply", "-f", &file.display().to_string()])?;
    }
    function::compose(&client, &mut function, timeout).await?;
    say(format!(
        "an XR composed through {} over mutual TLS (no development annotation) was Ready {:.1} s after \
         its creation; the function's ConfigMap {} names the revision that served the call",
        function.revision, function.xr_ready, function.composed.0
    ));
    Ok(Installed {
        v2,
        provider_healthy,
        function_healthy: function.apply_to_healthy,
        xr_ready: function.xr_ready,
        revision,
    })
}

/// Upgrades provider-nop to `v2` our way, and measures from the audit log the longest time nobody held
/// its Lease and the version that acted after.
pub(super) async fn upgrade(
    client: &Client,
    cluster: &testenv::Cluster,
    v2: &str,
    say: &impl Fn(String),
) -> Result<Upgraded> {
    let before = packages::leader_pod(client).await?;
    let u = packages::upgrade(client, Way::Ours, v2, "v1 → v2").await?;
    let events = cluster.audit().read()?.events;
    let terms = checker::terms(&events, &Lock::lease(packages::NAMESPACE, LEASE));
    let (gap_ms, _) = packages::longest_gap(&terms, u.start, u.end);
    let providers = packages::provider_api(client);
    let revision = packages::current_revision(&providers.get(PROVIDER).await?)?;
    let after = packages::leader_pod(client).await?;
    say(format!(
        "spec.package → {v2}: the new revision {revision}'s Pods started beside the old ones; {after} took \
         the Lease from {before} once they were Available, and the old Deployment went. Longest time with \
         no leader: {gap_ms:.0} ms (audit log); done in {:.1} s",
        u.seconds
    ));
    Ok(Upgraded {
        revision,
        gap_ms,
        leaders: (before, after),
    })
}

/// The versions (comma-separated) in the user agents of the writes made in provider-nop's current
/// term, from the audit log: after the upgrade, `v2`'s.
pub(super) fn acting_version(cluster: &testenv::Cluster) -> Result<String> {
    let events = cluster.audit().read()?.events;
    let terms = checker::terms(&events, &Lock::lease(packages::NAMESPACE, LEASE));
    Ok(
        checker::versions_per_term(&events, &terms[terms.len().saturating_sub(1)..])
            .pop()
            .map(|(_, v)| v)
            .unwrap_or_default(),
    )
}
