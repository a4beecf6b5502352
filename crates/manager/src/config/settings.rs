//! Turning [`Args`] plus a binary's [`Defaults`] into validated [`Settings`].
//!
//! Everything a user can get wrong on the command line is checked here, before any connection is made, and
//! reported as a [`UsageError`] that names the flag and exits 2 like any other clap usage error.

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::config::args::{Args, LogFormat, OnLostLeadership};
use crate::config::bind::BindAddress;
use crate::run::own_pod::OwnPod;
use election::{ConfigError, TimingFlags, Timings};

/// Where Kubernetes mounts the pod's namespace.
pub const SERVICE_ACCOUNT_NAMESPACE_FILE: &str = "/var/run/secrets/kubernetes.io/serviceaccount/namespace";

/// A binary's own defaults for the flags whose right value depends on the binary.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Defaults {
    /// The Lease name, e.g. `crossplane-leader-election-core`.
    pub lease_id: &'static str,
    /// Default `--lease-duration`, `--renew-deadline` and `--retry-period`, and the least stop margin
    /// accepted (timings leaving less are a usage error).
    pub timings: Timings,
    /// Default `--leader-election-release-on-cancel`.
    pub release_on_cancel: bool,
}

impl Defaults {
    /// [`Timings::DEFAULT`] (client-go's and controller-runtime's) and release on cancel, for the given
    /// Lease name.
    pub const fn new(lease_id: &'static str) -> Self {
        Self {
            lease_id,
            timings: Timings::DEFAULT,
            release_on_cancel: true,
        }
    }

    /// Sets the default lease duration, renew deadline and retry period.
    pub const fn timings(
        mut self,
        lease_duration: Duration,
        renew_deadline: Duration,
        retry: Duration,
    ) -> Self {
        self.timings = Timings::new(lease_duration, renew_deadline, retry)
            .with_min_stop_margin(self.timings.min_stop_margin);
        self
    }

    /// Sets the default of `--leader-election-release-on-cancel`.
    pub const fn release_on_cancel(mut self, release: bool) -> Self {
        self.release_on_cancel = release;
        self
    }

    /// Sets the least accepted stop margin ([`Timings::stop_margin`]).
    pub const fn min_stop_margin(mut self, margin: Duration) -> Self {
        self.timings = self.timings.with_min_stop_margin(margin);
        self
    }

    /// Writes these defaults into a clap command's help text, so `--help` shows the binary's values.
    /// Parsing is unaffected: [`Args::resolve`] applies the defaults either way.
    pub fn apply_to(&self, cmd: clap::Command) -> clap::Command {
        let help = |value: String| {
            move |arg: clap::Arg| {
                let about = arg.get_help().map(ToString::to_string).unwrap_or_default();
                arg.help(format!("{about} [default: {value}]"))
            }
        };
        let cmd = TimingFlags::show_defaults(cmd, &self.timings);
        cmd.mut_arg("leader_election_id", help(self.lease_id.to_owned()))
            .mut_arg(
                "leader_election_release_on_cancel",
                help(self.release_on_cancel.to_string()),
            )
    }
}

/// A command-line mistake. It names the flag, and [`UsageError::exit`] ends the process with code 2.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid value for --{flag}: {message}")]
pub struct UsageError {
    /// The flag at fault, without the leading dashes.
    pub flag: &'static str,
    /// What is wrong with it.
    pub message: String,
}

impl UsageError {
    /// The exit code of a usage error, as clap uses.
    pub const EXIT_CODE: i32 = 2;

    fn new(flag: &'static str, message: impl Into<String>) -> Self {
        Self {
            flag,
            message: message.into(),
        }
    }

    /// The same error as a clap error (kind `ValueValidation`, exit code 2).
    pub fn to_clap(&self) -> clap::Error {
        clap::Error::raw(clap::error::ErrorKind::ValueValidation, format!("{self}\n"))
    }

