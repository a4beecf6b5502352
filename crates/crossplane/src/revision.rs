//! Composition → CompositionRevision (crossplane `internal/controller/apiextensions/composition`).
//!
//! Each distinct Composition (labels, annotations, spec) gets one immutable revision named
//! `<composition>-<first 7 hash characters>`, labelled with the Composition's name and hash, controlled
//! by the Composition and numbered `latest + 1`. Going back to an earlier spec bumps that revision's
//! number to `latest + 1` instead of creating a new one.
//!
//! Deviation: the hash is SHA-256 of the canonical JSON (sorted keys) of labels, annotations and spec,
//! not of Go's YAML; only hash-label equality matters unless Go Crossplane shares the revisions.

use std::sync::Arc;
use std::time::Duration;

use apis::apiextensions::labels::{LABEL_COMPOSITION_HASH, LABEL_COMPOSITION_NAME};
use apis::apiextensions::{Composition, CompositionRevision, CompositionRevisionSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::api::{ListParams, ObjectMeta, Patch, PatchParams, PostParams};
use kube::runtime::controller::Action;
use kube::runtime::{Controller, watcher};
use kube::{Api, Resource, ResourceExt};
use manager::controller::ControllerBuilder;
use manager::{BoxError, ReconcileMetrics, TermContext};
use serde_json::json;
use sha2::{Digest, Sha256};

use crate::error::Error;

/// The controller's field manager (kept: existing objects' managed fields name it).
pub const CONTROLLER: &str = "apiextensions.crossplane.io/composition";

/// The controller's name in metrics and logs, as upstream spells it.
pub const CONTROLLER_NAME: &str = "revisions/composition.apiextensions.crossplane.io";

/// The hash of a Composition: hex SHA-256 of the canonical JSON of its labels, annotations and spec.
pub fn hash(comp: &Composition) -> Result<String, Error> {
    // serde_json's Map is a BTreeMap here, so keys come out sorted.
    let v = json!({
        "labels": comp.metadata.labels.clone().unwrap_or_default(),
        "annotations": comp.metadata.annotations.clone().unwrap_or_default(),
        "spec": serde_json::to_value(&comp.spec)?,
    });
    let canonical = serde_json::to_vec(&serde_json::from_value::<serde_json::Value>(v)?)?;
    Ok(format!("{:x}", Sha256::digest(canonical)))
}

/// The revision name for a Composition and its hash.
pub fn revision_name(composition: &str, hash: &str) -> String {
    format!("{composition}-{}", &hash[..7.min(hash.len())])
}

/// The label value of a hash: its first 63 characters.
pub fn hash_label(hash: &str) -> &str {
    &hash[..63.min(hash.len())]
}

struct Ctx {
    client: kube::Client,
}

/// Runs the controller until the term ends. `selector` limits the Compositions watched (test isolation).
pub async fn run(
    ctx: TermContext,
    selector: Option<String>,
    metrics: ReconcileMetrics,
) -> Result<(), BoxError> {
    let client = ctx.client().clone();
    let api: Api<Composition> = Api::all(client.clone());
    let mut wc = watcher::Config::default();
    if let Some(s) = &selector {
        wc = wc.labels(s);
    }
    let revs: Api<CompositionRevision> = Api::all(client.clone());
    ControllerBuilder::new(
        CONTROLLER_NAME,
        Controller::new(api, wc).owns(revs, watcher::Config::default()),
    )
    .metrics(&metrics)
    .run(ctx.token(), reconcile, Arc::new(Ctx { client }))
    .await;
    Ok(())
}

async fn reconcile(comp: Arc<Composition>, ctx: Arc<Ctx>) -> Result<Action, Error> {
    let name = comp.name_any();
    if comp.metadata.deletion_timestamp.is_some() {
        return Ok(Action::await_change());
    }
    let uid = comp.uid().unwrap_or_default();
    let hash = hash(&comp)?;
    let api = Api::<CompositionRevision>::all(ctx.client.clone());
    let lp = ListParams::default().labels(&format!("{LABEL_COMPOSITION_NAME}={name}"));
    let revs = api.list(&lp).await?.items;
    let owned: Vec<&CompositionRevision> = revs
        .iter()
        .filter(|r| {
            r.owner_references()
                .iter()
                .any(|o| o.controller == Some(true) && o.uid == uid)
        })
        .collect();
    let latest = owned.iter().map(|r| r.spec.revision).max().unwrap_or(0);
    let owner = owner_ref(&comp)?;

    let current = revs
        .iter()
        .find(|r| r.labels().get(LABEL_COMPOSITION_HASH).map(String::as_str) == Some(hash_label(&hash)));
    if let Some(rev) = current {
        let controlled = rev.owner_references().iter().any(|o| o.controller == Some(true));
        let owned_now = owned.iter().any(|r| r.name_any() == rev.name_any());
        let mut patch = json!({});
        if rev.spec.revision != latest || !owned_now {
            // Going back to an earlier spec makes its revision the latest again.
            patch["spec"] = json!({"revision": latest + 1});
        }
        if !controlled {
            let mut refs = rev.owner_references().to_vec();
            refs.push(owner);
            patch["metadata"] = json!({"ownerReferences": refs});
        }
        if patch.as_object().is_some_and(|m| !m.is_empty()) {
            api.patch(&rev.name_any(), &PatchParams::default(), &Patch::Merge(&patch))
                .await?;
        }
        return Ok(Action::await_change());
    }

    let mut labels = comp.labels().clone();
    labels.insert(LABEL_COMPOSITION_NAME.to_owned(), name.clone());
    labels.insert(LABEL_COMPOSITION_HASH.to_owned(), hash_label(&hash).to_owned());
    let rev = CompositionRevision {
        metadata: ObjectMeta {
            name: Some(revision_name(&name, &hash)),
            labels: Some(labels),
            annotations: Some(comp.annotations().clone()),
            owner_references: Some(vec![owner]),
            ..ObjectMeta::default()
        },
        spec: CompositionRevisionSpec {
            composite_type_ref: comp.spec.composite_type_ref.clone(),
            mode: comp.spec.mode,
            pipeline: comp.spec.pipeline.clone(),
            write_connection_secrets_to_namespace: comp.spec.write_connection_secrets_to_namespace.clone(),
            revision: latest + 1,
        },
        status: None,
    };
    match api.create(&PostParams::default(), &rev).await {
        Ok(_) => {}
        Err(kube::Error::Api(s)) if s.code == 409 => {
            return Ok(Action::requeue(Duration::from_secs(1)));
        }
        Err(e) => return Err(e.into()),
    }
    tracing::info!(composition = %name, revision = latest + 1, "created CompositionRevision");
    Ok(Action::await_change())
}

fn owner_ref(comp: &Composition) -> Result<OwnerReference, Error> {
    let mut o = comp
        .controller_owner_ref(&())
        .ok_or_else(|| Error::Message("the Composition has no name or uid".into()))?;
    o.block_owner_deletion = Some(true);
    Ok(o)
}

/// The API access this controller needs: Compositions read (and `update` on `/finalizers`, as the
/// blocking owner of their revisions) and CompositionRevisions read, created and patched.
pub fn rbac_needs() -> Vec<manager::controller::rbac::Rule> {
    use manager::controller::rbac::{READ, Rule};
    vec![
        Rule::kind::<Composition>(&[""], READ),
        Rule::kind::<Composition>(&["finalizers"], &["update"]),
        Rule::kind::<CompositionRevision>(&[""], &["get", "list", "watch", "create", "patch", "update"]),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use apis::apiextensions::CompositionSpec;

    fn comp(kind: &str) -> Composition {
        let mut c = Composition::new(
            "c",
            CompositionSpec {
                composite_type_ref: apis::apiextensions::TypeReference {
                    api_version: "example.org/v1".into(),
                    kind: kind.into(),
                },
                ..CompositionSpec::default()
            },
        );
        c.metadata.labels = Some([("b".to_owned(), "2".to_owned()), ("a".to_owned(), "1".to_owned())].into());
        c
    }

    #[test]
    fn hash_is_stable_and_changes_with_spec() {
        let a = hash(&comp("X")).expect("hash");
        assert_eq!(a, hash(&comp("X")).expect("hash"));
        assert_ne!(a, hash(&comp("Y")).expect("hash"));
        assert_eq!(a.len(), 64);
        assert_eq!(hash_label(&a).len(), 63);
        assert_eq!(revision_name("c", &a), format!("c-{}", &a[..7]));
    }
}
