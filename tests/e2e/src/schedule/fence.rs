//! The server-side fence (`election::admission::FencePolicy`), installed part-way through a run: one
//! policy per slot's ServiceAccount, with its group's Lease as the parameter. From then on the apiserver
//! refuses a write of a replica whose pod does not hold the Lease, so a frozen leader's late writes must
//! come back 403.

use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use election::admission::{Covers, FencePolicy};
use jiff::Timestamp;
use k8s_openapi::api::admissionregistration::v1::{
    ValidatingAdmissionPolicy, ValidatingAdmissionPolicyBinding,
};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, DeleteParams, PostParams};
use serde_json::json;

use super::world::World;

/// The prefix of the placeholder pods whose tokens probe the fence (never a replica's identity).
pub(super) const PROBE_PREFIX: &str = "fence-probe-";
/// The start of the fence's refusal message.
pub(super) const REFUSAL: &str = "only the pod holding Lease";
/// How long the policies get to come into force.
const IN_FORCE_TIMEOUT: Duration = Duration::from_secs(60);

impl World<'_> {
    /// Installs the fence for every slot's ServiceAccount and waits until each is in force: a write with
    /// a token of that account bound to a pod that does not hold the Lease is refused.
    pub(super) async fn install_fence(&mut self) -> anyhow::Result<()> {
        let policies: Api<ValidatingAdmissionPolicy> = Api::all(self.client.clone());
        let bindings: Api<ValidatingAdmissionPolicyBinding> = Api::all(self.client.clone());
        let accounts: Vec<(String, &'static str)> = self
            .slots
            .iter()
            .map(|s| (s.service_account(), s.group.lease()))
            .collect();
        for (sa, lease) in &accounts {
            let name = format!("e2e-fence-{}-{sa}", self.ns);
            let fence = FencePolicy {
                name: &name,
                service_account_namespace: &self.ns,
                service_account: sa,
                lease_namespace: &self.ns,
                lease,
                covers: Covers::Everything,
            };
            policies
                .create(&PostParams::default(), &fence.policy()?)
                .await
                .with_context(|| format!("creating the fence policy {name}"))?;
            bindings
                .create(&PostParams::default(), &fence.binding()?)
                .await
                .with_context(|| format!("creating the fence binding {name}"))?;
        }
        for (sa, _) in &accounts {
            let pod = format!("{PROBE_PREFIX}{sa}");
            let kubeconfig = self.cp.cluster().pod_kubeconfig(&self.ns, sa, &pod).await?;
            let probe = testenv::client_from(&kubeconfig).await?;
            let cms: Api<ConfigMap> = Api::namespaced(probe, &self.ns);
            let cm: ConfigMap = serde_json::from_value(json!({ "metadata": { "name": pod } }))?;
            let deadline = Instant::now() + IN_FORCE_TIMEOUT;
            loop {
                match cms.create(&PostParams::default(), &cm).await {
                    Err(kube::Error::Api(s)) if s.code == 403 && s.message.contains(REFUSAL) => break,
                    Ok(_) => {
                        cms.delete(&pod, &DeleteParams::default()).await.ok();
                    }
                    Err(_) => {}
                }
                if Instant::now() > deadline {
                    bail!(
                        "the fence for ServiceAccount {sa} was not in force {IN_FORCE_TIMEOUT:?} after it was installed"
                    );
                }
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        }
        let now = Timestamp::now();
        self.fence_from = Some(now);
        self.say(&format!(
            "server-side fence in force for {} ServiceAccounts",
            accounts.len()
        ));
        Ok(())
    }
}
