//! docs/packages.md and docs/packages.json from one run of the scenario.

use serde_json::{Value, json};

use super::{Outcome, Upgrade, Way};

/// The `q` quantile (nearest rank) of `xs`, or 0 when empty.
pub fn quantile(xs: &[f64], q: f64) -> f64 {
    let mut v: Vec<f64> = xs.to_vec();
    v.sort_by(f64::total_cmp);
    if v.is_empty() {
        return 0.0;
    }
    let rank = ((q * v.len() as f64).ceil() as usize).clamp(1, v.len());
    v[rank - 1]
}

fn of(o: &Outcome, way: Way) -> Vec<&Upgrade> {
    o.upgrades.iter().filter(|u| u.way == way).collect()
}

fn gaps(o: &Outcome, way: Way) -> Vec<f64> {
    of(o, way).iter().map(|u| u.gap_ms).collect()
}

/// The artifact.
pub fn json(o: &Outcome, provenance: &Value) -> Value {
    let way = |w: Way| {
        let us = of(o, w);
        let g = gaps(o, w);
        json!({
            "upgrades": us.len(),
            "no_leader_ms_p50": quantile(&g, 0.5),
            "no_leader_ms_p99": quantile(&g, 0.99),
            "rounds": us.iter().map(|u| json!({"change": u.change, "seconds": u.seconds,
                "no_leader_ms": u.gap_ms, "handovers": u.handovers})).collect::<Vec<_>>(),
        })
    };
    json!({
        "document": "packages.md",
        "registry": o.registry,
        "install": {"apply_to_healthy_s": o.apply_to_healthy, "ready_pods": o.pods.len(),
                    "leader": o.leader, "crds": o.crds},
        "function": {"package": o.function.package, "apply_to_healthy_s": o.function.apply_to_healthy,
                     "revision": o.function.revision, "endpoint": o.function.endpoint,
                     "ready_pods": o.function.pods.len(), "xr_ready_s": o.function.xr_ready,
                     "composed": o.function.composed.0, "composed_by_revision": o.function.composed.1},
        "configuration": {"package": o.configuration.package,
                          "apply_to_healthy_s": o.configuration.apply_to_healthy,
                          "objects": o.configuration.objects,
                          "dependency": o.configuration.dependency.0,
                          "dependency_package": o.configuration.dependency.1,
                          "dependency_healthy_s": o.configuration.dependency_healthy,
                          "dependency_ready_pods": o.configuration.dependency_pods.len(),
                          "conversion_webhook": o.configuration.conversion},
        "ours": way(Way::Ours),
        "upstream_order": way(Way::Upstream),
        "changes": o.changes,
        "nops_ready": o.nops_ready,
        "nops": super::NOPS,
        "writes_checked": o.writes,
        "violations": o.violations.len(),
        "terms": o.terms.iter().map(|(h, v)| json!({"holder": h, "versions": v})).collect::<Vec<_>>(),
        "refused_403": o.refused.len(),
        "bad_inputs": o.bad_inputs.iter().map(|b| json!({
            "what": b.what, "package": b.package, "condition": b.condition,
            "seconds_to_condition": b.seconds, "leader_kept": b.leader,
        })).collect::<Vec<_>>(),
        "provenance": provenance,
    })
}

