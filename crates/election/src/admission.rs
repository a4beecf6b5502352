//! A server-side fence: a `ValidatingAdmissionPolicy` that admits a ServiceAccount's writes only from
//! the pod that holds the Lease.
//!
//! The [`Guard`](crate::Guard) stops a leader from *starting* a write after its term, but a write that
//! was begun in the term can still reach the apiserver later: a process frozen (SIGSTOP, a long GC or
//! VM pause) between its last check and the socket sends it when it resumes. Only the apiserver can
//! refuse that write, and this policy makes it do so. It takes the Lease as its parameter and, for the
//! creates, updates and deletes by the ServiceAccount that it covers (see [`Covers`] below: what that
//! ServiceAccount's RBAC lets it write, never the lock objects themselves nor Events, which record state
//! rather than change it), requires the pod that the request's token is bound to to be the holder: the
//! holder identity must be the pod's name or start with `<pod name>_` (controller-runtime's
//! `<hostname>_<uuid>`, whose hostname is the pod's name). The apiserver puts the pod's name in
//! `authentication.kubernetes.io/pod-name` of the user's extra for every projected ServiceAccount
//! token, which is what pods get by default.
//!
//! The policy is evaluated when a request arrives, against the apiserver's cached copy of the Lease,
//! which follows the Lease's writes within milliseconds; so a write that arrives after another replica
//! took the Lease is refused with 403 however long ago it was begun.
//!
//! # What it costs every other writer
//!
//! The apiserver evaluates a policy's match conditions for every request its `matchConstraints`
//! match, whoever sends it, and to do so converts the request's object and old object to CEL values
//! first, even though the condition here reads only the user name. With `*/*` matched, every Pod
//! status update of the kubelet, every Pod the ReplicaSet controller creates and every status write
//! of the workload controllers paid that conversion once per fence policy: in a node run, 15 % of the
//! apiserver's CPU went there while a leader's Pod was deleted (a CPU profile of the apiserver). So a
//! policy matches only what its ServiceAccount can write ([`Covers`]): the resources its RBAC grants
//! writes on, or, where that RBAC is open-ended (Crossplane's aggregated core role), everything but the
//! status subresources and Pod bindings that the node and Kubernetes' own controllers write through
//! every Pod's life, which no controller of ours writes.
//!
//! It assumes that every replica runs with leader election: a replica with `--leader-election=false`
//! is refused every write (which is the point when it was started by mistake). Tokens that are not bound
//! to a pod (a kubeconfig Secret, a legacy token Secret) are refused too.

use k8s_openapi::api::admissionregistration::v1::{
    ValidatingAdmissionPolicy, ValidatingAdmissionPolicyBinding,
};
use serde_json::json;

/// The extra key under which the apiserver names the pod a ServiceAccount token is bound to.
pub const POD_NAME_EXTRA: &str = "authentication.kubernetes.io/pod-name";

/// The status subresources the fence never matches when it [`Covers::Everything`]: those of the
/// built-in groups, which the kubelet (Pods, Nodes) and the workload and disruption controllers
/// (ReplicaSets, Deployments, Jobs, PodDisruptionBudgets) write through every Pod's life.
const SYSTEM_STATUS_GROUPS: [&str; 4] = ["", "apps", "batch", "policy"];
/// The Pod subresources the fence never matches when it [`Covers::Everything`]: the scheduler's
/// bindings and evictions.
const SYSTEM_POD_SUBRESOURCES: [&str; 2] = ["pods/binding", "pods/eviction"];

/// The writes every fence lets through, as (API groups, resource): the Lease itself and Events, which
/// record state rather than change it. (The migration's ConfigMap lock is let through by its name.)
const ALWAYS_ADMITTED: [(&[&str], &str); 2] = [
    (&["coordination.k8s.io"], "leases"),
    (&["", "events.k8s.io"], "events"),
];

