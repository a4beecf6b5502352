//! One compose of one XR, in the order upstream's composer keeps: observe what the XR composed, run its
//! Composition's pipeline, name and place each desired resource, persist the XR's references before
//! anything is created, delete what is no longer desired, then apply the rest.

use std::borrow::Cow;
use std::collections::BTreeMap;

use apis::apiextensions::CompositionRevision;
use apis::apiextensions::labels::{
    FINALIZER_COMPOSITE, LABEL_CLAIM_NAME, LABEL_CLAIM_NAMESPACE, LABEL_COMPOSITE,
};
use composition::ObservedComposed;
use function::proto::v1;
use kube::api::{DeleteParams, DynamicObject, Patch, PatchParams};
use kube::runtime::reflector::ObjectRef;
use kube::{Api, ResourceExt};
use serde_json::{Value, json};

use super::builtin;
use super::connection;
use super::fields::{Fields, ResourceRef};
use super::functions::ClusterIo;
use super::pipeline;
use super::reconciler::{Ctx, FIELD_MANAGER_COMPOSED, FIELD_MANAGER_COMPOSITE, key};
use super::render::{self, Owner};
use super::required::Dependency;
use super::select::{self, XrType};
use super::status::{self, Outcome};
use crate::error::{Error, is_not_found};

/// What the XR composed before, as its `resourceRefs` and the cluster tell.
struct Seen {
    /// The composed resources that exist and the XR controls, by template name.
    observed: BTreeMap<String, ObservedComposed>,
    /// Their references, by template name.
    refs: BTreeMap<String, ResourceRef>,
    /// References persisted for resources not created yet (an apply that failed): their names are
    /// reused, so that names stay stable while an apply keeps failing.
    pending: Vec<ResourceRef>,
}

/// One desired resource, named, decorated and located.
struct Placed {
    template: String,
    name: String,
    api: Api<DynamicObject>,
    resource: Value,
    ready: bool,
    /// Whether the observed resource already holds `resource` (nothing to apply).
    unchanged: bool,
}

/// One compose; returns the outcome and the XR status overlay from To* patches.
pub(super) async fn compose(
    xr: &DynamicObject,
    xr_json: &Value,
    ctx: &Ctx,
) -> Result<(Outcome, Option<Value>), Error> {
    let fields = Fields::new(xr_json, ctx.legacy());
    let t = XrType {
        api_version: ctx.def.resource.api_version.clone(),
        kind: ctx.def.resource.kind.clone(),
    };
    let caches = &ctx.def.caches;
    let comp = select::composition(caches, &fields, &ctx.def.xrd, &t).await?;
    let rev = select::revision(caches, &fields, &ctx.def.xrd, &comp.name_any()).await?;
    let mut seen = observe(xr, &fields, ctx).await?;
    let run = run_pipeline(xr, xr_json, ctx, &rev, std::mem::take(&mut seen.observed)).await?;
    let desired = desired_ready(&run.result.desired, &run.observed);
    let owner = owner_of(xr, xr_json);
    let (placed, refs) = place(ctx, &owner, &desired, &run.observed, &mut seen).await?;
    let xr_json = persist(xr, xr_json, ctx, &fields, &owner, (&comp.name_any(), &rev), &refs).await?;
    collect_garbage(xr, ctx, &seen.refs, &desired).await?;
    let outcome = apply(xr, &owner.uid, placed, run.result).await?;
    let composite = outcome.1.as_ref();
    if let Some(c) = composite {
        let owner_ref = json!({"apiVersion": owner.api_version, "kind": owner.kind, "name": owner.name,
            "uid": owner.uid, "controller": true, "blockOwnerDeletion": true});
        connection::write(
            &ctx.client,
            &xr_json,
            owner_ref,
            &c.connection_details,
            FIELD_MANAGER_COMPOSITE,
        )
        .await?;
    }
    let overlay = builtin::json_of(composite).get("status").cloned();
    Ok((outcome.0, overlay))
}

