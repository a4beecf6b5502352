//! Checking a run against the audit log: the checker's findings, the leadership changes per fault
//! and per Lease, the versions seen, and writes that were in flight when a leader was frozen.

use std::collections::BTreeSet;
use std::time::Duration;

use jiff::Timestamp;
use testenv::AuditEvent;

use super::world::World;
use super::{CURRENT_VERSION, Fault, Group, IN_FLIGHT_GRACE, NEXT_VERSION, Report};
use crate::checker::{self, Lock, Violation};

impl World<'_> {
    pub(super) async fn check(&mut self, from: Timestamp, until: Timestamp) -> anyhow::Result<Report> {
        // The audit log is written synchronously, but give the last lines a moment.
        tokio::time::sleep(Duration::from_secs(1)).await;
        let audit = self.cp.cluster().audit().read()?;
        let events = audit.events;
        let mut report = Report {
            faults: self.faults.clone(),
            resources: (self.config.nop_resources, self.config.xrs),
            ..Report::default()
        };
        for g in Group::ALL {
            let lock = Lock::lease(&self.ns, g.lease());
            let identities: BTreeSet<&str> = self
                .history
                .iter()
                .filter(|r| r.group == g)
                .map(|r| r.identity.as_str())
                .collect();
            let controller_write = |e: &AuditEvent| {
                e.agent_identity().is_some_and(|i| identities.contains(i))
                    && e.resource != "leases"
                    && !(e.resource == "events" && e.name.starts_with(g.lease()))
            };
            report.checked_writes += events
                .iter()
                .filter(|e| e.is_write() && controller_write(e))
                .count();
            report.violations.extend(checker::check_lock(&events, &lock));
            for v in checker::check_writes(&events, &lock, controller_write) {
                match self.in_flight_at_stop(&v, &events) {
                    Some(what) => report.in_flight_at_stop.push(what),
                    None => report.violations.push(v),
                }
            }

            let versions: BTreeSet<String> = events
                .iter()
                .filter(|e| e.resource == "leases" && e.name == g.lease() && e.is_write())
                .filter(|e| e.agent_identity().is_some_and(|i| identities.contains(i)))
                .filter_map(|e| {
                    let rest = e.user_agent.strip_prefix(g.binary())?.strip_prefix('/')?;
                    Some(rest.split(' ').next()?.to_owned())
                })
                .collect();
            let rolled = self
                .faults
                .iter()
                .any(|f| f.fault == Fault::RollingUpdate && f.group == Some(g));
            if rolled && !(versions.contains(CURRENT_VERSION) && versions.contains(NEXT_VERSION)) {
                self.problems.push(format!(
                    "{g}: a rolling update ran, but the Lease writes show the versions {versions:?}"
                ));
            }
            report.versions.insert(g, versions);

            let terms = checker::terms(&events, &lock);
            let mut n = 0;
            for pair in terms.windows(2) {
                let (prev, next) = (&pair[0], &pair[1]);
                if prev.holder == next.holder || next.start < from || next.start > until {
                    continue;
                }
                n += 1;
                let fault = self
                    .faults
                    .iter()
                    .rev()
                    .find(|f| f.start <= next.start)
                    .map(|f| f.fault);
                if let Some(f) = fault {
                    *report.changes_by_fault.entry(f).or_default() += 1;
                }
            }
            report.changes_by_group.insert(g, n);
            report.total_changes += n;
        }
        for r in &self.history {
            let log = std::fs::read_to_string(&r.log).unwrap_or_default();
            if log.contains("panicked") {
                self.problems
                    .push(format!("{} panicked; see {}", r.identity, r.log.display()));
            }
        }
        report.problems = self.problems.clone();
        Ok(report)
    }

    /// Whether `v` is a write that the replica had in flight when SIGSTOP froze it: it arrived within
    /// [`IN_FLIGHT_GRACE`] of the SIGCONT. Such a write passed the fence check during the term; it can
    /// only have left the process after SIGCONT because the freeze caught it between the check and the
    /// socket. A write *begun* after SIGCONT would have been refused by the fence, whose deadline is on
    /// the monotonic clock, which ran on while the process was stopped.
    fn in_flight_at_stop(&self, v: &Violation, events: &[AuditEvent]) -> Option<String> {
        let grace = jiff::SignedDuration::try_from(IN_FLIGHT_GRACE).unwrap_or_default();
        let pause = self.pauses.iter().find(|p| {
            p.identity == v.identity
                && p.resumed <= v.time
                && p.resumed.checked_add(grace).is_ok_and(|end| v.time <= end)
        })?;
        let code = events
            .iter()
            .find(|e| e.received == v.time && e.agent_identity() == Some(v.identity.as_str()))
            .map_or(0, |e| e.code);
        Some(format!(
            "{} wrote {} {:.0} ms after its SIGCONT (HTTP {code}; holder {})",
            v.identity,
            v.object,
            v.time.duration_since(pause.resumed).as_secs_f64() * 1000.0,
            v.holder.as_deref().unwrap_or("nobody")
        ))
    }
}
