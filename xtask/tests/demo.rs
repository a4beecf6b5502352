//! Issue 7, must-show 5 and 2: `cargo xtask demo --ci` runs end to end inside the test suite and
//! reports the handover it measured; and the generated RBAC is complete: the core, the RBAC manager,
//! provider-nop and provider-kubernetes, each run under its own generated ServiceAccount through the
//! demo's whole scenario (compose, hand over, change, delete), get no 403 from the apiserver.
//!
//! The demo runs the controllers unscoped (as the Deployments do), so it gets a private control plane:
//! on the shared one it would reconcile the other tests' XRDs and NopResources.

use std::collections::BTreeMap;
use std::time::Instant;

use anyhow::{Context, Result, ensure};

const DEPLOYMENTS: [&str; 4] = [
    "crossplane",
    "crossplane-rbac-manager",
    "provider-nop",
    "provider-kubernetes",
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn demo_runs_end_to_end_and_generated_rbac_is_complete() -> Result<()> {
    let cp = testenv::ControlPlane::private().await?;
    let start = Instant::now();
    let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_xtask"))
        .args(["demo", "--ci", "--local"])
        .env(testenv::ENV_TESTBED, &cp.cluster().dir)
        .env_remove("KUBECONFIG")
        .kill_on_drop(true)
        .output()
        .await
        .context("running cargo xtask demo --ci")?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    eprintln!(
        "{stdout}\n--- stderr ---\n{stderr}\n(demo took {:.1}s)",
        start.elapsed().as_secs_f64()
    );
    ensure!(out.status.success(), "the demo failed: {}", out.status);

    // The demo's own report: the measured handovers, and no denied request.
    let result: BTreeMap<&str, &str> = stdout
        .lines()
        .find_map(|l| l.strip_prefix("RESULT "))
        .context("no RESULT line")?
        .split_whitespace()
        .filter_map(|kv| kv.split_once('='))
        .collect();
    let number = |k: &str| -> Result<f64> {
        result
            .get(k)
            .with_context(|| format!("RESULT lacks {k}"))?
            .parse::<f64>()
            .with_context(|| format!("RESULT {k} is not a number"))
    };
    let graceful = number("graceful_handover_ms")?;
    let crash = number("crash_failover_ms")?;
    ensure!(
        graceful < 3000.0,
        "a released Lease is taken over at once, not after {graceful} ms"
    );
    ensure!(
        (1000.0..=18_000.0).contains(&crash),
        "a crashed leader's Lease is taken over about a lease duration (6 s) later, not after {crash} ms"
    );
    number("propagated_ms")?;
    ensure!(number("denied")? == 0.0, "the demo reports denied requests");
    ensure!(
        stdout.contains("graceful (SIGTERM) handover of provider-nop")
            && stdout.contains("crash (SIGKILL) handover of provider-nop"),
        "the handovers are not reported"
    );

    // The audit log, read here independently: every ServiceAccount did its work, and none was denied.
    let events = cp.cluster().audit().read()?.events;
    let mut failures = Vec::new();
    for sa in DEPLOYMENTS {
        let user = format!("system:serviceaccount:crossplane-system:{sa}");
        let mine: Vec<_> = events.iter().filter(|e| e.user == user).collect();
        let writes = mine.iter().filter(|e| e.is_write() && e.code < 300).count();
        let denied: Vec<String> = mine
            .iter()
            .filter(|e| e.code == 403)
            .map(|e| {
                format!(
                    "{} {}/{} {}.{} ns={:?} name={:?}",
                    e.verb, e.resource, e.subresource, e.api_group, e.user_agent, e.namespace, e.name
                )
            })
            .collect();
        eprintln!(
            "{sa}: {} requests, {writes} successful writes, {} denied",
            mine.len(),
            denied.len()
        );
        if writes == 0 {
            failures.push(format!("{sa} made no successful write"));
        }
        if !denied.is_empty() {
            failures.push(format!("{sa} was denied:\n  {}", denied.join("\n  ")));
        }
    }
    // Both provider-nop replicas led at some point: the handovers happened.
    for identity in ["provider-nop-a", "provider-nop-b"] {
        let led = events.iter().any(|e| {
            e.resource == "leases"
                && e.name == "crossplane-leader-election-provider-nop"
                && e.is_write()
                && e.code < 300
                && e.lock_holder().as_deref() == Some(identity)
        });
        if !led {
            failures.push(format!(
                "{identity} never wrote the provider-nop Lease as its holder"
            ));
        }
    }
    ensure!(failures.is_empty(), "{}", failures.join("\n"));
    Ok(())
}
