//! The command-line flags every binary flattens into its own clap parser.
//!
//! The timing flags are the election crate's [`TimingFlags`], flattened: their names, parser, rules and
//! client-go defaults have one owner there.
//!
//! Flags whose default differs per binary (the Lease ID and the timings) are `Option`s here; the binary's
//! [`Defaults`](crate::Defaults) fill them in [`Args::resolve`]. [`Defaults::apply_to`](crate::Defaults::apply_to) also writes those
//! defaults into the `--help` text.

use std::path::PathBuf;
use std::time::Duration;

use clap::builder::BoolishValueParser;
use clap::{ArgAction, ValueEnum};

use crate::config::bind::BindAddress;
use crate::duration::parse_duration;
use election::TimingFlags;

/// The manager's flags. Flatten them into a binary's parser with `#[command(flatten)]`.
#[derive(Debug, Clone, clap::Args)]
#[command(next_help_heading = "Manager")]
pub struct Args {
    /// Use leader election: only the replica holding the Lease runs controllers. `--leader-election`
    /// alone turns it on; `--leader-election=false` (as controller-runtime's `--leader-elect=false`) off.
    #[arg(
        short = 'l',
        long = "leader-election",
        env = "LEADER_ELECTION",
        value_name = "BOOL",
        num_args = 0..=1,
        require_equals = true,
        default_value = "false",
        default_missing_value = "true",
        action = ArgAction::Set,
        value_parser = BoolishValueParser::new()
    )]
    pub leader_election: bool,

    /// Namespace of the Lease. Defaults to the pod's namespace (env POD_NAMESPACE, then the service
    /// account's namespace file).
    #[arg(long, env = "POD_NAMESPACE")]
    pub leader_election_namespace: Option<String>,

    /// Name of the Lease (env `LEADER_ELECTION_ID`, which the core's package runtime sets so that every
    /// revision of one package stands for the same Lease).
    #[arg(long, env = "LEADER_ELECTION_ID")]
    pub leader_election_id: Option<String>,

    /// This replica's identity in the Lease. Defaults to env POD_NAME, else `<hostname>_<uuid>`.
    #[arg(long, env = "POD_NAME")]
    pub leader_election_identity: Option<String>,

    /// `--lease-duration`, `--renew-deadline`, `--retry-period`: the election crate's flags.
    #[command(flatten)]
    pub timings: TimingFlags,

    /// Release the Lease on shutdown, after all leader work has stopped, so a standby takes over at once.
    #[arg(
        long,
        value_name = "BOOL",
        num_args = 0..=1,
        default_missing_value = "true",
        action = ArgAction::Set,
        value_parser = BoolishValueParser::new()
    )]
    pub leader_election_release_on_cancel: Option<bool>,

    /// Address of the /metrics listener (`:8080`, `127.0.0.1:8080`, or `0` for off).
    #[arg(long, default_value = ":8080", value_name = "ADDR")]
    pub metrics_bind_address: BindAddress,

    /// Address of the /healthz and /readyz listener (`:8081`, `127.0.0.1:8081`, or `0` for off).
    #[arg(long, default_value = ":8081", value_name = "ADDR")]
    pub health_probe_bind_address: BindAddress,

    /// Path to a kubeconfig. Defaults to KUBECONFIG, ~/.kube/config, then the in-cluster config.
    #[arg(long, value_name = "PATH")]
    pub kubeconfig: Option<PathBuf>,

    /// A separate kubeconfig for Lease traffic only (controller-runtime's `LeaderElectionConfig`).
    /// Defaults to the main one; either way Lease traffic gets a connection pool of its own.
    #[arg(long, value_name = "PATH")]
    pub leader_election_kubeconfig: Option<PathBuf>,

    /// Log format.
    #[arg(long, value_enum, default_value_t = LogFormat::Text)]
    pub log_format: LogFormat,

    /// Log level or tracing filter directives (e.g. `info`, `debug,kube=info`); RUST_LOG when not given.
    #[arg(long, env = "RUST_LOG", default_value = "info", value_name = "FILTER")]
    pub log_level: String,

    /// How long to wait for leader work and other runnables to stop on shutdown; 0 aborts them at once.
    #[arg(long, value_parser = parse_duration, default_value = "30s", value_name = "DURATION")]
    pub graceful_shutdown_timeout: Duration,

    /// What to do after losing leadership: become a standby again, or exit non-zero.
    #[arg(long, value_enum, default_value_t = OnLostLeadership::Standby)]
    pub on_lost_leadership: OnLostLeadership,
}

/// The log line format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum LogFormat {
    /// Human-readable lines.
    Text,
    /// One JSON object per line.
    Json,
}

/// What a replica does after its term ends without a shutdown having been asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum OnLostLeadership {
    /// Stop leader work and go back to standby; the replica may lead again later.
    Standby,
    /// Stop leader work and exit non-zero (controller-runtime's behaviour).
    Exit,
}
