//! The revision reconciler (upstream `internal/controller/pkg/revision`): an active revision fetches
//! its package, checks it, resolves its dependencies and installs its objects.
//!
//! 1. Deleting: leave the Lock, drop the finalizer `revision.pkg.crossplane.io` (owner references
//!    garbage-collect what it installed only when its package goes too).
//! 2. Inactive: leave the Lock and release what it controls (the controller reference becomes a
//!    plain owner reference). Nothing is deleted.
//! 3. Active: fetch the package (from the cache by digest) through the ImageConfigs, recording
//!    `status.resolvedImage` (the image after a prefix rewrite, which the runtime runs) and
//!    `status.appliedImageConfigRefs` as upstream does, require one meta object of the revision's
//!    kind, copy its capabilities into the status, check `crossplane.version` against
//!    [`CROSSPLANE_VERSION`](super::CROSSPLANE_VERSION) unless `ignoreCrossplaneConstraints`, record
//!    itself in the Lock and resolve `dependsOn` ([`super::resolver`]) unless
//!    `skipDependencyResolution`, and install its objects ([`super::establish`]), its webhooks (a
//!    CRD's conversion, a webhook configuration's) pointed at the revision's runtime
//!    ([`super::webhooks`]). A Provider's managed-resource CRDs are installed as
//!    ManagedResourceDefinitions ([`super::convert`]), Active unless the package declares `safe-start`.
//! 4. `RevisionHealthy` is True once all of that holds (every CRD established, and the CRD of every
//!    Active MRD established and controlled as the MRD is), and False with the one reason in words
//!    otherwise.

use std::sync::Arc;
use std::time::Duration;

use apis::condition::{Condition, ConditionStatus};
use apis::pkg::meta::Meta;
use apis::pkg::package::{REASON_HEALTHY, REASON_UNHEALTHY, TYPE_REVISION_HEALTHY};
use apis::pkg::{LABEL_PACKAGE, STATE_ACTIVE};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::api::{DynamicObject, Patch, PatchParams};
use kube::runtime::controller::Action;
use kube::{Api, ResourceExt};
use serde_json::{Value, json};

use super::constraint::Constraint;
use super::convert;
use super::establish::{self, Install};
use super::image_config;
use super::kind::Kind;
use super::object::{self, owner_ref, str_at};
use super::{CROSSPLANE_VERSION, Ctx, resolver, webhooks};
use crate::error::Error;

/// The revision finalizer.
pub const FINALIZER: &str = "revision.pkg.crossplane.io";

/// What went wrong with a revision, for its condition.
enum Outcome {
    /// Installed: the object references and dependency counts.
    Healthy(Vec<Value>, resolver::Resolved),
    /// Not (yet) healthy: the reason in words, and whether to look again soon.
    Unhealthy(String, Option<Duration>),
}