/// Reads each resource the XR references; keeps those that exist and that the XR controls.
async fn observe(xr: &DynamicObject, fields: &Fields<'_>, ctx: &Ctx) -> Result<Seen, Error> {
    let uid = xr.uid().unwrap_or_default();
    let xr_ns = xr.namespace();
    let mut seen = Seen {
        observed: BTreeMap::new(),
        refs: BTreeMap::new(),
        pending: Vec::new(),
    };
    for r in fields.resource_refs() {
        if r.name.is_empty() {
            continue;
        }
        let kind = ctx
            .discovery
            .resolve(&ctx.client, &r.api_version, &r.kind)
            .await?;
        let ns = r.namespace.as_deref().or(xr_ns.as_deref());
        let v = match read_composed(ctx, &kind, ns, &r.name).await? {
            Some(v) => v,
            None => {
                seen.pending.push(r.clone());
                continue;
            }
        };
        if !render::controlled_by(&v, &uid) {
            continue;
        }
        if let Some(t) = render::template_name(&v) {
            seen.refs.insert(t.to_owned(), r.clone());
            let connection_details = connection::read(&ctx.client, &v).await?;
            seen.observed.insert(
                t.to_owned(),
                ObservedComposed {
                    resource: v,
                    connection_details,
                },
            );
        }
    }
    Ok(seen)
}

/// The composed resource `name`: from the cache of its kind's watch when it holds it, else from the
/// apiserver. A cache miss is never taken for absence: the resource may have been created by the last
/// reconcile a moment ago and not be in the cache yet, and taking it for absent would be harmless for
/// its name (a reference without a resource is pending, and its name is reused) but would hide it from
/// the pipeline and from garbage collection; so a miss is confirmed live. A hit may lag our last apply
/// by a watch event: the pipeline then sees the previous state, as upstream's does from its informers,
/// the resource is applied again if its applied hash differs, and the watch event that brings the
/// change reconciles the XR again.
async fn read_composed(
    ctx: &Ctx,
    kind: &super::discovery::Kind,
    ns: Option<&str>,
    name: &str,
) -> Result<Option<Value>, Error> {
    let ns = ns.filter(|_| kind.namespaced);
    // A namespaced kind without a namespace is read as before, from the apiserver.
    if (ns.is_some() || !kind.namespaced)
        && let Some(obj) = ctx.watches.cached(&kind.resource, ns, name)
    {
        return Ok(Some(serde_json::to_value(&*obj)?));
    }
    match ctx.composed_api(kind, ns).get_opt(name).await? {
        Some(obj) => Ok(Some(serde_json::to_value(&obj)?)),
        None => Ok(None),
    }
}

/// The pipeline's run, with what it observed.
struct Ran {
    observed: BTreeMap<String, ObservedComposed>,
    result: pipeline::Outcome,
}

/// Runs the revision's pipeline on what was observed; publishes its events, and records what its
/// functions required.
async fn run_pipeline(
    xr: &DynamicObject,
    xr_json: &Value,
    ctx: &Ctx,
    rev: &CompositionRevision,
    observed: BTreeMap<String, ObservedComposed>,
) -> Result<Ran, Error> {
    let io = ClusterIo {
        client: &ctx.client,
        discovery: &ctx.discovery,
        functions: &ctx.def.functions,
        caches: Some(&ctx.def.caches),
    };
    let observed_state = pipeline::Observed {
        composite: xr_json.clone(),
        composite_connection: connection::read(&ctx.client, xr_json).await?,
        resources: observed,
    };
    let tag = format!(
        "{}/{}",
        xr.uid().unwrap_or_default(),
        xr.resource_version().unwrap_or_default()
    );
    let run = match pipeline::run(&io, &rev.spec.pipeline, &observed_state, &tag).await {
        Ok(run) => run,
        Err(e) => {
            if let pipeline::PipelineError::Fatal { events, .. } = &e {
                ctx.publish(xr, events).await;
            }
            return Err(Error::Message(e.to_string()));
        }
    };
    ctx.publish(xr, &run.events).await;
    track_required(ctx, xr, &run.required).await?;
    Ok(Ran {
        observed: observed_state.resources,
        result: run,
    })
}

