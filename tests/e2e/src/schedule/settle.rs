//! The end of a run: waiting until everything converged, then looking for duplicates and stopping
//! the replicas.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use anyhow::bail;
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, ListParams};
use serde_json::Value;

use super::world::World;
use super::{Census, Group, TAKEOVER_TIMEOUT};

fn condition_true(obj: &Value, type_: &str) -> bool {
    obj.pointer("/status/conditions")
        .and_then(Value::as_array)
        .is_some_and(|cs| cs.iter().any(|c| c["type"] == type_ && c["status"] == "True"))
}

impl World<'_> {
    /// Waits until every resource is Ready and Synced, every XR's composed resource has its latest
    /// `spec.n`, and nothing is missing; returns what was still wrong at the deadline as an error.
    pub(super) async fn converge(&self, timeout: Duration) -> anyhow::Result<()> {
        let deadline = Instant::now() + timeout;
        loop {
            let wrong = match self.unconverged().await {
                Ok(w) => w,
                Err(e) => vec![format!("listing: {e:#}")],
            };
            if wrong.is_empty() {
                return Ok(());
            }
            if Instant::now() > deadline {
                bail!(
                    "not converged after {timeout:?}: {} ({} in all)",
                    wrong.iter().take(5).cloned().collect::<Vec<_>>().join("; "),
                    wrong.len()
                );
            }
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
    }

    async fn unconverged(&self) -> anyhow::Result<Vec<String>> {
        let mut wrong = Vec::new();
        let nops = self.nops().list(&ListParams::default()).await?.items;
        let xrs = self.xrs().list(&ListParams::default()).await?.items;
        let composed: BTreeMap<String, Vec<Value>> = nops
            .iter()
            .map(|n| serde_json::to_value(n).unwrap_or(Value::Null))
            .fold(BTreeMap::new(), |mut m, n| {
                if let Some(xr) = n["metadata"]["labels"]["crossplane.io/composite"].as_str() {
                    m.entry(xr.to_owned()).or_insert_with(Vec::new).push(n.clone());
                }
                m
            });
        for n in &nops {
            let v = serde_json::to_value(n)?;
            if !(condition_true(&v, "Ready") && condition_true(&v, "Synced")) {
                wrong.push(format!(
                    "NopResource {} not Ready and Synced",
                    n.metadata.name.as_deref().unwrap_or("?")
                ));
            }
        }
        let standalone = nops
            .iter()
            .filter(|n| n.metadata.owner_references.as_ref().is_none_or(Vec::is_empty))
            .count();
        if standalone != self.config.nop_resources {
            wrong.push(format!(
                "{standalone} stand-alone NopResources, expected {}",
                self.config.nop_resources
            ));
        }
        if xrs.len() != self.config.xrs {
            wrong.push(format!("{} XRs, expected {}", xrs.len(), self.config.xrs));
        }
        for x in &xrs {
            let v = serde_json::to_value(x)?;
            let name = x.metadata.name.clone().unwrap_or_default();
            if !(condition_true(&v, "Ready") && condition_true(&v, "Synced")) {
                wrong.push(format!("XR {name} not Ready and Synced"));
            }
            match composed.get(&name).map(Vec::as_slice) {
                Some([one]) if one["spec"]["forProvider"]["fields"]["n"] == v["spec"]["n"] => {}
                Some([one]) => wrong.push(format!(
                    "XR {name} has spec.n {} but its NopResource {}",
                    v["spec"]["n"], one["spec"]["forProvider"]["fields"]["n"]
                )),
                Some(many) => wrong.push(format!("XR {name} composed {} NopResources", many.len())),
                None => wrong.push(format!("XR {name} composed nothing")),
            }
        }
        Ok(wrong)
    }

    /// The resources that should exist (stand-alone and composed NopResources, XRs), how many do, and
    /// how many of those are Ready and Synced.
    async fn census(&self) -> anyhow::Result<Census> {
        let nops = self.nops().list(&ListParams::default()).await?.items;
        let xrs = self.xrs().list(&ListParams::default()).await?.items;
        let ready = nops
            .iter()
            .chain(&xrs)
            .filter(|o| {
                let v = serde_json::to_value(o).unwrap_or(Value::Null);
                condition_true(&v, "Ready") && condition_true(&v, "Synced")
            })
            .count();
        let expected = self.config.nop_resources + 2 * self.config.xrs;
        Ok(Census {
            expected,
            present: (nops.len() + xrs.len()).min(expected),
            ready,
        })
    }

    pub(super) async fn settle(&mut self) -> anyhow::Result<()> {
        for g in Group::ALL {
            self.wait_leader(g, None, TAKEOVER_TIMEOUT).await?;
        }
        let timeout = Duration::from_secs(120 + self.config.nop_resources as u64 / 2);
        if let Err(e) = self.converge(timeout).await {
            self.problems.push(format!("{e:#}"));
        }
        self.census = self.census().await?;
        self.duplicates().await?;
        self.check_processes().await;
        self.stop_replicas().await;
        Ok(())
    }

    /// No XR composed twice (checked in `unconverged` too), no NopResource too many, and exactly one
    /// connection secret per NopResource.
    async fn duplicates(&mut self) -> anyhow::Result<()> {
        let nops = self.nops().list(&ListParams::default()).await?.items;
        let expected_nops = self.config.nop_resources + self.config.xrs;
        if nops.len() != expected_nops {
            self.problems.push(format!(
                "{} NopResources, expected {expected_nops} (stand-alone and composed)",
                nops.len()
            ));
        }
        let mut by_xr: BTreeMap<String, usize> = BTreeMap::new();
        for n in &nops {
            if let Some(xr) = n
                .metadata
                .labels
                .as_ref()
                .and_then(|l| l.get("crossplane.io/composite"))
            {
                *by_xr.entry(xr.clone()).or_default() += 1;
            }
        }
        for (xr, n) in by_xr.iter().filter(|(_, n)| **n != 1) {
            self.problems.push(format!("XR {xr} composed {n} NopResources"));
        }
        let secrets: Api<Secret> = Api::namespaced(self.client.clone(), &self.ns);
        let conn: Vec<String> = secrets
            .list(&ListParams::default())
            .await?
            .items
            .into_iter()
            .filter(|s| s.type_.as_deref() == Some(apis::meta::SECRET_TYPE_CONNECTION))
            .filter_map(|s| s.metadata.name)
            .collect();
        let expected: BTreeSet<String> = (0..self.config.nop_resources)
            .map(|i| format!("conn-nop-{i:03}"))
            .chain((0..self.config.xrs).map(|j| format!("conn-xr-{j:03}")))
            .collect();
        let got: BTreeSet<String> = conn.iter().cloned().collect();
        if conn.len() != expected.len() || got != expected {
            let extra: Vec<_> = got.difference(&expected).take(5).collect();
            let missing: Vec<_> = expected.difference(&got).take(5).collect();
            self.problems.push(format!(
                "{} connection secrets, expected {}: extra {extra:?}, missing {missing:?}",
                conn.len(),
                expected.len()
            ));
        }
        Ok(())
    }
}