    /// Prints the error to stderr and exits with code 2.
    pub fn exit(&self) -> ! {
        self.to_clap().exit()
    }
}

/// Validated settings, ready for [`Manager::new`](crate::Manager::new).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Settings {
    /// This replica's identity (the Lease holder name and part of the user agent).
    pub identity: String,
    /// The election, or `None` when leader election is off.
    pub election: Option<ElectionSettings>,
    /// The Pod this replica runs in (`POD_NAMESPACE`, `POD_NAME`), watched while leader election is on
    /// so that the leader leaves as soon as its Pod is deleted ([`crate::run::own_pod`]).
    pub own_pod: Option<OwnPod>,
    /// The election's timings, validated even when leader election is off.
    pub timings: Timings,
    /// The /metrics listener.
    pub metrics_bind_address: BindAddress,
    /// The /healthz and /readyz listener.
    pub health_probe_bind_address: BindAddress,
    /// An explicit kubeconfig, else the default inference.
    pub kubeconfig: Option<PathBuf>,
    /// A separate kubeconfig for Lease traffic, else the main one.
    pub leader_election_kubeconfig: Option<PathBuf>,
    /// Log format.
    pub log_format: LogFormat,
    /// Log filter directives.
    pub log_level: String,
    /// Bound on stopping runnables at shutdown.
    pub graceful_shutdown_timeout: Duration,
    /// What to do when a term is lost.
    pub on_lost_leadership: OnLostLeadership,
}

/// Maps the elector's configuration errors to the flag a user would change; a timing error speaks of the
/// timing flags by their names.
pub(crate) fn usage_error(e: ConfigError) -> UsageError {
    if let Some(flag) = TimingFlags::flag_of(&e) {
        let message = ["lease_duration", "renew_deadline", "retry_period"]
            .into_iter()
            .fold(e.to_string(), |m, field| {
                m.replace(field, &format!("--{}", field.replace('_', "-")))
            });
        return UsageError::new(flag, message);
    }
    let flag = match &e {
        ConfigError::Empty { field: "namespace" } => "leader-election-namespace",
        ConfigError::Empty { field: "name" } => "leader-election-id",
        _ => "leader-election-identity",
    };
    UsageError::new(flag, e.to_string())
}

/// The leader-election part of [`Settings`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ElectionSettings {
    /// Namespace of the Lease.
    pub namespace: String,
    /// Name of the Lease.
    pub lease_name: String,
    /// Whether to release the Lease on shutdown.
    pub release_on_cancel: bool,
}

impl Args {
    /// Applies `defaults` and validates. Reads the service-account namespace file when leader election is
    /// on and no namespace was given.
    pub fn resolve(&self, defaults: &Defaults) -> Result<Settings, UsageError> {
        self.resolve_in(defaults, Path::new(SERVICE_ACCOUNT_NAMESPACE_FILE))
    }

