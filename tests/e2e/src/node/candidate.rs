//! client-go's lease candidate as a Deployment on the node, under the conditions of provider-nop's Pods:
//! the same lease timings, the same termination grace period, release on cancel, and its identity from
//! the downward API's `POD_NAME`.
//!
//! The candidate is `tests/control-plane/candidate.go` built alone (`-tags candidateonly`,
//! `CGO_ENABLED=0`, so a static binary), packed as an image without a base layer and imported like ours.
//! It runs client-go's `leaderelection.LeaderElector` with a `LeaseLock` and `ReleaseOnCancel: true`,
//! which is what controller-runtime's `LeaderElectionReleaseOnCancel` sets; on SIGTERM it cancels its
//! context and the elector writes the released record. It reaches the apiserver with the in-cluster
//! configuration (the Pod's projected token), like any client-go program in a Pod.

use std::path::{Path, PathBuf};

use anyhow::Context;
use election::Timings;
use flate2::Compression;
use serde_json::{Value, json};

use release::{generate, image, target_dir};

/// The candidate's namespace: its own, so that deploy/'s fence (which judges crossplane-system's
/// ServiceAccounts) is not in its way.
pub const NAMESPACE: &str = "lease-candidate";
/// Its Deployment, its Pods' `app.kubernetes.io/name` and its Lease.
pub const APP: &str = "client-go-candidate";
/// The image's name.
const IMAGE: &str = "lease-candidate";

/// Builds the candidate and packs it as `<out>/lease-candidate.oci.tar`.
pub fn build_image(out: &Path) -> anyhow::Result<PathBuf> {
    let binary = testenv::harness::ensure_candidate_built(&target_dir())
        .context("building client-go's lease candidate (go build -tags candidateonly)")?;
    let archive = out.join(format!("{IMAGE}.oci.tar"));
    image::pack_static(
        IMAGE,
        "client-go's lease candidate (tests/control-plane/candidate.go), static",
        &binary,
        &archive,
        Compression::new(1),
    )?;
    Ok(archive)
}

/// provider-nop's lease timings, release on cancel and termination grace period, as deploy/ has them.
pub fn provider_nop_conditions() -> anyhow::Result<(Timings, bool, i64)> {
    let nop = generate::deployed()
        .into_iter()
        .find(|b| b.name == "provider-nop")
        .context("provider-nop is not deployed")?;
    let text = std::fs::read_to_string(
        testenv::harness::repo_root()
            .join("deploy")
            .join("provider-nop")
            .join("deployment.yaml"),
    )
    .context("reading deploy/provider-nop/deployment.yaml")?;
    let deployment: Value = serde_saphyr::from_str(&text).context("parsing provider-nop's Deployment")?;
    let grace = deployment["spec"]["template"]["spec"]["terminationGracePeriodSeconds"]
        .as_i64()
        .context("provider-nop's Deployment has no terminationGracePeriodSeconds")?;
    Ok((nop.lease.timings, nop.lease.release_on_cancel, grace))
}

/// The candidate's namespace, ServiceAccount, Role (its Lease only), RoleBinding and Deployment of 2
/// replicas, as one `List`.
pub fn manifests(timings: &Timings, release_on_cancel: bool, grace: i64) -> Value {
    let go = |d: std::time::Duration| format!("{}ms", d.as_millis());
    let meta = |name: &str| json!({"name": name, "namespace": NAMESPACE});
    let labels = json!({"app.kubernetes.io/name": APP});
    json!({
        "apiVersion": "v1",
        "kind": "List",
        "items": [
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}},
            {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": meta(APP)},
            {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": meta(APP),
             "rules": [{"apiGroups": ["coordination.k8s.io"], "resources": ["leases"],
                        "verbs": ["get", "list", "watch", "create", "update", "patch"]}]},
            {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding", "metadata": meta(APP),
             "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": APP},
             "subjects": [{"kind": "ServiceAccount", "name": APP, "namespace": NAMESPACE}]},
            {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": meta(APP),
             "spec": {
                "replicas": 2,
                "selector": {"matchLabels": labels},
                "strategy": {"type": "RollingUpdate",
                             "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}},
                "template": {
                    "metadata": {"labels": labels},
                    "spec": {
                        "serviceAccountName": APP,
                        "terminationGracePeriodSeconds": grace,
                        "containers": [{
                            "name": "candidate",
                            "image": image::full_reference(IMAGE),
                            "imagePullPolicy": "Never",
                            "args": [
                                "--namespace=$(POD_NAMESPACE)",
                                format!("--name={APP}"),
                                "--identity=$(POD_NAME)",
                                format!("--lease-duration={}", go(timings.lease_duration)),
                                format!("--renew-deadline={}", go(timings.renew_deadline)),
                                format!("--retry-period={}", go(timings.retry_period)),
                                format!("--release-on-cancel={release_on_cancel}"),
                            ],
                            "env": [
                                {"name": "POD_NAME",
                                 "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
                                {"name": "POD_NAMESPACE",
                                 "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}},
                            ],
                            "securityContext": {"allowPrivilegeEscalation": false,
                                                "readOnlyRootFilesystem": true,
                                                "runAsNonRoot": true},
                        }],
                    },
                },
             }},
        ],
    })
}

/// Applies the candidate's objects with kubectl.
pub fn apply(kubeconfig: &Path, dir: &Path) -> anyhow::Result<()> {
    let (timings, release, grace) = provider_nop_conditions()?;
    let file = dir.join("client-go-candidate.json");
    std::fs::write(&file, manifests(&timings, release, grace).to_string())
        .with_context(|| format!("writing {}", file.display()))?;
    testenv::kubectl::apply(kubeconfig, &file)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_candidate_runs_under_provider_nops_conditions() {
        let (timings, release, grace) = provider_nop_conditions().expect("deploy/ is readable");
        let list = manifests(&timings, release, grace);
        let deployment = &list["items"][4];
        assert_eq!(deployment["spec"]["replicas"], 2);
        let pod = &deployment["spec"]["template"]["spec"];
        assert_eq!(pod["terminationGracePeriodSeconds"], grace);
        let args: Vec<&str> = pod["containers"][0]["args"]
            .as_array()
            .expect("args")
            .iter()
            .filter_map(Value::as_str)
            .collect();
        assert!(args.contains(&"--identity=$(POD_NAME)"), "{args:?}");
        let lease = format!("--lease-duration={}ms", timings.lease_duration.as_millis());
        assert!(args.contains(&lease.as_str()), "{args:?}");
        assert!(args.contains(&"--release-on-cancel=true"), "{args:?}");
    }
}
