//! Publishing a run's figures: the split by fence mode, and the renderings `cargo xtask chaos` writes
//! to `docs/reliability.json` and `docs/reliability.md`.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde_json::json;

use super::report::{GoPeerFigures, LateWrite};
use super::{Fault, GoPeer, Report};
use crate::checker::Settled;

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

    /// Late writes whose answer did not tell, proven to have taken no effect (by their object read back,
    /// or by the fence's earlier refusal of their writer).
    pub fn settled(&self) -> usize {
        self.late_writes.iter().filter(|w| w.settled.is_some()).count()
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
        let (held, held_refused, gap) = self.held_fence_off();
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
                "freezes_with_writes_in_flight": self.freezes.iter().filter(|f| f.in_flight && !f.fenced).count(),
                "freezes_without": self.freezes.iter().filter(|f| !f.in_flight && !f.fenced).count(),
                "held_writes_delivered_late": held,
                "held_writes_refused": held_refused,
                "self_fencing_gap": gap,
            },
            "fence_on": {
                "in_force_from": self.fence_from.map(|t| t.to_string()),
                "writes_checked": self.checked_writes_fenced,
                "leadership_changes": self.changes_fenced,
                "violations": on,
                "fence_refusals": self.fence_refusals(),
                "freezes_with_writes_in_flight": self.freezes.iter().filter(|f| f.in_flight && f.fenced).count(),
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
                "held": w.held,
                "fence": w.fenced,
                "holder": w.write.holder,
                "settled": w.settled.as_ref().map(ToString::to_string),
                "committed_before_takeover": w.committed_before_takeover.map(|(w, t)| json!({"write": w, "takeover": t})),
                "before_next_term": w.before_next_term.as_ref().map(|b| json!({
                    "term_ended": b.ended.to_string(),
                    "term_ended_by": b.end.to_string(),
                    "next_term_began": b.start.to_string(),
                    "write_resource_version": b.write,
                    "acquiring_resource_version": b.acquired,
                    "may_have_overlapped": b.overlapped(),
                })),
                "unproven": w.unproven,
            })).collect::<Vec<_>>(),
            "late_writes_committed_before_takeover": self.committed_before_takeover(),
            "writes_during_foreign_lock_write": self.during_foreign_lock_write,
            "go_peer_findings": self.peer_findings().count(),
            "late_writes_settled": self.settled(),
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
                "leader_election_events_not_judged": self.audit.election_events,
            },
            "client_go": self.go_peers.get(&GoPeer::ClientGo).map(go_json),
            "go_provider": self.go_peers.get(&GoPeer::Provider).map(go_json),
            "provider_nop_terms_by_implementation": self.terms_by_implementation,
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
            (
                "Fence off: writes a frozen leader had in flight, delivered late / refused (409, 404) / \
                 may have taken effect (the self-fencing gap, which only the fence closes)",
                {
                    let (held, refused, gap) = self.held_fence_off();
                    format!("{held} / {refused} / {gap}")
                },
            ),
            ("Violations with the fence on", on.to_string()),
            (
                "Late writes (outside the writer's terms)",
                self.late_writes.len().to_string(),
            ),
            ("Late writes by frozen leaders", frozen.len().to_string()),
            (
                "Writes received in their writer's term, answered after the next term began, and committed by \
                 etcd before its acquiring write (by resourceVersion: no overlap, not violations)",
                self.committed_before_takeover().to_string(),
            ),
            (
                "Writes received while another writer's Lease write ending their writer's term was still \
                 unanswered (judged inside the term: the writer could not know of it, and its takeover, if \
                 any, began only with that answer)",
                self.during_foreign_lock_write.to_string(),
            ),
            ("Fence refusals (403)", self.fence_refusals().to_string()),
            (
                "Late writes whose answer did not tell (never answered, 5xx), proven to have taken no effect: \
                 all / by their object read back / by the fence's earlier refusal of their writer",
                {
                    let by_fence = self
                        .late_writes
                        .iter()
                        .filter(|w| matches!(w.settled, Some(Settled::Fenced { .. })))
                        .count();
                    format!("{} / {} / {by_fence}", self.settled(), self.settled() - by_fence)
                },
            ),
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
                "Leader-election Events not judged against terms (written as a term begins, and after it ends)",
                self.audit.election_events.to_string(),
            ),
            (
                "Problems (unexpected exits, resources not Ready, duplicates)",
                self.problems.len().to_string(),
            ),
        ];
        for (k, v) in rows {
            let _ = writeln!(s, "| {k} | {v} |");
        }
        for (peer, g) in &self.go_peers {
            let (title, what) = match peer {
                GoPeer::ClientGo => (
                    "client-go's candidate in provider-nop's pool (fence on)",
                    "client-go's leader election (`harness lease-candidate`, updating a ConfigMap every 100 ms \
                     while it leads) joined provider-nop's three replicas on their Lease once the fence was in \
                     force, and left before the run settled. client-go checks nothing before a write, so only \
                     the fence stands between a frozen client-go leader and its late writes.",
                ),
                GoPeer::Provider => (
                    "The Go provider in provider-nop's pool (fence on)",
                    "Our NopResource provider in Go (`tests/peers/provider-nop-go`: crossplane-runtime's \
                     managed reconciler, controller-runtime's leader election at the schedule's Lease \
                     timings) joined provider-nop's three replicas on their Lease once the fence was in \
                     force, reconciled the NopResources while it led, and left before the run settled. \
                     controller-runtime checks nothing before a write, so only the fence stands between a \
                     frozen Go leader and its late writes; where ours steps down on losing the Lease, it \
                     exits, and the schedule restarted it as the kubelet would.",
                ),
            };
            let _ = writeln!(
                s,
                "\n## {title}\n\n{what}\n\n\
                 | Figure | Value |\n|---|---|\n\
                 | Processes (of which exited on losing the Lease, restarted) | {} ({}) |\n\
                 | Terms held | {} |\n| Writes checked | {} |\n| Of which its work, admitted | {} |\n\
                 | Late writes / in flight at its freeze / refused (403, 409, 404) / unanswered, proven to have \
                 taken no effect | {} / {} / {} / {} |\n\
                 | Late writes admitted after its own term and before the next holder's (findings, listed below) \
                 / of which committed by etcd after the next holder's acquiring write | {} / {} |\n\
                 | Late writes whose answer did not tell, proven neither way (findings, listed below) | {} |\n\
                 | Releases of the Lease while another held it (findings, listed below) | {} |\n\
                 | Violations | {} |",
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
                g.late_writes_before_next_term_overlapping,
                g.late_writes_unproven,
                g.foreign_releases.len(),
                g.violations
            );
        }
        let findings: Vec<&LateWrite> = self.peer_findings().collect();
        let releases: Vec<&crate::checker::ForeignRelease> =
            self.go_peers.values().flat_map(|g| &g.foreign_releases).collect();
        if !findings.is_empty() || !releases.is_empty() {
            let _ = writeln!(
                s,
                "\n## Findings on the Go peers\n\n\
                 The Go peers are judged as ours are, with two kinds of write listed here and counted next to \
                 each peer's control rather than as violations. Our replicas get no such allowance: they \
                 check their own term before every write, and any write of theirs outside it is a \
                 violation.\n\n\
                 - **Admitted after its own term, before the next holder's began.** The peer's lease had \
                 lapsed, or its own release was in flight beside the write. Until the next holder's \
                 acquisition is committed and seen by the fence's policy, the Lease still names the old \
                 holder, and the fence, an admission check that cannot read the clock, admits its writes. \
                 client-go checks nothing before a write, so a client-go leader frozen past its lease and \
                 resumed at the takeover writes into that instant. Where etcd committed such a write after \
                 the next holder's acquiring write, the two holders overlapped.\n\
                 - **An answer that did not tell, proven neither way.** Received after the next holder's \
                 term began, cut off or failed with a 5xx other than 503 (controller-runtime exits on \
                 losing the Lease and cancels what it had in flight), and neither its object read back nor \
                 an earlier refusal of its writer by the fence proves it took no effect.\n"
            );
            for w in findings {
                let _ = writeln!(s, "- {}", w.describe());
            }
            if !releases.is_empty() {
                let _ = writeln!(
                    s,
                    "\nReleases of the Lease by a Go peer while another replica held it. client-go's \
                     `tryRelease` re-reads the Lease for its resourceVersion but judges leadership by the \
                     record it observed before; a leader that lost the Lease without seeing its successor \
                     (frozen, then refused on renewal) releases the successor's term. Our replicas, seeing \
                     their Lease released by someone else, step down.\n"
                );
                for r in releases {
                    let _ = writeln!(
                        s,
                        "- {} {} released the Lease held by {}",
                        r.time, r.writer, r.holder
                    );
                }
            }
        }
        if !self.terms_by_implementation.is_empty() {
            let _ = writeln!(
                s,
                "\n## provider-nop's terms by the implementation that acted\n\n\
                 Each term of provider-nop's Lease that began during the faults, by the product in the user \
                 agent of its holder's writes inside it (`provider-nop`: ours; `provider-nop-go`: the Go \
                 provider; `lease-candidate`: client-go's candidate; `-`: the holder wrote nothing but the \
                 Lease).\n\n| Implementation | Terms |\n|---|---|"
            );
            for (k, n) in &self.terms_by_implementation {
                let _ = writeln!(s, "| {k} | {n} |");
            }
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

/// A Go peer's figures, as JSON.
fn go_json(g: &GoPeerFigures) -> serde_json::Value {
    json!({
        "processes": g.processes,
        "lost_lease_exits": g.lost_lease_exits,
        "terms": g.terms,
        "writes_checked": g.writes_checked,
        "work_admitted": g.work_admitted,
        "late_writes": g.late_writes,
        "late_writes_in_flight": g.late_writes_in_flight,
        "late_writes_refused": g.late_writes_refused,
        "late_writes_settled": g.late_writes_settled,
        "late_writes_before_next_term": g.late_writes_before_next_term,
        "late_writes_before_next_term_overlapping": g.late_writes_before_next_term_overlapping,
        "late_writes_unproven": g.late_writes_unproven,
        "foreign_releases": g.foreign_releases.len(),
        "violations": g.violations,
    })
}

#[cfg(test)]
mod tests {
    use jiff::Timestamp;

    use super::*;
    use crate::checker::Violation;
    use crate::schedule::report::GoPeerFigures;

    fn late(at: &str, code: i32, fenced: bool) -> LateWrite {
        LateWrite {
            write: Violation {
                time: at.parse().unwrap_or(Timestamp::UNIX_EPOCH),
                user: "u".into(),
                identity: "nop-0-1".into(),
                object: "nopresources /n".into(),
                holder: Some("nop-1-1".into()),
                reason: "late".into(),
                code,
            },
            frozen: true,
            fenced,
            held: true,
            committed_before_takeover: None,
            before_next_term: None,
            unproven: false,
            settled: None,
        }
    }

    #[test]
    fn figures_split_by_fence_mode() {
        let fence: Timestamp = "2026-12-01T10:00:00Z".parse().unwrap_or(Timestamp::UNIX_EPOCH);
        let admitted = late("2026-12-01T10:00:05Z", 200, true);
        let report = Report {
            fence_from: Some(fence),
            late_writes: vec![
                late("2026-12-01T09:00:00Z", 409, false),
                late("2026-12-01T10:00:01Z", 403, true),
                admitted.clone(),
            ],
            violations: vec![admitted.write],
            checked_writes: 10,
            checked_writes_fenced: 4,
            ..Report::default()
        };
        assert_eq!(report.violations_by_mode(), (0, 1));
        assert_eq!(report.fence_refusals(), 1);
        let json = report.to_json();
        assert_eq!(json["fence_off"]["writes_checked"], 6);
        assert_eq!(json["fence_on"]["violations"], 1);
        assert_eq!(json["frozen_writes_by_code"]["409"], 1);
        let md = report.to_markdown("how");
        assert!(md.contains("| Violations with the fence on | 1 |"), "{md}");
        assert!(md.contains("| Fence refusals (403) | 1 |"), "{md}");
        assert!(json["go_provider"].is_null() && json["client_go"].is_null());
        assert!(!md.contains("Go provider"), "{md}");
    }

    #[test]
    fn go_peers_and_implementations_are_rendered() {
        let provider = GoPeerFigures {
            processes: 2,
            lost_lease_exits: 1,
            terms: 1,
            writes_checked: 238,
            work_admitted: 74,
            late_writes: 163,
            late_writes_in_flight: 1,
            late_writes_refused: 163,
            late_writes_settled: 0,
            late_writes_before_next_term: 0,
            late_writes_before_next_term_overlapping: 0,
            late_writes_unproven: 0,
            foreign_releases: Vec::new(),
            violations: 0,
        };
        let report = Report {
            go_peers: [(GoPeer::Provider, provider)].into_iter().collect(),
            terms_by_implementation: [("provider-nop".to_owned(), 14), ("provider-nop-go".to_owned(), 1)]
                .into_iter()
                .collect(),
            ..Report::default()
        };
        let json = report.to_json();
        assert_eq!(json["go_provider"]["late_writes_refused"], 163);
        assert_eq!(json["go_provider"]["lost_lease_exits"], 1);
        assert!(json["client_go"].is_null());
        assert_eq!(json["provider_nop_terms_by_implementation"]["provider-nop-go"], 1);
        let md = report.to_markdown("how");
        assert!(
            md.contains("## The Go provider in provider-nop's pool (fence on)"),
            "{md}"
        );
        assert!(
            md.contains("| Processes (of which exited on losing the Lease, restarted) | 2 (1) |"),
            "{md}"
        );
        assert!(md.contains("| provider-nop-go | 1 |"), "{md}");
        assert!(
            !md.contains("client-go's candidate in provider-nop's pool"),
            "{md}"
        );
        let summary = report.summary();
        assert!(
            summary.contains("the Go provider (provider-nop-go), with the fence: 2 processes"),
            "{summary}"
        );
        assert!(
            summary.contains("provider-nop 14, provider-nop-go 1"),
            "{summary}"
        );
    }
}
