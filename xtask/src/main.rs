//! `cargo xtask`: the project's automation.
//!
//! - `cargo xtask test [--lanes N] [-- <cargo test args>]` builds the Go harness (cached), starts one local
//!   control plane, runs the whole workspace test suite against it (two test binaries at a time), and
//!   stops it. This is the README's test command.
//! - `cargo xtask demo [--keep|--ci|--down|--local]` runs the whole system live: on a real node where one
//!   can start, the core from deploy/ and provider-nop and function-go installed by package, an XR composed
//!   through the function, a leader's Pod deleted and an upgrade, each handover measured (else, or with
//!   `--local`, two local processes of each binary under its generated RBAC and an XR composed).
//! - `cargo xtask control-plane up|down|status` leaves a control plane running for people and kubectl.
//! - `cargo xtask generate [--check]` writes deploy/ (CRDs, RBAC, Deployments) from the code.
//! - `cargo xtask image [BINARY|--all] [--pause]` packs release binaries as OCI image archives (and the
//!   node's sandbox image).
//! - `cargo xtask harness` only builds the harness.
//! - `cargo xtask bench [--quick]` measures our elector against client-go's and writes `docs/benchmarks.*`;
//!   `--scale [--size N]... [--xrds N]... [--xrs N]... [--cores-only | --providers-only]` measures
//!   providers at scale, ours against crossplane-runtime's, and cores with XRDs and XRs, ours against
//!   upstream's, and writes
//!   `docs/scale.*`.
//! - `cargo xtask chaos [--changes N] [--fence-after N]` runs the full fault schedule, first
//!   without and then with the server-side fence, prints its summary and writes
//!   `docs/reliability.md` and `docs/reliability.json`.
//! - `cargo xtask conformance` runs the conformance suite (upstream's e2e scenarios) and writes
//!   `docs/conformance.json`.
//! - `cargo xtask fencing` runs the server-side fence's tests and writes their figures to
//!   `docs/fencing.md` and `docs/fencing.json`.
//! - `cargo xtask node-bench [--deletions N]` runs deploy/ as Pods on a real node (containerd, kubelet),
//!   times the handover when the leader's Pod is deleted and writes `docs/node.md`.
//!
//! This crate only parses flags and dispatches: the release tooling lives in the `release` crate
//! (`tools/release`), the scenarios in the `e2e` crate (`tests/e2e`).
#![forbid(unsafe_code)]

use std::path::PathBuf;

use clap::{Parser, Subcommand};
use e2e::{bench, chaos, conformance, control_plane, demo, fencing, metrics_names, node, suite};
use release::{generate, image, registry};

