//! The package manager (upstream `internal/controller/pkg/manager`): a Provider, Function or
//! Configuration becomes a revision named after its package digest and generation.
//!
//! 1. Fetch the package to learn its digest (`Installed=False`, `UnpackingPackage`, with the fetch's
//!    error in words when that fails; nothing else changes, so what runs keeps running).
//! 2. The revision is `<package[:50]>-<sha256(digest|generation)[:12]>`, labelled
//!    `pkg.crossplane.io/package=<package>`, controlled by the package, numbered highest + 1, Active
//!    under the `Automatic` activation policy.
//! 3. **Deviation, for an upgrade with no gap:** upstream deactivates every other revision at once.
//!    Here the others stay Active until the current revision is healthy, and only then go Inactive;
//!    a revision that never becomes healthy leaves the old one in charge.
//! 4. Garbage collection: with `revisionHistoryLimit` ≠ 0, the lowest-numbered inactive revision goes
//!    while there are more than limit + 1 (one per reconcile), once none of its runtime's Pods is left.
//! 5. `Installed` follows the current revision's desired state, `Healthy` its health.
//! 6. As upstream, `status.resolvedPackage` is the image the package was fetched from (after an
//!    ImageConfig's prefix rewrite) and `status.appliedImageConfigRefs` says which ImageConfigs
//!    applied (`RewriteImage`, `SetImagePullSecret`); the revision's `spec.image` stays the package's
//!    own source, and the revision applies the ImageConfigs again when it fetches.
//!
//! The package's own labels are copied onto its revisions (upstream copies none), so a label selector
//! given to `core start` selects a package's revisions too.

use std::sync::Arc;
use std::time::Duration;

