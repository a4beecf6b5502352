//! The package runtime (upstream `internal/controller/pkg/runtime`, `--package-runtime=Deployment`):
//! each active ProviderRevision and FunctionRevision runs as a Deployment in the core's namespace, HA
//! by default, and an upgrade hands over with no gap and one writer.
//!
//! One reconcile of a revision:
//! 1. Its [`plan::Plan`]: names, labels, owners, image and the DeploymentRuntimeConfig
//!    (`runtimeConfigRef`, default `default`; a missing `default` means an empty one, any other
//!    missing config is a `RuntimeHealthy=False` condition). A change to the config rebuilds the
//!    runtimes of the revisions that name it.
//! 2. Inactive: the [`handover`].
//! 3. Active: the TLS Secrets ([`tls`]), the ServiceAccount, Role and RoleBinding ([`identity`]), the
//!    Service ([`service`]; a FunctionRevision's `status.endpoint` is its address); then, once the
//!    revision is `RevisionHealthy` (its CRDs are established), the Deployment and its
//!    PodDisruptionBudget ([`deployment`], its runtime container [`container`]), written with server-side apply (field manager
//!    [`FIELD_MANAGER`], forced, as upstream).
//!    A Provider with the `safe-start` capability whose ManagedResourceDefinitions are all Inactive
//!    runs 0 replicas until one is activated ([`activation`]).
//! 4. `RuntimeHealthy` from the Deployment's `Available` ([`health`]). A runtime that never becomes
//!    Available stays `RuntimeHealthy=False` with the Deployment's own words, and since the package
//!    manager hands over only to a healthy revision, the previous one keeps running.

pub mod activation;
pub mod container;
pub mod deployment;
pub mod handover;
pub mod health;
pub mod identity;
pub mod plan;
pub mod service;
pub mod tls;

use std::collections::BTreeSet;
use std::fmt::Debug;
use std::sync::Arc;
use std::time::Duration;

use apis::condition::{Condition, ConditionStatus};
use apis::pkg::package::{
    REASON_ACTIVE_RUNTIME, REASON_UNHEALTHY, REASON_UNKNOWN_HEALTH, TYPE_REVISION_HEALTHY,
    TYPE_RUNTIME_ACTIVE, TYPE_RUNTIME_HEALTHY,
};
use apis::pkg::{DEFAULT_RUNTIME_CONFIG, DeploymentRuntimeConfig, LABEL_REVISION, STATE_ACTIVE};
use k8s_openapi::NamespaceResourceScope;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{DeleteParams, DynamicObject, ListParams, Patch, PatchParams, PropagationPolicy};
use kube::runtime::controller::Action;
use kube::{Api, Resource, ResourceExt};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

use self::handover::{ANNOTATION_SCALED_FROM, Observed, Old, Step};
use self::plan::Plan;
use super::Ctx;
use super::kind::Kind;
use super::object::{self, str_at};
use crate::error::Error;

/// The field manager of everything the runtime writes (upstream's).
pub const FIELD_MANAGER: &str = "pkg.crossplane.io/runtime";

/// How often a handover in progress is looked at again (it waits on Pods and the Lease, which the
/// controller does not watch).
const HANDOVER_POLL: Duration = Duration::from_secs(1);

/// One reconcile of a revision of `kind` (Provider or Function).
pub async fn reconcile(kind: Kind, rev: Arc<DynamicObject>, ctx: Arc<Ctx>) -> Result<Action, Error> {
    if rev.metadata.deletion_timestamp.is_some() {
        // Owner references garbage-collect the runtime with the revision.
        return Ok(Action::await_change());
    }
    let revs: Api<DynamicObject> = Api::all_with(ctx.client.clone(), &kind.revision());
    let config = match runtime_config(&ctx.client, &rev).await {
        Ok(c) => c,
        Err(why) => {
            let c = Condition::new(TYPE_RUNTIME_HEALTHY, ConditionStatus::False, REASON_UNHEALTHY)
                .with_message(why);
            object::patch_status(&revs, &rev, vec![c], json!({})).await?;
            return Ok(Action::requeue(Duration::from_secs(30)));
        }
    };
    let mut plan = Plan::of(kind, &rev, &ctx.namespace, config)?;
    if str_at(&rev, "/spec/desiredState") != Some(STATE_ACTIVE) {
        return hand_over(&ctx, &plan).await;
    }
    plan.image_config_pull_secret = match image_config_pull_secret(&ctx.client, &rev).await {
        Ok(s) => s,
        Err(why) => {
            let c = Condition::new(TYPE_RUNTIME_HEALTHY, ConditionStatus::False, REASON_UNHEALTHY)
                .with_message(why);
            object::patch_status(&revs, &rev, vec![c], json!({})).await?;
            return Ok(Action::requeue(Duration::from_secs(30)));
        }
    };
    match run(&ctx, &rev, &plan).await {
        Ok((conditions, fields)) => {
            let available = conditions
                .iter()
                .any(|c| c.type_ == TYPE_RUNTIME_HEALTHY && c.status == ConditionStatus::True);
            object::patch_status(&revs, &rev, conditions, fields).await?;
            Ok(if available {
                Action::await_change()
            } else {
                Action::requeue(Duration::from_secs(30))
            })
        }
        Err(e) if e.is_not_leader() || e.is_conflict() => Err(e),
        Err(e) => {
            let c = Condition::new(TYPE_RUNTIME_HEALTHY, ConditionStatus::False, REASON_UNHEALTHY)
                .with_message(format!("cannot run the package's runtime: {e}"));
            object::patch_status(&revs, &rev, vec![c], json!({})).await?;
            Err(e)
        }
    }
}

