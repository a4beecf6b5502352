//! The outcome of a run: the faults and replica processes as they ran, the checker's findings, and
//! the human-readable summary.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::path::PathBuf;
use std::time::Duration;

use jiff::Timestamp;

use super::{Fault, Group, REPLICAS};
use crate::checker::Violation;

/// One fault as it ran.
#[derive(Debug, Clone)]
pub struct FaultRecord {
    /// The kind.
    pub fault: Fault,
    /// The group whose leader it hit; `None` for faults of the whole control plane.
    pub group: Option<Group>,
    /// When it began.
    pub start: Timestamp,
    /// When the schedule had recovered from it.
    pub end: Timestamp,
    /// What happened, in words.
    pub detail: String,
}

/// One replica process as it ran.
#[derive(Debug, Clone)]
pub struct ReplicaRecord {
    /// Its identity.
    pub identity: String,
    /// Its group.
    pub group: Group,
    /// The version its build reports.
    pub version: &'static str,
    /// Its `FAKETIME` offset, if skewed.
    pub clock: Option<String>,
    /// Its PID.
    pub pid: u32,
    /// Its log.
    pub log: PathBuf,
    /// How the schedule ended it (`None`: still running, or it exited on its own).
    pub ended_by: Option<String>,
    /// Its exit status, once it exited.
    pub exit: Option<String>,
}

/// The outcome of a run.
#[derive(Debug, Clone, Default)]
pub struct Report {
    /// The faults, in order.
    pub faults: Vec<FaultRecord>,
    /// Leadership changes during each kind of fault (both Leases), from the audit log.
    pub changes_by_fault: BTreeMap<Fault, usize>,
    /// Leadership changes per Lease during the faults, from the audit log.
    pub changes_by_group: BTreeMap<Group, usize>,
    /// All leadership changes during the faults.
    pub total_changes: usize,
    /// Leadership changes the schedule saw live (polling the Leases), which decided when to stop.
    pub live_changes: usize,
    /// The checker's findings: lock takeovers before expiry and writes outside the writer's terms.
    pub violations: Vec<Violation>,
    /// Writes outside their writer's term that arrived within [`IN_FLIGHT_GRACE`](super::IN_FLIGHT_GRACE)
    /// of a SIGCONT, from the replica that had been stopped: requests that had passed the fence check but
    /// were not yet on the wire when SIGSTOP froze the process, so that they left it as soon as it ran
    /// again. They are not counted as violations (see the module docs); each names its outcome (HTTP
    /// status).
    pub in_flight_at_stop: Vec<String>,
    /// How many controller writes the checker examined.
    pub checked_writes: usize,
    /// Every other failed expectation: unexpected exits, resources not Ready, duplicates, ...
    pub problems: Vec<String>,
    /// Every replica process started.
    pub replicas: Vec<ReplicaRecord>,
    /// The versions in the user agents of each group's Lease writes.
    pub versions: BTreeMap<Group, BTreeSet<String>>,
    /// Stand-alone NopResources and XRs.
    pub resources: (usize, usize),
    /// Time to set up and converge before the first fault.
    pub setup: Duration,
    /// Time injecting faults.
    pub schedule: Duration,
    /// Time to converge after the last fault and check.
    pub settle: Duration,
}

impl Report {
    /// Whether the run met every expectation, with at least `min_changes` leadership changes.
    pub fn passed(&self, min_changes: usize) -> bool {
        self.violations.is_empty() && self.problems.is_empty() && self.total_changes >= min_changes
    }

    /// A human-readable summary.
    pub fn summary(&self) -> String {
        let mut s = String::new();
        let _ = writeln!(
            s,
            "fault schedule: {} faults, {} leadership changes ({} seen live), {} NopResources + {} XRs",
            self.faults.len(),
            self.total_changes,
            self.live_changes,
            self.resources.0,
            self.resources.1
        );
        let _ = writeln!(
            s,
            "time: setup {:.0}s, faults {:.0}s, settle+check {:.0}s, total {:.0}s",
            self.setup.as_secs_f64(),
            self.schedule.as_secs_f64(),
            self.settle.as_secs_f64(),
            (self.setup + self.schedule + self.settle).as_secs_f64()
        );
        let _ = writeln!(s, "changes per fault kind:");
        for f in Fault::ALL {
            let runs = self.faults.iter().filter(|r| r.fault == f).count();
            let _ = writeln!(
                s,
                "  {:<18} {:>3} runs {:>4} changes",
                f.name(),
                runs,
                self.changes_by_fault.get(&f).copied().unwrap_or(0)
            );
        }
        for (g, n) in &self.changes_by_group {
            let versions: Vec<&str> = self
                .versions
                .get(g)
                .map(|v| v.iter().map(String::as_str).collect())
                .unwrap_or_default();
            let _ = writeln!(s, "  {g:<18} {n:>4} changes, versions seen {versions:?}");
        }
        let restarts = self.replicas.len().saturating_sub(2 * REPLICAS);
        let skewed = self.replicas.iter().filter(|r| r.clock.is_some()).count();
        let _ = writeln!(
            s,
            "replicas: {} processes ({restarts} started by the schedule, {skewed} with a skewed clock)",
            self.replicas.len()
        );
        let _ = writeln!(
            s,
            "checker: {} violations in {} controller writes",
            self.violations.len(),
            self.checked_writes
        );
        for v in self.violations.iter().take(20) {
            let _ = writeln!(s, "  VIOLATION {v}");
        }
        let _ = writeln!(
            s,
            "in flight at SIGSTOP, delivered after SIGCONT (not violations): {}",
            self.in_flight_at_stop.len()
        );
        for w in &self.in_flight_at_stop {
            let _ = writeln!(s, "  {w}");
        }
        let _ = writeln!(s, "problems: {}", self.problems.len());
        for p in self.problems.iter().take(20) {
            let _ = writeln!(s, "  PROBLEM {p}");
        }
        s
    }
}
