//! The outcome of a run: the faults and replica processes as they ran, the checker's findings, and
//! the human-readable summary.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::path::PathBuf;
use std::time::Duration;

use jiff::Timestamp;

use super::{Fault, GoPeer, Group, REPLICAS};

use crate::checker::{NextTerm, Settled, Violation};

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
    /// A Go peer rather than one of our builds.
    pub go: Option<GoPeer>,
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
    /// A Go provider that exited on its own on losing its Lease (controller-runtime's way), restarted by
    /// the schedule as the kubelet would.
    pub lost_lease_exit: bool,
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
    /// Delivered late by its relay: received while its sender was still stopped, after a freeze that
    /// caught writes in flight.
    pub held: bool,
    /// For a write whose answer did not tell (never answered, or a 5xx other than 503): the proof that it
    /// took no effect, by its object read back after the run ([`crate::checker::settle`]) or by the
    /// fence's earlier refusal of its writer ([`crate::checker::settle_by_fence`]).
    pub settled: Option<Settled>,
    /// For a write received inside its writer's term but answered after the next holder's term began:
    /// the `resourceVersion`s of the write and of that holder's acquiring write, when etcd committed the
    /// write first ([`crate::checker::committed_before_takeover`]). Not a violation; counted.
    pub committed_before_takeover: Option<(u64, u64)>,
    /// For a Go peer's write admitted after its own term had ended but before the next holder's term
    /// began ([`crate::checker::before_next_term`]): how that term ended and the next one. Until the next
    /// holder's acquisition is committed and seen by the fence's policy, the Lease still names the
    /// writer, so the fence, an admission check that cannot read the clock, admits the write. A finding,
    /// counted and listed, not a violation; ours get no such allowance, since they check their own term
    /// before every write.
    pub before_next_term: Option<NextTerm>,
    /// A Go peer's write received after the next holder's term began whose answer did not tell (never
    /// answered, or a 5xx other than 503: a request the peer canceled as it exited on losing the Lease,
    /// say) and that no proof settled: its outcome is unknown. Listed and counted next to the peer's
    /// control, not a violation; ours get no such allowance.
    pub unproven: bool,
}

/// One SIGSTOP freeze of a leader as it ran.
#[derive(Debug, Clone)]
pub struct FreezeRecord {
    /// The frozen leader.
    pub identity: String,
    /// Whether the freeze caught its writes in flight (its relay held them and delivered them late).
    pub in_flight: bool,
    /// Whether the server-side fence was in force.
    pub fenced: bool,
    /// Chunks of requests its relay held and delivered late.
    pub delivered_late: usize,
}

/// What the run was configured to show, so that the verdict can require that it did.
#[derive(Debug, Clone, Copy, Default)]
pub struct Expected {
    /// The server-side fence was to be installed part-way.
    pub fence: bool,
    /// client-go's candidate was to join under the fence.
    pub client_go: bool,
    /// The Go provider was to join under the fence.
    pub go_provider: bool,
}

impl Expected {
    /// Whether `peer` was to join.
    pub fn go_peer(&self, peer: GoPeer) -> bool {
        match peer {
            GoPeer::ClientGo => self.client_go,
            GoPeer::Provider => self.go_provider,
        }
    }
}

/// One check of the verdict: what it requires, the figure it judged, and whether it held.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Control {
    /// What must hold, in words.
    pub name: &'static str,
    /// The figure it was judged on.
    pub figure: String,
    /// Whether it held.
    pub held: bool,
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
    /// the elector writes "stopped leading" after its term ended (once it sees a successor hold the
    /// Lease, or 250 ms after its release); counted so the verdict shows what it leaves out.
    pub election_events: usize,
}

