//! What to run: the builds, the Lease timings, and the size and limits of a run.

use std::path::{Path, PathBuf};
use std::time::Duration;

use super::{GoPeer, Group};

/// The four builds the schedule runs.
#[derive(Debug, Clone)]
pub struct Binaries {
    /// provider-nop reporting [`CURRENT_VERSION`](super::CURRENT_VERSION).
    pub nop: PathBuf,
    /// provider-nop reporting [`NEXT_VERSION`](super::NEXT_VERSION).
    pub nop_next: PathBuf,
    /// The core reporting [`CURRENT_VERSION`](super::CURRENT_VERSION).
    pub core: PathBuf,
    /// The core reporting [`NEXT_VERSION`](super::NEXT_VERSION).
    pub core_next: PathBuf,
}

impl Binaries {
    /// The builds of this package's `src/bin` in a Cargo profile directory such as `target/debug`.
    pub fn in_dir(dir: &Path) -> Binaries {
        Binaries {
            nop: dir.join("e2e-provider-nop"),
            nop_next: dir.join("e2e-provider-nop-next"),
            core: dir.join("e2e-crossplane"),
            core_next: dir.join("e2e-crossplane-next"),
        }
    }

    pub(super) fn get(&self, group: Group, next: bool) -> &Path {
        match (group, next) {
            (Group::Nop, false) => &self.nop,
            (Group::Nop, true) => &self.nop_next,
            (Group::Core, false) => &self.core,
            (Group::Core, true) => &self.core_next,
        }
    }
}

/// Lease timings of every replica.
#[derive(Debug, Clone, Copy)]
pub struct Timings {
    /// `--lease-duration`.
    pub lease: Duration,
    /// `--renew-deadline`.
    pub renew: Duration,
    /// `--retry-period`.
    pub retry: Duration,
}

impl Timings {
    /// 4 s / 3 s / 1 s: short, so that faults are quick, with the least margin the manager accepts.
    pub const FAST: Timings = Timings {
        lease: Duration::from_secs(4),
        renew: Duration::from_secs(3),
        retry: Duration::from_secs(1),
    };
}

/// What to run.
#[derive(Debug, Clone)]
pub struct Config {
    /// The builds.
    pub binaries: Binaries,
    /// Stand-alone NopResources.
    pub nop_resources: usize,
    /// XRs, each composing one NopResource.
    pub xrs: usize,
    /// Stop injecting faults once this many leadership changes were observed.
    pub min_changes: usize,
    /// Install the server-side fence once this many leadership changes were observed (`Some(0)`:
    /// before the first fault); `None`: never. Before it, self-fencing alone must hold; after it, every
    /// late write of a frozen leader must be refused.
    pub fence_after: Option<usize>,
    /// Add client-go's candidate (`harness lease-candidate` with a work loop) to provider-nop's pool
    /// while the server-side fence is in force: it contends for the same Lease, writes a ConfigMap
    /// while it leads, and is hit by the faults like any replica. It leaves before the run settles.
    /// client-go checks nothing before a write, so it joins only under the fence (needs
    /// [`Config::fence_after`]).
    pub client_go: bool,
    /// Add the Go provider (provider-nop-go: crossplane-runtime's managed reconciler, controller-runtime's
    /// leader election at [`Config::timings`]) to provider-nop's pool while the server-side fence is in
    /// force: it contends for the same Lease, reconciles the NopResources while it leads, and is hit by
    /// the faults like any replica. It leaves before the run settles. controller-runtime checks nothing
    /// before a write either, so it joins only under the fence (needs [`Config::fence_after`]). The
    /// schedule builds it (cached with the other Go peers, `testenv::peers`).
    pub go_provider: bool,
    /// Give up (a failure) if the faults take longer than this.
    pub time_limit: Duration,
    /// Lease timings.
    pub timings: Timings,
    /// Where replica logs and kubeconfigs go.
    pub log_dir: PathBuf,
    /// Print a line per fault on stderr as it happens.
    pub verbose: bool,
    /// Break one thing on purpose, to see the verdict's positive control for it fail; `None` in every
    /// real run.
    pub sabotage: Option<Sabotage>,
}

/// A part of the schedule broken on purpose (`cargo xtask chaos --sabotage`): each one must make
/// [`Report::verdict`](super::Report::verdict) fail, naming the control it defeats.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sabotage {
    /// The relays drop what a freeze held instead of delivering it late: no frozen leader's write
    /// reaches the apiserver, so no late write is seen, refused or admitted.
    HoldDeliversNothing,
    /// The server-side fence is never installed, although [`Config::fence_after`] asks for it.
    NoFence,
    /// client-go's candidate never joins, although [`Config::client_go`] asks for it.
    NoClientGo,
    /// The Go provider never joins, although [`Config::go_provider`] asks for it.
    NoGoProvider,
}

impl Sabotage {
    /// Every sabotage, for `--sabotage`'s list.
    pub const ALL: [Sabotage; 4] = [
        Sabotage::HoldDeliversNothing,
        Sabotage::NoFence,
        Sabotage::NoClientGo,
        Sabotage::NoGoProvider,
    ];

    /// Its name on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Sabotage::HoldDeliversNothing => "hold-delivers-nothing",
            Sabotage::NoFence => "no-fence",
            Sabotage::NoClientGo => "no-client-go",
            Sabotage::NoGoProvider => "no-go-provider",
        }
    }

    /// Whether it keeps `peer` out of the pool.
    pub fn keeps_out(self, peer: GoPeer) -> bool {
        matches!(
            (self, peer),
            (Sabotage::NoClientGo, GoPeer::ClientGo) | (Sabotage::NoGoProvider, GoPeer::Provider)
        )
    }
}

impl Config {
    /// The Go peers the run asks for, in the order they join; none without the fence.
    pub fn go_peers(&self) -> Vec<GoPeer> {
        GoPeer::ALL
            .into_iter()
            .filter(|p| match p {
                GoPeer::ClientGo => self.client_go,
                GoPeer::Provider => self.go_provider,
            })
            .filter(|_| self.fence_after.is_some())
            .collect()
    }
}