/// The name of the DeploymentRuntimeConfig revision `rev` runs with: `spec.runtimeConfigRef.name`,
/// default `default`.
pub fn runtime_config_name(rev: &DynamicObject) -> &str {
    str_at(rev, "/spec/runtimeConfigRef/name").unwrap_or(DEFAULT_RUNTIME_CONFIG)
}

/// The revision's DeploymentRuntimeConfig ([`runtime_config_name`]). A missing `default` is an empty
/// config; any other missing one is an error in words.
pub(crate) async fn runtime_config(
    client: &kube::Client,
    rev: &DynamicObject,
) -> Result<apis::pkg::DeploymentRuntimeConfigSpec, String> {
    let name = runtime_config_name(rev);
    let api: Api<DeploymentRuntimeConfig> = Api::all(client.clone());
    match api.get_opt(name).await {
        Ok(Some(c)) => Ok(c.spec),
        Ok(None) if name == DEFAULT_RUNTIME_CONFIG => Ok(Default::default()),
        Ok(None) => Err(format!(
            "DeploymentRuntimeConfig {name} (spec.runtimeConfigRef) does not exist: create it, or point \
             the package's runtimeConfigRef at one that does"
        )),
        Err(e) => Err(format!(
            "cannot read DeploymentRuntimeConfig {name}: {}",
            crate::error::explain(&e)
        )),
    }
}

/// The pull secret of the ImageConfig the revision applied for its pull secret
/// (`status.appliedImageConfigRefs`, reason `SetImagePullSecret`), read again from the ImageConfig as
/// upstream does. An ImageConfig that is gone since is an error in words.
async fn image_config_pull_secret(
    client: &kube::Client,
    rev: &DynamicObject,
) -> Result<Option<String>, String> {
    let applied = rev
        .data
        .pointer("/status/appliedImageConfigRefs")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .find(|r| r["reason"] == super::image_config::REASON_PULL_SECRET)
        .and_then(|r| r["name"].as_str());
    let Some(name) = applied else {
        return Ok(None);
    };
    let api: Api<apis::pkg::ImageConfig> = Api::all(client.clone());
    match api.get_opt(name).await {
        Ok(Some(ic)) => Ok(super::image_config::pull_secret_name(&ic.spec).map(str::to_string)),
        Ok(None) => Err(format!(
            "ImageConfig {name}, whose pull secret the revision was fetched with, no longer exists; \
             the revision fetches again without it"
        )),
        Err(e) => Err(format!(
            "cannot read ImageConfig {name}: {}",
            crate::error::explain(&e)
        )),
    }
}

/// The core's CA, loaded (or created) once per term. The error is a sentence.
pub(crate) async fn pki(ctx: &Ctx) -> Result<&crate::composite::pki::Pki, String> {
    ctx.pki
        .get_or_try_init(|| crate::composite::pki::Pki::load_or_create(&ctx.client, &ctx.namespace))
        .await
}

