//! `cargo xtask demo`: the whole system, live, on this machine.
//!
//! When this machine can run a node (root, and the node's Debian packages), the demo installs the core
//! from deploy/ and provider-nop and function-go by package, as Pods on a real node ([`pods`]). Otherwise, or with `--local` (and always with `--keep` and `--down`),
//! it says why in one line and runs the local-process demo below.
//!
//! 1. Builds the binaries (debug; cargo's progress is shown) as `cargo xtask image --debug` does, reusing
//!    the libraries `cargo xtask` itself was built with.
//! 2. Uses the control plane named by `CROSSPLANE_RS_TESTBED`, or else the long-lived one of
//!    `cargo xtask control-plane up`, which it starts if needed (and stops at the end if it started it).
//! 3. Installs the CRDs and, for each binary, the ServiceAccount, Role, RoleBinding, ClusterRole(s) and
//!    ClusterRoleBinding that `cargo xtask generate` writes under deploy/ (not the Deployments), in
//!    `crossplane-system`, and waits until the core's aggregated ClusterRole is filled in.
//! 4. Starts two replicas each of the core, the RBAC manager, provider-nop and provider-kubernetes as local
//!    processes. Each authenticates with a token of *its own* binary's ServiceAccount, so it can do exactly
//!    what the generated RBAC allows.
//! 5. Applies `examples/demo/` (an XRD, a Composition of two NopResources and a provider-kubernetes Object,
//!    a ProviderConfig, an XR) and shows a live view: who holds each Lease, the resources' Synced and
//!    Ready, and per ServiceAccount the requests the apiserver's audit log saw and how many were denied.
//! 6. Hands provider-nop's Lease over twice and measures it, from the signal until the demo's watch sees
//!    the new holder: SIGTERM to the leader (it releases the Lease), then SIGKILL to the new leader (a
//!    crash: the standby takes over when the lease expires). Then it changes the XR and measures how long
//!    until the new leader has reconciled the change.
//! 7. Ctrl-C deletes the XR, Composition, XRD and ProviderConfig, stops the processes and deletes the
//!    namespace and the cluster-scoped RBAC. `--keep` leaves everything running and prints how to use
//!    kubectl on it; `--down` cleans a kept demo up. `--ci` needs no TTY: it runs once through, including the
//!    deletion, fails on any 403 of the four ServiceAccounts, and prints one `RESULT` line.
//!
//! The replicas run with the demo's lease timings, 6 s/4 s/1 s, so that the crash failover takes seconds
//! rather than the minute of the Deployments' defaults.

mod api;
mod audit;
mod cleanup;
mod handover;
mod install;
mod packages;
mod pods;
mod replica;
mod report;
mod session;
mod state;
mod view;

use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::Result;
use testenv::Cluster;

use crate::control_plane;
use release::generate::{self, Deployed};
use release::{image, runtime};

use session::Demo;
use state::{down, state_path, testbed_dir};

/// How the demo runs.
#[derive(Debug, Clone, Copy, Default)]
pub struct Options {
    /// Leave everything running at the end.
    pub keep: bool,
    /// Run once through without a TTY, and exit non-zero on any failure.
    pub ci: bool,
    /// Clean up a demo left running by `--keep`.
    pub down: bool,
    /// Run the replicas as local processes even where a node could start.
    pub local: bool,
}

const NS: &str = generate::NAMESPACE;
/// The field manager of everything the demo applies.
const MANAGER: &str = "crossplane-rs-demo";
/// The deployments the demo runs, two replicas each.
const DEPLOYMENTS: [&str; 4] = [
    "crossplane",
    "crossplane-rbac-manager",
    "provider-nop",
    "provider-kubernetes",
];
/// The deployment whose leader is killed.
const KILLED: &str = "provider-nop";
/// The demo's lease timings.
const LEASE_DURATION: Duration = Duration::from_secs(6);
const TIMINGS: [(&str, &str); 3] = [
    ("--lease-duration", "6s"),
    ("--renew-deadline", "4s"),
    ("--retry-period", "1s"),
];
/// The XR of examples/demo/xr.yaml.
const XR: &str = "demo";
/// The ServiceAccount whose kubeconfig provider-kubernetes applies the Objects with.
const WORKLOADS: &str = "demo-workloads";
const LABEL_COMPOSITE: &str = "crossplane.io/composite";
const ANNOTATION_RESOURCE_NAME: &str = "crossplane.io/composition-resource-name";
/// The kinds of the generated bases that the demo applies (not the Deployment or the PDB).
const RBAC_KINDS: [&str; 5] = [
    "ServiceAccount",
    "Role",
    "RoleBinding",
    "ClusterRole",
    "ClusterRoleBinding",
];

