//! The command line: `crossplane core start|init`, `crossplane rbac start|init` and `crossplane render`;
//! the starts flatten the manager's flags, every subcommand accepts upstream's flags too
//! ([`crate::upstream_flags`]), and the functions that run them.

use std::process::ExitCode;
use std::time::Duration;

use clap::{ArgMatches, FromArgMatches, Parser, Subcommand};
use manager::config::compat::{self, Given};
use manager::{BinaryInfo, Defaults, Manager, TermContext};

use crate::upstream_flags::{self, HEADING};
use crate::{definition, init, rbac, revision};

/// The core's Lease: `crossplane-leader-election-core`, 60/50/2 s, released on cancel.
pub const CORE_DEFAULTS: Defaults = Defaults::new("crossplane-leader-election-core")
    .timings(
        Duration::from_secs(60),
        Duration::from_secs(50),
        Duration::from_secs(2),
    )
    .release_on_cancel(true);

/// The RBAC manager's Lease: `crossplane-leader-election-rbac`, 15/10/2 s.
pub const RBAC_DEFAULTS: Defaults = Defaults::new("crossplane-leader-election-rbac").timings(
    Duration::from_secs(15),
    Duration::from_secs(10),
    Duration::from_secs(2),
);

/// `crossplane`.
#[derive(Debug, Parser)]
#[command(
    name = "crossplane",
    version,
    about = "Crossplane's core controllers and RBAC manager"
)]
pub struct Cli {
    /// Print verbose logging statements (debug for crossplane-rs's own crates; same as
    /// `--log-level` with [`manager::config::logging::debug_filter`]).
    #[arg(short = 'd', long, global = true)]
    pub debug: bool,
    /// The component.
    #[command(subcommand)]
    pub component: Component,
}

/// `core` or `rbac`.
#[derive(Debug, Subcommand)]
pub enum Component {
    /// The core controllers.
    Core {
        /// What to do.
        #[command(subcommand)]
        command: CoreCommand,
    },
    /// The RBAC manager.
    Rbac {
        /// What to do.
        #[command(subcommand)]
        command: RbacCommand,
    },
    /// Renders a composite resource through its Composition's pipeline without a cluster.
    Render(crate::render_command::RenderArgs),
}

/// `core start`.
#[derive(Debug, Subcommand)]
pub enum CoreCommand {
    /// Starts the core controllers.
    Start(Box<CoreStart>),
    /// Installs or upgrades the core's CRDs and waits until they are established (upstream's chart runs
    /// it as an init container).
    Init,
}

/// `rbac start`.
#[derive(Debug, Subcommand)]
pub enum RbacCommand {
    /// Starts the RBAC manager.
    Start(Box<RbacStart>),
    /// Waits until the XRD CRD is served (upstream's chart runs it as an init container).
    Init,
}

/// Flags of `core start`.
#[derive(Debug, clap::Args)]
pub struct CoreStart {
    /// The manager's flags.
    #[command(flatten)]
    pub manager: manager::Args,
    /// How often ready composite resources are checked again.
    #[arg(long, value_parser = manager::duration::parse_duration, default_value = "1m", value_name = "DURATION")]
    pub poll_interval: Duration,
    /// Only XRDs and Compositions matching this label selector (for tests sharing one apiserver).
    #[arg(long, hide = true)]
    pub watch_label_selector: Option<String>,
    /// The deadline of one composition-function call; a slower function fails its pipeline step.
    #[arg(long, value_parser = manager::duration::parse_duration, default_value = "20s", value_name = "DURATION")]
    pub function_deadline: Duration,
    /// The core's namespace: the function CA (`crossplane-root-ca`) and server-certificate Secrets live here.
    /// (`-n` as upstream.)
    #[arg(short = 'n', long, env = "POD_NAMESPACE", default_value = "crossplane-system")]
    pub namespace: String,
    /// The base URL the apiserver calls the core's webhooks at, instead of upstream's Service
    /// `crossplane-webhooks` (a core run outside the cluster: `https://127.0.0.1:<--webhook-port>`).
    #[arg(long, hide = true, value_name = "URL")]
    pub webhook_url: Option<String>,
    /// How Providers and Functions run (upstream's flag): `Deployment` runs each active revision as a
    /// Deployment in the core's namespace, HA by default; `External` runs nothing, and something else
    /// must run them.
    #[arg(long, env = "PACKAGE_RUNTIME", value_enum, default_value_t = PackageRuntime::Deployment)]
    pub package_runtime: PackageRuntime,
    /// Registry hosts (`host:port`, comma-separated) that packages are fetched from over plain HTTP,
    /// besides loopback ones, which always are: a registry on a private address without a certificate,
    /// such as a test bed's. Not an upstream flag (upstream fetches over HTTPS only).
    #[arg(
        long,
        env = "PLAIN_HTTP_REGISTRIES",
        value_delimiter = ',',
        value_name = "HOST:PORT"
    )]
    pub plain_http_registry: Vec<String>,
}