/// The writes a fence policy matches.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Covers {
    /// Every create, update and delete, but of the built-in status subresources and Pod bindings and
    /// evictions that the node and Kubernetes' own controllers write: for a ServiceAccount whose RBAC
    /// is open-ended (an aggregated ClusterRole), so that no list of resources can be known before.
    Everything,
    /// Only these writes: what the ServiceAccount's RBAC grants (a write elsewhere is refused by
    /// RBAC before admission, so the fence need not see it).
    Only(Vec<WriteRule>),
}

impl Covers {
    /// Whether the policy matches a write it could refuse: anything but the writes every fence lets
    /// through (the Lease and Events, and the ConfigMap lock named `lock`, the Lease's name). A policy
    /// that matches nothing else fences nothing.
    pub fn fences_a_write(&self, lock: &str) -> bool {
        match self {
            Covers::Everything => true,
            Covers::Only(rules) => rules.iter().any(|r| r.reaches_past_the_exclusions(lock)),
        }
    }
}

/// Writes to some resources, as an RBAC rule grants them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WriteRule {
    /// API groups (`""` is the core group).
    pub api_groups: Vec<String>,
    /// Resources as RBAC names them: plurals, `widgets/status`, or `*`.
    pub resources: Vec<String>,
    /// When not empty, only objects of these names.
    pub resource_names: Vec<String>,
    /// The admission operations: `CREATE`, `UPDATE`, `DELETE`.
    pub operations: Vec<&'static str>,
}

impl WriteRule {
    /// The writes an RBAC rule with `verbs` grants (`create` is CREATE, `update` and `patch` are
    /// UPDATE, `delete` and `deletecollection` DELETE, `*` all three), or `None` if it grants none.
    pub fn from_rbac(
        api_groups: &[String],
        resources: &[String],
        resource_names: &[String],
        verbs: &[String],
    ) -> Option<Self> {
        let mut operations = Vec::new();
        for (op, granted_by) in [
            ("CREATE", &["create", "*"][..]),
            ("UPDATE", &["update", "patch", "*"][..]),
            ("DELETE", &["delete", "deletecollection", "*"][..]),
        ] {
            if verbs.iter().any(|v| granted_by.contains(&v.as_str())) {
                operations.push(op);
            }
        }
        (!operations.is_empty()).then(|| Self {
            api_groups: api_groups.to_vec(),
            resources: resources.to_vec(),
            resource_names: resource_names.to_vec(),
            operations,
        })
    }

    /// Whether the rule grants a write on any (group, resource) that no fence lets through; a `*`
    /// group or resource always does. ConfigMaps are let through only by the lock's name `lock`, so a
    /// rule on them reaches past unless it names that ConfigMap alone.
    fn reaches_past_the_exclusions(&self, lock: &str) -> bool {
        let only_the_lock = !self.resource_names.is_empty() && self.resource_names.iter().all(|n| n == lock);
        self.api_groups.iter().any(|group| {
            self.resources.iter().any(|resource| {
                let admitted = ALWAYS_ADMITTED
                    .iter()
                    .any(|(groups, r)| groups.contains(&group.as_str()) && r == resource);
                let the_lock = group.is_empty() && resource == "configmaps" && only_the_lock;
                !admitted && !the_lock
            })
        })
    }

    /// The rule as a policy's `resourceRules` entry. RBAC's `*` is every resource and subresource,
    /// which a policy spells `*/*`.
    fn to_json(&self) -> serde_json::Value {
        let resources: Vec<&str> = self
            .resources
            .iter()
            .map(|r| if r == "*" { "*/*" } else { r.as_str() })
            .collect();
        let mut rule = json!({
            "apiGroups": self.api_groups,
            "apiVersions": ["*"],
            "operations": self.operations,
            "resources": resources,
        });
        if !self.resource_names.is_empty() {
            rule["resourceNames"] = json!(self.resource_names);
        }
        rule
    }
}