/// The active path: everything the runtime needs, then the Deployment once the revision is healthy.
/// Returns `RuntimeHealthy` (and `RuntimeActive` once the Deployment is written) and the status fields
/// to write.
async fn run(ctx: &Ctx, rev: &DynamicObject, plan: &Plan) -> Result<(Vec<Condition>, Value), Error> {
    let client = &ctx.client;
    let pki = pki(ctx).await.map_err(Error::Message)?;
    tls::ensure(client, pki, plan).await.map_err(Error::Message)?;
    apply(client, &plan.namespace, &identity::service_account(plan)).await?;
    apply(client, &plan.namespace, &identity::role(plan)).await?;
    apply(client, &plan.namespace, &identity::role_binding(plan)).await?;
    apply(client, &plan.namespace, &service::service(plan)).await?;
    let mut fields = json!({});
    if let Some(s) = &plan.tls_server {
        fields["tlsServerSecretName"] = json!(s);
    }
    if let Some(s) = &plan.tls_client {
        fields["tlsClientSecretName"] = json!(s);
    }
    if plan.kind == Kind::Function {
        fields["endpoint"] = json!(service::endpoint(plan));
    }
    if !object::is_true(rev, TYPE_REVISION_HEALTHY) {
        let c = Condition::new(
            TYPE_RUNTIME_HEALTHY,
            ConditionStatus::Unknown,
            REASON_UNKNOWN_HEALTH,
        )
        .with_message(
            "waiting for the revision to install its objects (RevisionHealthy) before starting its runtime",
        );
        return Ok((vec![c], fields));
    }
    let awaiting = activation::awaiting(&ctx.client, rev).await?;
    let mut d = deployment::deployment(plan);
    if awaiting && let Some(spec) = d.spec.as_mut() {
        spec.replicas = Some(0);
    }
    let d = apply(client, &plan.namespace, &d).await?;
    apply(client, &plan.namespace, &deployment::pod_disruption_budget(plan)).await?;
    if awaiting {
        return Ok((activation::awaiting_conditions(), fields));
    }
    let active = Condition::new(TYPE_RUNTIME_ACTIVE, ConditionStatus::True, REASON_ACTIVE_RUNTIME);
    Ok((vec![health::runtime_healthy(&d), active], fields))
}

/// Server-side applies `obj` in `ns` as [`FIELD_MANAGER`], forced; returns what is stored.
async fn apply<K>(client: &kube::Client, ns: &str, obj: &K) -> Result<K, Error>
where
    K: Resource<Scope = NamespaceResourceScope, DynamicType = ()>
        + Clone
        + Debug
        + Serialize
        + DeserializeOwned,
{
    let api: Api<K> = Api::namespaced(client.clone(), ns);
    let name = obj.meta().name.clone().unwrap_or_default();
    api.patch(
        &name,
        &PatchParams::apply(FIELD_MANAGER).force(),
        &Patch::Apply(obj),
    )
    .await
    .map_err(|e| {
        Error::Message(format!(
            "cannot apply {} {ns}/{name}: {}",
            K::kind(&()),
            crate::error::explain(&e)
        ))
    })
}

/// The inactive path: one [`handover`] step for the revision's Deployment.
async fn hand_over(ctx: &Ctx, plan: &Plan) -> Result<Action, Error> {
    let deployments: Api<Deployment> = Api::namespaced(ctx.client.clone(), &plan.namespace);
    let name = plan.deployment_name();
    let old = deployments.get_opt(&name).await?.filter(|d| {
        d.owner_references()
            .iter()
            .any(|o| o.uid == plan.revision_owner.uid)
    });
    let Some(old) = old else {
        return Ok(Action::await_change());
    };
    let current = current_revision(ctx, plan).await?;
    let Some(current) = current else {
        // No other revision to hand over to (a user deactivated the only one): stop, as upstream.
        delete(&deployments, &name, plan).await?;
        return Ok(Action::await_change());
    };
    let observed = observe(&ctx.client, &deployments, plan, &old, &current).await?;
    let step = handover::decide(observed);
    tracing::debug!(revision = %plan.revision, current = %current, ?observed, ?step, "handover");
    take_step(&deployments, plan, &current, observed, step).await
}

/// What a handover from the revision's `old` Deployment to revision `current` decides on: the old
/// Deployment's replicas and Pods, whether the current revision is Available, and who leads.
async fn observe(
    client: &kube::Client,
    deployments: &Api<Deployment>,
    plan: &Plan,
    old: &Deployment,
    current: &str,
) -> Result<Observed, Error> {
    let ns = &plan.namespace;
    let pods: Api<Pod> = Api::namespaced(client.clone(), ns);
    let pod_names = |rev: String| {
        let pods = pods.clone();
        async move {
            let lp = ListParams::default().labels(&format!("{LABEL_REVISION}={rev}"));
            Ok::<_, Error>(
                pods.list(&lp)
                    .await?
                    .items
                    .iter()
                    .map(ResourceExt::name_any)
                    .collect::<BTreeSet<String>>(),
            )
        }
    };
    let current_pods = pod_names(current.to_string()).await?;
    let old_pods = pod_names(plan.revision.clone()).await?;
    let lp = ListParams::default().labels(&format!("{LABEL_REVISION}={current}"));
    let current_available = deployments.list(&lp).await?.items.iter().any(health::available);
    let leases: Api<Lease> = Api::namespaced(client.clone(), ns);
    let holders: Vec<String> = leases
        .list(&ListParams::default())
        .await?
        .items
        .into_iter()
        .filter_map(|l| l.spec?.holder_identity)
        .collect();
    Ok(Observed {
        old: Some(Old {
            replicas: old.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1),
            pods: old_pods.len(),
            scaled_from: old
                .annotations()
                .get(ANNOTATION_SCALED_FROM)
                .and_then(|v| v.parse().ok()),
        }),
        current_available,
        elects: plan.kind == Kind::Provider,
        leader: handover::leader(holders.iter().map(String::as_str), &current_pods, &old_pods),
    })
}