/// A Go peer's part of the run (see [`GoPeer`]).
#[derive(Debug, Clone, Default)]
pub struct GoPeerFigures {
    /// Its processes (each start is a new candidate, as a new pod is).
    pub processes: usize,
    /// Of those, how many exited on their own on losing the Lease (controller-runtime's way) and were
    /// restarted, as the kubelet would.
    pub lost_lease_exits: usize,
    /// provider-nop Lease terms it held during the faults.
    pub terms: usize,
    /// Its writes the checker judged against its terms (its work; not its Lease writes).
    pub writes_checked: usize,
    /// Of those, its work admitted: writes to its ConfigMap (client-go's candidate) or to NopResources
    /// (the Go provider) that the apiserver answered 2xx.
    pub work_admitted: usize,
    /// Of its writes, those outside its terms, each refused or not.
    pub late_writes: usize,
    /// Of those, how many it had in flight when it was frozen, delivered late by its relay (the others it
    /// sent after SIGCONT, before it noticed the lost Lease).
    pub late_writes_in_flight: usize,
    /// Of those, how many the apiserver refused (403 by the fence, or 409/404 before admission).
    pub late_writes_refused: usize,
    /// Of those, how many got an answer that did not tell (a 504 when the request's own deadline passed
    /// during a restart, say) and were proven to have taken no effect (see [`LateWrite::settled`]).
    pub late_writes_settled: usize,
    /// Of those, how many were admitted after its term had ended but arrived before the next holder's
    /// term began (see [`LateWrite::before_next_term`]): findings, not violations.
    pub late_writes_before_next_term: usize,
    /// Of those findings, how many etcd committed after the next holder's acquiring write (or in an order
    /// not recorded): the write may have overlapped the next term.
    pub late_writes_before_next_term_overlapping: usize,
    /// Of its late writes, how many got an answer that did not tell and were proven neither way (see
    /// [`LateWrite::unproven`]): findings, not violations.
    pub late_writes_unproven: usize,
    /// Its releases of the Lease while another held it ([`crate::checker::ForeignRelease`]).
    pub foreign_releases: Vec<crate::checker::ForeignRelease>,
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
    /// Controller writes received while another writer's Lease write ending their writer's term was
    /// in flight (arrived, not yet answered), which the checker counts inside the term
    /// ([`crate::checker::during_foreign_lock_write`]): shown next to the verdict.
    pub during_foreign_lock_write: usize,
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
    /// Every SIGSTOP freeze of a leader, in order.
    pub freezes: Vec<FreezeRecord>,
    /// What the run was configured to show.
    pub expected: Expected,
    /// Each Go peer's part, if it joined.
    pub go_peers: BTreeMap<GoPeer, GoPeerFigures>,
    /// provider-nop's Lease terms during the faults by the implementation that acted in them (the product
    /// in the user agent of the holder's writes inside the term, `provider-nop` for ours); terms in which
    /// the holder wrote nothing but the Lease under `-`.
    pub terms_by_implementation: BTreeMap<String, usize>,
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
    /// Whether the run met every expectation, with at least `min_changes` leadership changes: every
    /// control of [`Report::verdict`] held.
    pub fn passed(&self, min_changes: usize) -> bool {
        self.verdict(min_changes).iter().all(|c| c.held)
    }

    /// The controls that failed, in words (empty when the run passed).
    pub fn failures(&self, min_changes: usize) -> Vec<String> {
        self.verdict(min_changes)
            .into_iter()
            .filter(|c| !c.held)
            .map(|c| format!("{}: {}", c.name, c.figure))
            .collect()
    }

    /// Writes received inside their writer's term and answered after the next holder's term began, which
    /// etcd committed before that holder's acquiring write (by `resourceVersion`): not violations, since
    /// they did not overlap the next term, but shown next to the verdict.
    pub fn committed_before_takeover(&self) -> usize {
        self.late_writes
            .iter()
            .filter(|w| w.committed_before_takeover.is_some())
            .count()
    }

    /// The Go peers' writes admitted after their own term and before the next holder's
    /// ([`LateWrite::before_next_term`]), and those whose answer did not tell, proven neither way
    /// ([`LateWrite::unproven`]): findings, shown next to the verdict.
    pub fn peer_findings(&self) -> impl Iterator<Item = &LateWrite> {
        self.late_writes
            .iter()
            .filter(|w| w.before_next_term.is_some() || w.unproven)
    }

    /// Whether `identity` is one of the Go peers' processes.
    pub fn is_go_peer(&self, identity: &str) -> bool {
        self.replicas
            .iter()
            .any(|r| r.go.is_some() && r.identity == identity)
    }