/// crossplane-rs project automation.
#[derive(Parser)]
#[command(name = "cargo xtask", version)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Build the harness, start a control plane, run every test of the workspace against it, stop it.
    Test {
        /// How many test binaries run at once in the whole workspace's run (1: one after another).
        #[arg(long, default_value_t = suite::LANES, value_parser = clap::value_parser!(u16).range(1..=8))]
        lanes: u16,
        /// Arguments passed to `cargo test` after `--workspace` (e.g. `-p election -- interop`); with
        /// them, `cargo test` runs its binaries itself, one after another.
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<String>,
    },
    /// The whole system live: deploy/ as Pods on a real node where one can start (root, containerd, runc,
    /// CNI plugins), deleting the leader's Pod and measuring the handover; else (or with --local) two local
    /// replicas of each binary under its generated RBAC, an XR composed, a leader killed. Ctrl-C cleans up.
    Demo {
        /// Leave everything running at the end and print how to use kubectl on it (local processes).
        #[arg(long, conflicts_with_all = ["ci", "down"])]
        keep: bool,
        /// Run once end to end without a TTY (also deleting the example), print the measured handover and
        /// exit non-zero on any failure or any request the generated RBAC denied.
        #[arg(long, alias = "non-interactive", conflicts_with = "down")]
        ci: bool,
        /// Clean up a demo left running by --keep.
        #[arg(long)]
        down: bool,
        /// Run the replicas as local processes, even where a node could start (--keep and --down always do).
        #[arg(long)]
        local: bool,
        /// The node demo's image and package archives, from `cargo xtask image --debug --pause --next
        /// --function --out DIR` (built when not given).
        #[arg(long, value_name = "DIR", conflicts_with_all = ["local", "keep", "down"])]
        images: Option<PathBuf>,
    },
    /// Manage a long-lived local control plane for kubectl and manual testing.
    ControlPlane {
        #[command(subcommand)]
        action: control_plane::Action,
    },
    /// Write deploy/ from the code: CRDs, per-binary kustomize bases (Deployment, RBAC, PDB), kustomization.
    Generate {
        /// Only compare: exit non-zero, listing what differs, when deploy/ or the README figures differ from the
        /// code and docs/*.json, or when an artifact under docs/ is stale or lacks its provenance.
        #[arg(long)]
        check: bool,
        /// Name the images `<PREFIX>/<binary>:<version>` in deploy/ and the chart (e.g. `ghcr.io/acme`;
        /// no tag, lower case). Build them with `cargo xtask image --registry` and the same prefix.
        #[arg(long, value_name = "PREFIX", default_value = registry::DEFAULT, value_parser = registry::Registry::parse)]
        registry: registry::Registry,
    },
    /// Build release images of the binaries as OCI archives under target/images/ (no Docker daemon).
    Image {
        /// Binaries to build (all when none is named).
        binaries: Vec<String>,
        /// Build every binary.
        #[arg(long, conflicts_with = "binaries")]
        all: bool,
        /// Pack debug builds instead of release builds (quick; under target/images/debug).
        #[arg(long)]
        debug: bool,
        /// Write the archives to this directory.
        #[arg(long, value_name = "DIR")]
        out: Option<PathBuf>,
        /// gzip level of the layer, 0-9 (default 6).
        #[arg(long, value_name = "LEVEL")]
        compression: Option<u32>,
        /// Also pack the test bed node's sandbox image (pause.oci.tar, a static Go binary).
        #[arg(long)]
        pause: bool,
        /// Also pack provider-nop's second build (version <version>+next) as provider-nop-next.oci.tar,
        /// tagged <version>-next, for a rolling update between two builds.
        #[arg(long)]
        next: bool,
        /// Also pack function-go (our composition function on the official Go SDK, built from tests/peers)
        /// as function-go.oci.tar and its Function package as function-go.xpkg.oci.tar.
        #[arg(long)]
        function: bool,
        /// Name the images `<PREFIX>/<binary>:<version>`, as `cargo xtask generate --registry` names them
        /// in deploy/ (a prefix without a registry host means docker.io).
        #[arg(long, value_name = "PREFIX", default_value = registry::DEFAULT, value_parser = registry::Registry::parse)]
        registry: registry::Registry,
    },
    /// Build the Go harness (kube-apiserver, etcd, kube-controller-manager, kube-scheduler, kubelet,
    /// client-go candidate) and print its path.
    Harness,
    /// Run deploy/ on a test bed with a real node (containerd, kubelet); delete provider-nop's leader Pod
    /// repeatedly and time the handover; read each Pod's memory; write docs/node.md.
    NodeBench {
        /// How many times the leader's Pod is deleted.
        #[arg(long, default_value_t = 20)]
        deletions: usize,
    },
    /// Install provider-nop as a package on a test bed with a real node (every image pulled from the test
    /// bed's OCI registry), then upgrade it v1 <-> v2 under churn our way and upstream's way; write
    /// docs/packages.md.
    PackageBench {
        /// How many upgrades each way.
        #[arg(long, default_value_t = 5)]
        upgrades: usize,
    },
    /// Measure the Rust elector against client-go's on a fresh control plane; write docs/benchmarks.md and .svg.
    Bench {
        /// Fewer repetitions and shorter windows (about 8 minutes instead of about 25).
        #[arg(long)]
        quick: bool,
        /// Only the composition-functions benchmark (100 XRs x 5 resources, 2-step pipeline; per-call
        /// gRPC overhead against the built-in step); writes docs/functions-benchmark.md.
        #[arg(long, conflicts_with = "scale")]
        functions: bool,
        /// Only the scale benchmark: providers, ours against crossplane-runtime's, with 1 000 and 10 000
        /// NopResources, and cores, ours against upstream's, with 10, 100 and 500 XRDs; writes
        /// docs/scale.md and docs/scale.json.
        #[arg(long, conflicts_with = "quick")]
        scale: bool,
        /// With --scale: the numbers of NopResources (repeatable; default 1000 and 10000).
        #[arg(
            long = "size",
            value_name = "N",
            requires = "scale",
            conflicts_with = "cores_only"
        )]
        sizes: Vec<usize>,
        /// With --scale: the numbers of XRDs for the cores (repeatable; default 10, 100 and 500).
        #[arg(
            long = "xrds",
            value_name = "N",
            requires = "scale",
            conflicts_with = "providers_only"
        )]
        xrds: Vec<usize>,
        /// With --scale: the numbers of XRs for the cores, each composing 3 resources through one
        /// function (repeatable; default 100).
        #[arg(
            long = "xrs",
            value_name = "N",
            requires = "scale",
            conflicts_with = "providers_only"
        )]
        xrs: Vec<usize>,
        /// With --scale: the cores alone, no providers.
        #[arg(long, requires = "scale", conflicts_with = "providers_only")]
        cores_only: bool,
        /// With --scale: the providers alone, no cores.
        #[arg(long, requires = "scale")]
        providers_only: bool,
    },
    /// Run the full fault schedule on a fresh control plane: provider-nop and core replicas
    /// hit by kills, stops, restarts, cut-offs, clock skew and rolling updates; the audit-log checker
    /// must find no violation.
    Chaos {
        /// Stop injecting faults after this many leadership changes.
        #[arg(long, default_value_t = 100)]
        changes: usize,
        /// Stand-alone NopResources, changed continuously.
        #[arg(long, default_value_t = 200)]
        nop_resources: usize,
        /// XRs, each composing a NopResource.
        #[arg(long, default_value_t = 20)]
        xrs: usize,
        /// Install the server-side fence after this many leadership changes (default: half of
        /// --changes); before it, self-fencing alone is judged.
        #[arg(long)]
        fence_after: Option<usize>,
        /// Break one part on purpose (hold-delivers-nothing, no-fence, no-client-go) to see the
        /// verdict's positive control for it fail; docs/ is not written.
        #[arg(long, value_name = "PART", value_parser = chaos::parse_sabotage)]
        sabotage: Option<e2e::schedule::Sabotage>,
    },
    /// Run provider-nop's metric-name diff against upstream's list on a fresh control plane and write its
    /// figures to docs/metrics-names.md and docs/metrics-names.json.
    MetricsNames,
    /// Run the server-side fence's tests (`providers/provider-nop/tests/fencing.rs`) on a fresh control
    /// plane and write their figures to docs/fencing.md and docs/fencing.json.
    Fencing,
    /// Run the conformance suite (upstream Crossplane's e2e scenarios, crates/crossplane/tests/conformance.rs)
    /// on a fresh control plane and write each scenario's outcome to docs/conformance.json.
    Conformance,
}

