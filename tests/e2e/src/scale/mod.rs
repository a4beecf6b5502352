//! `cargo xtask bench --scale`: how providers grow with their resources and cores with their XRDs, ours
//! against upstream's (the crossplane-runtime peer, upstream's core) in the same run, written to
//! `docs/scale.md` and `docs/scale.json`.
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
//! The cores (`--cores-only` runs them alone): ours (`crossplane core start`, release build) and
//! upstream's (v2.3.4, built by [`testenv::peers::ensure_built`]), two replicas each at their defaults
//! with webhooks off, on a control plane of their own per XRD count (10, 100 and 500 by default, or each
//! `--xrds`), ours first. Per run: the leader's and the standby's idle resident set once the core has
//! settled with its own CRDs (each core's `core init` installs them), then the XRDs created at once and
//! the time until a watch has seen all Established, with the leader's CPU seconds, resident set now and
//! at its peak, and the apiserver's CPU seconds over that window ([`core`], [`load`]). Then, the same way,
//! 100 and 1 000 XRs (or each `--xrs`), each composing 3 ConfigMaps through one function step, until all are
//! Ready: the Python SDK function served on loopback with mutual TLS, dialled by each core at a
//! FunctionRevision's `status.endpoint` ([`function`]).
//!
//! After the providers' runs, [`handover`]: each provider's two replicas under a steady churn of changes, its leader stopped
//! [`HANDOVERS`] times gracefully and then by a crash, timed by the audit log until the other replica
//! holds the Lease and until its first reconcile that wrote (each side at its own default timings).

pub mod core;
mod core_report;
mod function;
pub mod handover;
mod handover_report;
pub mod load;
mod procstat;
pub mod provider;
mod report;
mod tally;
mod upstream;
mod xrds;
mod xrs;

use std::path::{Path, PathBuf};

use anyhow::Context;

use provider::{Flags, Imp};
use release::{image, target_dir};

/// The sizes when none are given.
pub const SIZES: &[usize] = &[1_000, 10_000];

/// The XRD counts when none are given.
pub const XRDS: &[usize] = &[10, 100, 500];

/// The XR counts when none are given.
pub const XRS: &[usize] = &[100, 1_000];

/// What to measure.
#[derive(Clone, Debug)]
pub struct Options {
    /// Numbers of NopResources for the providers (empty: [`SIZES`]).
    pub sizes: Vec<usize>,
    /// Numbers of XRDs for the cores (empty: [`XRDS`]).
    pub xrds: Vec<usize>,
    /// Numbers of XRs for the cores (empty: [`XRS`]).
    pub xrs: Vec<usize>,
    /// The cores alone, no providers.
    pub cores_only: bool,
    /// The providers alone, no cores.
    pub providers_only: bool,
}

impl Options {
    fn sizes(&self) -> &[usize] {
        if self.cores_only {
            &[]
        } else if self.sizes.is_empty() {
            SIZES
        } else {
            &self.sizes
        }
    }

    fn xrds(&self) -> &[usize] {
        if self.providers_only {
            &[]
        } else if self.xrds.is_empty() {
            XRDS
        } else {
            &self.xrds
        }
    }

    fn xrs(&self) -> &[usize] {
        if self.providers_only {
            &[]
        } else if self.xrs.is_empty() {
            XRS
        } else {
            &self.xrs
        }
    }

    /// The cores' runs: each count of XRDs, then of XRs.
    fn core_work(&self) -> Vec<(load::Work, usize)> {
        let xrds = self.xrds().iter().map(|&n| (load::Work::Xrds, n));
        xrds.chain(self.xrs().iter().map(|&n| (load::Work::Xrs, n)))
            .collect()
    }

    /// The command line that measures this.
    fn command(&self) -> String {
        let mut command = "cargo xtask bench --scale".to_owned();
        if self.cores_only {
            command.push_str(" --cores-only");
        }
        if self.providers_only {
            command.push_str(" --providers-only");
        }
        for s in &self.sizes {
            command.push_str(&format!(" --size {s}"));
        }
        for n in &self.xrds {
            command.push_str(&format!(" --xrds {n}"));
        }
        for n in &self.xrs {
            command.push_str(&format!(" --xrs {n}"));
        }
        command
    }
}

/// Graceful and crash handovers per provider.
pub const HANDOVERS: (usize, usize) = (5, 2);

/// The flags both providers get.
pub const FLAGS: Flags = Flags {
    max_reconcile_rate: 100,
    poll_seconds: 3600,
};