/// One reconcile of a revision of `kind`.
pub async fn reconcile(kind: Kind, rev: Arc<DynamicObject>, ctx: Arc<Ctx>) -> Result<Action, Error> {
    let name = rev.name_any();
    let api: Api<DynamicObject> = Api::all_with(ctx.client.clone(), &kind.revision());
    if rev.metadata.deletion_timestamp.is_some() {
        resolver::unlock(&ctx.client, &name).await?;
        remove_finalizer(&api, &rev).await?;
        return Ok(Action::await_change());
    }
    if rev.finalizers().iter().all(|f| f != FINALIZER) {
        let mut finalizers = rev.finalizers().to_vec();
        finalizers.push(FINALIZER.into());
        api.patch(
            &name,
            &PatchParams::default(),
            &Patch::Merge(
                &json!({"metadata": {"finalizers": finalizers, "resourceVersion": rev.resource_version()}}),
            ),
        )
        .await?;
        return Ok(Action::await_change());
    }
    let refs: Vec<Value> = rev
        .data
        .pointer("/status/objectRefs")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    if str_at(&rev, "/spec/desiredState") != Some(STATE_ACTIVE) {
        resolver::unlock(&ctx.client, &name).await?;
        if let Some(uid) = rev.uid() {
            establish::release(&ctx.client, &uid, &refs).await?;
        }
        return Ok(Action::await_change());
    }
    let image = str_at(&rev, "/spec/image").unwrap_or_default().to_string();
    let (outcome, mut fields) = match ctx.source.fetch(&ctx.client, &rev, &image).await {
        Ok(resolved) => (
            install(kind, &rev, &ctx, &image, &resolved.fetched).await?,
            // As upstream, the image after ImageConfig rewrites, which the runtime runs.
            json!({
                "resolvedImage": resolved.image,
                "appliedImageConfigRefs": image_config::status_refs(&resolved.applied),
            }),
        ),
        Err(e) => (
            Outcome::Unhealthy(
                format!("cannot unpack the package {image}: {e}"),
                Some(Duration::from_secs(30)),
            ),
            json!({}),
        ),
    };
    let (condition, action) = match outcome {
        Outcome::Healthy(refs, deps) => {
            fields["objectRefs"] = json!(refs);
            fields["foundDependencies"] = json!(deps.found);
            fields["installedDependencies"] = json!(deps.installed);
            fields["invalidDependencies"] = json!(deps.invalid);
            (
                Condition::new(TYPE_REVISION_HEALTHY, ConditionStatus::True, REASON_HEALTHY),
                Action::await_change(),
            )
        }
        Outcome::Unhealthy(why, again) => {
            tracing::info!(revision = %name, reason = %why, "revision not healthy");
            (
                Condition::new(TYPE_REVISION_HEALTHY, ConditionStatus::False, REASON_UNHEALTHY)
                    .with_message(why),
                Action::requeue(again.unwrap_or(Duration::from_secs(60))),
            )
        }
    };
    object::patch_status(&api, &rev, vec![condition], fields).await?;
    Ok(action)
}

/// Why an install stopped short: the revision is not (yet) healthy, or a request failed.
enum Stop {
    /// The reason in words, and whether to look again soon (as [`Outcome::Unhealthy`]).
    Unhealthy(String, Option<Duration>),
    /// A request failed.
    Failed(Error),
}

impl From<Error> for Stop {
    fn from(e: Error) -> Self {
        Stop::Failed(e)
    }
}

/// Not healthy for reason `why`, to be looked at again after `again` (or the default).
fn unhealthy(why: impl Into<String>, again: Option<Duration>) -> Stop {
    Stop::Unhealthy(why.into(), again)
}

/// Checks and installs package `fetched` of revision `rev`, whose `spec.image` is `image`.
async fn install(
    kind: Kind,
    rev: &DynamicObject,
    ctx: &Ctx,
    image: &str,
    fetched: &xpkg::Fetched,
) -> Result<Outcome, Error> {
    match try_install(kind, rev, ctx, image, fetched).await {
        Ok((refs, deps)) => Ok(Outcome::Healthy(refs, deps)),
        Err(Stop::Unhealthy(why, again)) => Ok(Outcome::Unhealthy(why, again)),
        Err(Stop::Failed(e)) => Err(e),
    }
}

/// [`install`]'s steps in order: check the package, resolve its dependencies, prepare and establish
/// its objects, wait for them, record its capabilities.
async fn try_install(
    kind: Kind,
    rev: &DynamicObject,
    ctx: &Ctx,
    image: &str,
    fetched: &xpkg::Fetched,
) -> Result<(Vec<Value>, resolver::Resolved), Stop> {
    let meta = check_package(kind, rev, image, &fetched.package)?;
    let deps = resolve(kind, rev, ctx, image, &meta).await?;
    let installs = prepare(kind, rev, ctx, &fetched.package, &meta).await?;
    let (pkg_ref, rev_ref) = owners(kind, rev)?;
    let refs = establish::establish(&ctx.client, kind, rev, &pkg_ref, &rev_ref, &installs)
        .await
        .map_err(|why| unhealthy(why, Some(Duration::from_secs(30))))?;
    // CRDs, and the CRDs of Active MRDs, must be established before the revision counts as healthy.
    for r in &refs {
        if let Some(why) = not_established(&ctx.client, r).await? {
            return Err(unhealthy(why, Some(Duration::from_secs(1))));
        }
    }
    record_capabilities(kind, rev, ctx, &meta).await?;
    Ok((refs, deps))
}