    /// Late writes of frozen leaders that their relay delivered late with the fence off and that may
    /// have taken effect: the gap self-fencing cannot close, shown next to the fence-off figure (with
    /// the fence on, such a write is a violation).
    pub fn self_fencing_gap(&self) -> usize {
        self.late_writes
            .iter()
            .filter(|w| w.held && !w.fenced && w.may_have_taken_effect())
            .count()
    }

    /// Late writes of frozen leaders that their relay delivered with the fence off, and what became of
    /// them: `(delivered, refused with 409/404, may have taken effect)`.
    pub fn held_fence_off(&self) -> (usize, usize, usize) {
        let held: Vec<&LateWrite> = self.late_writes.iter().filter(|w| w.held && !w.fenced).collect();
        let gap = held.iter().filter(|w| w.may_have_taken_effect()).count();
        (held.len(), held.len() - gap, gap)
    }

    /// Every check the verdict makes, each with the figure it judged. Besides the absence of
    /// violations and problems, each is a positive control: it fails when the thing it judges did not
    /// happen (no fence, no client-go term, a fault kind that never ran, no late write delivered or
    /// refused), so a run that exercised nothing cannot pass.
    pub fn verdict(&self, min_changes: usize) -> Vec<Control> {
        let mut c = Vec::new();
        let mut check = |name: &'static str, figure: String, held: bool| {
            c.push(Control { name, figure, held });
        };
        let by_peers = self
            .violations
            .iter()
            .filter(|v| self.is_go_peer(&v.identity))
            .count();
        let findings = self
            .peer_findings()
            .filter(|w| w.before_next_term.is_some())
            .count();
        let unproven = self.peer_findings().filter(|w| w.unproven).count();
        let overlapping = self
            .peer_findings()
            .filter(|w| w.before_next_term.as_ref().is_some_and(|b| b.overlapped()))
            .count();
        check(
            "no violation",
            format!(
                "{} violations: {} by our replicas, {by_peers} by the Go peers ({} writes answered after a \
                 takeover but committed before it, by resourceVersion: not overlaps, listed among the late \
                 writes; {findings} Go peer writes admitted after their own term and before the next \
                 holder's, {overlapping} of them committed after its acquiring write, and {unproven} Go peer \
                 writes whose answer did not tell, proven neither way: findings, listed)",
                self.violations.len(),
                self.violations.len() - by_peers,
                self.committed_before_takeover(),
            ),
            self.violations.is_empty(),
        );
        check(
            "no other problem",
            format!("{} problems", self.problems.len()),
            self.problems.is_empty(),
        );
        check(
            "enough leadership changes",
            format!("{} changes (at least {min_changes})", self.total_changes),
            self.total_changes >= min_changes,
        );
        let missing: Vec<&str> = Fault::ALL
            .iter()
            .filter(|f| !self.faults.iter().any(|r| r.fault == **f))
            .map(|f| f.name())
            .collect();
        check(
            "every fault kind ran",
            if missing.is_empty() {
                format!("{} kinds", Fault::ALL.len())
            } else {
                format!("never ran: {}", missing.join(", "))
            },
            missing.is_empty(),
        );
        let fence_off_in_flight: Vec<&FreezeRecord> =
            self.freezes.iter().filter(|f| f.in_flight && !f.fenced).collect();
        let delivered: usize = fence_off_in_flight.iter().map(|f| f.delivered_late).sum();
        let (held, refused, gap) = self.held_fence_off();
        check(
            "with the fence off, a leader frozen with writes in flight, delivered late",
            format!(
                "{} such freezes, {delivered} chunks delivered late, {held} late writes ({refused} refused \
                 with 409/404, {gap} may have taken effect: the self-fencing gap)",
                fence_off_in_flight.len()
            ),
            !fence_off_in_flight.is_empty() && delivered > 0 && held > 0,
        );
        if self.expected.fence {
            let fenced_freezes: Vec<&FreezeRecord> =
                self.freezes.iter().filter(|f| f.in_flight && f.fenced).collect();
            let delivered: usize = fenced_freezes.iter().map(|f| f.delivered_late).sum();
            check(
                "the server-side fence was installed",
                match self.fence_from {
                    Some(t) => format!("in force from {t}, {} changes after it", self.changes_fenced),
                    None => "never installed".to_owned(),
                },
                self.fence_from.is_some() && self.changes_fenced > 0,
            );
            check(
                "with the fence on, a leader frozen with writes in flight, delivered late",
                format!(
                    "{} such freezes, {delivered} chunks delivered late",
                    fenced_freezes.len()
                ),
                !fenced_freezes.is_empty() && delivered > 0,
            );
            check(
                "late writes refused by the fence itself (403)",
                format!("{} refused with 403", self.fence_refusals()),
                self.fence_refusals() > 0,
            );
        }
        for peer in GoPeer::ALL.into_iter().filter(|p| self.expected.go_peer(*p)) {
            let go = self.go_peers.get(&peer).cloned().unwrap_or_default();
            let (joined, late) = match peer {
                GoPeer::ClientGo => (
                    "client-go's candidate joined and led",
                    "client-go's late writes as a frozen leader: some refused, every one admitted arrived \
                     before the next holder's term began",
                ),
                GoPeer::Provider => (
                    "the Go provider joined, led and reconciled NopResources",
                    "the Go provider's late writes as a frozen leader: some refused, every one admitted \
                     arrived before the next holder's term began",
                ),
            };
            check(
                joined,
                format!(
                    "{} processes ({} exited on losing the Lease, restarted), {} terms, {} writes, {} of its \
                     work admitted",
                    go.processes, go.lost_lease_exits, go.terms, go.writes_checked, go.work_admitted
                ),
                go.processes > 0 && go.terms > 0 && go.writes_checked > 0 && go.work_admitted > 0,
            );
            check(
                late,
                format!(
                    "{} late writes, {} refused, {} whose answer did not tell proven to have taken no \
                     effect, {} admitted after its term and before the next holder's (findings, listed; {} of \
                     them committed after the next holder's acquiring write), {} whose answer did not tell, \
                     proven neither way (findings, listed), {} violations",
                    go.late_writes,
                    go.late_writes_refused,
                    go.late_writes_settled,
                    go.late_writes_before_next_term,
                    go.late_writes_before_next_term_overlapping,
                    go.late_writes_unproven,
                    go.violations
                ),
                go.late_writes_refused > 0
                    && go.late_writes_refused
                        + go.late_writes_settled
                        + go.late_writes_before_next_term
                        + go.late_writes_unproven
                        == go.late_writes
                    && go.violations == 0,
            );
        }
        c
    }

    /// The verdict, a line per control: `ok` or `FAILED`, what it requires, and its figure.
    pub fn verdict_text(&self, min_changes: usize) -> String {
        let mut s = String::new();
        for c in self.verdict(min_changes) {
            let _ = writeln!(
                s,
                "  {} {}: {}",
                if c.held { "ok    " } else { "FAILED" },
                c.name,
                c.figure
            );
        }
        s
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
        let ours = self.replicas.iter().filter(|r| r.go.is_none()).count();
        let restarts = ours.saturating_sub(2 * REPLICAS);
        let skewed = self.replicas.iter().filter(|r| r.clock.is_some()).count();
        let _ = writeln!(
            s,
            "replicas: {} processes ({restarts} started by the schedule, {skewed} with a skewed clock)",
            self.replicas.len()
        );
        for (peer, g) in &self.go_peers {
            let _ = writeln!(
                s,
                "{peer}, with the fence: {} processes ({} exited on losing the Lease, restarted), {} terms, {} \
                 writes checked ({} of its work admitted), {} late writes ({} in flight at its freeze; {} \
                 refused, {} unanswered and settled: no effect; {} admitted after its own term and before the \
                 next holder's, {} whose answer did not tell and proven neither way: findings; {} releases of \
                 another holder's Lease), {} violations",
                g.processes,
                g.lost_lease_exits,
                g.terms,
                g.writes_checked,
                g.work_admitted,
                g.late_writes,
                g.late_writes_in_flight,
                g.late_writes_refused,
                g.late_writes_settled,
                g.late_writes_before_next_term,
                g.late_writes_unproven,
                g.foreign_releases.len(),
                g.violations
            );
        }
        if !self.terms_by_implementation.is_empty() {
            let by: Vec<String> = self
                .terms_by_implementation
                .iter()
                .map(|(k, n)| format!("{k} {n}"))
                .collect();
            let _ = writeln!(
                s,
                "provider-nop's terms during the faults by the implementation that acted: {}",
                by.join(", ")
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
            "late writes (outside the writer's terms): {} ({} by frozen leaders, {} refused by the fence with 403, \
             {} whose answer did not tell proven to have taken no effect (by the object read back or the fence's earlier refusal of the writer), {} received in \
             their term and answered after the takeover but committed before it by resourceVersion); {} writes \
             received while another writer's Lease write ending their writer's term was still unanswered, \
             judged inside the term",
            self.late_writes.len(),
            self.late_writes.iter().filter(|w| w.frozen).count(),
            self.fence_refusals(),
            self.settled(),
            self.committed_before_takeover(),
            self.during_foreign_lock_write
        );
        for w in self.late_writes.iter().take(40) {
            let _ = writeln!(s, "  {}", w.describe());
        }
        more(&mut s, self.late_writes.len(), 40, "late writes");
        let _ = writeln!(
            s,
            "audit log: {} files, {} requests, {} unparsable lines, {} replica writes cut off, {} \
             leader-election Events not judged against terms (written as a term begins, and after it ends)",
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
        let (held, refused, gap) = self.held_fence_off();
        let _ = writeln!(
            s,
            "self-fencing gap (fence off, writes a frozen leader had in flight, delivered late): {held} \
             delivered, {refused} refused with 409/404, {gap} may have taken effect"
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
        let settled = self
            .settled
            .as_ref()
            .map(|s| format!(": {s}"))
            .unwrap_or_default();
        let committed = self
            .committed_before_takeover
            .map(|(w, t)| {
                format!(
                    ": received in its term, answered after the takeover, committed before it \
                     (resourceVersion {w} < {t})"
                )
            })
            .unwrap_or_default();
        let before_next = self
            .before_next_term
            .as_ref()
            .map(|b| {
                let order = match (b.write, b.acquired) {
                    (Some(w), Some(a)) if w < a => {
                        format!("etcd committed it before the next holder's acquiring write (resourceVersion {w} < {a})")
                    }
                    (Some(w), Some(a)) => format!(
                        "etcd committed it after the next holder's acquiring write (resourceVersion {w} > {a}): \
                         an overlap"
                    ),
                    _ => "etcd's order of the two was not recorded: it may have overlapped".to_owned(),
                };
                let after = w.time.duration_since(b.ended).as_secs_f64() * 1000.0;
                let before = b.start.duration_since(w.time).as_secs_f64() * 1000.0;
                format!(
                    ": after its term ended ({} at {}, {after:.1} ms before the write arrived), {before:.1} ms \
                     before the next holder's term began; {order}",
                    b.end, b.ended
                )
            })
            .unwrap_or_default();
        let unproven = if self.unproven {
            ": its answer did not tell, and nothing proves its outcome either way (a Go peer's write: listed, \
             not a violation)"
        } else {
            ""
        };
        format!(
            "{} {}{} {} {} -> HTTP {} (holder {}){settled}{committed}{before_next}{unproven}",
            w.time,
            w.identity,
            if self.frozen { " (frozen)" } else { "" },
            if self.fenced { "[fence on]" } else { "[fence off]" },
            w.object,
            w.code,
            w.holder.as_deref().unwrap_or("nobody")
        )
    }

    /// Whether it may have taken effect: its answer says so or does not tell, and its object did not
    /// settle it.
    pub fn may_have_taken_effect(&self) -> bool {
        self.write.may_have_taken_effect() && self.settled.is_none()
    }
}

#[cfg(test)]
mod tests {
    //! The verdict's positive controls: a report in which everything the run is there to show happened
    //! passes, and breaking any one of those things makes the verdict fail, naming that control.

    use jiff::Timestamp;

    use super::super::Sabotage;
    use super::*;

    const MIN: usize = 4;

    fn at(s: &str) -> Timestamp {
        s.parse().unwrap_or(Timestamp::UNIX_EPOCH)
    }

    fn late(time: &str, identity: &str, code: i32, fenced: bool, held: bool) -> LateWrite {
        LateWrite {
            write: Violation {
                time: at(time),
                user: "u".into(),
                identity: identity.into(),
                object: "nopresources ns/n".into(),
                holder: Some("nop-1-1".into()),
                reason: "late".into(),
                code,
            },
            settled: None,
            committed_before_takeover: None,
            before_next_term: None,
            unproven: false,
            frozen: true,
            fenced,
            held,
        }
    }

    fn freeze(in_flight: bool, fenced: bool, delivered_late: usize) -> FreezeRecord {
        FreezeRecord {
            identity: "nop-0-1".into(),
            in_flight,
            fenced,
            delivered_late,
        }
    }

    /// A run that showed everything: every fault kind, a fence-off freeze with writes in flight whose
    /// late write got a 409, the fence installed and refusing with 403, client-go's candidate and the Go
    /// provider leading, working and refused.
    fn complete() -> Report {
        let faults = Fault::ALL
            .iter()
            .map(|&fault| FaultRecord {
                fault,
                group: None,
                start: at("2026-12-01T09:00:00Z"),
                end: at("2026-12-01T09:00:01Z"),
                detail: String::new(),
            })
            .collect();
        Report {
            faults,
            total_changes: MIN,
            changes_fenced: 2,
            fence_from: Some(at("2026-12-01T10:00:00Z")),
            late_writes: vec![
                late("2026-12-01T09:30:00Z", "nop-0-1", 409, false, true),
                late("2026-12-01T10:30:00Z", "nop-0-2", 403, true, true),
                late("2026-12-01T10:40:00Z", "nop-3-1", 403, true, false),
                late("2026-12-01T10:45:00Z", "nop-4-1", 403, true, true),
            ],
            freezes: vec![
                freeze(true, false, 3),
                freeze(false, false, 0),
                freeze(true, true, 2),
            ],
            go_peers: GoPeer::ALL
                .into_iter()
                .map(|p| {
                    let figures = GoPeerFigures {
                        processes: 2,
                        lost_lease_exits: 1,
                        terms: 1,
                        writes_checked: 10,
                        work_admitted: 8,
                        late_writes: 1,
                        late_writes_in_flight: 1,
                        late_writes_refused: 1,
                        late_writes_settled: 0,
                        late_writes_before_next_term: 0,
                        late_writes_before_next_term_overlapping: 0,
                        late_writes_unproven: 0,
                        foreign_releases: Vec::new(),
                        violations: 0,
                    };
                    (p, figures)
                })
                .collect(),
            expected: Expected {
                fence: true,
                client_go: true,
                go_provider: true,
            },
            ..Report::default()
        }
    }

    fn fails(report: &Report, control: &str) {
        let failures = report.failures(MIN);
        assert!(
            failures.iter().any(|f| f.starts_with(control)),
            "expected {control:?} to fail, got {failures:?}"
        );
        assert!(!report.passed(MIN));
    }

    #[test]
    fn a_run_that_showed_everything_passes() {
        let r = complete();
        assert_eq!(r.failures(MIN), Vec::<String>::new());
        assert!(r.passed(MIN));
        assert_eq!(r.held_fence_off(), (1, 1, 0));
    }

    #[test]
    fn the_hold_delivering_nothing_late_fails() {
        let mut r = complete();
        for f in &mut r.freezes {
            f.delivered_late = 0;
        }
        r.late_writes.retain(|w| !w.held);
        fails(&r, "with the fence off, a leader frozen with writes in flight");
        fails(&r, "with the fence on, a leader frozen with writes in flight");
    }

    #[test]
    fn no_fence_off_freeze_with_writes_in_flight_fails() {
        let mut r = complete();
        r.freezes.retain(|f| f.fenced || !f.in_flight);
        fails(&r, "with the fence off, a leader frozen with writes in flight");
    }

    #[test]
    fn a_fence_never_installed_fails() {
        let mut r = complete();
        r.fence_from = None;
        r.changes_fenced = 0;
        fails(&r, "the server-side fence was installed");
    }

    #[test]
    fn no_refusal_by_the_fence_itself_fails() {
        let mut r = complete();
        for w in &mut r.late_writes {
            if w.write.code == 403 {
                w.write.code = 409;
            }
        }
        fails(&r, "late writes refused by the fence itself (403)");
    }

    #[test]
    fn client_go_absent_or_never_leading_fails() {
        let mut r = complete();
        r.go_peers.remove(&GoPeer::ClientGo);
        fails(&r, "client-go's candidate joined and led");
        let mut r = complete();
        if let Some(g) = r.go_peers.get_mut(&GoPeer::ClientGo) {
            g.terms = 0;
        }
        fails(&r, "client-go's candidate joined and led");
    }

    #[test]
    fn client_go_without_late_writes_fails() {
        let mut r = complete();
        if let Some(g) = r.go_peers.get_mut(&GoPeer::ClientGo) {
            g.late_writes = 0;
            g.late_writes_refused = 0;
        }
        fails(&r, "client-go's late writes as a frozen leader");
    }

    #[test]
    fn a_client_go_late_write_with_an_unknown_answer_passes_only_when_settled() {
        // A 504 the object proved to have taken no effect is counted, shown and not a violation.
        let mut r = complete();
        let mut unanswered = late("2026-12-01T10:41:00Z", "nop-3-1", 504, true, false);
        unanswered.settled = Some(Settled::ReadBack {
            admitted_at: at("2026-12-01T10:39:00Z"),
            read_at: at("2026-12-01T10:50:00Z"),
        });
        assert!(!unanswered.may_have_taken_effect());
        r.late_writes.push(unanswered.clone());
        if let Some(g) = r.go_peers.get_mut(&GoPeer::ClientGo) {
            g.late_writes = 2;
            g.late_writes_settled = 1;
        }
        assert!(r.passed(MIN), "{:?}", r.failures(MIN));
        assert_eq!(r.settled(), 1);
        // Unsettled, the same write is neither refused nor settled: the control fails.
        if let Some(g) = r.go_peers.get_mut(&GoPeer::ClientGo) {
            g.late_writes_settled = 0;
        }
        fails(&r, "client-go's late writes as a frozen leader");
        // Settled but never refused by anyone: the fence was not shown refusing client-go.
        let mut r = complete();
        if let Some(g) = r.go_peers.get_mut(&GoPeer::ClientGo) {
            g.late_writes_refused = 0;
            g.late_writes_settled = 1;
        }
        fails(&r, "client-go's late writes as a frozen leader");
        unanswered.settled = None;
        assert!(unanswered.may_have_taken_effect());
    }

    #[test]
    fn the_go_provider_absent_idle_or_never_refused_fails() {
        // Sabotage::NoGoProvider: it never joins, so it has no figures.
        assert!(Sabotage::NoGoProvider.keeps_out(GoPeer::Provider));
        assert!(!Sabotage::NoGoProvider.keeps_out(GoPeer::ClientGo));
        let mut r = complete();
        r.go_peers.remove(&GoPeer::Provider);
        fails(&r, "the Go provider joined, led and reconciled NopResources");
        fails(&r, "the Go provider's late writes as a frozen leader");
        // It led, but none of its NopResource work was admitted.
        let mut r = complete();
        if let Some(g) = r.go_peers.get_mut(&GoPeer::Provider) {
            g.work_admitted = 0;
        }
        fails(&r, "the Go provider joined, led and reconciled NopResources");
        // A late write of it that may have taken effect.
        let mut r = complete();
        if let Some(g) = r.go_peers.get_mut(&GoPeer::Provider) {
            g.late_writes = 2;
            g.violations = 1;
        }
        fails(&r, "the Go provider's late writes as a frozen leader");
        // Not expected (no fence, or not asked for): no control, and the run passes without it.
        let mut r = complete();
        r.go_peers.remove(&GoPeer::Provider);
        r.expected.go_provider = false;
        assert!(r.passed(MIN), "{:?}", r.failures(MIN));
        assert!(
            !r.verdict(MIN)
                .iter()
                .any(|c| c.name.starts_with("the Go provider"))
        );
    }

    #[test]
    fn a_go_peer_write_admitted_before_the_next_term_is_a_finding_but_not_for_ours() {
        // client-go's write, received after its lease lapsed and before the next holder's term began,
        // admitted, and committed just after the acquiring write: a finding, counted and listed.
        let mut r = complete();
        r.replicas.push(ReplicaRecord {
            identity: "nop-3-4".into(),
            group: Group::Nop,
            go: Some(GoPeer::ClientGo),
            version: "client-go",
            clock: None,
            pid: 1,
            log: PathBuf::new(),
            ended_by: None,
            exit: None,
            lost_lease_exit: false,
        });
        let mut finding = late("2026-12-01T10:42:00.750Z", "nop-3-4", 200, true, false);
        finding.before_next_term = Some(NextTerm {
            ended: at("2026-12-01T10:41:59Z"),
            end: crate::checker::TermEnd::Lapsed,
            start: at("2026-12-01T10:42:00.848Z"),
            write: Some(7207),
            acquired: Some(7206),
        });
        r.late_writes.push(finding.clone());
        if let Some(g) = r.go_peers.get_mut(&GoPeer::ClientGo) {
            g.late_writes = 2;
            g.late_writes_before_next_term = 1;
            g.late_writes_before_next_term_overlapping = 1;
        }
        assert!(r.passed(MIN), "{:?}", r.failures(MIN));
        assert_eq!(r.peer_findings().count(), 1);
        let line = finding.describe();
        assert!(
            line.contains("98.0 ms before the next holder's term began"),
            "{line}"
        );
        assert!(
            line.contains("(resourceVersion 7207 > 7206): an overlap"),
            "{line}"
        );
        let md = r.to_markdown("how");
        assert!(md.contains("## Findings on the Go peers"), "{md}");
        assert!(md.contains("acquiring write | 1 / 1 |"), "{md}");
        // Positive control: the same write arriving after the next term began is a violation, and the
        // verdict fails on the peer's control and on "no violation".
        let mut after = r.clone();
        after.late_writes.retain(|w| w.before_next_term.is_none());
        after.violations.push(finding.write.clone());
        if let Some(g) = after.go_peers.get_mut(&GoPeer::ClientGo) {
            g.late_writes_before_next_term = 0;
            g.late_writes_before_next_term_overlapping = 0;
            g.violations = 1;
        }
        fails(&after, "no violation");
        fails(&after, "client-go's late writes as a frozen leader");
        assert!(
            after.failures(MIN)[0].contains("0 by our replicas, 1 by the Go peers"),
            "{:?}",
            after.failures(MIN)
        );
        // A finding not accounted for in the peer's figures fails its control.
        if let Some(g) = r.go_peers.get_mut(&GoPeer::ClientGo) {
            g.late_writes_before_next_term = 0;
        }
        fails(&r, "client-go's late writes as a frozen leader");
    }

    #[test]
    fn a_go_peer_write_with_an_unknown_answer_is_a_finding_and_fails_its_control_unaccounted() {
        let mut r = complete();
        let mut w = late("2026-12-01T10:42:00Z", "nop-4-1", 504, true, false);
        w.unproven = true;
        assert!(w.describe().contains("proves its outcome either way"));
        r.late_writes.push(w);
        if let Some(g) = r.go_peers.get_mut(&GoPeer::Provider) {
            g.late_writes = 2;
            g.late_writes_unproven = 1;
        }
        assert!(r.passed(MIN), "{:?}", r.failures(MIN));
        assert_eq!(r.peer_findings().count(), 1);
        // Positive control: not accounted for as a finding, it fails the peer's control.
        if let Some(g) = r.go_peers.get_mut(&GoPeer::Provider) {
            g.late_writes_unproven = 0;
        }
        fails(&r, "the Go provider's late writes as a frozen leader");
    }

    #[test]
    fn a_fault_kind_that_never_ran_fails() {
        let mut r = complete();
        r.faults.retain(|f| f.fault != Fault::EtcdPause);
        fails(&r, "every fault kind ran");
    }

    #[test]
    fn the_self_fencing_gap_is_counted_and_not_a_violation_with_the_fence_off() {
        let mut r = complete();
        r.late_writes
            .push(late("2026-12-01T09:30:01Z", "nop-0-1", 200, false, true));
        assert_eq!(r.self_fencing_gap(), 1);
        assert_eq!(r.held_fence_off(), (2, 1, 1));
        assert!(r.passed(MIN), "{:?}", r.failures(MIN));
    }

    #[test]
    fn violations_and_too_few_changes_fail() {
        let mut r = complete();
        r.violations.push(r.late_writes[0].write.clone());
        fails(&r, "no violation");
        let mut r = complete();
        r.total_changes = MIN - 1;
        fails(&r, "enough leadership changes");
    }
}