/// Each desired resource as JSON, and whether it is ready.
fn desired_ready(
    desired: &v1::State,
    observed: &BTreeMap<String, ObservedComposed>,
) -> BTreeMap<String, (Value, bool)> {
    desired
        .resources
        .iter()
        .map(|(t, r)| {
            let ready = match r.ready() {
                v1::Ready::True => true,
                v1::Ready::False => false,
                // Unspecified: ready when the observed resource says so, as upstream.
                v1::Ready::Unspecified => observed.get(t).is_some_and(|o| {
                    status::current(&o.resource)
                        .iter()
                        .any(|c| c.type_ == "Ready" && c.status == apis::ConditionStatus::True)
                }),
            };
            (t.clone(), (builtin::json_of(Some(r)), ready))
        })
        .collect()
}

/// The XR as the owner of what it composes.
fn owner_of(xr: &DynamicObject, xr_json: &Value) -> Owner {
    Owner {
        api_version: xr_json["apiVersion"].as_str().unwrap_or_default().to_owned(),
        kind: xr_json["kind"].as_str().unwrap_or_default().to_owned(),
        name: xr.name_any(),
        uid: xr.uid().unwrap_or_default(),
        namespace: xr.namespace(),
        labels: xr.labels().clone(),
    }
}

/// Names, decorates and locates every desired resource (watching its kind); returns them and the XR's
/// new `resourceRefs`.
async fn place(
    ctx: &Ctx,
    owner: &Owner,
    desired: &BTreeMap<String, (Value, bool)>,
    observed: &BTreeMap<String, ObservedComposed>,
    seen: &mut Seen,
) -> Result<(Vec<Placed>, Vec<ResourceRef>), Error> {
    let mut placed = Vec::new();
    let mut refs = Vec::new();
    for (template, (resource, ready)) in desired {
        let mut res = resource.clone();
        let api_version = res["apiVersion"].as_str().unwrap_or_default().to_owned();
        let kind_name = res["kind"].as_str().unwrap_or_default().to_owned();
        if api_version.is_empty() || kind_name.is_empty() {
            return Err(Error::Message(format!(
                "composed resource {template:?} has no apiVersion or kind"
            )));
        }
        let kind = ctx
            .discovery
            .resolve(&ctx.client, &api_version, &kind_name)
            .await?;
        let namespace = render::namespace_of(
            &res,
            template,
            &kind_name,
            kind.namespaced,
            owner.namespace.as_deref(),
        )
        .map_err(Error::Message)?;
        ctx.watches.ensure(&kind.resource);
        let api = ctx.composed_api(&kind, namespace.as_deref());
        let reusable = seen
            .pending
            .iter()
            .position(|r| r.api_version == api_version && r.kind == kind_name && r.namespace == namespace);
        // A name the Composition gives, unless it is the name the core generated before (functions
        // such as patch-and-transform hand the observed name back).
        let generated_before = observed.get(template).is_some_and(|o| {
            o.resource
                .pointer("/metadata/generateName")
                .and_then(Value::as_str)
                .is_some_and(|g| !g.is_empty())
        });
        let given = render::explicit_name(&res).filter(|_| !generated_before);
        let name = match (given, seen.refs.get(template), reusable) {
            (Some(n), _, _) => n.to_owned(),
            (None, Some(r), _) => r.name.clone(),
            (None, None, Some(i)) => seen.pending.remove(i).name,
            (None, None, None) => free_name(&api, &format!("{}-", owner.name)).await?,
        };
        let generate_name = given.is_none();
        render::decorate(
            &mut res,
            owner,
            template,
            &name,
            namespace.as_deref(),
            generate_name,
        );
        refs.push(ResourceRef {
            api_version,
            kind: kind_name,
            name: name.clone(),
            namespace,
        });
        // Every reconcile would apply every composed resource again; one that already holds what was
        // last applied, unchanged since, costs the apiserver a full apply for nothing.
        let res = crate::applied::stamp(res);
        let unchanged = observed
            .get(template)
            .is_some_and(|o| crate::applied::unchanged(&res, &o.resource));
        placed.push(Placed {
            template: template.clone(),
            name,
            api,
            resource: res,
            ready: *ready,
            unchanged,
        });
    }
    Ok((placed, refs))
}