    pub(crate) fn resolve_in(
        &self,
        defaults: &Defaults,
        sa_namespace: &Path,
    ) -> Result<Settings, UsageError> {
        let timings = self.timings.over(defaults.timings);
        timings.validate().map_err(usage_error)?;

        let identity = match self.leader_election_identity.as_deref().map(str::trim) {
            Some("") => return Err(UsageError::new("leader-election-identity", "must not be empty")),
            Some(id) => id.to_owned(),
            None => default_identity(),
        };
        if http::HeaderValue::from_str(&identity).is_err() {
            return Err(UsageError::new(
                "leader-election-identity",
                format!("{identity:?} must be printable ASCII (it is part of the user agent)"),
            ));
        }

        let election = if self.leader_election {
            let lease_name = self
                .leader_election_id
                .clone()
                .unwrap_or_else(|| defaults.lease_id.to_owned());
            if lease_name.trim().is_empty() {
                return Err(UsageError::new("leader-election-id", "must not be empty"));
            }
            Some(ElectionSettings {
                namespace: lease_namespace(self.leader_election_namespace.as_deref(), sa_namespace)?,
                lease_name,
                release_on_cancel: self
                    .leader_election_release_on_cancel
                    .unwrap_or(defaults.release_on_cancel),
            })
        } else {
            None
        };

        if let Err(e) = tracing_subscriber::EnvFilter::try_new(&self.log_level) {
            return Err(UsageError::new("log-level", format!("{:?}: {e}", self.log_level)));
        }

        let own_pod = election.as_ref().and_then(|_| OwnPod::from_env());
        Ok(Settings {
            identity,
            election,
            own_pod,
            timings,
            metrics_bind_address: self.metrics_bind_address,
            health_probe_bind_address: self.health_probe_bind_address,
            kubeconfig: self.kubeconfig.clone(),
            leader_election_kubeconfig: self.leader_election_kubeconfig.clone(),
            log_format: self.log_format,
            log_level: self.log_level.clone(),
            graceful_shutdown_timeout: self.graceful_shutdown_timeout,
            on_lost_leadership: self.on_lost_leadership,
        })
    }
}

/// The flag or env value, else the service account's namespace file, else a usage error.
fn lease_namespace(given: Option<&str>, sa_namespace: &Path) -> Result<String, UsageError> {
    if let Some(ns) = given.map(str::trim).filter(|ns| !ns.is_empty()) {
        return Ok(ns.to_owned());
    }
    match std::fs::read_to_string(sa_namespace) {
        Ok(ns) if !ns.trim().is_empty() => Ok(ns.trim().to_owned()),
        _ => Err(UsageError::new(
            "leader-election-namespace",
            format!(
                "leader election is on but no namespace is known: set --leader-election-namespace or \
                 POD_NAMESPACE (not running in a cluster: {} is missing)",
                sa_namespace.display()
            ),
        )),
    }
}

