//! A server-side fence: a `ValidatingAdmissionPolicy` that admits a ServiceAccount's writes only from
//! the pod that holds the Lease.
//!
//! The [`Guard`](crate::Guard) stops a leader from *starting* a write after its term, but a write that
//! was begun in the term can still reach the apiserver later: a process frozen (SIGSTOP, a long GC or
//! VM pause) between its last check and the socket sends it when it resumes. Only the apiserver can
//! refuse that write, and this policy makes it do so. It takes the Lease as its parameter and, for every
//! create, update and delete by the ServiceAccount (except on the lock objects themselves and on Events,
//! which record state rather than change it), requires the
//! pod that the request's token is bound to to be the holder: the holder identity must be the pod's name
//! or start with `<pod name>_` (controller-runtime's `<hostname>_<uuid>`, whose hostname is the pod's
//! name). The apiserver puts the pod's name in `authentication.kubernetes.io/pod-name` of the user's
//! extra for every projected ServiceAccount token, which is what pods get by default.
//!
//! The policy is evaluated when a request arrives, against the apiserver's cached copy of the Lease,
//! which follows the Lease's writes within milliseconds; so a write that arrives after another replica
//! took the Lease is refused with 403 however long ago it was begun.
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
                    "resourceRules": [{
                        "apiGroups": ["*"],
                        "apiVersions": ["*"],
                        "operations": ["CREATE", "UPDATE", "DELETE"],
                        "resources": ["*/*"],
                    }],
                    "excludeResourceRules": [
                        {
                            "apiGroups": ["coordination.k8s.io"],
                            "apiVersions": ["*"],
                            "operations": ["*"],
                            "resources": ["leases"],
                        },
                        {
                            "apiGroups": [""],
                            "apiVersions": ["*"],
                            "operations": ["*"],
                            "resources": ["configmaps"],
                            "resourceNames": [self.lease],
                        },
                        {
                            "apiGroups": ["", "events.k8s.io"],
                            "apiVersions": ["*"],
                            "operations": ["*"],
                            "resources": ["events"],
                        },
                    ],
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

    const FENCE: FencePolicy<'static> = FencePolicy {
        name: "fence-nop",
        service_account_namespace: "crossplane-system",
        service_account: "provider-nop",
        lease_namespace: "crossplane-system",
        lease: "crossplane-leader-election-provider-nop",
    };

    #[test]
    fn the_policy_matches_only_the_service_account_and_spares_the_locks() -> Result<(), serde_json::Error> {
        let policy = serde_json::to_value(FENCE.policy()?)?;
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
        let binding = serde_json::to_value(FENCE.binding()?)?;
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
}