/// Persists the finalizer, the label, the selected Composition and revision and the `resourceRefs`
/// before anything is created; returns the XR as it now is (a legacy XR may have got a connection
/// Secret reference).
async fn persist<'a>(
    xr: &DynamicObject,
    xr_json: &'a Value,
    ctx: &Ctx,
    fields: &Fields<'_>,
    owner: &Owner,
    (comp_name, rev): (&str, &CompositionRevision),
    refs: &[ResourceRef],
) -> Result<Cow<'a, Value>, Error> {
    let legacy = ctx.legacy();
    let mut meta = json!({});
    if !xr.finalizers().iter().any(|f| f == FINALIZER_COMPOSITE) {
        let mut f = xr.finalizers().to_vec();
        f.push(FINALIZER_COMPOSITE.to_owned());
        meta["finalizers"] = json!(f);
    }
    if xr.labels().get(LABEL_COMPOSITE) != Some(&owner.name) {
        meta["labels"] = json!({ LABEL_COMPOSITE: owner.name });
    }
    let mut xp = json!({});
    if fields.composition_ref() != Some(comp_name) {
        xp["compositionRef"] = json!({"name": comp_name});
    }
    let rev_name = rev.name_any();
    if fields.composition_revision_ref() != Some(rev_name.as_str()) {
        xp["compositionRevisionRef"] = json!({"name": rev_name});
    }
    if fields.resource_refs() != refs {
        xp["resourceRefs"] = json!(refs);
    }
    // A legacy XR that names no connection Secret gets one in the Composition's
    // `writeConnectionSecretsToNamespace`, named by its UID, as upstream's configurator does.
    let mut xr_json = Cow::Borrowed(xr_json);
    if legacy
        && xr_json.pointer("/spec/writeConnectionSecretToRef").is_none()
        && let Some(ns) = &rev.spec.write_connection_secrets_to_namespace
    {
        let r = json!({"name": owner.uid, "namespace": ns});
        xp["writeConnectionSecretToRef"] = r.clone();
        xr_json.to_mut()["spec"]["writeConnectionSecretToRef"] = r;
    }
    let meta_changed = meta.as_object().is_some_and(|m| !m.is_empty());
    let xp_changed = xp.as_object().is_some_and(|m| !m.is_empty());
    if meta_changed || xp_changed {
        let mut patch = if xp_changed {
            Fields::spec_patch(legacy, xp)
        } else {
            json!({})
        };
        meta["resourceVersion"] = json!(xr.resource_version());
        patch["metadata"] = meta;
        patch["apiVersion"] = xr_json["apiVersion"].clone();
        patch["kind"] = xr_json["kind"].clone();
        ctx.xr_api(owner.namespace.as_deref())
            .patch(&owner.name, &PatchParams::default(), &Patch::Merge(&patch))
            .await?;
    }
    Ok(xr_json)
}

/// Deletes what the XR composed and no longer desires: its labels that tie it to the XR first, as
/// upstream (they tell a deletion by garbage collection from the XR's own: a composed Usage waits for
/// its user only in the latter).
async fn collect_garbage(
    xr: &DynamicObject,
    ctx: &Ctx,
    observed_refs: &BTreeMap<String, ResourceRef>,
    desired: &BTreeMap<String, (Value, bool)>,
) -> Result<(), Error> {
    let xr_ns = xr.namespace();
    for (template, r) in observed_refs {
        if desired.contains_key(template) {
            continue;
        }
        let kind = ctx
            .discovery
            .resolve(&ctx.client, &r.api_version, &r.kind)
            .await?;
        let api = ctx.composed_api(&kind, r.namespace.as_deref().or(xr_ns.as_deref()));
        let unlabel = json!({"metadata": {"labels": {
            LABEL_COMPOSITE: null, LABEL_CLAIM_NAME: null, LABEL_CLAIM_NAMESPACE: null}}});
        match api
            .patch(&r.name, &PatchParams::default(), &Patch::Merge(&unlabel))
            .await
        {
            Ok(_) => {}
            Err(e) if is_not_found(&e) => continue,
            Err(e) => return Err(e.into()),
        }
        match api.delete(&r.name, &DeleteParams::background()).await {
            Ok(_) => tracing::info!(xr = %key(xr), resource = %r.name, "deleted unwanted composed resource"),
            Err(e) if is_not_found(&e) => {}
            Err(e) => return Err(e.into()),
        }
    }
    Ok(())
}

