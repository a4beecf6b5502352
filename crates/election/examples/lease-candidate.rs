//! `lease-candidate`: this crate's elector as a process, with the same flags and the same JSON-line
//! output as the client-go candidate of the test bed (`harness lease-candidate`, see
//! `tests/control-plane/candidate.go`), so that `cargo xtask bench` can run both side by side.
//!
//! Flags: `--kubeconfig --namespace --name --identity --lease-duration --renew-deadline --retry-period
//! --release-on-cancel`; durations in Go's syntax (`15s`, `500ms`, `1m30s`). One JSON line per event:
//! `started`, `new_leader`, `started_leading`, `stopped_leading`, `signal`, `exited`, each with
//! `identity`, `leader`, `wall` (RFC 3339) and `mono_ns` (`CLOCK_MONOTONIC`).
//!
//! The user agent is `lease-candidate-rs/<version> (<identity>)`. On SIGTERM or SIGINT it prints
//! `signal`, resolves the elector's shutdown (which releases the Lease when leading and
//! `--release-on-cancel`), waits for `run` to return and prints `exited`. A second signal exits at once
//! with status 1.
//!
//! It runs on a current-thread runtime: a candidate does little, and the benchmark reports its RSS.

use std::{io::Write, path::PathBuf, time::Duration};

use anyhow::{Context, bail};
use clap::Parser;
use election::{ElectorBuilder, Leadership, Timings, duration::parse_duration};
use kube::{
    Client, Config,
    config::{KubeConfigOptions, Kubeconfig},
};
use tokio::signal::unix::{SignalKind, signal};

/// client-go's leader election, the Rust way, as a process.
#[derive(Parser, Debug)]
#[command(name = "lease-candidate", version)]
struct Args {
    /// Path to a kubeconfig.
    #[arg(long, env = "KUBECONFIG")]
    kubeconfig: PathBuf,
    /// Namespace of the Lease.
    #[arg(long, default_value = "default")]
    namespace: String,
    /// Name of the Lease.
    #[arg(long)]
    name: String,
    /// Identity of this candidate.
    #[arg(long)]
    identity: String,
    /// Lease duration.
    #[arg(long, value_parser = parse_duration, default_value = "15s")]
    lease_duration: Duration,
    /// Renew deadline.
    #[arg(long, value_parser = parse_duration, default_value = "10s")]
    renew_deadline: Duration,
    /// Retry period.
    #[arg(long, value_parser = parse_duration, default_value = "2s")]
    retry_period: Duration,
    /// Release the Lease on SIGTERM/SIGINT.
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set, num_args = 0..=1, default_missing_value = "true")]
    release_on_cancel: bool,
}

fn mono_ns() -> i64 {
    testenv::monotonic_ns()
}

/// Prints one event line, flushed at once.
fn emit(event: &str, identity: &str, leader: &str) {
    let line = serde_json::json!({
        "event": event,
        "identity": identity,
        "leader": leader,
        "wall": jiff::Timestamp::now().to_string(),
        "mono_ns": mono_ns(),
    });
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{line}");
    let _ = out.flush();
}

async fn client(args: &Args) -> anyhow::Result<Client> {
    let kc = Kubeconfig::read_from(&args.kubeconfig)
        .with_context(|| format!("reading {}", args.kubeconfig.display()))?;
    let mut config = Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default()).await?;
    let agent = format!(
        "lease-candidate-rs/{} ({})",
        env!("CARGO_PKG_VERSION"),
        args.identity
    );
    config
        .headers
        .push((http::header::USER_AGENT, http::HeaderValue::from_str(&agent)?));
    // As client-go: a failed Lease write is retried by the elector on its schedule, not by the client.
    config.default_retry = false;
    Ok(Client::try_from(config)?)
}

async fn run(args: Args) -> anyhow::Result<()> {
    if args.name.is_empty() || args.identity.is_empty() {
        bail!("--name and --identity are required");
    }
    let client = client(&args).await?;
    let elector = ElectorBuilder::new(client, &args.namespace, &args.name, &args.identity)
        .timings(Timings::new(
            args.lease_duration,
            args.renew_deadline,
            args.retry_period,
        ))
        .release_on_cancel(args.release_on_cancel)
        .build()?;
    let identity = args.identity.clone();

    let mut leadership = elector.leadership();
    let monitor = {
        let identity = identity.clone();
        tokio::spawn(async move {
            let mut leading = false;
            let mut leader: Option<String> = None;
            loop {
                let now = leadership.borrow_and_update().clone();
                match now {
                    Leadership::Leading { .. } => {
                        if leader.as_deref() != Some(identity.as_str()) {
                            leader = Some(identity.clone());
                            emit("new_leader", &identity, &identity);
                        }
                        if !leading {
                            leading = true;
                            emit("started_leading", &identity, &identity);
                        }
                    }
                    Leadership::Following { leader: seen } => {
                        if leading {
                            leading = false;
                            emit("stopped_leading", &identity, "");
                        }
                        if let Some(seen) = seen
                            && leader.as_ref() != Some(&seen)
                        {
                            emit("new_leader", &identity, &seen);
                            leader = Some(seen);
                        }
                    }
                }
                if leadership.changed().await.is_err() {
                    break;
                }
            }
            if leading {
                emit("stopped_leading", &identity, "");
            }
        })
    };

    let mut term = signal(SignalKind::terminate())?;
    let mut int = signal(SignalKind::interrupt())?;
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let sig_identity = identity.clone();
    tokio::spawn(async move {
        tokio::select! { _ = term.recv() => {}, _ = int.recv() => {} }
        emit("signal", &sig_identity, "");
        let _ = stop_tx.send(());
        tokio::select! { _ = term.recv() => {}, _ = int.recv() => {} }
        std::process::exit(1);
    });

    emit("started", &identity, "");
    let result = elector
        .run(async move {
            let _ = stop_rx.await;
        })
        .await;
    let _ = tokio::time::timeout(Duration::from_secs(1), monitor).await;
    emit("exited", &identity, "");
    result.map_err(Into::into)
}

fn main() -> std::process::ExitCode {
    let args = Args::parse();
    let rt = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("lease-candidate: runtime: {e}");
            return std::process::ExitCode::from(2);
        }
    };
    match rt.block_on(run(args)) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("lease-candidate: {e:#}");
            std::process::ExitCode::from(2)
        }
    }
}