fn main() {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Test { lanes, args } => suite::run(&args, lanes.into()),
        Command::Demo {
            keep,
            ci,
            down,
            local,
            images,
        } => demo::run(
            demo::Options {
                keep,
                ci,
                down,
                local,
            },
            images.as_deref(),
        ),
        Command::ControlPlane { action } => control_plane::run(action),
        Command::Generate { check, registry } => generate::run(check, &registry),
        Command::Image {
            binaries,
            all: _,
            debug,
            out,
            compression,
            pause,
            next,
            function,
            registry,
        } => {
            let options = image::Options {
                debug,
                out,
                compression,
                pause,
                next,
                registry,
            };
            image::run(&binaries, &options).and_then(|_| match function {
                true => image::pack_function(&options.out_dir(), compression, &options.registry).map(|_| 0),
                false => Ok(0),
            })
        }
        Command::Bench { functions: true, .. } => bench::functions::run(),
        Command::Bench {
            scale: true,
            sizes,
            xrds,
            xrs,
            cores_only,
            providers_only,
            ..
        } => e2e::scale::run(&e2e::scale::Options {
            sizes,
            xrds,
            xrs,
            cores_only,
            providers_only,
        }),
        Command::Bench { quick, .. } => bench::run(quick),
        Command::NodeBench { deletions } => node::run(deletions),
        Command::PackageBench { upgrades } => e2e::packages::bench::run(upgrades),
        Command::Chaos {
            changes,
            nop_resources,
            xrs,
            fence_after,
            sabotage,
        } => chaos::run(&chaos::Options {
            changes,
            nop_resources,
            xrs,
            fence_after: fence_after.unwrap_or(changes / 2),
            sabotage,
        }),
        Command::Fencing => fencing::run(),
        Command::MetricsNames => metrics_names::run(),
        Command::Conformance => conformance::run(),
        Command::Harness => release::harness().map(|p| {
            println!("{}", p.display());
            0
        }),
    };
    match result {
        Ok(code) => std::process::exit(code),
        Err(e) => {
            eprintln!("xtask: error: {e:#}");
            std::process::exit(1);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn registry_option_parses_or_is_a_usage_error() {
        let parse = |args: &[&str]| Cli::try_parse_from([&["cargo xtask"], args].concat());
        match parse(&["generate", "--check"]).map(|c| c.command) {
            Ok(Command::Generate { registry, check }) => {
                assert!(check);
                assert_eq!(registry, registry::Registry::default());
            }
            _ => panic!("generate --check must parse"),
        }
        match parse(&["image", "--registry", "ghcr.io/acme", "provider-nop"]).map(|c| c.command) {
            Ok(Command::Image { registry, .. }) => {
                assert_eq!(
                    registry.full_reference("provider-nop", "1"),
                    "ghcr.io/acme/provider-nop:1"
                );
            }
            _ => panic!("image --registry must parse"),
        }
        for bad in ["ghcr.io/acme:v1", "GHCR.io/acme"] {
            let e = match parse(&["generate", "--registry", bad]) {
                Err(e) => e,
                Ok(_) => panic!("{bad} accepted"),
            };
            assert_eq!(e.exit_code(), 2, "{e}");
            assert!(e.to_string().contains("e.g. `ghcr.io/acme`"), "{e}");
        }
    }
}