/// Applies every placed resource (server-side, as field manager `<composed>/<uid>`); returns the
/// outcome, and the desired composite.
async fn apply(
    xr: &DynamicObject,
    uid: &str,
    placed: Vec<Placed>,
    mut run: pipeline::Outcome,
) -> Result<(Outcome, Option<v1::Resource>), Error> {
    let mut outcome = Outcome::default();
    let pp = PatchParams::apply(&format!("{FIELD_MANAGER_COMPOSED}/{uid}")).force();
    for p in placed {
        let applied = if p.unchanged {
            Ok(())
        } else {
            p.api
                .patch(&p.name, &pp, &Patch::Apply(&p.resource))
                .await
                .map(|_| ())
        };
        match applied {
            Ok(()) => {}
            Err(kube::Error::Api(s)) if s.code == 422 => {
                tracing::warn!(xr = %key(xr), resource = %p.template, error = %s.message, "cannot apply composed resource");
                outcome.unsynced.push(p.template.clone());
            }
            Err(e) => return Err(e.into()),
        }
        if !p.ready {
            outcome.unready.push(p.template);
        }
    }
    let composite = run.desired.composite.take();
    outcome.composite_ready = composite.as_ref().map(v1::Resource::ready).and_then(|r| match r {
        v1::Ready::True => Some(true),
        v1::Ready::False => Some(false),
        v1::Ready::Unspecified => None,
    });
    outcome.conditions = run.conditions;
    outcome.ttl = run.ttl;
    Ok((outcome, composite))
}

/// Records what the XR's functions required, so that a change to one of those resources reconciles it.
async fn track_required(
    ctx: &Ctx,
    xr: &DynamicObject,
    required: &[v1::ResourceSelector],
) -> Result<(), Error> {
    let mut deps = Vec::new();
    let mut kinds = Vec::new();
    for sel in required {
        let kind = ctx
            .discovery
            .resolve(&ctx.client, &sel.api_version, &sel.kind)
            .await?;
        let (name, labels) = match &sel.r#match {
            Some(v1::resource_selector::Match::MatchName(n)) => (Some(n.clone()), BTreeMap::new()),
            Some(v1::resource_selector::Match::MatchLabels(l)) => {
                (None, l.labels.clone().into_iter().collect())
            }
            None => continue,
        };
        deps.push(Dependency {
            api_version: sel.api_version.clone(),
            kind: sel.kind.clone(),
            namespace: sel.namespace.clone().filter(|_| kind.namespaced),
            name,
            labels,
        });
        kinds.push(kind.resource);
    }
    ctx.required.track(
        ObjectRef::from_obj_with(xr, ctx.def.resource.clone()),
        deps,
        &kinds,
    );
    Ok(())
}

/// A generated name no object of this kind has yet. Asked of the apiserver, not of the kind's cache:
/// the cache holds only composed resources (labelled `crossplane.io/composite`) and may lag, and a name
/// taken by an object it does not hold would have the apply take that object over. It is asked once
/// per composed resource: the name is then persisted in the XR's `resourceRefs` before anything is
/// created (with the XR's `resourceVersion`, so that a reconcile of an older copy of the XR cannot
/// persist a second name).
async fn free_name(api: &Api<DynamicObject>, prefix: &str) -> Result<String, Error> {
    for _ in 0..8 {
        let n = render::generate_name(prefix);
        match api.get_opt(&n).await {
            Ok(None) => return Ok(n),
            Ok(Some(_)) => {}
            Err(e) if is_not_found(&e) => return Ok(n),
            Err(e) => return Err(e.into()),
        }
    }
    Err(Error::Message(
        "cannot generate a free name for a composed resource".into(),
    ))
}
