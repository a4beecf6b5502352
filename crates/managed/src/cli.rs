//! The flags every provider shares (`--poll`, `--max-reconcile-rate`, `--sync`, `--debug`) and the
//! `main` that parses them with the manager's flags, builds the [`Manager`] and hands it to the
//! provider's setup function. A provider's `main.rs` is one call to [`main`].

use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use clap::{CommandFactory, FromArgMatches, Parser};
use manager::config::compat;
pub use manager::config::compat::Flag;
use manager::duration::{format_duration, parse_duration};
use manager::{BinaryInfo, Defaults, Manager};

use crate::options::Options;
use crate::ratelimit::GlobalRateLimiter;

/// The provider flags.
#[derive(Debug, Clone, clap::Args)]
#[command(next_help_heading = "Provider")]
pub struct ProviderArgs {
    /// How often an up-to-date resource is checked for drift.
    #[arg(long = "poll", value_parser = parse_duration, value_name = "DURATION")]
    pub poll: Option<Duration>,

    /// The global maximum rate of reconciles per second, and the number of concurrent reconciles.
    #[arg(long, value_name = "N")]
    pub max_reconcile_rate: Option<u16>,

    /// How often every resource is reconciled even without changes.
    #[arg(short = 's', long = "sync", value_parser = parse_duration, default_value = "1h", value_name = "DURATION")]
    pub sync: Duration,

    /// Debug logging (same as `--log-level debug`).
    #[arg(short = 'd', long)]
    pub debug: bool,

    /// Only reconcile managed resources matching this label selector (for sharding and tests).
    #[arg(long, hide = true, value_name = "SELECTOR")]
    pub label_selector: Option<String>,
}

/// A provider's defaults for its flags.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProviderDefaults {
    /// Default `--poll`.
    pub poll: Duration,
    /// Default `--max-reconcile-rate`.
    pub max_reconcile_rate: u16,
}

impl ProviderDefaults {
    /// Writes the defaults into `--help`.
    pub fn apply_to(&self, cmd: clap::Command) -> clap::Command {
        let help = |value: String| {
            move |arg: clap::Arg| {
                let about = arg.get_help().map(ToString::to_string).unwrap_or_default();
                arg.help(format!("{about} [default: {value}]"))
            }
        };
        cmd.mut_arg("poll", help(format_duration(self.poll)))
            .mut_arg("max_reconcile_rate", help(self.max_reconcile_rate.to_string()))
    }
}

impl ProviderArgs {
    /// Controller options from the flags: poll interval with 10 % jitter, `max-reconcile-rate` workers
    /// and a global limiter of that many reconciles per second (burst ×10), the sync period.
    pub fn options(&self, defaults: &ProviderDefaults) -> Options {
        let rate = self
            .max_reconcile_rate
            .unwrap_or(defaults.max_reconcile_rate)
            .max(1);
        Options {
            poll_interval: self.poll.unwrap_or(defaults.poll),
            max_concurrent: rate,
            rate_limiter: Some(Arc::new(GlobalRateLimiter::new(u32::from(rate)))),
            sync_interval: Some(self.sync),
            label_selector: self.label_selector.clone(),
            ..Options::default()
        }
    }
}

/// Everything a provider binary tells [`main`] about itself.
#[derive(Debug, Clone, Copy)]
pub struct ProviderInfo {
    /// Name and version, for the user agent and `--version`.
    pub binary: BinaryInfo,
    /// One line on what it is (its image's description, its package's).
    pub description: &'static str,
    /// Lease name and timings.
    pub lease: Defaults,
    /// Flag defaults.
    pub defaults: ProviderDefaults,
    /// The upstream provider's own flags beyond [`UPSTREAM_FLAGS`] (accepted for compatibility).
    pub upstream_flags: &'static [Flag],
}

/// The help heading of the flags accepted for compatibility.
const HEADING: &str = "Upstream compatibility";

/// crossplane-runtime's flags that every upstream provider has and this runtime handles differently.
/// `--metrics-bind-address` and `--health-probe-bind-address` also answer to upstream's environment
/// variables and to `--health-probe-bind-addr`.
pub const UPSTREAM_FLAGS: &[Flag] = &[
    Flag::ignored_switch(
        "enable-management-policies",
        "management policies are always honoured",
    )
    .env("ENABLE_MANAGEMENT_POLICIES")
    .default("true"),
    Flag::ignored("poll-state-metric", "the state metrics are recorded every 5 s").default("5s"),
];

