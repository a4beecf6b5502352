//! The fault schedule (issue 8): three replicas of provider-nop and three of the core, on a control plane
//! of their own, are hit with faults one after another, round-robin over the leader of the relevant
//! Lease, until enough leadership changes have happened. Then the audit-log [`checker`](crate::checker)
//! must find no write outside its writer's terms that the apiserver admitted, and every write must
//! carry the identity of the pod that sent it; every resource must end Ready, nothing may be
//! duplicated, and no process may have exited except where the schedule stopped it.
//!
//! # Setup
//!
//! - provider-nop replicas reconcile `nop_resources` NopResources (Ready after 1 s, each with a
//!   connection secret), which a background task keeps changing (about ten spec patches a second);
//! - core replicas compose one NopResource (with its own connection secret) for each of `xrs` XRs,
//!   whose `spec.n` the same task keeps changing, and the provider makes those Ready too;
//! - each replica reaches the apiserver through its own loopback [`Relay`](crate::relay::Relay), so one
//!   replica alone can be cut off;
//! - identities are `<nop|core>-<slot>-<generation>`: a restarted replica is a new candidate, as a new
//!   pod of a Deployment is, so every takeover is a change of holder in the Lease.
//!
//! # Faults
//!
//! [`Fault::ALL`], in order, each aimed at the leader of one group (alternating provider-nop and core,
//! so that over two rounds every fault hits both Leases):
//!
//! - [`Fault::Kill`]: SIGKILL the leader, wait for a standby to take over, start a new replica;
//! - [`Fault::Term`]: SIGTERM the leader (it must exit 0, releasing the Lease), then start a new one;
//! - [`Fault::Stop`]: SIGSTOP the leader for longer than the lease, SIGCONT it after a standby took over;
//!   with the server-side fence in force, its relay first delays what it sends by 400 ms and holds it
//!   at the SIGSTOP, so that the requests it had in flight (writes among them) reach the apiserver
//!   after the takeover, while it is still stopped;
//! - [`Fault::ApiserverRestart`]: restart the apiserver (both Leases);
//! - [`Fault::RelayCut`]: cut only the leader's relay for longer than the lease, then restore it;
//! - [`Fault::ClockSkew`]: restart a standby under libfaketime (`FAKETIME=+5m`, the next time `-5m`;
//!   the monotonic clock is left alone), then SIGTERM leaders until the skewed replica leads;
//! - [`Fault::EtcdPause`]: SIGSTOP etcd for longer than the lease (so longer than the renew deadline);
//! - [`Fault::RollingUpdate`]: replace the group's replicas one by one with the other build (standbys
//!   first, the leader last), so that two builds with different version strings run side by side. The
//!   second build is `e2e-<binary>-next`, the same code reporting [`NEXT_VERSION`]; the next rolling
//!   update of the group goes back.
//!
//! Leadership changes are counted from the audit log (a term of a new holder starting) and attributed
//! to the fault during which they happened. The apiserver restart and the etcd pause leave the choice of
//! the next leader to a race (the old leader may win it back), so they need not cause a change.
//!
//! # Identities, and judging writes by their outcome
//!
//! Each slot has a ServiceAccount of its own (`<nop|core>-<slot>`), and each replica process a token of
//! it bound to a placeholder Pod named after its identity, as a pod of a Deployment has. The checker
//! attributes every write to the pod the apiserver authenticated, and fails a write whose user agent
//! lacks that pod's identity. A write outside its writer's terms is judged by the apiserver's answer,
//! with no grace window (see `check`): if it may have taken effect it is a violation.
//!
//! A frozen leader (SIGSTOP) can deliver, after the takeover, a write it sent inside its term: the
//! client-side fence checked it before the freeze. Without the server-side fence only the apiserver's
//! optimistic concurrency can refuse it (409). With [`Config::fence_after`], the schedule installs the
//! server-side fence (`election::admission::FencePolicy`, one per slot's ServiceAccount) part-way
//! through; from then on the Stop fault puts the leader's in-flight requests on the wire late on
//! purpose (see [`Fault::Stop`]), and every late write of a frozen leader must be refused with 403 (or
//! with 409/404, which the apiserver decides before admission). The report lists each with its answer.
//!
//! # Go peers in provider-nop's pool
//!
//! Once the fence is in force, [`GoPeer`]s join provider-nop's pool beside our three replicas, on the
//! same Lease at the same timings: client-go's bare candidate ([`Config::client_go`]) and our
//! NopResource provider in Go on crossplane-runtime and controller-runtime ([`Config::go_provider`]),
//! which does the same NopResource work as ours while it leads. Each is handed the Lease once, frozen
//! with writes in flight while it leads (its late writes must come back refused: neither checks its
//! term before a write, so only the fence stops them), stays in the pool while the faults go on, and
//! leaves before the run settles. Rolling updates roll our builds only; the clock-skew fault never
//! skews a Go process (they are static, `CGO_ENABLED=0`, and read the clock through the vDSO, so
//! libfaketime's `LD_PRELOAD` does not reach them). controller-runtime exits when it loses its Lease
//! (`leader election lost`) where ours steps down: the schedule restarts such a process, as the kubelet
//! would, and counts it in the peer's figures; any other exit is a problem.
//!
//! This module is test machinery: its errors are `anyhow` errors that end up in a test failure or in
//! `cargo xtask chaos`'s exit code.

