//! Keeping a connection ready for a standby's acquiring write.
//!
//! kube's client speaks HTTP/1.1, one request at a time per connection. A standby's watch holds one
//! connection of the elector's pool for as long as it runs, and in steady state a standby makes no
//! other request, so its pool has no idle connection. Without this task, the acquiring write, sent the
//! moment a release is seen, would first open a TCP connection and a TLS session: a handshake on the
//! apiserver's CPU inside the handover, on a machine often busy with the very Pod deletion or rollout
//! that caused it.
//!
//! So while this candidate follows, a task sends `GET /version` through the elector's client at once and
//! then every [`KEEP_WARM`]: the pool opens a second connection beside the watch's and keeps it idle for
//! the next request. The apiserver closes a connection idle for 90 s (its `IdleTimeout`), as hyper's pool
//! also drops one idle for 90 s, so the period stays below that, with 10 s to spare. Once every 80 s,
//! with the watch's own renewal about every 290 s, a standby stays under one request a minute. `/version` is readable by every
//! authenticated user (the `system:public-info-viewer` ClusterRole), needs no RBAC of its own and is
//! answered from the apiserver's memory, without etcd. A leader renews every retry period through the
//! same pool, so the task sends nothing while this candidate leads.

use std::time::Duration;

use tokio::sync::watch;

use crate::leadership::Leadership;

/// How often a following candidate sends its keep-warm request.
pub const KEEP_WARM: Duration = Duration::from_secs(80);

/// Aborts the keep-warm task when dropped.
#[derive(Debug)]
pub(crate) struct WarmTask(tokio::task::JoinHandle<()>);

impl Drop for WarmTask {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Spawns the task: while `leadership` says this candidate follows, `GET /version` through `client`,
/// bounded by `timeout`, at once and then every `period`. Failures are logged at debug level and
/// otherwise ignored: the watch and the acquiring write report an unreachable apiserver themselves.
pub(crate) fn spawn(
    client: kube::Client,
    leadership: watch::Receiver<Leadership>,
    period: Duration,
    timeout: Duration,
) -> WarmTask {
    WarmTask(tokio::spawn(async move {
        let mut ticks = tokio::time::interval(period);
        ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            ticks.tick().await;
            if matches!(*leadership.borrow(), Leadership::Leading { .. }) {
                continue;
            }
            match tokio::time::timeout(timeout, client.apiserver_version()).await {
                Ok(Ok(_)) => tracing::trace!("keep-warm request answered"),
                Ok(Err(e)) => tracing::debug!(error = %e, "keep-warm request failed"),
                Err(_) => tracing::debug!(?timeout, "keep-warm request timed out"),
            }
        }
    }))
}
