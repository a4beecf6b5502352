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
    /// client-go's candidate rather than one of our builds.
    pub client_go: bool,
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

/// A write its writer sent outside its own terms, and what the apiserver answered.
#[derive(Debug, Clone)]
pub struct LateWrite {
    /// The write (its [`Violation::code`] is the answer).
    pub write: Violation,
    /// Sent by a replica after the schedule resumed it from SIGSTOP: a frozen leader's write.
    pub frozen: bool,
    /// Received with the server-side fence in force, on a resource the fence covers (not Events).
    pub fenced: bool,
}

/// What the audit log itself looked like.
#[derive(Debug, Clone, Default)]
pub struct AuditFigures {
    /// Files read (the current log and any rotated ones).
    pub files: usize,
    /// Lines that did not parse (must be 0).
    pub unparsable: usize,
    /// Completed requests in the log.
    pub requests: usize,
    /// Writes by the replicas that the apiserver received but never answered (cut off by a restart).
    pub cut_off_writes: usize,
    /// The replicas' leader-election Events (named after their Lease): not judged against terms, since
    /// the elector writes "stopped leading" as its term ends; counted so the verdict shows what it leaves out.
    pub election_events: usize,
}

/// client-go's candidate's part of the run (see [`Config::client_go`](super::Config)).
#[derive(Debug, Clone, Default)]
pub struct ClientGoFigures {
    /// Its processes (each start is a new candidate, as a new pod is).
    pub processes: usize,
    /// provider-nop Lease terms it held during the faults.
    pub terms: usize,
    /// Its writes the checker judged against its terms (its work; not its Lease writes).
    pub writes_checked: usize,
    /// Of its writes, those outside its terms, each refused or not.
    pub late_writes: usize,
    /// Of those, how many the apiserver refused (403 by the fence, or 409/404 before admission).
    pub late_writes_refused: usize,
    /// Violations among its writes.
    pub violations: usize,
}

/// The resources at the end of the run.
#[derive(Debug, Clone, Copy, Default)]
pub struct Census {
    /// NopResources (stand-alone and composed) and XRs that should exist.
    pub expected: usize,
    /// Of those, how many exist.
    pub present: usize,
    /// Of those, how many are Ready and Synced.
    pub ready: usize,
}

impl Census {
    /// Resources that should exist but do not.
    pub fn lost(&self) -> usize {
        self.expected.saturating_sub(self.present)
    }
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
    /// Leadership changes after the server-side fence came into force.
    pub changes_fenced: usize,
    /// The checker's findings: lock takeovers before expiry; writes outside the writer's terms that
    /// may have taken effect (admitted, or never answered); late writes the fence should have refused
    /// and did not; writes whose user agent lacks the identity of the pod that sent them.
    pub violations: Vec<Violation>,
    /// Every write sent outside its writer's terms, refused or not, with the apiserver's answer.
    pub late_writes: Vec<LateWrite>,
    /// How many controller writes the checker examined (each judged against its writer's terms).
    pub checked_writes: usize,
    /// Of those, how many were received with the fence in force.
    pub checked_writes_fenced: usize,
    /// Writes by the replicas' ServiceAccounts whose user agent was checked against their pod.
    pub attributed_writes: usize,
    /// When the server-side fence came into force, if it was installed.
    pub fence_from: Option<Timestamp>,
    /// The audit log's own figures.
    pub audit: AuditFigures,
    /// The resources at the end.
    pub census: Census,
    /// Every other failed expectation: unexpected exits, resources not Ready, duplicates, ...
    pub problems: Vec<String>,
    /// Every replica process started.
    pub replicas: Vec<ReplicaRecord>,
    /// client-go's candidate's part, if it joined.
    pub client_go: Option<ClientGoFigures>,
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
        let ours = self.replicas.iter().filter(|r| !r.client_go).count();
        let restarts = ours.saturating_sub(2 * REPLICAS);
        let skewed = self.replicas.iter().filter(|r| r.clock.is_some()).count();
        let _ = writeln!(
            s,
            "replicas: {} processes ({restarts} started by the schedule, {skewed} with a skewed clock)",
            self.replicas.len()
        );
        if let Some(g) = &self.client_go {
            let _ = writeln!(
                s,
                "client-go candidate (with the fence): {} processes, {} terms, {} writes checked, {} late \
                 writes ({} refused), {} violations",
                g.processes, g.terms, g.writes_checked, g.late_writes, g.late_writes_refused, g.violations
            );
        }
        let (off, on) = self.violations_by_mode();
        let _ = writeln!(
            s,
            "checker: {} violations in {} controller writes ({} with the fence off: {off} violations; \
             {} with it on: {on} violations); {} writes attributed by pod",
            self.violations.len(),
            self.checked_writes,
            self.checked_writes - self.checked_writes_fenced,
            self.checked_writes_fenced,
            self.attributed_writes
        );
        match self.fence_from {
            Some(t) => {
                let _ = writeln!(
                    s,
                    "server-side fence in force from {t} ({} leadership changes after it)",
                    self.changes_fenced
                );
            }
            None => {
                let _ = writeln!(s, "server-side fence: off for the whole run");
            }
        }
        for v in self.violations.iter().take(20) {
            let _ = writeln!(s, "  VIOLATION {v}");
        }
        more(&mut s, self.violations.len(), 20, "violations");
        let _ = writeln!(
            s,
            "late writes (outside the writer's terms): {} ({} by frozen leaders, {} refused by the fence with 403)",
            self.late_writes.len(),
            self.late_writes.iter().filter(|w| w.frozen).count(),
            self.fence_refusals()
        );
        for w in self.late_writes.iter().take(40) {
            let _ = writeln!(s, "  {}", w.describe());
        }
        more(&mut s, self.late_writes.len(), 40, "late writes");
        let _ = writeln!(
            s,
            "audit log: {} files, {} requests, {} unparsable lines, {} replica writes cut off, {} \
             leader-election Events not judged against terms (written at term boundaries)",
            self.audit.files,
            self.audit.requests,
            self.audit.unparsable,
            self.audit.cut_off_writes,
            self.audit.election_events
        );
        let _ = writeln!(
            s,
            "resources: {} expected, {} present, {} Ready, {} lost",
            self.census.expected,
            self.census.present,
            self.census.ready,
            self.census.lost()
        );
        let _ = writeln!(s, "problems: {}", self.problems.len());
        for p in self.problems.iter().take(20) {
            let _ = writeln!(s, "  PROBLEM {p}");
        }
        more(&mut s, self.problems.len(), 20, "problems");
        s
    }
}

/// Says how many of `total` items a list cut at `shown` left out (`cargo xtask chaos` writes them all
/// to docs/reliability.json).
fn more(s: &mut String, total: usize, shown: usize, what: &str) {
    if total > shown {
        let _ = writeln!(s, "  … and {} more {what}, not listed here", total - shown);
    }
}

impl LateWrite {
    /// One line: who wrote what, when, and the answer.
    pub fn describe(&self) -> String {
        let w = &self.write;
        format!(
            "{} {}{} {} {} -> HTTP {} (holder {})",
            w.time,
            w.identity,
            if self.frozen { " (frozen)" } else { "" },
            if self.fenced { "[fence on]" } else { "[fence off]" },
            w.object,
            w.code,
            w.holder.as_deref().unwrap_or("nobody")
        )
    }
}
