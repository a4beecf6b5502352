//! The live view: Lease holders, the resources' Synced and Ready, and the audit log's figures.

use std::fmt::Write as _;

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::Api;

use super::api::{composed, condition, get_json, nop_resource, object_resource, xr_resource, xrd_resource};
use super::session::Demo;
use super::{ANNOTATION_RESOURCE_NAME, NS, XR, demo_deployments};

impl Demo {
    pub(super) async fn print_view(&mut self) {
        let _ = self.audit.poll();
        let view = self.view().await;
        if self.tty {
            print!("\x1b[H\x1b[2J");
        }
        println!("{view}");
    }

    /// The live view as text.
    pub(super) async fn view(&mut self) -> String {
        let mut out = String::new();
        let _ = writeln!(
            out,
            "crossplane-rs demo · {:.0}s · namespace {NS} · {}",
            self.wall.elapsed().as_secs_f64(),
            self.cluster.server
        );
        let _ = writeln!(
            out,
            "\n{:<48} {:<28} {:>5}  REPLICAS (* leads, - stands by, x down)",
            "LEASE", "HOLDER", "TRANS"
        );
        self.lease_rows(&mut out).await;
        self.resource_rows(&mut out).await;
        let _ = writeln!(
            out,
            "\n{:<48} {:>9} {:>12}",
            "SERVICEACCOUNT (apiserver audit log)", "REQUESTS", "DENIED (403)"
        );
        for (sa, s) in &self.audit.users {
            let _ = writeln!(out, "{:<48} {:>9} {:>12}", sa, s.requests, s.denied);
            for e in &s.examples {
                let _ = writeln!(out, "    denied: {e}");
            }
        }
        // Without a TTY the events are printed as they happen.
        if self.tty {
            let _ = writeln!(out);
            let from = self.events.len().saturating_sub(12);
            for e in &self.events[from..] {
                let _ = writeln!(out, "{e}");
            }
        }
        out
    }

    /// One row per Lease: its holder, transitions, and the replicas that stand for it.
    async fn lease_rows(&mut self, out: &mut String) {
        for b in demo_deployments() {
            let lease: Option<Lease> = Api::namespaced(self.client.clone(), NS)
                .get_opt(b.lease.lease_id)
                .await
                .ok()
                .flatten();
            let spec = lease.and_then(|l| l.spec).unwrap_or_default();
            let h = spec.holder_identity.clone().unwrap_or_default();
            let mut reps = Vec::new();
            for r in self.replicas.iter_mut().filter(|r| r.deployment == b.name) {
                let mark = if !r.running() {
                    'x'
                } else if r.identity == h {
                    '*'
                } else {
                    '-'
                };
                reps.push(format!("{mark} {}", r.identity));
            }
            let _ = writeln!(
                out,
                "{:<48} {:<28} {:>5}  {}",
                b.lease.lease_id,
                if h.is_empty() { "(none)" } else { &h },
                spec.lease_transitions.unwrap_or(0),
                reps.join("  ")
            );
        }
    }

    /// The XRD, the XR and what it composed, with their Synced and Ready.
    async fn resource_rows(&self, out: &mut String) {
        let _ = writeln!(out, "\n{:<62} {:<7} {:<7} NOTE", "RESOURCE", "SYNCED", "READY");
        let c = self.client.clone();
        let xrd = get_json(&c, &xrd_resource(), "xapps.demo.crossplane-rs.io")
            .await
            .unwrap_or_default();
        if !xrd.is_null() {
            let _ = writeln!(
                out,
                "{:<62} {:<7} {:<7} Established={}",
                "CompositeResourceDefinition/xapps.demo.crossplane-rs.io",
                "",
                "",
                condition(&xrd, "Established").unwrap_or_else(|| "-".into())
            );
        }
        let xr = get_json(&c, &xr_resource(), XR).await.unwrap_or_default();
        if !xr.is_null() {
            let _ = writeln!(
                out,
                "{:<62} {:<7} {:<7} size={}",
                format!("XApp/{XR}"),
                condition(&xr, "Synced").unwrap_or_else(|| "-".into()),
                condition(&xr, "Ready").unwrap_or_else(|| "-".into()),
                xr["spec"]["size"].as_str().unwrap_or("-")
            );
        }
        for (ar, kind) in [(nop_resource(), "NopResource"), (object_resource(), "Object")] {
            for r in composed(&c, &ar).await.unwrap_or_default() {
                let role = r["metadata"]["annotations"][ANNOTATION_RESOURCE_NAME]
                    .as_str()
                    .unwrap_or("-")
                    .to_owned();
                let name = r["metadata"]["name"].as_str().unwrap_or("-").to_owned();
                let note = if kind == "Object" {
                    let cm = format!("{XR}-config");
                    match Api::<ConfigMap>::namespaced(c.clone(), NS).get_opt(&cm).await {
                        Ok(Some(m)) => format!(
                            "ConfigMap {NS}/{cm} size={}",
                            m.data
                                .unwrap_or_default()
                                .get("size")
                                .cloned()
                                .unwrap_or_default()
                        ),
                        _ => "no ConfigMap yet".into(),
                    }
                } else {
                    format!("{role}: {}", r["spec"]["forProvider"]["fields"])
                };
                let _ = writeln!(
                    out,
                    "{:<62} {:<7} {:<7} {note}",
                    format!("  {kind}/{name}"),
                    condition(&r, "Synced").unwrap_or_else(|| "-".into()),
                    condition(&r, "Ready").unwrap_or_else(|| "-".into()),
                );
            }
        }
    }
}
