//! Issue 23 on a real node: `cargo xtask package-bench`'s scenario with one upgrade each way
//! (`e2e::packages`). The core and the RBAC manager run as Pods pulled from the test bed's OCI registry;
//! an upstream-shaped `Provider` naming provider-nop's package there becomes Installed and Healthy with
//! 2 Ready Pods and one leader, and its NopResources become Ready (the RBAC manager granted the revision
//! its kinds). function-go's `Function` package (our function on the official Go SDK) becomes Healthy with
//! an Active revision, a `Configuration` depending on provider-kubernetes's package installs both, and an
//! XR composes through the function over the cluster's DNS and mutual TLS. Then, while NopResources change, `spec.package` goes v1 → v2 our way and v1 → v2 in
//! upstream's order, and the audit-log checker must find writes, no violation, one version per term, a
//! gap in upstream's order (the measure's positive control) and none longer than that our way.
//!
//! If the node cannot start, the test fails with the reason; it never skips.

use anyhow::{Context, Result};

#[test]
fn a_provider_installs_from_the_registry_and_upgrades_with_one_writer() -> Result<()> {
    testenv::Cluster::shared().context("the package test needs `cargo xtask test`")?;
    let outcome = e2e::packages::bench::run_on_node("package-test", 1)?;
    eprintln!(
        "[packages] Healthy {:.1}s after apply; Function Healthy {:.1}s, XR Ready {:.1}s; Configuration's \
         dependency Healthy {:.1}s; {} writes checked, {} violations; gaps (ms): {}",
        outcome.apply_to_healthy,
        outcome.function.apply_to_healthy,
        outcome.function.xr_ready,
        outcome.configuration.dependency_healthy,
        outcome.writes,
        outcome.violations.len(),
        outcome
            .upgrades
            .iter()
            .map(|u| format!("{:?} {} {:.0}", u.way, u.change, u.gap_ms))
            .collect::<Vec<_>>()
            .join(", ")
    );
    outcome.check()
}
