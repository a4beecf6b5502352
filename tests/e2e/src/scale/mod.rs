//! `cargo xtask bench --scale`: how providers grow with their resources, ours against the
//! crossplane-runtime peer in the same run, written to `docs/scale.md` and `docs/scale.json`.
//!
//! For each size (1 000 and 10 000 NopResources by default), each provider runs as two replicas (a
//! leader and a standby on Lease `crossplane-leader-election-provider-nop`) on a control plane of its
//! own, so that neither sees the other's objects or audit log: ours, providers/provider-nop (release
//! build), and tests/peers/provider-nop-go, our NopResource provider in Go on crossplane-runtime's managed
//! reconciler and controller-runtime (built as upstream releases). Both get the same flags: the same
//! `--max-reconcile-rate` (each takes it as its global reconcile rate and its number of workers) and a
//! long `--poll`. The NopResources are Ready at once (`conditionAfter: 0s`), so the run measures the
//! provider, not its cloud. Ours always goes first, then the peer, one at a time, so they never share
//! the CPU.
//!
//! Per run: the time from the first create until all are Ready (counted from a watch), Ready resources
//! and reconciles per second (the leader's `controller_runtime_reconcile_total`), CPU seconds and peak
//! RSS (`VmHWM`) of the leader and the standby over that window, and the replicas' requests to the
//! apiserver per resource by verb from the audit log. What bounds a run is named from those figures: the
//! rate limit when reconciles per second reach it, the CPU when the leader kept a core busy, else the
//! apiserver.
//!
//! Then [`handover`]: each provider's two replicas under a steady churn of changes, its leader stopped
//! [`HANDOVERS`] times gracefully and then by a crash, timed by the audit log until the other replica
//! holds the Lease and until its first reconcile that wrote (each side at its own default timings).

pub mod handover;
mod handover_report;
pub mod provider;
mod report;

use std::path::Path;

use anyhow::Context;

use provider::{Flags, Imp};
use release::{image, target_dir};

/// The sizes when none are given.
pub const SIZES: &[usize] = &[1_000, 10_000];

/// Graceful and crash handovers per provider.
pub const HANDOVERS: (usize, usize) = (5, 2);

/// The flags both providers get.
pub const FLAGS: Flags = Flags {
    max_reconcile_rate: 100,
    poll_seconds: 3600,
};

/// Runs the scale benchmark at `sizes` and writes docs/scale.md and docs/scale.json.
pub fn run(sizes: &[usize]) -> anyhow::Result<i32> {
    if sizes.is_empty() || sizes.contains(&0) {
        eprintln!("xtask: every --size must be at least 1");
        return Ok(2);
    }
    let command = if sizes == SIZES {
        "cargo xtask bench --scale".to_owned()
    } else {
        format!(
            "cargo xtask bench --scale {}",
            sizes
                .iter()
                .map(|s| format!("--size {s}"))
                .collect::<Vec<_>>()
                .join(" ")
        )
    };
    let provenance = release::provenance::for_artifact("scale.json", &command)?;
    let harness = release::harness()?;
    let nop = image::BINARIES
        .iter()
        .find(|b| b.name == "provider-nop")
        .context("provider-nop is not among the images' binaries")?;
    let ours = image::cargo_build(&[nop], true)?.join(nop.name);
    let peer = testenv::peers::ensure_provider_nop(&target_dir(), |line| eprintln!("[peers] {line}"))
        .context("building provider-nop-go (Go, crossplane-runtime)")?;
    let rt = release::runtime()?;
    let mut runs = Vec::new();
    for &size in sizes {
        for (imp, binary) in [(Imp::Rust, &ours), (Imp::Go, &peer)] {
            let dir = target_dir().join("testbed").join("scale");
            eprintln!("[scale] {} with {size} NopResources", imp.label());
            runs.push(rt.block_on(provider::run(imp, binary, &harness, &dir, size, FLAGS))?);
        }
    }
    let mut handovers = Vec::new();
    for (imp, binary) in [(Imp::Rust, &ours), (Imp::Go, &peer)] {
        let dir = target_dir().join("testbed").join("scale");
        eprintln!("[scale] {}: handovers under load", imp.label());
        handovers.push(rt.block_on(handover::run(imp, binary, &harness, &dir, FLAGS, HANDOVERS))?);
    }
    let docs = testenv::harness::repo_root().join("docs");
    write(&docs, &runs, &handovers, &provenance)?;
    Ok(0)
}

fn write(
    docs: &Path,
    runs: &[provider::Run],
    handovers: &[handover::Handovers],
    provenance: &serde_json::Value,
) -> anyhow::Result<()> {
    let md = report::markdown(runs, FLAGS, provenance) + "\n" + &handover_report::markdown(handovers);
    let path = docs.join("scale.md");
    std::fs::write(&path, md).with_context(|| format!("writing {}", path.display()))?;
    let mut json = report::json(runs, FLAGS, provenance);
    json["handovers"] = handover_report::json(handovers);
    let path = docs.join("scale.json");
    std::fs::write(&path, serde_json::to_string_pretty(&json)? + "\n")
        .with_context(|| format!("writing {}", path.display()))?;
    eprintln!("[scale] wrote {} and docs/scale.md", path.display());
    Ok(())
}