use apis::condition::{Condition, ConditionStatus};
use apis::pkg::package::{
    REASON_ACTIVE, REASON_AWAITING_ACTIVATION, REASON_HEALTHY, REASON_INACTIVE, REASON_UNHEALTHY,
    REASON_UNKNOWN_HEALTH, REASON_UNPACKING, TYPE_HEALTHY, TYPE_INSTALLED, TYPE_RUNTIME_ACTIVE,
};
use apis::pkg::{LABEL_PACKAGE, LABEL_REVISION, STATE_ACTIVE, STATE_INACTIVE};
use k8s_openapi::api::core::v1::Pod;
use kube::api::{DeleteParams, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use kube::runtime::controller::Action;
use kube::{Api, ResourceExt};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use super::image_config;
use super::kind::Kind;
use super::object::{self, owner_ref, str_at};
use super::{Ctx, health};
use crate::error::Error;

/// How soon garbage collection looks again at an old revision whose Pods still run.
const GC_POLL: Duration = Duration::from_secs(2);

/// The paused annotation.
pub const ANNOTATION_PAUSED: &str = "crossplane.io/paused";

/// The revision name of package `name` at `digest` and `generation`: upstream's `FriendlyID`.
pub fn revision_name(name: &str, digest: &str, generation: i64) -> String {
    let hash = format!("{:x}", Sha256::digest(format!("{digest}|{generation}")));
    let head: String = name.chars().take(50).collect();
    let head = head.trim_end_matches(['-', '.']);
    format!("{head}-{}", &hash[..12])
}

/// One reconcile of a package of `kind`.
pub async fn reconcile(kind: Kind, pkg: Arc<DynamicObject>, ctx: Arc<Ctx>) -> Result<Action, Error> {
    let name = pkg.name_any();
    if pkg.metadata.deletion_timestamp.is_some() {
        return Ok(Action::await_change());
    }
    let pkgs: Api<DynamicObject> = Api::all_with(ctx.client.clone(), &kind.package());
    if pkg.annotations().get(ANNOTATION_PAUSED).map(String::as_str) == Some("true") {
        object::patch_status(&pkgs, &pkg, vec![Condition::reconcile_paused()], json!({})).await?;
        return Ok(Action::await_change());
    }
    let revs: Api<DynamicObject> = Api::all_with(ctx.client.clone(), &kind.revision());
    let reference = str_at(&pkg, "/spec/package").unwrap_or_default().to_string();
    let resolved = match ctx.source.fetch(&ctx.client, &pkg, &reference).await {
        Ok(r) => r,
        Err(e) => {
            let c = Condition::new(TYPE_INSTALLED, ConditionStatus::False, REASON_UNPACKING)
                .with_message(format!("cannot unpack the package {reference}: {e}"));
            object::patch_status(&pkgs, &pkg, vec![c], json!({})).await?;
            return Ok(Action::requeue(Duration::from_secs(30)));
        }
    };
    let generation = pkg.metadata.generation.unwrap_or(0);
    let rev_name = revision_name(&name, &resolved.fetched.digest, generation);
    let lp = ListParams::default().labels(&format!("{LABEL_PACKAGE}={name}"));
    let list = revs.list(&lp).await?.items;
    let Some(current) = current_revision(kind, &pkg, &revs, &list, &rev_name, &resolved.fetched).await?
    else {
        return Ok(Action::requeue(Duration::from_secs(1)));
    };

    let active = str_at(&current, "/spec/desiredState") == Some(STATE_ACTIVE);
    let healthy = health(kind, &current, ctx.runtime);
    // Hand over only to a healthy revision: the others stay Active until then.
    if active && healthy == Some(true) {
        deactivate_others(&revs, &name, &list, &rev_name).await?;
    }
    let pods = (ctx.runtime && kind.has_runtime())
        .then(|| Api::<Pod>::namespaced(ctx.client.clone(), &ctx.namespace));
    let gc_waits = gc(&revs, &pkg, &list, &rev_name, pods.as_ref()).await?;

    let installed = installed_condition(active);
    let healthy = healthy_condition(kind, &current, &rev_name, healthy);
    // As upstream: the identifier is the package's own source, the resolved package the image it was
    // fetched from, after ImageConfig rewrites.
    let fields = json!({
        "currentRevision": rev_name,
        "currentIdentifier": reference,
        "resolvedPackage": resolved.image,
        "appliedImageConfigRefs": image_config::status_refs(&resolved.applied),
    });
    object::patch_status(&pkgs, &pkg, vec![installed, healthy], fields).await?;
    let pull_always = str_at(&pkg, "/spec/packagePullPolicy") == Some("Always");
    Ok(if gc_waits {
        Action::requeue(GC_POLL)
    } else if pull_always {
        Action::requeue(Duration::from_secs(60))
    } else {
        Action::await_change()
    })
}

/// The package's current revision `rev_name` among its revisions `list`: numbered above the
/// others and Active under the `Automatic` activation policy, created when it is not there yet.
/// `None` when another writer created it first (look again soon).
async fn current_revision(
    kind: Kind,
    pkg: &DynamicObject,
    revs: &Api<DynamicObject>,
    list: &[DynamicObject],
    rev_name: &str,
    fetched: &xpkg::Fetched,
) -> Result<Option<DynamicObject>, Error> {
    let highest = list
        .iter()
        .filter_map(|r| r.data.pointer("/spec/revision").and_then(Value::as_i64))
        .max()
        .unwrap_or(0);
    let automatic = str_at(pkg, "/spec/revisionActivationPolicy").unwrap_or("Automatic") != "Manual";
    if let Some(rev) = list.iter().find(|r| r.name_any() == rev_name) {
        let number = rev
            .data
            .pointer("/spec/revision")
            .and_then(Value::as_i64)
            .unwrap_or(0);
        let mut spec = serde_json::Map::new();
        if number < highest {
            spec.insert("revision".into(), json!(highest + 1));
        }
        if automatic && str_at(rev, "/spec/desiredState") != Some(STATE_ACTIVE) {
            spec.insert("desiredState".into(), json!(STATE_ACTIVE));
        }
        if spec.is_empty() {
            return Ok(Some(rev.clone()));
        }
        let patch = Patch::Merge(json!({"spec": spec}));
        return Ok(Some(revs.patch(rev_name, &PatchParams::default(), &patch).await?));
    }
    let rev = new_revision(kind, pkg, rev_name, fetched, highest + 1, automatic)?;
    match revs.create(&PostParams::default(), &rev).await {
        Ok(r) => {
            tracing::info!(package = %pkg.name_any(), revision = %rev_name, number = highest + 1, "created {}", kind.revision().kind);
            Ok(Some(r))
        }
        Err(kube::Error::Api(s)) if s.code == 409 => Ok(None),
        Err(e) => Err(e.into()),
    }
}

/// Deactivates every Active revision in `list` other than `current`, of package `package`.
async fn deactivate_others(
    revs: &Api<DynamicObject>,
    package: &str,
    list: &[DynamicObject],
    current: &str,
) -> Result<(), Error> {
    for other in list.iter().filter(|r| r.name_any() != current) {
        if str_at(other, "/spec/desiredState") == Some(STATE_ACTIVE) {
            revs.patch(
                &other.name_any(),
                &PatchParams::default(),
                &Patch::Merge(&json!({"spec": {"desiredState": STATE_INACTIVE}})),
            )
            .await?;
            tracing::info!(package = %package, revision = %other.name_any(), "deactivated the previous revision");
        }
    }
    Ok(())
}

/// The package's `Installed` condition: whether its current revision is active.
fn installed_condition(active: bool) -> Condition {
    if active {
        Condition::new(TYPE_INSTALLED, ConditionStatus::True, REASON_ACTIVE)
    } else {
        Condition::new(TYPE_INSTALLED, ConditionStatus::False, REASON_INACTIVE)
    }
}

/// The package's `Healthy` condition from its current revision `current` (named `rev_name`) and
/// that revision's health (`None`: unknown).
fn healthy_condition(
    kind: Kind,
    current: &DynamicObject,
    rev_name: &str,
    healthy: Option<bool>,
) -> Condition {
    match healthy {
        // A safe-start runtime held at 0 replicas is healthy and says why it does not run.
        Some(true) => match apis::condition::get(&object::conditions(current), TYPE_RUNTIME_ACTIVE)
            .filter(|c| c.reason == REASON_AWAITING_ACTIVATION)
        {
            Some(c) => Condition::new(TYPE_HEALTHY, ConditionStatus::True, REASON_AWAITING_ACTIVATION)
                .with_message(c.message.clone().unwrap_or_default()),
            None => Condition::new(TYPE_HEALTHY, ConditionStatus::True, REASON_HEALTHY),
        },
        Some(false) => {
            let why = super::unhealthy_message(kind, current)
                .unwrap_or_else(|| "the revision is not healthy".into());
            Condition::new(TYPE_HEALTHY, ConditionStatus::False, REASON_UNHEALTHY)
                .with_message(format!("{} {rev_name}: {why}", kind.revision().kind))
        }
        None => Condition::new(TYPE_HEALTHY, ConditionStatus::Unknown, REASON_UNKNOWN_HEALTH),
    }
}

fn new_revision(
    kind: Kind,
    pkg: &DynamicObject,
    rev_name: &str,
    fetched: &xpkg::Fetched,
    number: i64,
    automatic: bool,
) -> Result<DynamicObject, Error> {
    let name = pkg.name_any();
    let mut labels = pkg.labels().clone();
    labels.insert(LABEL_PACKAGE.to_string(), name.clone());
    let spec_of = |field: &str| pkg.data.pointer(&format!("/spec/{field}")).cloned();
    let mut spec = json!({
        "desiredState": if automatic { STATE_ACTIVE } else { STATE_INACTIVE },
        "image": str_at(pkg, "/spec/package").unwrap_or_default(),
        "revision": number,
    });
    for field in [
        "packagePullSecrets",
        "packagePullPolicy",
        "ignoreCrossplaneConstraints",
        "skipDependencyResolution",
        "commonLabels",
        "commonAnnotations",
        "runtimeConfigRef",
    ] {
        if let Some(v) = spec_of(field) {
            spec[field] = v;
        }
    }
    if kind.has_runtime() {
        spec["tlsServerSecretName"] = json!(super::tls_secret_name(&name, "server"));
        spec["tlsClientSecretName"] = json!(super::tls_secret_name(&name, "client"));
    }
    let owner = owner_ref(pkg, &kind.package().api_version, kind.name(), true)?;
    let rev = json!({
        "apiVersion": kind.revision().api_version,
        "kind": kind.revision().kind,
        "metadata": {
            "name": rev_name,
            "labels": labels,
            "ownerReferences": [owner],
            "annotations": {"pkg.crossplane.io/digest": fetched.digest},
        },
        "spec": spec,
    });
    Ok(serde_json::from_value(rev)?)
}

/// Deletes the lowest-numbered inactive revision while there are more than
/// `revisionHistoryLimit + 1` (one per reconcile; 0 keeps them all). A revision whose runtime still has Pods in `pods`'
/// namespace (terminating ones included) waits: deleting it would take its ServiceAccount, Role and
/// bindings away from Pods still shutting down, so a leader's release of its Lease would be refused.
/// Returns whether it waits for such Pods.
async fn gc(
    revs: &Api<DynamicObject>,
    pkg: &DynamicObject,
    list: &[DynamicObject],
    current: &str,
    pods: Option<&Api<Pod>>,
) -> Result<bool, Error> {
    let limit = pkg
        .data
        .pointer("/spec/revisionHistoryLimit")
        .and_then(Value::as_i64)
        .unwrap_or(1);
    let count = list.len() + usize::from(!list.iter().any(|r| r.name_any() == current));
    if limit == 0 || i64::try_from(count).unwrap_or(i64::MAX) <= limit + 1 {
        return Ok(false);
    }
    let oldest = list
        .iter()
        .filter(|r| r.name_any() != current && str_at(r, "/spec/desiredState") != Some(STATE_ACTIVE))
        .min_by_key(|r| {
            r.data
                .pointer("/spec/revision")
                .and_then(Value::as_i64)
                .unwrap_or(0)
        });
    let Some(old) = oldest else {
        return Ok(false);
    };
    if let Some(pods) = pods {
        let lp = ListParams::default()
            .labels(&format!("{LABEL_REVISION}={}", old.name_any()))
            .limit(1);
        if !pods.list(&lp).await?.items.is_empty() {
            tracing::debug!(package = %pkg.name_any(), revision = %old.name_any(), "an old revision's Pods still run; garbage collection waits");
            return Ok(true);
        }
    }
    match revs.delete(&old.name_any(), &DeleteParams::default()).await {
        Ok(_) => {
            tracing::info!(package = %pkg.name_any(), revision = %old.name_any(), "deleted an old revision (revisionHistoryLimit)")
        }
        Err(e) if crate::error::is_not_found(&e) => {}
        Err(e) => return Err(e.into()),
    }
    Ok(false)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn revision_names_are_friendly_ids_that_change_with_digest_and_generation() {
        let a = revision_name("provider-nop", "sha256:aa", 1);
        assert!(a.starts_with("provider-nop-"), "{a}");
        assert_eq!(a.len(), "provider-nop-".len() + 12);
        assert_ne!(a, revision_name("provider-nop", "sha256:aa", 2));
        assert_ne!(a, revision_name("provider-nop", "sha256:bb", 1));
        let long = revision_name(&"x".repeat(80), "sha256:aa", 1);
        assert_eq!(long.len(), 63);
    }
}
