//! SIGTERM and SIGINT: the first starts a graceful shutdown, the second exits at once.
//!
//! The second signal exits with `128 + signal number` (143 for SIGTERM, 130 for SIGINT), the shell's
//! convention for death by signal, without releasing the Lease: leader work may still be running, so the
//! Lease must expire rather than be handed over.

use tokio::signal::unix::{SignalKind, signal};
use tokio_util::sync::CancellationToken;

/// Installs the handlers. `shutdown` and `signalled` are cancelled on the first signal (`signalled` only
/// by a signal, so that a shutdown asked for otherwise can still wait for one).
pub(crate) fn install(shutdown: CancellationToken, signalled: CancellationToken) -> std::io::Result<()> {
    let mut term = signal(SignalKind::terminate())?;
    let mut int = signal(SignalKind::interrupt())?;
    tokio::spawn(async move {
        let mut first = true;
        loop {
            let (name, code) = tokio::select! {
                Some(()) = term.recv() => ("SIGTERM", 128 + 15),
                Some(()) = int.recv() => ("SIGINT", 128 + 2),
                else => return,
            };
            if first {
                tracing::info!(signal = name, "shutting down; a second signal exits at once");
                shutdown.cancel();
                signalled.cancel();
                first = false;
            } else {
                tracing::warn!(
                    signal = name,
                    code,
                    "second signal: exiting now, without releasing the lease"
                );
                std::process::exit(code);
            }
        }
    });
    Ok(())
}
