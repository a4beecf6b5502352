//! Bad input on the node: provider-nop's `spec.package` is changed to a package that cannot run, and
//! back. Each must give one clear condition on the Provider or its new revision, and delete nothing
//! that was running: the old revision's Deployment stays and its leader keeps the Lease until the
//! package is changed back (which is an upgrade like any other).
//!
//! - a tag that does not exist in the registry: `Installed=False` on the Provider (nothing to unpack);
//! - an image that is not an xpkg (the core's image, pushed as a tag of provider-nop's repository):
//!   `Installed=False` on the Provider;
//! - a runtime that never becomes ready (provider-nop's package layer on the pause image, whose
//!   container never answers the readiness probe): the new revision's `RuntimeHealthy=False`, seen once
//!   its containers run and the kubelet has reported a failed readiness probe (an `Unhealthy` Event).
//!
//! The bad inputs the node adds nothing to (an unreachable registry, zero or two meta objects, a CRD of
//! another package, dependencies, the Crossplane version) are tested against the control-plane test bed
//! and its registry in `crates/crossplane/tests/packages.rs`.

use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{Context, ensure};
use k8s_openapi::api::core::v1::Event;
use kube::api::{DynamicObject, ListParams, Patch, PatchParams};
use kube::{Api, Client};
use serde_json::json;
use testenv::workload;

use super::{
    NAMESPACE, PROVIDER, REPOSITORY, Way, current_revision, leader_pod, provider_api, revision_api,
    runtime_deployments, runtime_pods, upgrade, wait_for,
};

/// One bad input and what it gave.
#[derive(Debug, Clone)]
pub struct BadInput {
    /// What was wrong, in words.
    pub what: String,
    /// The package reference it was.
    pub package: String,
    /// The condition it gave: `<Kind> <type>=False (<reason>): <message>`.
    pub condition: String,
    /// Seconds from the change of `spec.package` until the condition was seen.
    pub seconds: f64,
    /// The Pod that held the Lease before, and still held it when the condition was seen.
    pub leader: String,
}

/// Pushes the bad packages, then changes provider-nop to each and back to `good`.
pub async fn run(
    client: &Client,
    registry: &testenv::Registry,
    core: &Path,
    pause: &Path,
    good: &str,
    timeout: Duration,
) -> anyhow::Result<Vec<BadInput>> {
    let push = xpkg::registry::Client::new("crossplane-rs-e2e")?.with_plain_http([registry.host.clone()]);
    let not_xpkg = registry.reference(REPOSITORY, "not-an-xpkg");
    push.push(
        &xpkg::archive::read(core)?,
        &xpkg::Reference::parse(&not_xpkg)?,
        None,
    )
    .await
    .with_context(|| format!("pushing {not_xpkg}"))?;
    let never_ready = registry.reference(REPOSITORY, "never-ready");
    let binary = release::image::select(&[PROVIDER.to_string()])?
        .into_iter()
        .next()
        .context("provider-nop is not a binary of the workspace")?;
    let package = release::package::package_of(binary)?.context("provider-nop has no package")?;
    push.push(
        &xpkg::Image::xpkg(&package, Some(&xpkg::archive::read(pause)?))?,
        &xpkg::Reference::parse(&never_ready)?,
        None,
    )
    .await
    .with_context(|| format!("pushing {never_ready}"))?;
    let missing = registry.reference(REPOSITORY, "v9-does-not-exist");

    let mut out = Vec::new();
    for (what, reference, expect) in [
        ("a tag that does not exist", &missing, Expect::NotInstalled),
        ("an image that is not an xpkg", &not_xpkg, Expect::NotInstalled),
        (
            "a runtime that never becomes ready",
            &never_ready,
            Expect::NeverReady,
        ),
    ] {
        let bad = one(client, what, reference, expect, timeout).await?;
        eprintln!(
            "[packages] bad input, {what}: {} ({:.1}s); {} still leads",
            bad.condition, bad.seconds, bad.leader
        );
        out.push(bad);
        upgrade(client, Way::Ours, good, "back to v1").await?;
    }
    Ok(out)
}

/// The condition a bad package must give.
#[derive(Debug, Clone, Copy)]
enum Expect {
    /// `Installed=False` on the Provider, naming the package: nothing could be unpacked.
    NotInstalled,
    /// `RuntimeHealthy=False` on the new revision, once its runtime is seen failing ([`never_ready`]).
    NeverReady,
}

