//! The outcome of a run: the faults and replica processes as they ran, the checker's findings, and
//! the human-readable summary.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::path::PathBuf;
use std::time::Duration;

use jiff::Timestamp;
use serde_json::json;

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
        let _ = writeln!(
            s,
            "audit log: {} files, {} requests, {} unparsable lines, {} replica writes cut off",
            self.audit.files, self.audit.requests, self.audit.unparsable, self.audit.cut_off_writes
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
        s
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

impl Report {
    /// Violations found with the fence off and with it on (by when the offending write arrived).
    pub fn violations_by_mode(&self) -> (usize, usize) {
        let on = self
            .violations
            .iter()
            .filter(|v| self.fence_from.is_some_and(|f| v.time >= f))
            .count();
        (self.violations.len() - on, on)
    }

    /// Late writes the fence refused (403).
    pub fn fence_refusals(&self) -> usize {
        self.late_writes
            .iter()
            .filter(|w| w.fenced && w.write.code == 403)
            .count()
    }

    /// Every figure, as JSON (what `cargo xtask chaos` writes to `docs/reliability.json`).
    pub fn to_json(&self) -> serde_json::Value {
        let faults: serde_json::Map<String, serde_json::Value> = Fault::ALL
            .iter()
            .map(|f| {
                let runs = self.faults.iter().filter(|r| r.fault == *f).count();
                let changes = self.changes_by_fault.get(f).copied().unwrap_or(0);
                (
                    f.name().to_owned(),
                    json!({ "runs": runs, "leadership_changes": changes }),
                )
            })
            .collect();
        let groups: serde_json::Map<String, serde_json::Value> = self
            .changes_by_group
            .iter()
            .map(|(g, n)| {
                let versions: Vec<&String> = self
                    .versions
                    .get(g)
                    .map(|v| v.iter().collect())
                    .unwrap_or_default();
                (
                    g.to_string(),
                    json!({ "leadership_changes": n, "versions": versions }),
                )
            })
            .collect();
        let (off, on) = self.violations_by_mode();
        let mut codes: BTreeMap<String, usize> = BTreeMap::new();
        for w in self.late_writes.iter().filter(|w| w.frozen) {
            *codes.entry(w.write.code.to_string()).or_default() += 1;
        }
        json!({
            "faults": self.faults.len(),
            "faults_by_kind": faults,
            "leadership_changes": self.total_changes,
            "leadership_changes_seen_live": self.live_changes,
            "leadership_changes_by_lease": groups,
            "replica_processes": self.replicas.len(),
            "fence_off": {
                "writes_checked": self.checked_writes - self.checked_writes_fenced,
                "leadership_changes": self.total_changes - self.changes_fenced,
                "violations": off,
            },
            "fence_on": {
                "in_force_from": self.fence_from.map(|t| t.to_string()),
                "writes_checked": self.checked_writes_fenced,
                "leadership_changes": self.changes_fenced,
                "violations": on,
                "fence_refusals": self.fence_refusals(),
            },
            "writes_checked": self.checked_writes,
            "writes_attributed_by_pod": self.attributed_writes,
            "violations": self.violations.len(),
            "violation_list": self.violations.iter().map(ToString::to_string).collect::<Vec<_>>(),
            "late_writes": self.late_writes.len(),
            "frozen_writes": self.late_writes.iter().filter(|w| w.frozen).count(),
            "frozen_writes_by_code": codes,
            "late_write_list": self.late_writes.iter().map(|w| json!({
                "time": w.write.time.to_string(),
                "writer": w.write.identity,
                "object": w.write.object,
                "code": w.write.code,
                "frozen": w.frozen,
                "fence": w.fenced,
                "holder": w.write.holder,
            })).collect::<Vec<_>>(),
            "resources": {
                "expected": self.census.expected,
                "present": self.census.present,
                "ready": self.census.ready,
                "lost": self.census.lost(),
                "stand_alone_nop_resources": self.resources.0,
                "xrs": self.resources.1,
            },
            "audit_log": {
                "files": self.audit.files,
                "requests": self.audit.requests,
                "unparsable_lines": self.audit.unparsable,
                "replica_writes_cut_off": self.audit.cut_off_writes,
            },
            "problems": self.problems,
            "seconds": {
                "setup": self.setup.as_secs(),
                "faults": self.schedule.as_secs(),
                "settle_and_check": self.settle.as_secs(),
            },
        })
    }

    /// The figures as Markdown (what `cargo xtask chaos` writes to `docs/reliability.md`), after a
    /// paragraph that says how the run was made (`how`).
    pub fn to_markdown(&self, how: &str) -> String {
        let mut s = String::new();
        let (off, on) = self.violations_by_mode();
        let frozen: Vec<&LateWrite> = self.late_writes.iter().filter(|w| w.frozen).collect();
        let _ = writeln!(s, "# Reliability under faults\n");
        let _ = writeln!(s, "{how}\n");
        let _ = writeln!(s, "| Figure | Value |\n|---|---|");
        let rows: Vec<(&str, String)> = vec![
            ("Faults injected", self.faults.len().to_string()),
            ("Leadership changes (audit log)", self.total_changes.to_string()),
            (
                "Leadership changes with the fence off / on",
                format!(
                    "{} / {}",
                    self.total_changes - self.changes_fenced,
                    self.changes_fenced
                ),
            ),
            ("Replica processes started", self.replicas.len().to_string()),
            ("Controller writes checked", self.checked_writes.to_string()),
            (
                "Controller writes checked with the fence off / on",
                format!(
                    "{} / {}",
                    self.checked_writes - self.checked_writes_fenced,
                    self.checked_writes_fenced
                ),
            ),
            (
                "Writes attributed by the authenticated pod",
                self.attributed_writes.to_string(),
            ),
            (
                "Violations with the fence off (self-fencing alone)",
                off.to_string(),
            ),
            ("Violations with the fence on", on.to_string()),
            (
                "Late writes (outside the writer's terms)",
                self.late_writes.len().to_string(),
            ),
            ("Late writes by frozen leaders", frozen.len().to_string()),
            ("Fence refusals (403)", self.fence_refusals().to_string()),
            (
                "Resources expected / present / Ready / lost",
                format!(
                    "{} / {} / {} / {}",
                    self.census.expected,
                    self.census.present,
                    self.census.ready,
                    self.census.lost()
                ),
            ),
            (
                "Audit log files / requests / unparsable lines",
                format!(
                    "{} / {} / {}",
                    self.audit.files, self.audit.requests, self.audit.unparsable
                ),
            ),
            (
                "Replica writes cut off by an apiserver restart",
                self.audit.cut_off_writes.to_string(),
            ),
            (
                "Problems (unexpected exits, resources not Ready, duplicates)",
                self.problems.len().to_string(),
            ),
        ];
        for (k, v) in rows {
            let _ = writeln!(s, "| {k} | {v} |");
        }
        let _ = writeln!(
            s,
            "\n## Faults by kind\n\n| Fault | Runs | Leadership changes |\n|---|---|---|"
        );
        for f in Fault::ALL {
            let runs = self.faults.iter().filter(|r| r.fault == f).count();
            let n = self.changes_by_fault.get(&f).copied().unwrap_or(0);
            let _ = writeln!(s, "| {} | {runs} | {n} |", f.name());
        }
        let _ = writeln!(s, "\n## Frozen leaders' late writes\n");
        if frozen.is_empty() {
            let _ = writeln!(
                s,
                "None: no leader resumed from SIGSTOP sent a write after its term."
            );
        } else {
            let _ = writeln!(
                s,
                "| Received | Writer | Fence | Object | HTTP |\n|---|---|---|---|---|"
            );
            for w in &frozen {
                let _ = writeln!(
                    s,
                    "| {} | {} | {} | {} | {} |",
                    w.write.time,
                    w.write.identity,
                    if w.fenced { "on" } else { "off" },
                    w.write.object,
                    w.write.code
                );
            }
        }
        let others: Vec<&LateWrite> = self.late_writes.iter().filter(|w| !w.frozen).collect();
        if !others.is_empty() {
            let _ = writeln!(s, "\n## Other late writes\n");
            for w in others {
                let _ = writeln!(s, "- {}", w.describe());
            }
        }
        let _ = writeln!(s, "\n## Violations\n");
        if self.violations.is_empty() {
            let _ = writeln!(s, "None.");
        }
        for v in &self.violations {
            let _ = writeln!(s, "- {v}");
        }
        if !self.problems.is_empty() {
            let _ = writeln!(s, "\n## Problems\n");
            for p in &self.problems {
                let _ = writeln!(s, "- {}", p.lines().next().unwrap_or_default());
            }
        }
        s
    }
}