/// What one fence policy protects: the writes of one ServiceAccount, fenced by one Lease.
#[derive(Clone, Debug)]
pub struct FencePolicy<'a> {
    /// The policy's and the binding's name (cluster-scoped objects), e.g. `crossplane-rs-fence-core`.
    pub name: &'a str,
    /// The ServiceAccount's namespace.
    pub service_account_namespace: &'a str,
    /// The ServiceAccount's name.
    pub service_account: &'a str,
    /// The Lease's namespace.
    pub lease_namespace: &'a str,
    /// The Lease's name; a ConfigMap of the same name in the same namespace (the migration lock) is
    /// exempt too.
    pub lease: &'a str,
    /// The writes the policy matches.
    pub covers: Covers,
}

impl FencePolicy<'_> {
    /// The user name of the ServiceAccount.
    pub fn user(&self) -> String {
        format!(
            "system:serviceaccount:{}:{}",
            self.service_account_namespace, self.service_account
        )
    }

    /// The CEL expression that admits a request: the token's pod holds the Lease.
    pub fn holder_expression() -> String {
        format!(
            "'{POD_NAME_EXTRA}' in request.userInfo.extra && has(params.spec.holderIdentity) && \
             (params.spec.holderIdentity == request.userInfo.extra['{POD_NAME_EXTRA}'][0] || \
             params.spec.holderIdentity.startsWith(request.userInfo.extra['{POD_NAME_EXTRA}'][0] + '_'))"
        )
    }

    /// The policy's `resourceRules`: what it [`Covers`].
    fn resource_rules(&self) -> serde_json::Value {
        match &self.covers {
            Covers::Everything => json!([{
                "apiGroups": ["*"],
                "apiVersions": ["*"],
                "operations": ["CREATE", "UPDATE", "DELETE"],
                "resources": ["*/*"],
            }]),
            Covers::Only(rules) => rules.iter().map(WriteRule::to_json).collect(),
        }
    }

    /// The policy's `excludeResourceRules`: the lock objects and Events always, and when it covers
    /// everything, the built-in status subresources and Pod subresources of the node and Kubernetes'
    /// own controllers.
    fn exclude_resource_rules(&self) -> serde_json::Value {
        let [lease, events] = ALWAYS_ADMITTED.map(|(groups, resource)| {
            json!({
                "apiGroups": groups,
                "apiVersions": ["*"],
                "operations": ["*"],
                "resources": [resource],
            })
        });
        let lock = json!({
            "apiGroups": [""],
            "apiVersions": ["*"],
            "operations": ["*"],
            "resources": ["configmaps"],
            "resourceNames": [self.lease],
        });
        let mut rules = vec![lease, lock, events];
        if self.covers == Covers::Everything {
            rules.push(json!({
                "apiGroups": SYSTEM_STATUS_GROUPS,
                "apiVersions": ["*"],
                "operations": ["*"],
                "resources": ["*/status"],
            }));
            rules.push(json!({
                "apiGroups": [""],
                "apiVersions": ["*"],
                "operations": ["*"],
                "resources": SYSTEM_POD_SUBRESOURCES,
            }));
        }
        serde_json::Value::Array(rules)
    }

    /// The policy.
    pub fn policy(&self) -> Result<ValidatingAdmissionPolicy, serde_json::Error> {
        let user = self.user();
        serde_json::from_value(json!({
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "ValidatingAdmissionPolicy",
            "metadata": { "name": self.name },
            "spec": {
                "failurePolicy": "Fail",
                "paramKind": { "apiVersion": "coordination.k8s.io/v1", "kind": "Lease" },
                "matchConstraints": {
                    "resourceRules": self.resource_rules(),
                    "excludeResourceRules": self.exclude_resource_rules(),
                },
                "matchConditions": [{
                    "name": "written-by-the-service-account",
                    "expression": format!("request.userInfo.username == '{user}'"),
                }],
                "validations": [{
                    "expression": Self::holder_expression(),
                    "messageExpression": format!(
                        "'only the pod holding Lease {}/{} may write as {user}; it is held by ' + \
                         (has(params.spec.holderIdentity) && params.spec.holderIdentity != '' ? \
                         params.spec.holderIdentity : 'nobody') + ', and this token is ' + \
                         ('{POD_NAME_EXTRA}' in request.userInfo.extra ? 'bound to pod ' + \
                         request.userInfo.extra['{POD_NAME_EXTRA}'][0] : 'not bound to a pod') + \
                         '. Run every replica with leader election and the token of its own pod, or delete \
                         this policy (crossplane-rs deploy/fencing) to turn the fence off'",
                        self.lease_namespace, self.lease
                    ),
                    "reason": "Forbidden",
                }],
            },
        }))
    }

    /// The binding, with the Lease as the parameter. While the Lease is missing the policy admits
    /// everything: the apiserver looks the parameter up before it evaluates the match conditions, so
    /// `Deny` would refuse every write in the cluster, not only the ServiceAccount's. (A leader
    /// re-creates a deleted Lease at once; the client-side fence still holds meanwhile.)
    pub fn binding(&self) -> Result<ValidatingAdmissionPolicyBinding, serde_json::Error> {
        serde_json::from_value(json!({
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "ValidatingAdmissionPolicyBinding",
            "metadata": { "name": self.name },
            "spec": {
                "policyName": self.name,
                "validationActions": ["Deny"],
                "paramRef": {
                    "name": self.lease,
                    "namespace": self.lease_namespace,
                    "parameterNotFoundAction": "Allow",
                },
            },
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fence(covers: Covers) -> FencePolicy<'static> {
        FencePolicy {
            name: "fence-nop",
            service_account_namespace: "crossplane-system",
            service_account: "provider-nop",
            lease_namespace: "crossplane-system",
            lease: "crossplane-leader-election-provider-nop",
            covers,
        }
    }

    fn strings(s: &[&str]) -> Vec<String> {
        s.iter().map(|x| (*x).to_owned()).collect()
    }

    #[test]
    fn the_policy_matches_only_the_service_account_and_spares_the_locks() -> Result<(), serde_json::Error> {
        let policy = serde_json::to_value(fence(Covers::Everything).policy()?)?;
        assert_eq!(
            policy["spec"]["matchConditions"][0]["expression"],
            "request.userInfo.username == 'system:serviceaccount:crossplane-system:provider-nop'"
        );
        let excluded = &policy["spec"]["matchConstraints"]["excludeResourceRules"];
        assert_eq!(excluded[0]["resources"][0], "leases");
        assert_eq!(
            excluded[1]["resourceNames"][0],
            "crossplane-leader-election-provider-nop"
        );
        assert_eq!(policy["spec"]["failurePolicy"], "Fail");
        Ok(())
    }

    #[test]
    fn the_binding_takes_the_lease_as_its_parameter() -> Result<(), serde_json::Error> {
        let binding = serde_json::to_value(fence(Covers::Everything).binding()?)?;
        assert_eq!(binding["spec"]["policyName"], "fence-nop");
        assert_eq!(
            binding["spec"]["paramRef"]["name"],
            "crossplane-leader-election-provider-nop"
        );
        assert_eq!(binding["spec"]["paramRef"]["namespace"], "crossplane-system");
        // `Deny` would refuse every request in the cluster while the Lease is missing.
        assert_eq!(binding["spec"]["paramRef"]["parameterNotFoundAction"], "Allow");
        Ok(())
    }

    #[test]
    fn covering_everything_spares_what_the_node_and_kubernetes_controllers_write()
    -> Result<(), serde_json::Error> {
        let policy = serde_json::to_value(fence(Covers::Everything).policy()?)?;
        let rules = &policy["spec"]["matchConstraints"];
        assert_eq!(rules["resourceRules"][0]["resources"][0], "*/*");
        let excluded = rules["excludeResourceRules"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        let spares = |group: &str, resource: &str| {
            excluded.iter().any(|r| {
                r["apiGroups"]
                    .as_array()
                    .is_some_and(|g| g.iter().any(|x| x == group))
                    && r["resources"]
                        .as_array()
                        .is_some_and(|rs| rs.iter().any(|x| x == resource))
            })
        };
        assert!(spares("", "*/status"), "the kubelet's Pod status writes");
        assert!(
            spares("apps", "*/status"),
            "the ReplicaSet controller's status writes"
        );
        assert!(
            spares("policy", "*/status"),
            "the disruption controller's status writes"
        );
        assert!(spares("", "pods/binding"), "the scheduler's bindings");
        assert!(!spares("", "pods"), "a Pod itself stays fenced");
        Ok(())
    }

    #[test]
    fn a_policy_over_only_the_lease_and_events_fences_nothing() {
        let rule = |group: &str, resource: &str| {
            WriteRule::from_rbac(
                &strings(&[group]),
                &strings(&[resource]),
                &[],
                &strings(&["update"]),
            )
        };
        let lock_only: Vec<WriteRule> = [
            rule("coordination.k8s.io", "leases"),
            rule("", "events"),
            rule("events.k8s.io", "events"),
        ]
        .into_iter()
        .flatten()
        .collect();
        assert_eq!(lock_only.len(), 3);
        assert!(!Covers::Only(lock_only.clone()).fences_a_write("l"));
        // The group counts: a custom group's "events" is fenced, and so is a `*` group's.
        for (group, resource) in [("example.org", "events"), ("*", "leases"), ("", "*")] {
            let mut rules = lock_only.clone();
            rules.extend(rule(group, resource));
            assert!(Covers::Only(rules).fences_a_write("l"), "{group}/{resource}");
        }
        // ConfigMaps count unless the rule names only the lock: the policy lets only that one through.
        let configmaps = |names: &[&str]| {
            WriteRule::from_rbac(
                &strings(&[""]),
                &strings(&["configmaps"]),
                &strings(names),
                &strings(&["update"]),
            )
        };
        for (names, fenced) in [(&[][..], true), (&["l"][..], false), (&["l", "other"][..], true)] {
            let mut rules = lock_only.clone();
            rules.extend(configmaps(names));
            assert_eq!(Covers::Only(rules).fences_a_write("l"), fenced, "{names:?}");
        }
        assert!(Covers::Everything.fences_a_write("l"));
    }

    #[test]
    fn covering_only_the_rbac_writes_matches_them_and_nothing_else() -> Result<(), serde_json::Error> {
        let rbac = [
            (
                strings(&["nop.crossplane.io"]),
                strings(&["nopresources"]),
                strings(&["get", "patch", "update"]),
            ),
            (
                strings(&[""]),
                strings(&["secrets"]),
                strings(&["create", "get", "update"]),
            ),
            (
                strings(&[""]),
                strings(&["pods"]),
                strings(&["get", "list", "watch"]),
            ),
            (strings(&["example.org"]), strings(&["*"]), strings(&["*"])),
        ];
        let rules: Vec<WriteRule> = rbac
            .iter()
            .filter_map(|(g, r, v)| WriteRule::from_rbac(g, r, &[], v))
            .collect();
        assert_eq!(rules.len(), 3, "a read-only rule grants no write: {rules:?}");
        let policy = serde_json::to_value(fence(Covers::Only(rules)).policy()?)?;
        let rules = &policy["spec"]["matchConstraints"]["resourceRules"];
        assert_eq!(rules[0]["resources"], json!(["nopresources"]));
        assert_eq!(rules[0]["operations"], json!(["UPDATE"]));
        assert_eq!(rules[1]["operations"], json!(["CREATE", "UPDATE"]));
        assert_eq!(
            rules[2]["resources"],
            json!(["*/*"]),
            "RBAC's * takes in subresources"
        );
        assert_eq!(rules[2]["operations"], json!(["CREATE", "UPDATE", "DELETE"]));
        // Only the lock objects and Events are excluded: nothing outside the rules is matched anyway.
        assert_eq!(
            policy["spec"]["matchConstraints"]["excludeResourceRules"]
                .as_array()
                .map(Vec::len),
            Some(3)
        );
        Ok(())
    }
}