/// Changes `spec.package` to `reference` and waits for the condition it must give; the old revision's
/// Deployment must still be there and its Pod still lead.
async fn one(
    client: &Client,
    what: &str,
    reference: &str,
    expect: Expect,
    timeout: Duration,
) -> anyhow::Result<BadInput> {
    let providers = provider_api(client);
    let running = current_revision(&providers.get(PROVIDER).await?)?;
    let leader = leader_pod(client).await?;
    let changed = Instant::now();
    providers
        .patch(
            PROVIDER,
            &PatchParams::default(),
            &Patch::Merge(&json!({"spec": {"package": reference}})),
        )
        .await?;
    let condition = match expect {
        Expect::NeverReady => never_ready(client, &running, timeout).await?,
        Expect::NotInstalled => {
            wait_for(&format!("{what}: Installed=False"), timeout, async || {
                let p = providers.get(PROVIDER).await?;
                Ok(match false_condition(&p, "Installed") {
                    Some(c) if c.contains(reference) => Ok(format!("Provider {c}")),
                    _ => Err(p.data["status"]["conditions"].to_string()),
                })
            })
            .await?
        }
    };
    let seconds = changed.elapsed().as_secs_f64();
    ensure!(
        !runtime_deployments(client, &running).await?.is_empty(),
        "{what}: the running revision {running}'s Deployment was deleted"
    );
    let now = leader_pod(client).await?;
    ensure!(
        now == leader,
        "{what}: the Lease went from {leader} to {now:?}; the running revision must keep leading"
    );
    Ok(BadInput {
        what: what.to_string(),
        package: reference.to_string(),
        condition,
        seconds,
        leader,
    })
}

/// Waits until the new revision (not `running`) has Pods whose containers run, one of which the kubelet
/// reported failing its readiness probe (an `Unhealthy` Event), none Ready, and the revision reports
/// `RuntimeHealthy=False`; returns that condition.
async fn never_ready(client: &Client, running: &str, timeout: Duration) -> anyhow::Result<String> {
    let providers = provider_api(client);
    let revisions = revision_api(client);
    let events: Api<Event> = Api::namespaced(client.clone(), NAMESPACE);
    wait_for(
        "a runtime that never becomes ready: RuntimeHealthy=False",
        timeout,
        async || {
            let p = providers.get(PROVIDER).await?;
            let Ok(new) = current_revision(&p) else {
                return Ok(Err("no current revision".to_string()));
            };
            if new == running {
                return Ok(Err("the new revision is not there yet".to_string()));
            }
            let pods = runtime_pods(client, &new).await?;
            let running = |p: &k8s_openapi::api::core::v1::Pod| {
                p.status
                    .as_ref()
                    .and_then(|s| s.container_statuses.as_ref())
                    .is_some_and(|cs| {
                        cs.iter()
                            .any(|c| c.state.as_ref().is_some_and(|s| s.running.is_some()))
                    })
            };
            let names: Vec<&str> = pods.iter().map(workload::name).collect();
            let probe_failed = events
                .list(&ListParams::default().fields("reason=Unhealthy"))
                .await?
                .items
                .iter()
                .any(|e| {
                    e.involved_object
                        .name
                        .as_deref()
                        .is_some_and(|n| names.contains(&n))
                });
            let started_not_ready =
                !pods.is_empty() && probe_failed && pods.iter().all(|p| running(p) && !workload::is_ready(p));
            let rev = revisions.get(&new).await?;
            Ok(match false_condition(&rev, "RuntimeHealthy") {
                Some(c) if started_not_ready => Ok(format!("ProviderRevision {new} {c}")),
                _ => Err(format!(
                    "{} Pods of {new}; all running and none Ready, one with a failed readiness probe: \
                     {started_not_ready}; its conditions: {}",
                    pods.len(),
                    rev.data["status"]["conditions"]
                )),
            })
        },
    )
    .await
}

/// `<type>=False (<reason>): <message>` of `obj`'s condition `type_`, if it is False.
fn false_condition(obj: &DynamicObject, type_: &str) -> Option<String> {
    obj.data["status"]["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == type_ && c["status"] == "False")
        .map(|c| {
            format!(
                "{type_}=False ({}): {}",
                c["reason"].as_str().unwrap_or_default(),
                c["message"].as_str().unwrap_or_default()
            )
        })
}