/// The document.
pub fn markdown(o: &Outcome, provenance: &Value) -> String {
    let commit = provenance["commit"].as_str().unwrap_or("unknown");
    let load = &provenance["machine"]["load_average_1_5_15_min"];
    let mut out = vec![
        "# The package manager on a node".to_string(),
        String::new(),
        format!(
            "Written by `{}` at commit `{commit}` (load average {load}). Every image came from the test bed's \
             OCI registry at `{}` (go-containerregistry's, on the node's address): containerd pulled the core's \
             and the provider's images from it, and the core fetched the packages from it.",
            provenance["command"]
                .as_str()
                .unwrap_or("cargo xtask package-bench"),
            o.registry
        ),
        String::new(),
        "## Install".to_string(),
        String::new(),
        format!(
            "An upstream-shaped `Provider` (only `spec.package` names the registry) was Installed and Healthy \
             **{:.1} s** after `kubectl apply`, with {} definition(s) of its kinds ({}), {} Ready Pods ({}) and one leader, `{}`. \
             Its {} NopResources then became Ready: the RBAC manager bound the revision's system role, \
             so the runtime may manage its own kinds.",
            o.apply_to_healthy,
            o.crds.len(),
            o.crds.join(", "),
            o.pods.len(),
            o.pods.join(", "),
            o.leader,
            super::NOPS,
        ),
        String::new(),
        format!(
            "A `Function` of function-go's package (our function on the official Go SDK, function-sdk-go, \
             at `{}`) was Installed and Healthy **{:.1} s** after `kubectl apply`; its FunctionRevision `{}` \
             became Active at `{}` with {} Ready Pods. An XR whose Composition's one step is that function \
             (installed by the Configuration below) was Ready **{:.1} s** after its creation: the core, in its Pod, found the headless Service \
             through the cluster's DNS and called the function over mutual TLS (the Function has no \
             development annotation, and function-go serves only with the certificates the package \
             manager mounted). The ConfigMap it composed, `{}`, names the revision that served the call, \
             `{}`.",
            o.function.package,
            o.function.apply_to_healthy,
            o.function.revision,
            o.function.endpoint,
            o.function.pods.len(),
            o.function.xr_ready,
            o.function.composed.0,
            o.function.composed.1,
        ),
        String::new(),
        format!(
            "A `Configuration` (`{}`) whose package holds that XRD and Composition and depends on \
             provider-kubernetes's package (not installed) was Installed and Healthy **{:.1} s** after \
             `kubectl apply`, with {}; the Lock installed its dependency as Provider `{}` from `{}`, \
             Healthy {:.1} s after the Configuration's apply with {} Ready Pods. The package manager pointed \
             its CRD's conversion webhook at the revision's runtime and injected the CA that signed the \
             runtime's certificate: `{}`. The provider writes nothing to its CRD.",
            o.configuration.package,
            o.configuration.apply_to_healthy,
            o.configuration.objects.join(", "),
            o.configuration.dependency.0,
            o.configuration.dependency.1,
            o.configuration.dependency_healthy,
            o.configuration.dependency_pods.len(),
            o.configuration.conversion,
        ),
        String::new(),
        "## Upgrade under churn".to_string(),
        String::new(),
        format!(
            "While {} NopResources kept changing ({} changes, one every 250 ms), `spec.package` went between \
             `v1` (provider-nop) and `v2` (its second build, reporting `<version>+next`). Ours: the old \
             Deployment runs until the new one is Available and one of its Pods leads. Upstream's order, for \
             comparison: the old revision is deactivated and its Deployment deleted before the new one runs \
             (done here by hand, with `revisionActivationPolicy: Manual`). The time with no leader is the \
             longest stretch in one upgrade from a term's end (its release or expiry) to the next term's \
             start, from the apiserver's audit log.",
            super::NOPS,
            o.changes
        ),
        String::new(),
        "| Order | Upgrades | No leader p50 | No leader p99 | Upgrade took (p50) |".to_string(),
        "|---|---:|---:|---:|---:|".to_string(),
    ];
    for (name, w) in [
        ("ours", Way::Ours),
        ("upstream's (old Deployment deleted first)", Way::Upstream),
    ] {
        let g = gaps(o, w);
        let secs: Vec<f64> = of(o, w).iter().map(|u| u.seconds).collect();
        out.push(format!(
            "| {name} | {} | {:.0} ms | {:.0} ms | {:.1} s |",
            g.len(),
            quantile(&g, 0.5),
            quantile(&g, 0.99),
            quantile(&secs, 0.5)
        ));
    }
    out.push(String::new());
    out.push("Each upgrade:".to_string());
    out.push(String::new());
    out.push("| Order | Change | No leader | Handovers | Took |".to_string());
    out.push("|---|---|---:|---:|---:|".to_string());
    for u in &o.upgrades {
        out.push(format!(
            "| {:?} | {} | {:.0} ms | {} | {:.1} s |",
            u.way, u.change, u.gap_ms, u.handovers, u.seconds
        ));
    }
    out.push(String::new());
    out.push("## One writer".to_string());
    out.push(String::new());
    let terms = o
        .terms
        .iter()
        .map(|(h, v)| {
            format!(
                "{} ({})",
                if v.is_empty() { "no write" } else { v },
                testenv::workload::holder_pod(h)
            )
        })
        .collect::<Vec<_>>()
        .join(" → ");
    out.push(format!(
        "The audit-log checker (tests/e2e/src/checker.rs) judged **{} writes** of the revisions' ServiceAccounts \
         (all resources but Leases and Events) against their writer's terms: **{} violations**. At the end {} of \
         {} NopResources were Ready and Synced. The version that acted in each term, in order: {terms}.",
        o.writes,
        o.violations.len(),
        o.nops_ready,
        super::NOPS
    ));
    for v in &o.violations {
        out.push(String::new());
        out.push(format!("Violation: {v}"));
    }
    out.push(String::new());
    out.push("## Bad input".to_string());
    out.push(String::new());
    out.push(
        "`spec.package` changed to a package that cannot run, then back to `v1` (an upgrade like any \
         other). Each gave one condition and deleted nothing: the running revision's Deployment stayed \
         and its leader kept the Lease. The other bad inputs (an unreachable registry, zero or two meta \
         objects, a CRD another package controls, an unsatisfiable or cyclic dependency, an unmet \
         Crossplane version) are tested on the control-plane test bed with its registry \
         (`crates/crossplane/tests/packages.rs`)."
            .to_string(),
    );
    out.push(String::new());
    out.push("| Bad input | Condition | Seen after | Leader kept |".to_string());
    out.push("|---|---|---|---|".to_string());
    for b in &o.bad_inputs {
        out.push(format!(
            "| {} (`{}`) | {} | {:.1} s | {} |",
            b.what,
            b.package,
            b.condition.replace('|', "\\|"),
            b.seconds,
            b.leader
        ));
    }
    out.push(String::new());
    out.push(format!(
        "Requests of crossplane-system's ServiceAccounts refused with 403 in the whole run: {}.",
        o.refused.len()
    ));
    for r in &o.refused {
        out.push(format!("- {r}"));
    }
    out.push(String::new());
    out.join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantiles_take_the_nearest_rank() {
        assert_eq!(quantile(&[], 0.5), 0.0);
        assert_eq!(quantile(&[3.0, 1.0, 2.0], 0.5), 2.0);
        assert_eq!(quantile(&[3.0, 1.0, 2.0, 10.0, 4.0], 0.99), 10.0);
    }
}