/// The package's meta object, once the package is of the revision's kind, its meta can be read and
/// its `crossplane.version` constraint (unless ignored) admits this core.
fn check_package(
    kind: Kind,
    rev: &DynamicObject,
    image: &str,
    package: &xpkg::Package,
) -> Result<Meta, Stop> {
    if package.kind != kind.meta() {
        return Err(unhealthy(
            format!(
                "the package {image} is a {} package, not a {}; install it as a {}",
                package.kind.as_str(),
                kind.name(),
                package.kind.as_str()
            ),
            None,
        ));
    }
    let meta: Meta = serde_json::from_value(package.meta.clone()).map_err(|e| {
        unhealthy(
            format!("the package's meta {} cannot be read: {e}", kind.name()),
            None,
        )
    })?;
    let ignore = rev
        .data
        .pointer("/spec/ignoreCrossplaneConstraints")
        .and_then(Value::as_bool)
        .unwrap_or(false);
    if let Some(c) = meta.spec.crossplane.as_ref().filter(|_| !ignore) {
        check_constraint(&c.version)?;
    }
    Ok(meta)
}

/// Whether `version`, a package's `crossplane.version` constraint, admits this core.
fn check_constraint(version: &str) -> Result<(), Stop> {
    match Constraint::parse(version) {
        Ok(constraint) if constraint.matches(CROSSPLANE_VERSION) => Ok(()),
        Ok(constraint) => Err(unhealthy(
            format!(
                "the package needs Crossplane {constraint}, and this core implements Crossplane \
                 {CROSSPLANE_VERSION}; install a version of the package made for it, or set \
                 spec.ignoreCrossplaneConstraints: true on the package"
            ),
            None,
        )),
        Err(e) => Err(unhealthy(
            format!("the package's crossplane.version constraint cannot be read: {e}"),
            None,
        )),
    }
}

/// Records the revision in the Lock and resolves its dependencies, unless
/// `skipDependencyResolution`; stops while a dependency is still on its way.
async fn resolve(
    kind: Kind,
    rev: &DynamicObject,
    ctx: &Ctx,
    image: &str,
    meta: &Meta,
) -> Result<resolver::Resolved, Stop> {
    let skip = rev
        .data
        .pointer("/spec/skipDependencyResolution")
        .and_then(Value::as_bool)
        .unwrap_or(false);
    // The Lock records the package's own source, not where an ImageConfig rewrote it to (upstream's).
    let source = xpkg::Reference::parse(image).map_err(|e| unhealthy(e.to_string(), None))?;
    let me = resolver::entry(kind, &rev.name_any(), &source, meta);
    let packages = resolver::lock(&ctx.client, me.clone()).await?;
    let deps = if skip {
        resolver::Resolved::default()
    } else {
        match resolver::resolve(&ctx.client, &ctx.source, &me, &packages, rev.labels()).await {
            Ok(r) => r,
            Err(Ok(why)) => return Err(unhealthy(why, Some(Duration::from_secs(30)))),
            Err(Err(e)) => return Err(Stop::Failed(e)),
        }
    };
    if let Some(waiting) = &deps.waiting {
        return Err(unhealthy(waiting.clone(), Some(Duration::from_secs(3))));
    }
    Ok(deps)
}

/// The package's objects of the kinds a `kind` installs, their webhooks pointed at the revision's
/// runtime, and a Provider's managed-resource CRDs as MRDs (Active unless it starts safely).
async fn prepare(
    kind: Kind,
    rev: &DynamicObject,
    ctx: &Ctx,
    package: &xpkg::Package,
    meta: &Meta,
) -> Result<Vec<Install>, Stop> {
    let mut installs = Vec::new();
    for o in &package.objects {
        let k = o.get("kind").and_then(Value::as_str).unwrap_or_default();
        if !kind.installs().contains(&k) {
            continue;
        }
        installs.push(Install::of(o).map_err(|e| unhealthy(e, None))?);
    }
    if installs.iter().any(|i| webhooks::has_webhooks(&i.object)) {
        let target = webhooks::target(kind, rev, ctx).await.map_err(|why| {
            unhealthy(
                format!("cannot point the package's webhooks at its runtime: {why}"),
                Some(Duration::from_secs(30)),
            )
        })?;
        for i in &mut installs {
            webhooks::inject(&mut i.object, &target);
        }
    }
    if kind == Kind::Provider && ctx.convert {
        let active = !meta.has_capability(apis::pkg::meta::CAPABILITY_SAFE_START);
        installs = convert::convert(installs, active).map_err(|e| unhealthy(e, None))?;
    }
    Ok(installs)
}

