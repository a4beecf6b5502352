//! `cargo xtask package-bench`: the package manager on a real node, every image pulled from the test
//! bed's OCI registry.
//!
//! 1. The core's image and provider-nop's package (`v1`: its image with the package layer; `v2`: its
//!    second build, reporting `<version>+next`, with the same package layer) are pushed to the
//!    registry, which listens on the node's address ([`push`]).
//! 2. The core and the RBAC manager are applied from deploy/ through an overlay that names the
//!    registry's images and lets the core fetch from it over plain HTTP; containerd pulls them.
//! 3. An upstream-shaped `Provider` manifest (only `spec.package` names the registry) is applied, and
//!    timed until it is Installed and Healthy; its runtime must have 2 Ready Pods, one holding the
//!    package's Lease, and its NopResources must become Ready (the RBAC manager grants the revision its
//!    kinds).
//! 4. function-go's package (our function on the official Go SDK) is installed with a `Function`
//!    manifest ([`function`]); a `Configuration` whose package holds an XRD and a Composition through
//!    that function, and depends on provider-kubernetes's package, installs both ([`configuration`]);
//!    and an XR composes through the function over mutual TLS.
//! 5. While NopResources keep changing, `spec.package` goes v1 → v2 → v1 … `--upgrades` times our way
//!    (the old Deployment runs until the new one is Available and one of its Pods leads), then as many
//!    times upstream's way (the old revision deactivated and its Deployment deleted at once, before
//!    the new one runs; done by hand through `revisionActivationPolicy: Manual`).
//! 6. The audit log gives, per upgrade, the longest time nobody held the Lease, and for the whole run
//!    the writes of every revision's ServiceAccount checked against their writer's terms, the
//!    violations and the version that acted in each term ([`crate::checker`]).

pub mod bad;
pub mod bench;
pub mod configuration;
pub mod function;
pub mod report;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{Context, bail, ensure};
use jiff::Timestamp;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{
    ApiResource, DeleteParams, DynamicObject, GroupVersionKind, ListParams, Patch, PatchParams, PostParams,
};
use kube::{Api, Client, ResourceExt};
use serde_json::{Value, json};
use testenv::{AuditEvent, workload};

use crate::checker::{self, Lock};
use release::image;

/// Where the core and the runtimes run.
pub const NAMESPACE: &str = "crossplane-system";
/// The Provider's name, and so its package's name.
pub const PROVIDER: &str = "provider-nop";
/// The Lease both revisions of the package stand for.
pub const LEASE: &str = "crossplane-leader-election-provider-nop";
/// The repository of provider-nop's package in the registry.
pub(crate) const REPOSITORY: &str = "crossplane-rs/provider-nop";
const READY_TIMEOUT: Duration = Duration::from_secs(300);
const UPGRADE_TIMEOUT: Duration = Duration::from_secs(180);
const NOPS: usize = 8;

/// The archives the scenario pushes, from `cargo xtask image --debug --next`.
#[derive(Debug, Clone)]
pub struct Archives {
    /// The core's image (`crossplane.oci.tar`).
    pub core: PathBuf,
    /// provider-nop's package (`provider-nop.xpkg.oci.tar`).
    pub package: PathBuf,
    /// provider-nop's second build (`provider-nop-next.oci.tar`), the runtime of package `v2`.
    pub next: PathBuf,
    /// function-go's package (`function-go.xpkg.oci.tar`: its static image with the package layer).
    pub function: PathBuf,
    /// provider-kubernetes's package (`provider-kubernetes.xpkg.oci.tar`), the Configuration's
    /// dependency.
    pub dependency: PathBuf,
    /// The node's pause image (`pause.oci.tar`): the runtime of the package that never becomes ready.
    pub pause: PathBuf,
}

/// How an upgrade was done.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Way {
    /// Ours: the old Deployment runs until the new one is Available and leads.
    Ours,
    /// Upstream's: the old revision's Deployment is deleted first.
    Upstream,
}

/// One upgrade, as the scenario saw it and the audit log tells it.
#[derive(Debug, Clone)]
pub struct Upgrade {
    /// How it was done.
    pub way: Way,
    /// `v1 → v2` or `v2 → v1`.
    pub change: String,
    /// From `spec.package`'s change until a Pod of the new revision led and the old Deployment was gone.
    pub seconds: f64,
    /// The longest time in the upgrade with no valid holder of the Lease, in ms (audit log).
    pub gap_ms: f64,
    /// How many times the Lease changed hands in it.
    pub handovers: usize,
    /// When `spec.package` changed.
    pub start: Timestamp,
    /// When the upgrade was done.
    pub end: Timestamp,
}

