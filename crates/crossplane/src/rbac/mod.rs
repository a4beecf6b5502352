//! The RBAC manager's definition controller (crossplane `internal/controller/rbac/definition`): for each
//! XRD, ClusterRoles that Crossplane's aggregated roles pick up through their labels. The roles are
//! controlled by the XRD, so the garbage collector removes them with it. Its provider-revision
//! controller is [`provider`].

use std::sync::Arc;

use apis::apiextensions::CompositeResourceDefinition;
use k8s_openapi::api::rbac::v1::{ClusterRole, PolicyRule};
use kube::api::{ObjectMeta, Patch, PatchParams};
use kube::runtime::controller::Action;
use kube::runtime::{Controller, watcher};
use kube::{Api, Resource, ResourceExt};
use manager::controller::ControllerBuilder;
use manager::{BoxError, ReconcileMetrics, TermContext};

use crate::error::Error;

/// The controller's field manager (kept: existing objects' managed fields name it).
pub const CONTROLLER: &str = "rbac.crossplane.io/definition";

/// The controller's name in metrics and logs, as upstream spells it.
pub const CONTROLLER_NAME: &str = "rbac/compositeresourcedefinition.apiextensions.crossplane.io";

pub mod provider;

const PREFIX_AGGREGATE: &str = "rbac.crossplane.io/aggregate-to-";

fn rule(group: &str, resources: Vec<String>, verbs: &[&str]) -> PolicyRule {
    PolicyRule {
        api_groups: Some(vec![group.to_owned()]),
        resources: Some(resources),
        verbs: verbs.iter().map(|v| (*v).to_owned()).collect(),
        ..PolicyRule::default()
    }
}

/// The ClusterRoles of an XRD: `crossplane:composite:<xrd>:aggregate-to-{crossplane,edit,view,browse}`.
pub fn roles(xrd: &CompositeResourceDefinition) -> Vec<ClusterRole> {
    let name = xrd.name_any();
    let group = &xrd.spec.group;
    let plural = &xrd.spec.names.plural;
    let mut main = vec![plural.clone(), format!("{plural}/status")];
    let mut finalizers = vec![format!("{plural}/finalizers")];
    // An XRD that offers claims grants the claim kind alongside the composite kind, as upstream.
    if let Ok(Some(claim)) = xrd.spec.offered_claim_names() {
        let c = &claim.plural;
        main.extend([c.clone(), format!("{c}/status")]);
        finalizers.push(format!("{c}/finalizers"));
    }
    let owner = xrd.controller_owner_ref(&()).map(|mut o| {
        o.block_owner_deletion = Some(true);
        vec![o]
    });
    let role = |suffix: &str, aggregate_to: &[&str], rules: Vec<PolicyRule>| ClusterRole {
        metadata: ObjectMeta {
            name: Some(format!("crossplane:composite:{name}:aggregate-to-{suffix}")),
            labels: Some(
                aggregate_to
                    .iter()
                    .map(|a| (format!("{PREFIX_AGGREGATE}{a}"), "true".to_owned()))
                    .collect(),
            ),
            owner_references: owner.clone(),
            ..ObjectMeta::default()
        },
        rules: Some(rules),
        ..ClusterRole::default()
    };
    let read = ["get", "list", "watch"];
    vec![
        role(
            "crossplane",
            &["crossplane"],
            vec![
                rule(group, main.clone(), &["*"]),
                rule(group, finalizers, &["update"]),
            ],
        ),
        role(
            "edit",
            &["admin", "ns-admin", "edit", "ns-edit"],
            vec![rule(group, main.clone(), &["*"])],
        ),
        role(
            "view",
            &["view", "ns-view"],
            vec![rule(group, main.clone(), &read)],
        ),
        role("browse", &["browse"], vec![rule(group, main, &read)]),
    ]
}

struct Ctx {
    client: kube::Client,
}

/// Runs the controller until the term ends. `selector` limits the XRDs watched (test isolation).
pub async fn run(
    term: TermContext,
    selector: Option<String>,
    metrics: ReconcileMetrics,
) -> Result<(), BoxError> {
    let client = term.client().clone();
    let api: Api<CompositeResourceDefinition> = Api::all(client.clone());
    let mut wc = watcher::Config::default();
    if let Some(s) = &selector {
        wc = wc.labels(s);
    }
    let roles_api: Api<ClusterRole> = Api::all(client.clone());
    ControllerBuilder::new(
        CONTROLLER_NAME,
        Controller::new(api, wc).owns(roles_api, watcher::Config::default()),
    )
    .metrics(&metrics)
    .run(term.token(), reconcile, Arc::new(Ctx { client }))
    .await;
    Ok(())
}