/// `cargo xtask demo`: on a node, setting it up first (the node's system packages, as `cargo xtask test`
/// installs them), unless this machine truly cannot run one (not root, no cgroups): then it says why in
/// one line and runs local processes. `images` holds the node's image archives (built when `None`).
/// Returns the exit code.
pub fn run(options: Options, images: Option<&std::path::Path>) -> Result<i32> {
    if options.local || options.keep || options.down {
        return local(options);
    }
    if let Some(why) = pods::impossible() {
        eprintln!("[demo] no node: {why}; running the replicas as local processes instead (--local)");
        return local(options);
    }
    eprintln!(
        "[demo] setting up the node's system packages (containerd, runc, CNI plugins, iptables, kubectl)"
    );
    release::prereq::ensure_node()?;
    if let Some(why) = pods::unavailable() {
        anyhow::bail!("the node cannot start: {why}");
    }
    match pods::run(options, images)? {
        pods::Outcome::Ran(code) => Ok(code),
        pods::Outcome::NoNode(why) => {
            eprintln!(
                "[demo] the node did not start: {why}. Its logs are under {}; `cargo xtask demo --local` \
                 runs the replicas as local processes instead",
                pods::dir().display()
            );
            Ok(1)
        }
    }
}

/// The demo with local processes.
fn local(options: Options) -> Result<i32> {
    let testbed = testbed_dir();
    if options.down {
        return down(&testbed).map(|()| 0);
    }
    let wall = Instant::now();
    if state_path(&testbed).exists() {
        eprintln!("[demo] a previous demo is still up (--keep, or it was killed); cleaning it up first");
        down(&testbed)?;
    }
    let images: Vec<&image::Binary> = image::BINARIES
        .iter()
        .filter(|i| demo_deployments().iter().any(|b| b.image == i.name))
        .collect();
    let bin_dir = image::cargo_build(&images, false)?;
    let (cluster, started_control_plane) = match std::env::var_os(testenv::ENV_TESTBED) {
        Some(dir) => {
            eprintln!(
                "[demo] using the control plane in {} ({})",
                PathBuf::from(dir).display(),
                testenv::ENV_TESTBED
            );
            (Cluster::shared()?, false)
        }
        None => control_plane::up()?,
    };
    let rt = runtime()?;
    let outcome = rt.block_on(async {
        let mut demo = Demo::new(cluster, bin_dir, options, started_control_plane, wall).await?;
        let result = tokio::select! {
            r = demo.scenario() => Some(r),
            _ = interrupted() => None,
        };
        demo.finish(result).await
    });
    drop(rt);
    let code = outcome?;
    if started_control_plane && !options.keep {
        eprintln!("[demo] stopping the control plane the demo started");
        control_plane::down()?;
    }
    eprintln!("[demo] done in {:.1}s", wall.elapsed().as_secs_f64());
    Ok(code)
}

/// Ctrl-C, SIGTERM or SIGHUP (a closed terminal).
async fn interrupted() {
    use tokio::signal::unix::{SignalKind, signal};
    let (Ok(mut term), Ok(mut hup)) = (signal(SignalKind::terminate()), signal(SignalKind::hangup())) else {
        let _ = tokio::signal::ctrl_c().await;
        return;
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = term.recv() => {}
        _ = hup.recv() => {}
    }
}

fn demo_deployments() -> Vec<Deployed> {
    generate::deployed()
        .into_iter()
        .filter(|b| DEPLOYMENTS.contains(&b.name))
        .collect()
}