/// What the whole run showed.
#[derive(Debug, Clone)]
pub struct Outcome {
    /// The registry's address.
    pub registry: String,
    /// Seconds from `kubectl apply` of the Provider until it was Installed and Healthy.
    pub apply_to_healthy: f64,
    /// The Function's part: installed from its package, an XR composed through it.
    pub function: function::FunctionOutcome,
    /// The Configuration's part: it and its dependency installed.
    pub configuration: configuration::ConfigurationOutcome,
    /// The first revision's Ready Pods, and which one held the Lease.
    pub pods: Vec<String>,
    /// The first leader.
    pub leader: String,
    /// The definitions of its kinds the first revision installed: `CRD <name>`, or `MRD <name> (its CRD
    /// exists)` / `(no CRD yet)`.
    pub crds: Vec<String>,
    /// The upgrades, ours first.
    pub upgrades: Vec<Upgrade>,
    /// NopResources changed during the upgrades.
    pub changes: u64,
    /// NopResources Ready and Synced at the end, of [`NOPS`].
    pub nops_ready: usize,
    /// Writes of the revisions' ServiceAccounts checked (all resources but Leases and Events).
    pub writes: usize,
    /// What the checker found.
    pub violations: Vec<String>,
    /// Each term from the first upgrade on: its holder and the versions that wrote in it.
    pub terms: Vec<(String, String)>,
    /// Requests of crossplane-system's ServiceAccounts refused with 403, described.
    pub refused: Vec<String>,
    /// The bad inputs tried on the node, and the condition each gave ([`bad`]).
    pub bad_inputs: Vec<bad::BadInput>,
}

/// The cluster-scoped API of `kind` in `group`/`version`.
fn api(client: &Client, group: &str, version: &str, kind: &str) -> Api<DynamicObject> {
    let gvk = GroupVersionKind::gvk(group, version, kind);
    Api::all_with(client.clone(), &ApiResource::from_gvk(&gvk))
}

/// The API of a `pkg.crossplane.io/v1` kind (Provider, FunctionRevision, ...).
pub(crate) fn pkg_api(client: &Client, kind: &str) -> Api<DynamicObject> {
    api(client, "pkg.crossplane.io", "v1", kind)
}

pub(crate) fn provider_api(client: &Client) -> Api<DynamicObject> {
    pkg_api(client, "Provider")
}

pub(crate) fn revision_api(client: &Client) -> Api<DynamicObject> {
    pkg_api(client, "ProviderRevision")
}