/// Takes handover step `step` (decided on `observed`) for the revision's Deployment, handing over
/// to revision `current`.
async fn take_step(
    deployments: &Api<Deployment>,
    plan: &Plan,
    current: &str,
    observed: Observed,
    step: Step,
) -> Result<Action, Error> {
    let name = plan.deployment_name();
    let pp = PatchParams::default();
    match step {
        Step::Done => Ok(Action::await_change()),
        Step::Wait => Ok(Action::requeue(HANDOVER_POLL)),
        Step::ScaleDown => {
            let from = observed.old.map_or(1, |o| o.replicas);
            deployments
                .patch(
                    &name,
                    &pp,
                    &Patch::Merge(&json!({
                        "metadata": {"annotations": {ANNOTATION_SCALED_FROM: from.to_string()}},
                        "spec": {"replicas": 0},
                    })),
                )
                .await?;
            tracing::info!(revision = %plan.revision, current = %current, "handover: the current revision is Available; scaled the old Deployment to 0 so its leader releases the Lease");
            Ok(Action::requeue(HANDOVER_POLL))
        }
        Step::Restore(n) => {
            deployments
                .patch(
                    &name,
                    &pp,
                    &Patch::Merge(&json!({
                        "metadata": {"annotations": {ANNOTATION_SCALED_FROM: null}},
                        "spec": {"replicas": n},
                    })),
                )
                .await?;
            tracing::warn!(revision = %plan.revision, current = %current, replicas = n, "handover: the current revision is no longer Available; scaled the old Deployment back");
            Ok(Action::requeue(HANDOVER_POLL))
        }
        Step::Delete => {
            delete(deployments, &name, plan).await?;
            tracing::info!(revision = %plan.revision, current = %current, "handover done: the current revision leads; deleted the old Deployment");
            Ok(Action::await_change())
        }
    }
}

/// The package's current revision, when it is another active revision of the package.
async fn current_revision(ctx: &Ctx, plan: &Plan) -> Result<Option<String>, Error> {
    let pkgs: Api<DynamicObject> = Api::all_with(ctx.client.clone(), &plan.kind.package());
    let Some(pkg) = pkgs.get_opt(&plan.package).await? else {
        return Ok(None);
    };
    let Some(current) = str_at(&pkg, "/status/currentRevision").map(str::to_string) else {
        return Ok(None);
    };
    if current == plan.revision {
        return Ok(None);
    }
    let revs: Api<DynamicObject> = Api::all_with(ctx.client.clone(), &plan.kind.revision());
    Ok(revs
        .get_opt(&current)
        .await?
        .filter(|r| str_at(r, "/spec/desiredState") == Some(STATE_ACTIVE))
        .map(|_| current))
}

/// Deletes the revision's Deployment and PodDisruptionBudget.
async fn delete(deployments: &Api<Deployment>, name: &str, plan: &Plan) -> Result<(), Error> {
    let dp = DeleteParams {
        propagation_policy: Some(PropagationPolicy::Background),
        ..Default::default()
    };
    match deployments.delete(name, &dp).await {
        Ok(_) => {}
        Err(e) if crate::error::is_not_found(&e) => {}
        Err(e) => return Err(e.into()),
    }
    let pdbs: Api<k8s_openapi::api::policy::v1::PodDisruptionBudget> =
        Api::namespaced(deployments.clone().into_client(), &plan.namespace);
    match pdbs.delete(name, &dp).await {
        Ok(_) => Ok(()),
        Err(e) if crate::error::is_not_found(&e) => Ok(()),
        Err(e) => Err(e.into()),
    }
}

/// What the runtime writes and reads, for the core's ClusterRole. Creating the runtime's Role needs
/// the core to hold what the Role grants (RBAC refuses escalation), hence Leases, Events and Pods.
pub fn rbac_needs() -> Vec<::manager::controller::rbac::Rule> {
    use ::manager::controller::rbac::{OWN, READ, Rule};
    let mut rules = vec![
        Rule::plural("apps", "deployments", &[""], OWN),
        Rule::plural("policy", "poddisruptionbudgets", &[""], OWN),
        Rule::plural("", "services", &[""], OWN),
        Rule::plural("", "serviceaccounts", &[""], OWN),
        Rule::plural("", "secrets", &[""], OWN),
        Rule::plural("rbac.authorization.k8s.io", "roles", &[""], OWN),
        Rule::plural("rbac.authorization.k8s.io", "rolebindings", &[""], OWN),
        Rule::plural("", "pods", &[""], READ),
    ];
    for (group, resources, verbs) in identity::RULES {
        rules.push(Rule::new(group, resources, verbs));
    }
    rules
}
