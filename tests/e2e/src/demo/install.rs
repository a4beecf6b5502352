//! Setting the demo up: CRDs, namespace and RBAC, the replicas, and the examples up to a Ready XR.

use std::time::{Duration, Instant};

use anyhow::Result;
use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::api::rbac::v1::ClusterRole;
use kube::Api;
use kube::api::{DynamicObject, Patch, PatchParams};
use serde_json::json;

use super::api::{
    apply, condition, examples_dir, get_json, holder, read_example, to_json, xr_resource, xrd_resource,
};
use super::replica::Replica;
use super::session::Demo;
use super::state::demo_dir;
use super::{DEPLOYMENTS, MANAGER, NS, RBAC_KINDS, TIMINGS, WORKLOADS, XR, demo_deployments, generate};

impl Demo {
    /// Installs the CRDs, the namespace, the generated RBAC of the four binaries and the workload identity.
    pub(super) async fn install(&mut self) -> Result<()> {
        let root = testenv::harness::repo_root().join("deploy");
        if !generate::drift(&root, &generate::render(&release::registry::Registry::default())?)?.is_empty() {
            self.note(
                "note: deploy/ differs from the code (run `cargo xtask generate`); the demo uses the code's",
            );
        }
        let crds: Vec<_> = generate::deployed().iter().flat_map(|b| (b.crds)()).collect();
        self.note(format!("installing {} CRDs", crds.len()));
        testenv::support::install_crds(&self.client, &crds).await?;

        let namespaces: Api<Namespace> = Api::all(self.client.clone());
        self.wait(
            "the old namespace to be gone",
            Duration::from_secs(120),
            |c| async move {
                let ns = Api::<Namespace>::all(c).get_opt(NS).await?;
                Ok(ns
                    .filter(|n| n.metadata.deletion_timestamp.is_some())
                    .is_none()
                    .then_some(()))
            },
        )
        .await?;
        namespaces
            .patch(
                NS,
                &PatchParams::apply(MANAGER).force(),
                &Patch::Apply(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})),
            )
            .await?;

        let mut applied = 0;
        for b in demo_deployments() {
            for (_, obj) in generate::base(&b, &release::registry::Registry::default()) {
                if RBAC_KINDS.contains(&obj["kind"].as_str().unwrap_or_default()) {
                    apply(&self.client, &obj).await?;
                    applied += 1;
                }
            }
        }
        self.note(format!(
            "applied the generated RBAC of {}: {applied} objects (ServiceAccounts, Roles, ClusterRoles, bindings)",
            DEPLOYMENTS.join(", ")
        ));

        // The identity provider-kubernetes applies the demo's Objects with: ConfigMaps in the namespace.
        let kubeconfig = self.cluster.service_account_kubeconfig(NS, WORKLOADS).await?;
        let text = std::fs::read_to_string(&kubeconfig)?;
        for obj in [
            json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
                   "metadata": {"name": WORKLOADS, "namespace": NS},
                   "rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["*"]}]}),
            json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
                   "metadata": {"name": WORKLOADS, "namespace": NS},
                   "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": WORKLOADS},
                   "subjects": [{"kind": "ServiceAccount", "name": WORKLOADS, "namespace": NS}]}),
            json!({"apiVersion": "v1", "kind": "Secret",
                   "metadata": {"name": format!("{WORKLOADS}-kubeconfig"), "namespace": NS},
                   "stringData": {"kubeconfig": text}}),
        ] {
            apply(&self.client, &obj).await?;
        }

        // The core's ClusterRole aggregates its own needs and the providers' kinds.
        self.wait(
            "the aggregated ClusterRole crossplane",
            Duration::from_secs(60),
            |c| async move {
                let role = Api::<ClusterRole>::all(c).get_opt("crossplane").await?;
                let groups: Vec<String> = role
                    .and_then(|r| r.rules)
                    .unwrap_or_default()
                    .into_iter()
                    .flat_map(|r| r.api_groups.unwrap_or_default())
                    .collect();
                let want = [
                    "apiextensions.crossplane.io",
                    "nop.crossplane.io",
                    "kubernetes.crossplane.io",
                ];
                Ok(want.iter().all(|g| groups.iter().any(|h| h == g)).then_some(()))
            },
        )
        .await?;
        self.note("the core's ClusterRole is aggregated");
        Ok(())
    }

    pub(super) async fn start_replicas(&mut self) -> Result<()> {
        let logs = demo_dir(&self.cluster.dir).join("logs");
        for b in demo_deployments() {
            let kubeconfig = self.cluster.service_account_kubeconfig(NS, b.name).await?;
            for suffix in ["a", "b"] {
                let identity = format!("{}-{suffix}", b.name);
                let mut args: Vec<String> = b.args.iter().map(|s| (*s).to_owned()).collect();
                args.extend(
                    [
                        "--kubeconfig",
                        &kubeconfig.display().to_string(),
                        "--leader-election",
                        "--leader-election-namespace",
                        NS,
                        "--metrics-bind-address",
                        "0",
                        "--health-probe-bind-address",
                        "0",
                    ]
                    .map(String::from),
                );
                for (flag, value) in TIMINGS {
                    args.extend([flag.to_owned(), value.to_owned()]);
                }
                let log = logs.join(format!("{identity}.log"));
                let _ = std::fs::remove_file(&log);
                let mut replica = Replica {
                    deployment: b.name,
                    identity,
                    binary: self.bin_dir.join(b.image),
                    args,
                    log,
                    process: None,
                    detached: false,
                };
                replica.spawn()?;
                self.replicas.push(replica);
                self.save_state()?;
            }
        }
        self.note(format!(
            "started {} replicas, each with its own ServiceAccount's token (logs: {})",
            self.replicas.len(),
            logs.display()
        ));
        self.wait(
            "a leader for every Lease",
            Duration::from_secs(60),
            |c| async move {
                for b in demo_deployments() {
                    if holder(&c, b.lease.lease_id).await?.is_empty() {
                        return Ok(None);
                    }
                }
                Ok(Some(()))
            },
        )
        .await?;
        self.note("every Lease has a leader");
        Ok(())
    }

    pub(super) async fn apply_examples(&mut self) -> Result<()> {
        let dir = examples_dir();
        for file in ["providerconfig.yaml", "xrd.yaml", "composition.yaml"] {
            apply(&self.client, &read_example(&dir.join(file))?).await?;
        }
        self.note("applied examples/demo/: ProviderConfig, XRD, Composition");
        self.wait(
            "the XRD to be Established",
            Duration::from_secs(60),
            |c| async move {
                let xrd = Api::<DynamicObject>::all_with(c, &xrd_resource())
                    .get_opt("xapps.demo.crossplane-rs.io")
                    .await?;
                Ok(
                    (condition(&xrd.map(to_json).unwrap_or_default(), "Established").as_deref()
                        == Some("True"))
                    .then_some(()),
                )
            },
        )
        .await?;
        self.note("XRD Established: the core serves xapps.demo.crossplane-rs.io");
        apply(&self.client, &read_example(&dir.join("xr.yaml"))?).await?;
        let applied = Instant::now();
        self.note("applied the XR XApp/demo");
        self.wait("the XR to be Ready", Duration::from_secs(120), |c| async move {
            let xr = get_json(&c, &xr_resource(), XR).await?;
            Ok((condition(&xr, "Ready").as_deref() == Some("True")
                && condition(&xr, "Synced").as_deref() == Some("True"))
            .then_some(()))
        })
        .await?;
        self.results.ready = Some(applied.elapsed());
        self.note(format!(
            "XApp/demo is Ready {:.1}s after it was applied: two NopResources and a ConfigMap",
            applied.elapsed().as_secs_f64()
        ));
        Ok(())
    }
}