/// The provider's clap command: the manager's and the provider's flags, upstream's aliases and
/// environment variables, and the compatibility flags.
fn command(info: &ProviderInfo) -> clap::Command {
    let cmd = Cli::command().name(info.binary.name).version(info.binary.version);
    let cmd = info.defaults.apply_to(info.lease.apply_to(cmd));
    let cmd = cmd
        .mut_arg("metrics_bind_address", |a| a.env("METRICS_BIND_ADDRESS"))
        .mut_arg("health_probe_bind_address", |a| {
            a.visible_alias("health-probe-bind-addr")
                .env("HEALTH_PROBE_BIND_ADDRESS")
        });
    let cmd = compat::augment(cmd, HEADING, UPSTREAM_FLAGS);
    compat::augment(cmd, HEADING, info.upstream_flags)
}

#[derive(Debug, Parser)]
struct Cli {
    #[command(flatten)]
    manager: manager::Args,
    #[command(flatten)]
    provider: ProviderArgs,
}

/// Parses the flags, builds the manager, lets `setup` register the provider's controllers with the
/// resolved [`Options`], and runs until shutdown. Returns the process exit code.
pub fn main<F>(info: ProviderInfo, setup: F) -> ExitCode
where
    F: FnOnce(&mut Manager, &Options),
{
    let matches = command(&info).get_matches();
    let mut cli = Cli::from_arg_matches(&matches).unwrap_or_else(|e| e.exit());
    let upstream = [UPSTREAM_FLAGS, info.upstream_flags].concat();
    let given = match compat::given(&matches, &upstream) {
        Ok(given) => given,
        Err(refused) => {
            eprintln!("error: {refused}");
            std::process::exit(manager::UsageError::EXIT_CODE);
        }
    };
    if cli.provider.debug {
        cli.manager.log_level = manager::config::logging::debug_filter(&info.binary.name.replace('-', "_"));
    }
    manager::run::exit::block_on(run(cli, info, &given, setup))
}

async fn run<F>(
    cli: Cli,
    info: ProviderInfo,
    upstream: &[compat::Given],
    setup: F,
) -> Result<(), manager::Error>
where
    F: FnOnce(&mut Manager, &Options),
{
    let settings = cli.manager.resolve(&info.lease)?;
    manager::config::logging::init(settings.log_format, &settings.log_level)?;
    tracing::debug!(filter = %settings.log_level, "logging at debug level");
    compat::log_ignored(upstream);
    let mut options = cli.provider.options(&info.defaults);
    options.compat = upstream.to_vec();
    let mut mgr = Manager::new(settings, info.binary).await?;
    for (addr, endpoints) in mgr.admin_addrs() {
        tracing::info!(%addr, ?endpoints, "admin endpoint bound");
    }
    tracing::info!(?options, "provider starting");
    setup(&mut mgr, &options);
    mgr.run().await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_parse_and_resolve() {
        let cli = Cli::try_parse_from([
            "p",
            "--poll",
            "5s",
            "--max-reconcile-rate",
            "7",
            "-s",
            "10m",
            "-d",
        ])
        .expect("parse");
        let defaults = ProviderDefaults {
            poll: Duration::from_secs(10),
            max_reconcile_rate: 1,
        };
        let o = cli.provider.options(&defaults);
        assert_eq!(o.poll_interval, Duration::from_secs(5));
        assert_eq!(o.max_concurrent, 7);
        assert_eq!(o.sync_interval, Some(Duration::from_secs(600)));
        assert!(cli.provider.debug);
        let plain = Cli::try_parse_from(["p"]).expect("parse");
        let o = plain.provider.options(&defaults);
        assert_eq!(o.poll_interval, Duration::from_secs(10));
        assert_eq!(o.max_concurrent, 1);
        assert_eq!(o.sync_interval, Some(Duration::from_secs(3600)));
    }

    const INFO: ProviderInfo = ProviderInfo {
        description: "a provider under test",
        binary: BinaryInfo {
            name: "provider-test",
            version: "0.0.0",
        },
        lease: Defaults::new("test"),
        defaults: ProviderDefaults {
            poll: Duration::from_secs(10),
            max_reconcile_rate: 1,
        },
        upstream_flags: &[Flag::ignored("sanitize-secrets", "test")],
    };

    #[test]
    fn upstream_provider_args_parse() {
        let m = command(&INFO)
            .try_get_matches_from([
                "p",
                "--debug",
                "--enable-management-policies=false",
                "--poll-state-metric",
                "5s",
                "--health-probe-bind-addr",
                ":9440",
                "--sanitize-secrets",
                "true",
                "-l",
            ])
            .expect("upstream's args parse");
        let cli = Cli::from_arg_matches(&m).expect("cli");
        assert_eq!(cli.manager.health_probe_bind_address.to_string(), "0.0.0.0:9440");
        let upstream = [UPSTREAM_FLAGS, INFO.upstream_flags].concat();
        let names: Vec<&str> = compat::given(&m, &upstream)
            .expect("nothing refused")
            .iter()
            .map(|g| g.name)
            .collect();
        assert_eq!(
            names,
            [
                "enable-management-policies",
                "poll-state-metric",
                "sanitize-secrets"
            ]
        );
    }
}