async fn reconcile(xrd: Arc<CompositeResourceDefinition>, ctx: Arc<Ctx>) -> Result<Action, Error> {
    if xrd.metadata.deletion_timestamp.is_some() {
        // The roles are owned by the XRD; the garbage collector removes them.
        return Ok(Action::await_change());
    }
    let api = Api::<ClusterRole>::all(ctx.client.clone());
    let pp = PatchParams::apply(CONTROLLER).force();
    for r in roles(&xrd) {
        let name = r.name_any();
        api.patch(&name, &pp, &Patch::Apply(&r)).await?;
    }
    Ok(Action::await_change())
}

/// The API access this controller needs: XRDs read (and `update` on `/finalizers`, as the blocking owner
/// of the roles), and ClusterRoles applied and watched. `escalate` lets it grant `*` on the XRs without
/// holding that access itself.
pub fn rbac_needs() -> Vec<manager::controller::rbac::Rule> {
    use manager::controller::rbac::{READ, Rule};
    let mut rules = provider::rbac_needs();
    rules.extend([
        Rule::kind::<CompositeResourceDefinition>(&[""], READ),
        Rule::kind::<CompositeResourceDefinition>(&["finalizers"], &["update"]),
        Rule::kind::<ClusterRole>(
            &[""],
            &["get", "list", "watch", "create", "patch", "update", "escalate"],
        ),
    ]);
    rules
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn four_roles_with_aggregation_labels() {
        let mut xrd = CompositeResourceDefinition::new(
            "xthings.example.org",
            serde_json::from_value(serde_json::json!({
                "group": "example.org", "names": {"kind": "XThing", "plural": "xthings"},
                "versions": [{"name": "v1", "referenceable": true, "served": true}]
            }))
            .expect("spec"),
        );
        xrd.metadata.uid = Some("u".into());
        let rs = roles(&xrd);
        let names: Vec<_> = rs.iter().map(|r| r.name_any()).collect();
        assert_eq!(
            names,
            [
                "crossplane:composite:xthings.example.org:aggregate-to-crossplane",
                "crossplane:composite:xthings.example.org:aggregate-to-edit",
                "crossplane:composite:xthings.example.org:aggregate-to-view",
                "crossplane:composite:xthings.example.org:aggregate-to-browse",
            ]
        );
        assert_eq!(
            rs[0].labels()["rbac.crossplane.io/aggregate-to-crossplane"],
            "true"
        );
        assert_eq!(rs[1].labels().len(), 4);
        assert_eq!(
            rs[2].rules.as_ref().expect("rules")[0].verbs,
            ["get", "list", "watch"]
        );
        assert_eq!(rs[0].owner_references()[0].uid, "u");
        // No claims offered: only the composite kind.
        assert_eq!(
            rs[1].rules.as_ref().expect("rules")[0].resources,
            Some(vec!["xthings".to_owned(), "xthings/status".to_owned()])
        );
    }

    #[test]
    fn offered_claims_are_granted_too() {
        let xrd = CompositeResourceDefinition::new(
            "xthings.example.org",
            serde_json::from_value(serde_json::json!({
                "group": "example.org", "names": {"kind": "XThing", "plural": "xthings"},
                "scope": "LegacyCluster", "claimNames": {"kind": "Thing", "plural": "things"},
                "versions": [{"name": "v1", "referenceable": true, "served": true}]
            }))
            .expect("spec"),
        );
        let rs = roles(&xrd);
        for r in &rs {
            let resources = r.rules.as_ref().expect("rules")[0]
                .resources
                .clone()
                .unwrap_or_default();
            assert_eq!(
                resources,
                ["xthings", "xthings/status", "things", "things/status"],
                "{}",
                r.name_any()
            );
        }
        assert_eq!(
            rs[0].rules.as_ref().expect("rules")[1].resources,
            Some(vec![
                "xthings/finalizers".to_owned(),
                "things/finalizers".to_owned()
            ])
        );
    }
}