/// Runs the scale benchmark as `options` say and writes docs/scale.md and docs/scale.json.
pub fn run(options: &Options) -> anyhow::Result<i32> {
    if options.sizes().contains(&0) || options.core_work().iter().any(|(_, n)| *n == 0) {
        eprintln!("xtask: every --size, --xrds and --xrs must be at least 1");
        return Ok(2);
    }
    let provenance = release::provenance::for_artifact("scale.json", &options.command())?;
    let harness = release::harness()?;
    let rt = release::runtime()?;
    let dir = target_dir().join("testbed").join("scale");
    let mut runs = Vec::new();
    let mut handovers = Vec::new();
    if !options.sizes().is_empty() {
        let (ours, peer) = provider_binaries()?;
        for &size in options.sizes() {
            for (imp, binary) in [(Imp::Rust, &ours), (Imp::Go, &peer)] {
                eprintln!("[scale] {} with {size} NopResources", imp.label());
                runs.push(rt.block_on(provider::run(imp, binary, &harness, &dir, size, FLAGS))?);
            }
        }
        for (imp, binary) in [(Imp::Rust, &ours), (Imp::Go, &peer)] {
            eprintln!("[scale] {}: handovers under load", imp.label());
            handovers.push(rt.block_on(handover::run(imp, binary, &harness, &dir, FLAGS, HANDOVERS))?);
        }
    }
    let mut cores = Vec::new();
    let work = options.core_work();
    if !work.is_empty() {
        let bins = core_binaries()?;
        for (w, n) in work {
            for c in [core::Core::Rust, core::Core::Go] {
                eprintln!("[scale] {} with {n} {}", c.label(), w.noun());
                cores.push(rt.block_on(core::run(c, &bins, &harness, &dir, w, n))?);
            }
        }
    }
    let docs = testenv::harness::repo_root().join("docs");
    write(&docs, &runs, &cores, &handovers, &provenance)?;
    Ok(0)
}

/// provider-nop (release build) and provider-nop-go.
fn provider_binaries() -> anyhow::Result<(PathBuf, PathBuf)> {
    let nop = image::BINARIES
        .iter()
        .find(|b| b.name == "provider-nop")
        .context("provider-nop is not among the images' binaries")?;
    let ours = image::cargo_build(&[nop], true)?.join(nop.name);
    let peer = testenv::peers::ensure_provider_nop(&target_dir(), |line| eprintln!("[peers] {line}"))
        .context("building provider-nop-go (Go, crossplane-runtime)")?;
    Ok((ours, peer))
}

/// Our core (release build) and upstream's.
fn core_binaries() -> anyhow::Result<core::Binaries> {
    let bin = image::BINARIES
        .iter()
        .find(|b| b.name == "crossplane")
        .context("crossplane is not among the images' binaries")?;
    let ours = image::cargo_build(&[bin], true)?.join(bin.name);
    let peers = testenv::peers::ensure_built(&target_dir(), |line| eprintln!("[peers] {line}"))
        .context("building upstream's core (Go)")?;
    Ok(core::Binaries { ours, peers })
}

fn write(
    docs: &Path,
    runs: &[provider::Run],
    cores: &[core::Run],
    handovers: &[handover::Handovers],
    provenance: &serde_json::Value,
) -> anyhow::Result<()> {
    let mut md = report::markdown(runs, cores, FLAGS, provenance);
    if !handovers.is_empty() {
        md = md + "\n" + &handover_report::markdown(handovers);
    }
    let path = docs.join("scale.md");
    std::fs::write(&path, md).with_context(|| format!("writing {}", path.display()))?;
    let mut json = report::json(runs, cores, FLAGS, provenance);
    json["handovers"] = handover_report::json(handovers);
    let path = docs.join("scale.json");
    std::fs::write(&path, serde_json::to_string_pretty(&json)? + "\n")
        .with_context(|| format!("writing {}", path.display()))?;
    eprintln!("[scale] wrote {} and docs/scale.md", path.display());
    Ok(())
}

/// Runs `work` on a fresh control plane in `dir` (whatever was there is removed first), then stops the
/// control plane whatever `work` returned: one per run, so that no run sees another's objects or audit
/// log.
async fn on_fresh_control_plane<T>(
    dir: &Path,
    harness: &Path,
    work: impl AsyncFnOnce(&mut testenv::ControlPlane) -> anyhow::Result<T>,
) -> anyhow::Result<T> {
    if dir.exists() {
        std::fs::remove_dir_all(dir).with_context(|| format!("removing {}", dir.display()))?;
    }
    let mut cp = testenv::ControlPlane::start(dir, harness, false)
        .await
        .context("starting a control plane")?;
    let result = work(&mut cp).await;
    cp.stop().context("stopping the control plane")?;
    result
}

/// How many requests create a run's objects at once.
const CREATORS: usize = 16;

/// Creates objects `0..n` through `api`, [`CREATORS`] requests at a time, object `i` being `object(i)`;
/// returns when the last create returned. `what` names an object in errors ("XRD", "XR").
async fn create_all(
    api: &kube::Api<kube::api::DynamicObject>,
    n: usize,
    what: &'static str,
    object: fn(usize) -> anyhow::Result<kube::api::DynamicObject>,
) -> anyhow::Result<()> {
    let mut set = tokio::task::JoinSet::new();
    let per = n.div_ceil(CREATORS);
    for w in 0..CREATORS {
        let api = api.clone();
        set.spawn(async move {
            for i in (w * per)..((w + 1) * per).min(n) {
                api.create(&kube::api::PostParams::default(), &object(i)?)
                    .await
                    .with_context(|| format!("creating {what} number {i}"))?;
            }
            anyhow::Ok(())
        });
    }
    while let Some(r) = set.join_next().await {
        r??;
    }
    Ok(())
}