/// `--package-runtime`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum PackageRuntime {
    /// Each active ProviderRevision and FunctionRevision runs as a Deployment.
    #[value(name = "Deployment")]
    Deployment,
    /// No Deployments: something else runs the packages.
    #[value(name = "External")]
    External,
}

/// Flags of `rbac start`.
#[derive(Debug, clap::Args)]
pub struct RbacStart {
    /// The manager's flags.
    #[command(flatten)]
    pub manager: manager::Args,
    /// Accepted for compatibility; v2 appends no provider permissions.
    #[arg(long, default_value = "crossplane:allowed-provider-permissions")]
    pub provider_clusterrole: String,
    /// Only XRDs matching this label selector (for tests sharing one apiserver).
    #[arg(long, hide = true)]
    pub watch_label_selector: Option<String>,
    /// Where package runtimes run (the core's namespace): the ServiceAccounts a provider revision's
    /// system role is bound to live here.
    #[arg(short = 'n', long, env = "POD_NAMESPACE", default_value = "crossplane-system")]
    pub namespace: String,
}

/// The clap command: each start's Lease defaults, upstream's flags on every subcommand, and upstream's
/// `-v` for `--version`.
pub fn command() -> clap::Command {
    use clap::CommandFactory;
    let mut cmd = Cli::command().disable_version_flag(true).arg(
        clap::Arg::new("version")
            .short('v')
            .long("version")
            .action(clap::ArgAction::Version)
            .help("Print version and quit"),
    );
    cmd = cmd.mut_subcommand("core", |c| {
        c.mut_subcommand("start", |s| {
            compat::augment(CORE_DEFAULTS.apply_to(s), HEADING, upstream_flags::CORE_START)
        })
        .mut_subcommand("init", |s| compat::augment(s, HEADING, upstream_flags::CORE_INIT))
    });
    cmd.mut_subcommand("rbac", |c| {
        c.mut_subcommand("start", |s| {
            compat::augment(RBAC_DEFAULTS.apply_to(s), HEADING, upstream_flags::RBAC_START)
        })
    })
}

/// The upstream flags given to the chosen subcommand. A refused one exits with the usage code.
fn upstream_given(matches: &ArgMatches) -> Vec<Given> {
    let Some((component, m)) = matches.subcommand() else {
        return Vec::new();
    };
    let Some((command, m)) = m.subcommand() else {
        return Vec::new();
    };
    let flags = match (component, command) {
        ("core", "start") => upstream_flags::CORE_START,
        ("core", "init") => upstream_flags::CORE_INIT,
        ("rbac", "start") => upstream_flags::RBAC_START,
        _ => return Vec::new(),
    };
    match compat::given(m, flags) {
        Ok(given) => given,
        Err(refused) => {
            eprintln!("error: {refused}");
            std::process::exit(manager::UsageError::EXIT_CODE);
        }
    }
}