/// `<hostname>_<uuid>`, as controller-runtime does.
fn default_identity() -> String {
    let host = hostname::get()
        .map(|h| h.to_string_lossy().into_owned())
        .unwrap_or_default();
    let host: String = host.chars().filter(|c| c.is_ascii_graphic()).collect();
    let host = if host.is_empty() {
        "unknown".to_owned()
    } else {
        host
    };
    format!("{host}_{}", uuid::Uuid::new_v4())
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Debug, Parser)]
    struct Cli {
        #[command(flatten)]
        manager: Args,
    }

    const DEFAULTS: Defaults = Defaults::new("test-lease").timings(
        Duration::from_secs(60),
        Duration::from_secs(50),
        Duration::from_secs(2),
    );

    /// Parses without env fallbacks, so the tests do not depend on the environment they run in.
    fn parse(args: &[&str]) -> Result<Args, clap::Error> {
        use clap::{CommandFactory, FromArgMatches};
        let argv = std::iter::once("bin").chain(args.iter().copied());
        let cmd = Cli::command().mut_args(|a| a.env(None::<&str>));
        let matches = cmd.try_get_matches_from(argv)?;
        Cli::from_arg_matches(&matches).map(|c| c.manager)
    }

    #[test]
    fn env_fallbacks_are_declared() {
        use clap::CommandFactory;
        let cmd = Cli::command();
        let env = |id: &str| {
            cmd.get_arguments()
                .find(|a| a.get_id() == id)
                .and_then(|a| a.get_env())
                .map(|e| e.to_string_lossy().into_owned())
        };
        assert_eq!(env("leader_election").as_deref(), Some("LEADER_ELECTION"));
        assert_eq!(env("leader_election_namespace").as_deref(), Some("POD_NAMESPACE"));
        assert_eq!(env("leader_election_identity").as_deref(), Some("POD_NAME"));
        assert_eq!(env("leader_election_id").as_deref(), Some("LEADER_ELECTION_ID"));
    }

    fn resolve(args: &[&str]) -> Result<Settings, UsageError> {
        let args = parse(args).map_err(|e| UsageError::new("parse", e.to_string()))?;
        args.resolve_in(&DEFAULTS, Path::new("/nonexistent/namespace"))
    }

    #[test]
    fn binary_defaults_apply_when_flags_are_absent() {
        let s = resolve(&[
            "-l",
            "--leader-election-namespace",
            "ns1",
            "--leader-election-identity",
            "me",
        ])
        .expect("valid");
        assert_eq!(s.timings.lease_duration, Duration::from_secs(60));
        assert_eq!(s.timings.renew_deadline, Duration::from_secs(50));
        assert_eq!(s.timings.retry_period, Duration::from_secs(2));
        assert_eq!(s.timings.stop_margin(), Duration::from_secs(10));
        assert_eq!(s.identity, "me");
        let e = s.election.expect("election on");
        assert_eq!(
            (e.namespace.as_str(), e.lease_name.as_str(), e.release_on_cancel),
            ("ns1", "test-lease", true)
        );
        assert_eq!(s.on_lost_leadership, OnLostLeadership::Standby);
        assert_eq!(s.graceful_shutdown_timeout, Duration::from_secs(30));
    }

    #[test]
    fn leader_election_takes_an_optional_bool() {
        let on = |args: &[&str]| parse(args).map(|a| a.leader_election);
        assert!(!on(&[]).expect("valid"));
        assert!(on(&["--leader-election"]).expect("valid"));
        assert!(on(&["-l"]).expect("valid"));
        assert!(on(&["--leader-election=true"]).expect("valid"));
        assert!(!on(&["--leader-election=false"]).expect("valid"));
        assert!(on(&["--leader-election=maybe"]).is_err());
    }

    #[test]
    fn flags_override_defaults() {
        let s = resolve(&[
            "--leader-election",
            "--leader-election-namespace=ns",
            "--leader-election-id=other",
            "--lease-duration=4s",
            "--renew-deadline=3s",
            "--retry-period=500ms",
            "--leader-election-release-on-cancel=false",
            "--on-lost-leadership=exit",
            "--log-format=json",
            "--log-level=debug,kube=info",
            "--metrics-bind-address=0",
            "--health-probe-bind-address=127.0.0.1:0",
            "--graceful-shutdown-timeout=5s",
        ])
        .expect("valid");
        assert_eq!(s.timings.lease_duration, Duration::from_secs(4));
        assert_eq!(s.timings.retry_period, Duration::from_millis(500));
        let e = s.election.expect("on");
        assert_eq!(e.lease_name, "other");
        assert!(!e.release_on_cancel);
        assert_eq!(s.on_lost_leadership, OnLostLeadership::Exit);
        assert_eq!(s.log_format, LogFormat::Json);
        assert_eq!(s.metrics_bind_address, BindAddress::Disabled);
        assert_eq!(s.graceful_shutdown_timeout, Duration::from_secs(5));
    }

    #[test]
    fn release_on_cancel_bare_flag_means_true() {
        let d = DEFAULTS.release_on_cancel(false);
        let a = parse(&[
            "-l",
            "--leader-election-namespace=n",
            "--leader-election-release-on-cancel",
        ])
        .expect("ok");
        let s = a.resolve_in(&d, Path::new("/nonexistent")).expect("ok");
        assert!(s.election.expect("on").release_on_cancel);
        let a = parse(&["-l", "--leader-election-namespace=n"]).expect("ok");
        let s = a.resolve_in(&d, Path::new("/nonexistent")).expect("ok");
        assert!(!s.election.expect("on").release_on_cancel);
    }

    #[test]
    fn election_off_needs_no_namespace_and_identity_defaults_to_host_uuid() {
        let s = resolve(&[]).expect("valid");
        assert!(s.election.is_none());
        let (host, uuid) = s.identity.rsplit_once('_').expect("host_uuid");
        assert!(!host.is_empty());
        assert!(uuid::Uuid::parse_str(uuid).is_ok());
    }

    #[test]
    fn namespace_falls_back_to_service_account_file_then_errors() {
        let dir = std::env::temp_dir().join(format!("manager-ns-{}", uuid::Uuid::new_v4()));
        std::fs::create_dir_all(&dir).expect("tmp");
        let file = dir.join("namespace");
        std::fs::write(&file, "from-file\n").expect("write");
        let a = parse(&["-l"]).expect("ok");
        let s = a.resolve_in(&DEFAULTS, &file).expect("ok");
        assert_eq!(s.election.expect("on").namespace, "from-file");
        let err = a
            .resolve_in(&DEFAULTS, &dir.join("missing"))
            .expect_err("no namespace");
        assert_eq!(err.flag, "leader-election-namespace");
        assert!(err.to_string().contains("POD_NAMESPACE"), "{err}");
        let _ = std::fs::remove_dir_all(dir);
    }

    #[test]
    fn bad_timings_name_the_flag_and_exit_2() {
        let cases: [(&[&str], &str); 8] = [
            (
                &["--lease-duration=10s", "--renew-deadline=10s"],
                "renew-deadline",
            ),
            (
                &["--lease-duration=10s", "--renew-deadline=15s"],
                "renew-deadline",
            ),
            (
                &["--renew-deadline=2s", "--retry-period=2s", "--lease-duration=5s"],
                "retry-period",
            ),
            (&["--retry-period=0s"], "retry-period"),
            (&["--lease-duration=0"], "lease-duration"),
            (&["--lease-duration=50500ms"], "lease-duration"),
            (
                &[
                    "--lease-duration=4s",
                    "--renew-deadline=3500ms",
                    "--retry-period=1s",
                ],
                "lease-duration",
            ),
            (&["--lease-duration=2h"], "lease-duration"),
        ];
        for (args, flag) in cases {
            let err = resolve(args).expect_err("invalid timings");
            assert_eq!(err.flag, flag, "{args:?}: {err}");
            assert!(err.message.contains(&format!("--{flag}")), "{err}");
            assert!(
                !err.message.contains('_') || err.message.contains("min_stop_margin"),
                "{err}"
            );
            assert_eq!(err.to_clap().exit_code(), UsageError::EXIT_CODE);
        }
    }

    #[test]
    fn clap_rejects_unparsable_values_with_exit_2_naming_the_flag() {
        for (args, flag) in [
            (&["--lease-duration=fifteen"][..], "--lease-duration"),
            (&["--on-lost-leadership=panic"], "--on-lost-leadership"),
            (&["--metrics-bind-address=nope"], "--metrics-bind-address"),
            (&["--log-format=xml"], "--log-format"),
        ] {
            let err = parse(args).expect_err("invalid");
            assert_eq!(err.exit_code(), 2);
            assert!(err.to_string().contains(flag), "{err}");
        }
        let err = parse(&["--no-such-flag"]).expect_err("unknown flag");
        assert_eq!(err.exit_code(), 2);
    }

    #[test]
    fn bad_log_level_is_a_usage_error() {
        let err = resolve(&["--log-level=info,=[{"]).expect_err("bad filter");
        assert_eq!(err.flag, "log-level");
    }

    #[test]
    fn empty_lease_id_is_rejected() {
        let err =
            resolve(&["-l", "--leader-election-namespace=n", "--leader-election-id="]).expect_err("empty");
        assert_eq!(err.flag, "leader-election-id");
    }

    #[test]
    fn help_shows_binary_defaults() {
        use clap::CommandFactory;
        let help = DEFAULTS.apply_to(Cli::command()).render_long_help().to_string();
        assert!(help.contains("[default: test-lease]"), "{help}");
        assert!(help.contains("[default: 60s]"), "{help}");
    }
}
