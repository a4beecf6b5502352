//! The workload: the CRDs, the XRD and Composition, the NopResources and XRs created at setup, and the
//! background task that keeps changing them during the faults.

use std::time::{Duration, Instant};

use kube::CustomResourceExt;
use kube::api::{Api, DynamicObject, Patch, PatchParams, PostParams};
use serde_json::{Value, json};

use super::world::{World, dynamic};
use super::{Group, XR_GROUP};

impl World<'_> {
    pub(super) async fn setup(&mut self) -> anyhow::Result<()> {
        let crds = [
            apis::apiextensions::xrd::crd(),
            apis::apiextensions::Composition::crd(),
            apis::apiextensions::CompositionRevision::crd(),
            provider_nop::types::NopResource::crd(),
        ];
        testenv::support::install_crds(&self.client, &crds).await?;
        for i in 0..self.slots.len() {
            // The Go peers join later, with the fence (see `go_peer`).
            if self.slots[i].go.is_none() {
                self.spawn(i, None).await?;
            }
        }
        for g in Group::ALL {
            let leader = self.wait_leader(g, None, Duration::from_secs(60)).await?;
            self.say(&format!("{g} leader: {leader}"));
        }

        let ns = self.ns.clone();
        let xrds = dynamic(
            &self.client,
            "apiextensions.crossplane.io",
            "v2",
            "CompositeResourceDefinition",
            "compositeresourcedefinitions",
        );
        let comps = dynamic(
            &self.client,
            "apiextensions.crossplane.io",
            "v1",
            "Composition",
            "compositions",
        );
        let xrd_name = format!("xfaults.{XR_GROUP}");
        create(&xrds, json!({
            "apiVersion": "apiextensions.crossplane.io/v2", "kind": "CompositeResourceDefinition",
            "metadata": {"name": xrd_name},
            "spec": {"group": XR_GROUP, "scope": "Cluster", "names": {"kind": "XFault", "plural": "xfaults"},
                     "versions": [{"name": "v1", "referenceable": true, "served": true, "schema": {"openAPIV3Schema": {
                         "type": "object", "properties": {"spec": {"type": "object", "properties": {"n": {"type": "integer"}}}}}}}]}
        })).await?;
        create(&comps, json!({
            "apiVersion": "apiextensions.crossplane.io/v1", "kind": "Composition",
            "metadata": {"name": "faults"},
            "spec": {"compositeTypeRef": {"apiVersion": format!("{XR_GROUP}/v1"), "kind": "XFault"}, "mode": "Pipeline",
                     "pipeline": [{"step": "pt", "functionRef": {"name": "function-patch-and-transform"},
                       "input": {"apiVersion": "pt.fn.crossplane.io/v1beta1", "kind": "Resources", "resources": [{
                         "name": "nop",
                         "base": {"apiVersion": "nop.crossplane.io/v1alpha1", "kind": "NopResource",
                                  "spec": {"forProvider": {
                                              "conditionAfter": [{"time": "1s", "conditionType": "Ready", "conditionStatus": "True"}],
                                              "connectionDetails": [{"name": "composed", "value": "yes"}]},
                                           "writeConnectionSecretToRef": {"namespace": ns, "name": "unset"}}},
                         "patches": [
                             {"type": "FromCompositeFieldPath", "fromFieldPath": "spec.n", "toFieldPath": "spec.forProvider.fields.n"},
                             {"type": "FromCompositeFieldPath", "fromFieldPath": "metadata.name",
                              "toFieldPath": "spec.writeConnectionSecretToRef.name",
                              "transforms": [{"type": "string", "string": {"type": "Format", "fmt": "conn-%s"}}]}
                         ]}]}}]}
        })).await?;

        let nops = self.nops();
        for i in 0..self.config.nop_resources {
            create(&nops, json!({
                "apiVersion": "nop.crossplane.io/v1alpha1", "kind": "NopResource",
                "metadata": {"name": format!("nop-{i:03}")},
                "spec": {
                    "forProvider": {
                        "conditionAfter": [{"time": "1s", "conditionType": "Ready", "conditionStatus": "True"}],
                        "connectionDetails": [{"name": "index", "value": i.to_string()}],
                        "fields": {"gen": 0},
                    },
                    "writeConnectionSecretToRef": {"name": format!("conn-nop-{i:03}"), "namespace": ns},
                },
            }))
            .await?;
        }

        // The XR kind is served once the core leader has turned the XRD into a CRD.
        let xrs = self.xrs();
        let deadline = Instant::now() + Duration::from_secs(90);
        for j in 0..self.config.xrs {
            let xr = json!({"apiVersion": format!("{XR_GROUP}/v1"), "kind": "XFault",
                            "metadata": {"name": format!("xr-{j:03}")}, "spec": {"n": 0}});
            loop {
                match create(&xrs, xr.clone()).await {
                    Ok(()) => break,
                    Err(e) if Instant::now() > deadline => {
                        return Err(e.context("creating XRs: the XR kind was never served"));
                    }
                    Err(_) => tokio::time::sleep(Duration::from_millis(250)).await,
                }
            }
        }
        self.converge(Duration::from_secs(180)).await
    }
}

/// Creates an object from JSON.
async fn create(api: &Api<DynamicObject>, obj: Value) -> anyhow::Result<()> {
    let o: DynamicObject = serde_json::from_value(obj)?;
    api.create(&PostParams::default(), &o).await?;
    Ok(())
}

/// Keeps changing resources: about ten NopResource spec patches a second, and every fifth an XR's.
pub(super) async fn churn(nops: Api<DynamicObject>, xrs: Api<DynamicObject>, n_nops: usize, n_xrs: usize) {
    let pp = PatchParams::default();
    let mut k: u64 = 0;
    loop {
        k += 1;
        if n_nops > 0 {
            let i = usize::try_from(k).unwrap_or(0) % n_nops;
            let patch = json!({"spec": {"forProvider": {"fields": {"gen": k}}}});
            let _ = nops
                .patch(&format!("nop-{i:03}"), &pp, &Patch::Merge(&patch))
                .await;
        }
        if n_xrs > 0 && k.is_multiple_of(5) {
            let j = usize::try_from(k / 5).unwrap_or(0) % n_xrs;
            let patch = json!({"spec": {"n": k}});
            let _ = xrs.patch(&format!("xr-{j:03}"), &pp, &Patch::Merge(&patch)).await;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