/// `--metrics-port` and `--health-probe-port` (or `METRICS_PORT`, `HEALTH_PROBE_PORT`), as upstream's
/// chart sets them, become the manager's bind addresses.
fn apply_ports(manager: &mut manager::Args, given: &[Given]) -> Result<(), String> {
    for g in given {
        let target = match g.name {
            "metrics-port" => &mut manager.metrics_bind_address,
            "health-probe-port" => &mut manager.health_probe_bind_address,
            _ => continue,
        };
        let port: u16 = g
            .value
            .parse()
            .map_err(|_| format!("--{} must be a port number, got {:?}", g.name, g.value))?;
        *target = format!(":{port}")
            .parse()
            .map_err(|e| format!("--{}: {e}", g.name))?;
    }
    Ok(())
}

/// The whole `crossplane` binary: parses the flags, runs the chosen component on a tokio runtime, and
/// maps the outcome to the exit code. `binary` names the build in the user agent and in `--version`;
/// `main.rs` passes the package's, and a test can pass another to run two builds side by side.
pub fn main(binary: BinaryInfo) -> ExitCode {
    let matches = command().version(binary.version).get_matches();
    let mut cli = Cli::from_arg_matches(&matches).unwrap_or_else(|e| e.exit());
    if let Component::Render(args) = &cli.component {
        return crate::render_command::main(args);
    }
    let given = upstream_given(&matches);
    if let Component::Core {
        command: CoreCommand::Start(args),
    } = &mut cli.component
        && let Err(e) = apply_ports(&mut args.manager, &given)
    {
        eprintln!("error: {e}");
        std::process::exit(manager::UsageError::EXIT_CODE);
    }
    let debug = cli
        .debug
        .then(|| manager::config::logging::debug_filter("crossplane"));
    manager::run::exit::block_on(async move {
        match cli.component {
            Component::Core {
                command: CoreCommand::Start(mut args),
            } => {
                if let Some(filter) = debug {
                    args.manager.log_level = filter;
                }
                core_start(*args, binary, &given).await.map_err(Failure::Manager)
            }
            Component::Rbac {
                command: RbacCommand::Start(mut args),
            } => {
                if let Some(filter) = debug {
                    args.manager.log_level = filter;
                }
                rbac_start(*args, binary, &given).await.map_err(Failure::Manager)
            }
            Component::Core {
                command: CoreCommand::Init,
            } => init::run(true, debug.as_deref(), &given, binary)
                .await
                .map_err(Failure::Init),
            Component::Rbac {
                command: RbacCommand::Init,
            } => init::run(false, debug.as_deref(), &given, binary)
                .await
                .map_err(Failure::Init),
            Component::Render(_) => Ok(()),
        }
    })
}

/// How a command of the binary failed.
#[derive(Debug, thiserror::Error)]
enum Failure {
    /// `core start` or `rbac start`.
    #[error(transparent)]
    Manager(manager::Error),
    /// `core init` or `rbac init`.
    #[error(transparent)]
    Init(init::InitError),
}

impl manager::run::exit::Failure for Failure {
    fn exit_code(&self) -> u8 {
        match self {
            Self::Manager(e) => manager::run::exit::Failure::exit_code(e),
            Self::Init(_) => 1,
        }
    }

    fn exit_if_usage(&self) {
        if let Self::Manager(e) = self {
            e.exit_if_usage();
        }
    }
}

