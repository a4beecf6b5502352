//! The command line: `crossplane core start` and `crossplane rbac start`, each flattening the manager's
//! flags, `crossplane render`, and the functions that run them.

use std::process::ExitCode;
use std::time::Duration;

use clap::{FromArgMatches, Parser, Subcommand};
use manager::{BinaryInfo, Defaults, Manager, TermContext};

use crate::{definition, rbac, revision};

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
    Start(CoreStart),
}

/// `rbac start`.
#[derive(Debug, Subcommand)]
pub enum RbacCommand {
    /// Starts the RBAC manager.
    Start(RbacStart),
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
    #[arg(long, env = "POD_NAMESPACE", default_value = "crossplane-system")]
    pub namespace: String,
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
}

/// Applies each subcommand's Lease defaults to the clap command.
pub fn command() -> clap::Command {
    use clap::CommandFactory;
    let mut cmd = Cli::command();
    cmd = cmd.mut_subcommand("core", |c| {
        c.mut_subcommand("start", |s| CORE_DEFAULTS.apply_to(s))
    });
    cmd.mut_subcommand("rbac", |c| {
        c.mut_subcommand("start", |s| RBAC_DEFAULTS.apply_to(s))
    })
}

/// The whole `crossplane` binary: parses the flags, runs the chosen component on a tokio runtime, and
/// maps the outcome to the exit code. `binary` names the build in the user agent and in `--version`;
/// `main.rs` passes the package's, and a test can pass another to run two builds side by side.
pub fn main(binary: BinaryInfo) -> ExitCode {
    let matches = command().version(binary.version).get_matches();
    let cli = Cli::from_arg_matches(&matches).unwrap_or_else(|e| e.exit());
    if let Component::Render(args) = &cli.component {
        return crate::render_command::main(args);
    }
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let result = runtime.block_on(async move {
        match cli.component {
            Component::Core {
                command: CoreCommand::Start(args),
            } => core_start(args, binary).await,
            Component::Rbac {
                command: RbacCommand::Start(args),
            } => rbac_start(args, binary).await,
            Component::Render(_) => Ok(()),
        }
    });
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            if let manager::Error::Usage(usage) = &e {
                usage.exit();
            }
            eprintln!("error: {e}");
            ExitCode::from(u8::try_from(e.exit_code()).unwrap_or(1))
        }
    }
}

/// Runs `core start`.
pub async fn core_start(args: CoreStart, binary: BinaryInfo) -> Result<(), manager::Error> {
    let settings = args.manager.resolve(&CORE_DEFAULTS)?;
    manager::logging::init(settings.log_format, &settings.log_level)?;
    let mut mgr = Manager::new(settings, binary).await?;
    let metrics = mgr.metrics().reconcile().clone();
    let selector = args.watch_label_selector.clone();
    let revision_metrics = metrics.clone();
    mgr.add_gated(revision::CONTROLLER, move |ctx: TermContext| {
        revision::run(ctx, selector.clone(), revision_metrics.clone())
    });
    let options = definition::Options {
        selector: args.watch_label_selector,
        poll: args.poll_interval,
        metrics,
        functions: std::sync::Arc::new(crate::composite::functions::Functions::new(
            args.function_deadline,
            args.namespace.clone(),
        )),
    };
    mgr.add_gated(definition::CONTROLLER, move |ctx: TermContext| {
        definition::run(ctx, options.clone())
    });
    mgr.run().await
}

/// Runs `rbac start`.
pub async fn rbac_start(args: RbacStart, binary: BinaryInfo) -> Result<(), manager::Error> {
    let settings = args.manager.resolve(&RBAC_DEFAULTS)?;
    manager::logging::init(settings.log_format, &settings.log_level)?;
    let mut mgr = Manager::new(settings, binary).await?;
    let selector = args.watch_label_selector;
    let metrics = mgr.metrics().reconcile().clone();
    mgr.add_gated(rbac::CONTROLLER, move |ctx: TermContext| {
        rbac::run(ctx, selector.clone(), metrics.clone())
    });
    mgr.run().await
}