/// Polls `get` every 250 ms until it gives a value (`Ok`), for at most `timeout`; fails naming `what`
/// and what was last seen (the `Err` of the last poll).
pub(crate) async fn wait_for<T>(
    what: &str,
    timeout: Duration,
    mut get: impl AsyncFnMut() -> anyhow::Result<Result<T, String>>,
) -> anyhow::Result<T> {
    let start = Instant::now();
    loop {
        let seen = match get().await? {
            Ok(v) => return Ok(v),
            Err(seen) => seen,
        };
        ensure!(
            start.elapsed() < timeout,
            "{what} did not happen within {}s; last seen: {seen}",
            timeout.as_secs()
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// Waits until the package `name` of `packages` (Provider, Function or Configuration) is Installed and
/// Healthy; returns it and its `status.currentRevision`.
pub(crate) async fn wait_healthy(
    packages: &Api<DynamicObject>,
    name: &str,
    timeout: Duration,
) -> anyhow::Result<(DynamicObject, String)> {
    let p = wait_for(&format!("{name} Installed and Healthy"), timeout, async || {
        Ok(match packages.get_opt(name).await? {
            Some(p) if is_true(&p, "Installed") && is_true(&p, "Healthy") => Ok(p),
            Some(p) => Err(p.data["status"]["conditions"].to_string()),
            None => Err(format!("no package {name}")),
        })
    })
    .await?;
    let revision = current_revision(&p)?;
    Ok((p, revision))
}

fn is_true(obj: &DynamicObject, kind: &str) -> bool {
    obj.data["status"]["conditions"]
        .as_array()
        .is_some_and(|cs| cs.iter().any(|c| c["type"] == kind && c["status"] == "True"))
}

/// Pushes the core's image and provider-nop's packages `v1` and `v2`; returns the references of v1
/// and v2.
pub async fn push(registry: &testenv::Registry, archives: &Archives) -> anyhow::Result<(String, String)> {
    let client = xpkg::registry::Client::new("crossplane-rs-e2e")?.with_plain_http([registry.host.clone()]);
    let push = |image: xpkg::Image, reference: String| {
        let client = client.clone();
        async move {
            let r = xpkg::Reference::parse(&reference)?;
            client
                .push(&image, &r, None)
                .await
                .with_context(|| format!("pushing {reference}"))?;
            anyhow::Ok(reference)
        }
    };
    let core = xpkg::archive::read(&archives.core)?;
    push(
        core,
        registry.reference(&format!("{}/crossplane", image::REPOSITORY), image::TAG),
    )
    .await?;
    let v1 = push(
        xpkg::archive::read(&archives.package)?,
        registry.reference(REPOSITORY, "v1"),
    )
    .await?;
    let binary = image::select(&[PROVIDER.to_string()])?
        .into_iter()
        .next()
        .context("provider-nop is not a binary of the workspace")?;
    let package = release::package::package_of(binary)?.context("provider-nop has no package")?;
    let next = xpkg::archive::read(&archives.next)?;
    let v2 = push(
        xpkg::Image::xpkg(&package, Some(&next))?,
        registry.reference(REPOSITORY, "v2"),
    )
    .await?;
    Ok((v1, v2))
}

/// Pushes provider-kubernetes's package (`archive`) at [`configuration::DEPENDENCY_TAG`] and the
/// Configuration that depends on it; returns the Configuration's reference and the dependency's
/// repository.
pub async fn push_configuration(
    registry: &testenv::Registry,
    archive: &Path,
) -> anyhow::Result<(String, String)> {
    let client = xpkg::registry::Client::new("crossplane-rs-e2e")?.with_plain_http([registry.host.clone()]);
    let dependency = registry.reference(
        configuration::DEPENDENCY_REPOSITORY,
        configuration::DEPENDENCY_TAG,
    );
    client
        .push(
            &xpkg::archive::read(archive)?,
            &xpkg::Reference::parse(&dependency)?,
            None,
        )
        .await
        .with_context(|| format!("pushing {dependency}"))?;
    let source = dependency
        .rsplit_once(':')
        .map(|(repo, _)| repo.to_string())
        .context("a reference without a tag")?;
    let image = xpkg::Image::xpkg(&configuration::package(&source)?, None)?;
    let reference = registry.reference(configuration::REPOSITORY, "v1.0.0");
    client
        .push(&image, &xpkg::Reference::parse(&reference)?, None)
        .await
        .with_context(|| format!("pushing {reference}"))?;
    Ok((reference, source))
}

/// Pushes function-go's package (`archive`, from `cargo xtask image --function`); returns its reference.
pub async fn push_function(registry: &testenv::Registry, archive: &Path) -> anyhow::Result<String> {
    let client = xpkg::registry::Client::new("crossplane-rs-e2e")?.with_plain_http([registry.host.clone()]);
    let reference = registry.reference(function::REPOSITORY, "v1");
    client
        .push(
            &xpkg::archive::read(archive)?,
            &xpkg::Reference::parse(&reference)?,
            None,
        )
        .await
        .with_context(|| format!("pushing {reference}"))?;
    Ok(reference)
}

/// The overlay: the core, the RBAC manager, the CRDs and roles of deploy/, their image from the
/// registry, and the core told to fetch from it over plain HTTP; with `fencing`, deploy/fencing/ too.
pub fn write_overlay(dir: &Path, registry: &str, fencing: bool) -> anyhow::Result<PathBuf> {
    let (overlay, deploy) = workload::overlay_dir(dir)?;
    // kustomize takes files only from within the overlay, so the namespace is copied in.
    let root = testenv::harness::repo_root();
    let namespace = overlay.join("namespace.yaml");
    std::fs::copy(root.join("deploy/namespace.yaml"), &namespace)
        .with_context(|| format!("copying deploy/namespace.yaml to {}", namespace.display()))?;
    let text = format!(
        "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n\
         - namespace.yaml\n- {deploy}/crds\n- {deploy}/crossplane\n\
         - {deploy}/crossplane-rbac-manager\n- {deploy}/crossplane-roles\n{fence}\
         images:\n- name: {repo}/crossplane\n  newName: {registry}/{repo}/crossplane\n  newTag: \"{tag}\"\n\
         patches:\n- target:\n    kind: Deployment\n    name: crossplane\n  patch: |-\n\
         \x20   - op: add\n      path: /spec/template/spec/containers/0/env/-\n\
         \x20     value:\n        name: PLAIN_HTTP_REGISTRIES\n        value: \"{registry}\"\n",
        repo = image::REPOSITORY,
        tag = image::TAG,
        fence = if fencing {
            format!("- {deploy}/fencing\n")
        } else {
            String::new()
        },
    );
    let path = overlay.join("kustomization.yaml");
    std::fs::write(&path, text).with_context(|| format!("writing {}", path.display()))?;
    Ok(overlay)
}

/// The Provider, as a user writes it.
pub(crate) fn provider_manifest(package: &str) -> Value {
    json!({"apiVersion": "pkg.crossplane.io/v1", "kind": "Provider",
           "metadata": {"name": PROVIDER}, "spec": {"package": package}})
}

/// Runs the scenario on `bed` (a node test bed whose registry listens on the node's address).
pub async fn run(
    bed: &mut testenv::NodeTestBed,
    dir: &Path,
    archives: &Archives,
    upgrades: usize,
) -> anyhow::Result<Outcome> {
    let cluster = bed.cluster().clone();
    let registry = cluster.registry().map_err(|e| anyhow::anyhow!("{e}"))?.clone();
    let (v1, v2) = push(&registry, archives).await?;
    eprintln!("[packages] pushed the core, {v1} and {v2}");
    let client = cluster.client().await?;
    install_core(&cluster, &client, dir, registry.host()).await?;
    let installed = install_provider(&cluster, &client, dir, &v1).await?;

    let function_package = push_function(&registry, &archives.function).await?;
    let mut function = function::install(
        &client,
        cluster.kubeconfig(),
        dir,
        &function_package,
        READY_TIMEOUT,
    )
    .await?;
    let (configuration_package, dependency_source) =
        push_configuration(&registry, &archives.dependency).await?;
    let configuration = configuration::install(
        &client,
        cluster.kubeconfig(),
        dir,
        &configuration_package,
        &dependency_source,
        READY_TIMEOUT,
    )
    .await?;
    function::compose(&client, &mut function, READY_TIMEOUT).await?;

    let nops = workload::nop_api(&client);
    for i in 0..NOPS {
        nops.create(&PostParams::default(), &workload::ready_nop(&format!("pkg-{i}")))
            .await
            .context("creating a NopResource (is its CRD installed?)")?;
    }
    crate::churn::wait_settled(nops.clone(), "pkg", NOPS, READY_TIMEOUT).await?;
    eprintln!("[packages] {NOPS} NopResources Ready: the package's runtime may manage its kinds");

    let churn = crate::churn::Churn::start(nops.clone(), "pkg", NOPS, Duration::from_millis(250));
    let started_at = Timestamp::now();
    let rounds = upgrade_rounds(&client, (&v1, &v2), upgrades).await;
    let changes = churn.stop().await?;
    let mut rounds = rounds?;
    let nops_ready = crate::churn::wait_settled(nops.clone(), "pkg", NOPS, READY_TIMEOUT).await?;

    back_to_automatic(&client).await?;
    let bad_inputs = bad::run(
        &client,
        &registry,
        &archives.core,
        &archives.pause,
        &v1,
        READY_TIMEOUT,
    )
    .await?;

    let audit = judge(&cluster, started_at, &mut rounds)?;
    Ok(Outcome {
        registry: registry.host().to_string(),
        apply_to_healthy: installed.apply_to_healthy,
        function,
        configuration,
        pods: installed.pods,
        leader: installed.leader,
        crds: installed.crds,
        upgrades: rounds,
        changes,
        nops_ready,
        writes: audit.writes,
        violations: audit.violations,
        terms: audit.terms,
        refused: audit.refused,
        bad_inputs,
    })
}

/// Applies the core's overlay (images from `registry`) and waits for the core and the RBAC manager.
async fn install_core(
    cluster: &testenv::Cluster,
    client: &kube::Client,
    dir: &Path,
    registry: &str,
) -> anyhow::Result<()> {
    let overlay = write_overlay(&dir.join("packages-overlay"), registry, false)?;
    testenv::kubectl::apply(cluster.kubeconfig(), &overlay)?;
    let core: Vec<String> = ["crossplane", "crossplane-rbac-manager"]
        .map(String::from)
        .to_vec();
    workload::wait_deployments(client, NAMESPACE, &core, 2, READY_TIMEOUT).await?;
    eprintln!("[packages] the core and the RBAC manager run, pulled from the registry");
    Ok(())
}

/// How [`Outcome::crds`] names a definition of a kind: `CRD <name>` (`mrd_made: None`), or `MRD <name>`
/// and whether the MRD has made its CRD.
fn definition(name: &str, mrd_made: Option<bool>) -> String {
    match mrd_made {
        None => format!("CRD {name}"),
        Some(true) => format!("MRD {name} ({MRD_MADE})"),
        Some(false) => format!("MRD {name} (no CRD yet)"),
    }
}

/// The words of [`definition`] for an MRD whose CRD exists.
const MRD_MADE: &str = "its CRD exists";

/// Whether one of `definitions` ([`definition`]) really defines a kind: a CRD, or an MRD whose CRD exists.
pub(crate) fn defines_a_kind(definitions: &[String]) -> bool {
    definitions
        .iter()
        .any(|d| d.starts_with("CRD ") || d.ends_with(&format!("({MRD_MADE})")))
}

/// What installing the Provider showed.
struct Installed {
    apply_to_healthy: f64,
    pods: Vec<String>,
    leader: String,
    crds: Vec<String>,
}

/// Applies the Provider at `package` with kubectl, as a user does, and waits until it is Installed and
/// Healthy, its runtime's Pods Ready and one of them leading.
async fn install_provider(
    cluster: &testenv::Cluster,
    client: &kube::Client,
    dir: &Path,
    package: &str,
) -> anyhow::Result<Installed> {
    let file = dir.join("provider.json");
    std::fs::write(&file, provider_manifest(package).to_string())?;
    let applied = Instant::now();
    testenv::kubectl::run(
        cluster.kubeconfig(),
        &["apply", "-f", &file.display().to_string()],
    )
    .context("applying the Provider")?;
    let provider = wait_provider(&provider_api(client), READY_TIMEOUT, |p| {
        is_true(p, "Installed") && is_true(p, "Healthy")
    })
    .await?;
    let apply_to_healthy = applied.elapsed().as_secs_f64();
    let revision = current_revision(&provider)?;
    eprintln!("[packages] Provider Installed and Healthy {apply_to_healthy:.1}s after apply ({revision})");
    let pods = wait_runtime(client, &revision, READY_TIMEOUT).await?;
    let leader = wait_leader_among(client, &pods, READY_TIMEOUT).await?;
    let rev = revision_api(client).get(&revision).await?;
    // A provider's managed-resource CRDs are installed as ManagedResourceDefinitions, each of which
    // makes its CRD once active; its other CRDs (ProviderConfigs) directly.
    let crd_api: Api<
        k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition,
    > = Api::all(client.clone());
    let mut crds = Vec::new();
    for r in rev.data["status"]["objectRefs"].as_array().into_iter().flatten() {
        let (Some(kind), Some(name)) = (r["kind"].as_str(), r["name"].as_str()) else {
            continue;
        };
        match kind {
            "CustomResourceDefinition" => crds.push(definition(name, None)),
            "ManagedResourceDefinition" => {
                let made = crd_api.get_opt(name).await?.is_some();
                crds.push(definition(name, Some(made)));
            }
            _ => {}
        }
    }
    Ok(Installed {
        apply_to_healthy,
        pods,
        leader,
        crds,
    })
}

/// `upgrades` upgrades between `v1` and `v2` our way, then as many upstream's way (revision activation
/// Manual), each way ending on v1.
async fn upgrade_rounds(
    client: &kube::Client,
    (v1, v2): (&str, &str),
    upgrades: usize,
) -> anyhow::Result<Vec<Upgrade>> {
    let mut rounds = Vec::new();
    for way in [Way::Ours, Way::Upstream] {
        if way == Way::Upstream {
            let patch = json!({"spec": {"revisionActivationPolicy": "Manual"}});
            provider_api(client)
                .patch(PROVIDER, &PatchParams::default(), &Patch::Merge(&patch))
                .await?;
        }
        for i in 0..upgrades {
            let (to, change) = if i % 2 == 0 {
                (v2, "v1 → v2")
            } else {
                (v1, "v2 → v1")
            };
            let u = upgrade(client, way, to, change).await?;
            eprintln!("[packages] {way:?} {change}: done in {:.1}s", u.seconds);
            rounds.push(u);
        }
        // Back to v1 for the next way.
        if upgrades % 2 == 1 {
            let u = upgrade(client, way, v1, "v2 → v1").await?;
            eprintln!(
                "[packages] {way:?} back to v1 (not counted): done in {:.1}s",
                u.seconds
            );
        }
    }
    Ok(rounds)
}

/// What the audit log shows of the provider's writes since `started_at`.
struct Audit {
    writes: usize,
    violations: Vec<String>,
    terms: Vec<(String, String)>,
    refused: Vec<String>,
}

/// Checks the provider's writes since `started_at` against its Lease's terms, and fills in each
/// round's longest time with no leader.
fn judge(cluster: &testenv::Cluster, started_at: Timestamp, rounds: &mut [Upgrade]) -> anyhow::Result<Audit> {
    let events: Vec<AuditEvent> = cluster
        .audit()
        .read()?
        .events
        .into_iter()
        .filter(|e| e.resource == "leases" || e.received >= started_at)
        .collect();
    let lock = Lock::lease(NAMESPACE, LEASE);
    let prefix = format!("system:serviceaccount:{NAMESPACE}:{PROVIDER}-");
    let is_write = |e: &AuditEvent| {
        e.user.starts_with(&prefix)
            && e.resource != "leases"
            && e.resource != "events"
            && e.received >= started_at
    };
    let writes = events.iter().filter(|e| e.is_write() && is_write(e)).count();
    let mut violations: Vec<String> = checker::check_lock(&events, &lock)
        .into_iter()
        .filter(|v| v.time >= started_at)
        .map(|v| v.to_string())
        .collect();
    violations.extend(
        checker::check_writes(&events, &lock, is_write)
            .into_iter()
            .map(|v| v.to_string()),
    );
    let all_terms = checker::terms(&events, &lock);
    for u in rounds.iter_mut() {
        let (gap, handovers) = longest_gap(&all_terms, u.start, u.end);
        u.gap_ms = gap;
        u.handovers = handovers;
    }
    let live: Vec<checker::Term> = all_terms
        .into_iter()
        .filter(|t| t.valid_until() >= started_at)
        .collect();
    let terms = checker::versions_per_term(&events, &live);
    let all_events = cluster.audit().read()?.events;
    let refused = all_events
        .iter()
        .filter(|e| e.user.starts_with(&format!("system:serviceaccount:{NAMESPACE}:")) && e.code == 403)
        .map(|e| {
            format!(
                "{} {} {} {}/{} ({})",
                e.user, e.verb, e.resource, e.namespace, e.name, e.received
            )
        })
        .collect();
    Ok(Audit {
        writes,
        violations,
        terms,
        refused,
    })
}

/// The longest time in `[start, end]` between one term's end (its release or expiry) and the next
/// term's start, in ms, and how many terms began in the window.
pub fn longest_gap(terms: &[checker::Term], start: Timestamp, end: Timestamp) -> (f64, usize) {
    let mut longest = 0.0f64;
    let mut handovers = 0;
    for pair in terms.windows(2) {
        let (prev, next) = (&pair[0], &pair[1]);
        if next.start < start || next.start > end {
            continue;
        }
        handovers += 1;
        let gap = next.start.duration_since(prev.valid_until()).as_secs_f64() * 1000.0;
        longest = longest.max(gap.max(0.0));
    }
    (longest, handovers)
}

/// One upgrade to `to`, the `way` given; returns once a Pod of the new revision leads, the Provider is
/// Healthy and no other revision's Deployment is left.
pub(crate) async fn upgrade(client: &Client, way: Way, to: &str, change: &str) -> anyhow::Result<Upgrade> {
    let providers = provider_api(client);
    let before = current_revision(&providers.get(PROVIDER).await?)?;
    let start = Timestamp::now();
    let started = Instant::now();
    let patch = json!({"spec": {"package": to}});
    providers
        .patch(PROVIDER, &PatchParams::default(), &Patch::Merge(&patch))
        .await?;
    let provider = wait_provider(&providers, UPGRADE_TIMEOUT, |p| {
        current_revision(p).is_ok_and(|r| r != before)
    })
    .await?;
    let after = current_revision(&provider)?;
    if way == Way::Upstream {
        // What upstream's package manager does at once: the new revision Active, the old one Inactive
        // and its Deployment deleted, before the new one runs.
        let revs = revision_api(client);
        let state = |s: &str| json!({"spec": {"desiredState": s}});
        revs.patch(&after, &PatchParams::default(), &Patch::Merge(&state("Active")))
            .await?;
        revs.patch(
            &before,
            &PatchParams::default(),
            &Patch::Merge(&state("Inactive")),
        )
        .await?;
        let deployments: Api<Deployment> = Api::namespaced(client.clone(), NAMESPACE);
        for d in runtime_deployments(client, &before).await? {
            deployments.delete(&d, &DeleteParams::default()).await?;
        }
    }
    wait_alone_leading(client, &after, started, &format!("{change} ({way:?})")).await?;
    Ok(Upgrade {
        way,
        change: change.to_string(),
        seconds: started.elapsed().as_secs_f64(),
        gap_ms: 0.0,
        handovers: 0,
        start,
        end: Timestamp::now(),
    })
}

/// Waits until the Provider is Healthy at revision `after`, whose Deployment is the package's only one and
/// one of whose Pods leads; `what` names the change for the error after [`UPGRADE_TIMEOUT`] from
/// `started`.
async fn wait_alone_leading(
    client: &Client,
    after: &str,
    started: Instant,
    what: &str,
) -> anyhow::Result<()> {
    let providers = provider_api(client);
    loop {
        let done = async {
            let p = providers.get(PROVIDER).await?;
            if !(is_true(&p, "Healthy") && current_revision(&p)? == after) {
                return anyhow::Ok(false);
            }
            let deployments: Api<Deployment> = Api::namespaced(client.clone(), NAMESPACE);
            let all = deployments
                .list(&ListParams::default().labels(&format!("{}={PROVIDER}", apis::pkg::LABEL_PACKAGE)))
                .await?
                .items;
            if all.iter().any(|d| revision_of(d) != Some(after)) {
                return Ok(false);
            }
            let pods = runtime_pods(client, after).await?;
            let holder = leader_pod(client).await?;
            Ok(pods.iter().any(|p| workload::name(p) == holder))
        }
        .await?;
        if done {
            return Ok(());
        }
        if started.elapsed() > UPGRADE_TIMEOUT {
            bail!(
                "{what} did not finish within {}s: the new revision {after} should be Healthy, lead, and be \
                 the package's only Deployment",
                UPGRADE_TIMEOUT.as_secs()
            );
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Sets `revisionActivationPolicy` back to Automatic and waits until it has settled. The generation is
/// part of a revision's name, so the change makes a new revision of the same package, which takes over
/// as an upgrade does: until then the previous revision's Deployment may still go.
async fn back_to_automatic(client: &Client) -> anyhow::Result<()> {
    let providers = provider_api(client);
    let revs = revision_api(client);
    let number = |r: &DynamicObject| r.data["spec"]["revision"].as_i64().unwrap_or(0);
    let lp = ListParams::default().labels(&format!("{}={PROVIDER}", apis::pkg::LABEL_PACKAGE));
    let highest = revs.list(&lp).await?.items.iter().map(number).max().unwrap_or(0);
    let started = Instant::now();
    providers
        .patch(
            PROVIDER,
            &PatchParams::default(),
            &Patch::Merge(&json!({"spec": {"revisionActivationPolicy": "Automatic"}})),
        )
        .await?;
    let after = wait_for(
        "a new revision after revisionActivationPolicy → Automatic",
        UPGRADE_TIMEOUT,
        async || {
            let current = current_revision(&providers.get(PROVIDER).await?)?;
            Ok(match revs.get_opt(&current).await? {
                Some(r) if number(&r) > highest => Ok(current),
                _ => Err(format!(
                    "current revision {current}, not numbered above {highest}"
                )),
            })
        },
    )
    .await?;
    wait_alone_leading(client, &after, started, "revisionActivationPolicy → Automatic").await
}

pub(crate) fn current_revision(p: &DynamicObject) -> anyhow::Result<String> {
    p.data["status"]["currentRevision"]
        .as_str()
        .map(str::to_string)
        .with_context(|| format!("{} has no status.currentRevision yet", p.name_any()))
}

fn revision_of(d: &Deployment) -> Option<&str> {
    d.metadata
        .labels
        .as_ref()?
        .get(apis::pkg::LABEL_REVISION)
        .map(String::as_str)
}

pub(crate) async fn runtime_deployments(client: &Client, revision: &str) -> anyhow::Result<Vec<String>> {
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), NAMESPACE);
    let lp = ListParams::default().labels(&format!("{}={revision}", apis::pkg::LABEL_REVISION));
    Ok(deployments
        .list(&lp)
        .await?
        .items
        .iter()
        .map(|d| d.name_any())
        .collect())
}

pub(crate) async fn runtime_pods(client: &Client, revision: &str) -> anyhow::Result<Vec<Pod>> {
    let pods: Api<Pod> = Api::namespaced(client.clone(), NAMESPACE);
    let lp = ListParams::default().labels(&format!("{}={revision}", apis::pkg::LABEL_REVISION));
    Ok(pods
        .list(&lp)
        .await?
        .items
        .into_iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .collect())
}

/// Waits until the Provider satisfies `done`.
async fn wait_provider(
    providers: &Api<DynamicObject>,
    timeout: Duration,
    done: impl Fn(&DynamicObject) -> bool,
) -> anyhow::Result<DynamicObject> {
    let start = Instant::now();
    loop {
        if let Some(p) = providers.get_opt(PROVIDER).await?
            && done(&p)
        {
            return Ok(p);
        }
        if start.elapsed() > timeout {
            let p = providers.get_opt(PROVIDER).await?;
            bail!(
                "the Provider did not get there within {}s; its conditions: {}",
                timeout.as_secs(),
                p.map(|p| p.data["status"]["conditions"].to_string())
                    .unwrap_or_else(|| "none (no Provider)".into())
            );
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Waits until the runtime of `revision` has 2 Pods, Running and Ready; returns their names.
pub(crate) async fn wait_runtime(
    client: &Client,
    revision: &str,
    timeout: Duration,
) -> anyhow::Result<Vec<String>> {
    wait_for(
        &format!("2 Ready Pods of {revision}'s runtime"),
        timeout,
        async || {
            let pods = runtime_pods(client, revision).await?;
            let ready = pods.iter().filter(|p| workload::is_ready(p)).count();
            Ok(if pods.len() == 2 && ready == 2 {
                Ok(pods.iter().map(|p| workload::name(p).to_string()).collect())
            } else {
                Err(format!("{} Pods, {ready} Ready", pods.len()))
            })
        },
    )
    .await
}

/// The Pod holding the package's Lease (empty when nobody does).
pub(crate) async fn leader_pod(client: &Client) -> anyhow::Result<String> {
    let holders = workload::lease_holders(client, NAMESPACE).await?;
    let holder = holders.get(LEASE).map(String::as_str).unwrap_or_default();
    Ok(workload::holder_pod(holder).to_string())
}

/// Waits until one of `pods` holds the package's Lease; returns it.
pub(crate) async fn wait_leader_among(
    client: &Client,
    pods: &[String],
    timeout: Duration,
) -> anyhow::Result<String> {
    let start = Instant::now();
    loop {
        let holder = leader_pod(client).await?;
        if let Some(p) = pods.iter().find(|p| **p == holder) {
            return Ok(p.clone());
        }
        ensure!(
            start.elapsed() < timeout,
            "no Pod of {pods:?} held Lease {NAMESPACE}/{LEASE} within {}s (holder: {holder:?})",
            timeout.as_secs()
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_crd_or_an_mrd_that_made_its_crd_defines_a_kind() {
        assert!(defines_a_kind(&[definition("a.example.org", None)]));
        assert!(defines_a_kind(&[
            definition("a.example.org", Some(false)),
            definition("b.example.org", Some(true)),
        ]));
        // Positive controls: nothing installed, or only an MRD that made no CRD, defines no kind.
        assert!(!defines_a_kind(&[]));
        assert!(!defines_a_kind(&[definition("a.example.org", Some(false))]));
    }
}