mod check;
mod config;
mod driver;
mod fault;
mod fence;
mod go_peer;
mod group;
mod inject;
mod leadership;
mod publish;
mod replica;
mod report;
mod settle;
mod workload;
mod world;

use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use testenv::ControlPlane;

pub use config::{Binaries, Config, Sabotage, Timings};
pub use fault::Fault;
pub use go_peer::GoPeer;
pub use group::Group;
pub use report::{
    AuditFigures, Census, Control, Expected, FaultRecord, FreezeRecord, GoPeerFigures, LateWrite,
    ReplicaRecord, Report,
};

use world::World;

/// The version string of the second build (`e2e-provider-nop-next`, `e2e-crossplane-next`).
pub const NEXT_VERSION: &str = concat!(env!("CARGO_PKG_VERSION"), "+next");
/// The version string of the first build, the package's.
pub const CURRENT_VERSION: &str = env!("CARGO_PKG_VERSION");
/// libfaketime, from the Debian/Ubuntu package `libfaketime`.
pub const LIBFAKETIME: &str = "/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1";
/// The offset applied to a skewed replica's wall clock, forward and backward in turn.
pub const CLOCK_OFFSET: &str = "5m";

const REPLICAS: usize = 3;
const XR_GROUP: &str = "faults.example.org";
const POLL: Duration = Duration::from_millis(100);
/// How long a new leader may take after a fault. Generous: after an apiserver restart on a loaded
/// 2-core machine, the apiserver itself can take most of a minute to serve again (seen once in CI's
/// rehearsal); the takeover figures come from the audit log, not from this bound.
const TAKEOVER_TIMEOUT: Duration = Duration::from_secs(90);

/// Runs the schedule on `cp`, which it disrupts (use a control plane of its own).
pub async fn run(cp: &mut ControlPlane, config: &Config) -> anyhow::Result<Report> {
    preflight(config)?;
    std::fs::create_dir_all(&config.log_dir)
        .with_context(|| format!("creating {}", config.log_dir.display()))?;
    let started = Instant::now();
    let go_provider = if config.go_provider {
        let built = tokio::task::spawn_blocking(|| {
            testenv::peers::ensure_provider_nop(&testenv::cargo::target_dir(), |line| {
                eprintln!("[faults] {line}");
            })
        })
        .await
        .context("building provider-nop-go")?
        .context("building provider-nop-go (the Go provider of Config::go_provider)")?;
        Some(built)
    } else {
        None
    };
    let mut world = World::new(cp, config, go_provider).await?;
    let result = world.run(started).await;
    world.stop_all();
    let mut report = result.with_context(|| {
        format!(
            "the fault schedule failed after {:.0}s; replica logs in {}",
            started.elapsed().as_secs_f64(),
            config.log_dir.display()
        )
    })?;
    report.replicas = world.history.clone();
    Ok(report)
}

fn preflight(config: &Config) -> anyhow::Result<()> {
    if !Path::new(LIBFAKETIME).exists() {
        bail!(
            "libfaketime is missing ({LIBFAKETIME}): the clock-skew fault needs it. Install the package \
             `libfaketime` (apt-get install libfaketime; .ci/run does)."
        );
    }
    let b = &config.binaries;
    for p in [&b.nop, &b.nop_next, &b.core, &b.core_next] {
        if !p.exists() {
            bail!(
                "{} is missing: build it with `cargo build -p e2e --bins`",
                p.display()
            );
        }
    }
    Ok(())
}
