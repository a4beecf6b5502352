//! The end of a run: cleaning up (unless kept), the summary, the `RESULT` line and duration formatting.

use std::time::Duration;

use anyhow::{Result, bail, ensure};
use nix::sys::signal::Signal;

use super::cleanup::{delete_examples, delete_rbac_and_namespace};
use super::replica::Replica;
use super::session::Demo;
use super::state::state_path;
use super::{DEPLOYMENTS, KILLED, interrupted};

impl Demo {
    /// After the scenario (`Some`) or Ctrl-C (`None`): cleans up (unless kept) and reports.
    pub(super) async fn finish(mut self, result: Option<Result<()>>) -> Result<i32> {
        let failed = match &result {
            Some(Err(e)) => Some(format!("{e:#}")),
            _ => None,
        };
        if self.tty {
            print!("\x1b[H\x1b[2J");
            let view = self.view().await;
            println!("{view}");
        }
        if let Some(e) = &failed {
            eprintln!("[demo] error: {e}");
        }
        if self.options.keep && failed.is_none() && result.is_some() {
            return self.keep();
        }
        if result.is_none() {
            eprintln!("[demo] Ctrl-C: cleaning up (Ctrl-C again to stop at once)");
        }
        let cleanup = async {
            if !self.deleted {
                let _ = delete_examples(&self.client, true, |m| eprintln!("[demo] {m}")).await;
            }
            let _ = self.audit.poll();
            futures::future::join_all(self.replicas.iter_mut().map(Replica::stop)).await;
            // Let the apiserver write the last requests' audit events.
            tokio::time::sleep(Duration::from_millis(300)).await;
            let _ = self.audit.poll();
            delete_rbac_and_namespace(&self.client).await
        };
        tokio::select! {
            r = cleanup => r?,
            _ = interrupted() => {
                eprintln!("[demo] stopping at once");
                return Ok(130);
            }
        }
        let _ = std::fs::remove_file(state_path(&self.cluster.dir));
        let summary = self.summary();
        for line in &summary.lines {
            println!("[demo] {line}");
        }
        if let Some(e) = failed {
            bail!("{e}");
        }
        if result.is_none() {
            return Ok(if self.running { 0 } else { 130 });
        }
        if self.options.ci {
            ensure!(
                summary.denied == 0,
                "{} requests of the demo's ServiceAccounts were denied (403)",
                summary.denied
            );
            let r = &self.results;
            println!(
                "RESULT mode=local graceful_handover_ms={} crash_failover_ms={} propagated_ms={} xr_ready_ms={} \
                 requests={} denied={} wall_s={:.1}",
                ms(r.graceful.as_ref().map(|h| h.took)),
                ms(r.crash.as_ref().map(|h| h.took)),
                ms(r.propagated),
                ms(r.ready),
                summary.requests,
                summary.denied,
                self.wall.elapsed().as_secs_f64()
            );
        }
        Ok(0)
    }

    fn summary(&self) -> Summary {
        let mut lines = Vec::new();
        let r = &self.results;
        for h in [&r.graceful, &r.crash].into_iter().flatten() {
            lines.push(format!(
                "{} handover of {}: {} -> {} in {}",
                if h.signal == Signal::SIGKILL {
                    "crash (SIGKILL)"
                } else {
                    "graceful (SIGTERM)"
                },
                KILLED,
                h.from,
                h.to,
                show(h.took)
            ));
        }
        let (mut requests, mut denied) = (0, 0);
        for name in DEPLOYMENTS {
            let s = self.audit.users.get(name).cloned().unwrap_or_default();
            requests += s.requests;
            denied += s.denied;
            lines.push(format!(
                "RBAC {name}: {} requests, {} denied (403)",
                s.requests, s.denied
            ));
            for e in &s.examples {
                lines.push(format!("  denied: {e}"));
            }
        }
        Summary {
            lines,
            requests,
            denied,
        }
    }
}

struct Summary {
    lines: Vec<String>,
    requests: u64,
    denied: u64,
}

pub(super) fn show(d: Duration) -> String {
    if d < Duration::from_secs(1) {
        format!("{} ms", d.as_millis())
    } else {
        format!("{:.2} s", d.as_secs_f64())
    }
}

fn ms(d: Option<Duration>) -> String {
    d.map(|d| d.as_millis().to_string()).unwrap_or_else(|| "-".into())
}