/// The owner references installed objects get: a plain one to the revision's controlling package
/// (which its package label must name) and the controller reference to the revision.
fn owners(kind: Kind, rev: &DynamicObject) -> Result<(OwnerReference, OwnerReference), Stop> {
    let Some(pkg_owner) = rev
        .owner_references()
        .iter()
        .find(|o| o.controller == Some(true) && o.kind == kind.name())
        .cloned()
    else {
        return Err(unhealthy(
            format!(
                "the revision has no controlling {}; the package manager creates revisions, not users",
                kind.name()
            ),
            None,
        ));
    };
    if rev.labels().get(LABEL_PACKAGE) != Some(&pkg_owner.name) {
        return Err(unhealthy(
            format!(
                "the revision's {LABEL_PACKAGE} label does not name its package {}",
                pkg_owner.name
            ),
            None,
        ));
    }
    let mut pkg_ref = pkg_owner;
    pkg_ref.controller = Some(false);
    let rev_ref = owner_ref(rev, &kind.revision().api_version, &kind.revision().kind, true)?;
    Ok((pkg_ref, rev_ref))
}

/// Copies the package's capabilities into the revision's status when they differ (and are any).
async fn record_capabilities(kind: Kind, rev: &DynamicObject, ctx: &Ctx, meta: &Meta) -> Result<(), Error> {
    let caps = json!(meta.spec.capabilities);
    if rev.data.pointer("/status/capabilities") != Some(&caps) && !meta.spec.capabilities.is_empty() {
        let api: Api<DynamicObject> = Api::all_with(ctx.client.clone(), &kind.revision());
        api.patch_status(
            &rev.name_any(),
            &PatchParams::default(),
            &Patch::Merge(&json!({"status": {"capabilities": caps}})),
        )
        .await?;
    }
    Ok(())
}

/// Why installed object `r` is not ready yet, if it is not: a CRD that is not established, or an
/// Active MRD whose CRD is not established or not yet controlled by the MRD's controller (an upgrade
/// moves both). An Inactive MRD has no CRD and is ready as it is.
async fn not_established(client: &kube::Client, r: &Value) -> Result<Option<String>, Error> {
    let name = r["name"].as_str().unwrap_or_default();
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let established = |c: &CustomResourceDefinition| {
        c.status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Established" && c.status == "True"))
    };
    match r["kind"].as_str() {
        Some("CustomResourceDefinition") => {
            if crds.get_opt(name).await?.is_some_and(|c| established(&c)) {
                Ok(None)
            } else {
                Ok(Some(format!(
                    "waiting for CustomResourceDefinition {name} to be established"
                )))
            }
        }
        Some(apis::apiextensions::mrd::KIND) => {
            let mrds: Api<DynamicObject> = Api::all_with(client.clone(), &crate::mrd::mrd_api());
            let Some(mrd) = mrds.get_opt(name).await? else {
                return Ok(Some(format!(
                    "waiting for ManagedResourceDefinition {name} to exist"
                )));
            };
            if !crate::mrd::crd::is_active(&mrd) {
                return Ok(None);
            }
            let controller = object::controller_of(mrd.owner_references()).map(|o| o.uid.clone());
            let ready = crds.get_opt(name).await?.is_some_and(|c| {
                established(&c)
                    && object::controller_of(c.owner_references()).map(|o| o.uid.clone()) == controller
            });
            if ready {
                Ok(None)
            } else {
                Ok(Some(format!(
                    "waiting for the CustomResourceDefinition of the Active ManagedResourceDefinition {name} to be established"
                )))
            }
        }
        _ => Ok(None),
    }
}

async fn remove_finalizer(api: &Api<DynamicObject>, rev: &DynamicObject) -> Result<(), Error> {
    if rev.finalizers().iter().all(|f| f != FINALIZER) {
        return Ok(());
    }
    let finalizers: Vec<&String> = rev.finalizers().iter().filter(|f| *f != FINALIZER).collect();
    api.patch(
        &rev.name_any(),
        &PatchParams::default(),
        &Patch::Merge(
            &json!({"metadata": {"finalizers": finalizers, "resourceVersion": rev.resource_version()}}),
        ),
    )
    .await?;
    Ok(())
}