/// Runs `core start`.
pub async fn core_start(
    args: CoreStart,
    binary: BinaryInfo,
    upstream: &[Given],
) -> Result<(), manager::Error> {
    let settings = args.manager.resolve(&CORE_DEFAULTS)?;
    manager::config::logging::init(settings.log_format, &settings.log_level)?;
    tracing::debug!(filter = %settings.log_level, "logging at debug level");
    compat::log_ignored(upstream);
    let usages = crate::usage::Wiring::from_flags(
        upstream,
        &args.namespace,
        args.watch_label_selector.clone(),
        args.webhook_url.clone(),
        args.poll_interval,
    )
    .map_err(|message| manager::UsageError {
        flag: "webhook-port",
        message,
    })?;
    let circuit = crate::composite::circuit::Settings::from_flags(upstream)
        .map_err(|(flag, message)| manager::UsageError { flag, message })?;
    let mut mgr = Manager::new(settings, binary).await?;
    let metrics = mgr.metrics().reconcile().clone();
    let selector = args.watch_label_selector.clone();
    let revision_metrics = metrics.clone();
    mgr.add_gated(revision::CONTROLLER_NAME, move |ctx: TermContext| {
        revision::run(ctx, selector.clone(), revision_metrics.clone())
    });
    let packages = crate::pkg::Options {
        selector: args.watch_label_selector.clone(),
        metrics: metrics.clone(),
        namespace: args.namespace.clone(),
        user_agent: format!("{}/{}", binary.name, binary.version),
        runtime: args.package_runtime == PackageRuntime::Deployment,
        plain_http: args.plain_http_registry.clone(),
        convert: upstream
            .iter()
            .find(|g| g.name == "enable-custom-to-managed-resource-conversion")
            .is_none_or(|g| g.value != "false"),
    };
    mgr.add_gated(crate::pkg::CONTROLLER_NAME, move |ctx: TermContext| {
        crate::pkg::run(ctx, packages.clone())
    });
    let mrd_selector = args.watch_label_selector.clone();
    let mrd_metrics = metrics.clone();
    mgr.add_gated(crate::mrd::CONTROLLER_NAME, move |ctx: TermContext| {
        crate::mrd::run(ctx, mrd_selector.clone(), mrd_metrics.clone())
    });
    crate::usage::register(&mut mgr, usages, metrics.clone());
    let functions = std::sync::Arc::new(crate::composite::functions::Functions::new(
        args.function_deadline,
        args.namespace.clone(),
    ));
    crate::ops::register(
        &mut mgr,
        crate::ops::enabled(upstream),
        crate::ops::Options {
            selector: args.watch_label_selector.clone(),
            metrics: metrics.clone(),
            functions: functions.clone(),
        },
    );
    let options = definition::Options {
        selector: args.watch_label_selector,
        poll: args.poll_interval,
        metrics,
        functions,
        circuit,
        ssa_claims: crate::claim::ssa_enabled(upstream),
    };
    if !crate::claim::ssa_enabled(upstream) {
        tracing::info!(
            "claims are synced with their composite resources by client-side apply (--enable-ssa-claims=false)"
        );
    }
    mgr.add_gated(definition::CONTROLLER_NAME, move |ctx: TermContext| {
        definition::run(ctx, options.clone())
    });
    mgr.run().await
}

/// Runs `rbac start`.
pub async fn rbac_start(
    args: RbacStart,
    binary: BinaryInfo,
    upstream: &[Given],
) -> Result<(), manager::Error> {
    let settings = args.manager.resolve(&RBAC_DEFAULTS)?;
    manager::config::logging::init(settings.log_format, &settings.log_level)?;
    tracing::debug!(filter = %settings.log_level, "logging at debug level");
    compat::log_ignored(upstream);
    let mut mgr = Manager::new(settings, binary).await?;
    let selector = args.watch_label_selector;
    let metrics = mgr.metrics().reconcile().clone();
    let provider_metrics = metrics.clone();
    mgr.add_gated(rbac::CONTROLLER_NAME, move |ctx: TermContext| {
        rbac::run(ctx, selector.clone(), metrics.clone())
    });
    let namespace = args.namespace;
    mgr.add_gated(rbac::provider::CONTROLLER_NAME, move |ctx: TermContext| {
        rbac::provider::run(ctx, namespace.clone(), provider_metrics.clone())
    });
    mgr.run().await
}
