//! Checking a run against the audit log: the checker's findings judged by the apiserver's answers,
//! attribution by authenticated pod, the leadership changes per fault and per Lease, and the versions
//! seen.
//!
//! Every write is attributed to the replica whose pod its token is bound to ([`checker::writer`]). A
//! write outside its writer's terms is a *late write*. It is a violation when it may have taken effect:
//! the apiserver admitted it (2xx), never answered it (cut off by a restart) or failed it in a way that
//! may have persisted it (5xx other than 503). There is no grace window: a frozen leader's write that
//! the apiserver admits after another replica's acquisition is a violation, however it came to be late.
//! With the server-side fence in force, a late write to a fenced resource must moreover be refused by
//! the fence (403), or by a check the apiserver makes before admission (409 Conflict on a stale
//! resourceVersion, 404 Not Found); any other answer is a violation.
//!
//! Our replicas are held to their terms without exception. A Go peer's write admitted after its own term
//! had ended but received before the next holder's term began (while the Lease may still name it, so
//! an admission check admits it) is a finding, listed with etcd's order of it and the next holder's
//! acquiring write, and counted next to the peer's control; received after the next term began, it is
//! a violation.

use std::collections::BTreeSet;
use std::time::Duration;

use jiff::Timestamp;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::Api;
use testenv::AuditEvent;

use super::fence::PROBE_PREFIX;
use super::report::{AuditFigures, Expected, FreezeRecord, GoPeerFigures, LateWrite};
use super::world::World;
use super::{CURRENT_VERSION, Fault, GoPeer, Group, NEXT_VERSION, Report};
use crate::checker::{self, Lock, Readback, Settled, Violation, writer};

/// Answers with which the apiserver refuses a write before validating admission runs, so before the
/// fence can: a stale resourceVersion (409) or a missing object (404).
const REFUSED_BEFORE_ADMISSION: [i32; 2] = [409, 404];

/// Whether the fence covers writes to this resource (it exempts Events and the lock objects).
fn fenced_resource(e: &AuditEvent) -> bool {
    e.resource != "events"
}

impl World<'_> {
    pub(super) async fn check(&mut self, from: Timestamp, until: Timestamp) -> anyhow::Result<Report> {
        // The audit log is written synchronously, but give the last lines a moment.
        tokio::time::sleep(Duration::from_secs(1)).await;
        let audit = self.cp.cluster().audit().read()?;
        let events = audit.events;
        // Completed requests, and those the apiserver never answered (code 0).
        let judged: Vec<AuditEvent> = events.iter().chain(&audit.cut_off).cloned().collect();
        let fence_from = self.fence_from;
        let fenced_at = |t: Timestamp| fence_from.is_some_and(|f| t >= f);
        let mut report = Report {
            faults: self.faults.clone(),
            resources: (self.config.nop_resources, self.config.xrs),
            fence_from,
            census: self.census,
            ..Report::default()
        };
        let all_identities: BTreeSet<&str> = self.history.iter().map(|r| r.identity.as_str()).collect();
        report.audit = AuditFigures {
            files: audit.files,
            unparsable: audit.skipped,
            requests: events.len(),
            cut_off_writes: audit
                .cut_off
                .iter()
                .filter(|e| e.is_write() && all_identities.contains(writer(e)))
                .count(),
            election_events: 0,
        };
        if audit.skipped > 0 {
            self.problems.push(format!(
                "{} lines of the audit log did not parse: events may be missing",
                audit.skipped
            ));
        }
        // The commit-order check needs the resourceVersion of successful writes; a log that recorded
        // none (a policy without responses) would leave it blind, so that is a problem, not a pass.
        let successful = || {
            events
                .iter()
                .filter(|e| e.is_write() && (200..300).contains(&e.code))
                .filter(|e| all_identities.contains(writer(e)))
        };
        let versioned = successful().filter(|e| e.committed.is_some()).count();
        if successful().next().is_some() && versioned == 0 {
            self.problems.push(
                "the audit log recorded no resourceVersion for the replicas' successful writes, so no write \
                 could be placed in etcd's order of commits; check the test bed's audit policy"
                    .to_owned(),
            );
        }
        let misattributed = self.misattributed(&judged, &mut report);
        report.violations.extend(misattributed);

        let mut unsettled = Vec::new();
        let go_ids: BTreeSet<&str> = self
            .history
            .iter()
            .filter(|r| r.go.is_some())
            .map(|r| r.identity.as_str())
            .collect();
        for g in Group::ALL {
            let lock = Lock::lease(&self.ns, g.lease());
            let identities: BTreeSet<&str> = self
                .history
                .iter()
                .filter(|r| r.group == g)
                .map(|r| r.identity.as_str())
                .collect();
            let controller_write = |e: &AuditEvent| {
                identities.contains(writer(e))
                    && e.resource != "leases"
                    && !(e.resource == "events" && e.name.starts_with(g.lease()))
            };
            report.audit.election_events += judged
                .iter()
                .filter(|e| e.is_write() && identities.contains(writer(e)))
                .filter(|e| e.resource == "events" && e.name.starts_with(g.lease()))
                .count();
            for e in judged.iter().filter(|e| e.is_write() && controller_write(e)) {
                report.checked_writes += 1;
                if fenced_at(e.received) {
                    report.checked_writes_fenced += 1;
                }
            }
            report.violations.extend(checker::check_lock(&events, &lock));
            let lock_terms = checker::terms(&judged, &lock);
            report.during_foreign_lock_write +=
                checker::during_foreign_lock_write(&lock_terms, &judged, &lock, controller_write).len();
            for v in checker::check_writes_in(&lock_terms, &judged, &lock, controller_write) {
                let event = judged
                    .iter()
                    .find(|e| e.received == v.time && writer(e) == v.identity);
                let fenced = fenced_at(v.time) && event.is_some_and(fenced_resource);
                let frozen = self
                    .pauses
                    .iter()
                    .any(|p| p.identity == v.identity && p.stopped <= v.time);
                // Received while its sender was still stopped, after a freeze that caught writes in
                // flight: the relay delivered it late (the process itself could send nothing).
                let held = self.pauses.iter().any(|p| {
                    p.in_flight && p.identity == v.identity && p.stopped <= v.time && v.time <= p.resumed
                });
                let settled = match event {
                    Some(e) if v.may_have_taken_effect() => self
                        .settle_by_readback(&judged, e)
                        .await
                        .unwrap_or_else(|problem| {
                            unsettled.push(problem);
                            None
                        })
                        .or_else(|| {
                            fenced
                                .then(|| checker::settle_by_fence(&judged, e, &lock))
                                .flatten()
                        }),
                    _ => None,
                };
                let committed_before_takeover =
                    event.and_then(|e| checker::committed_before_takeover(&lock_terms, e));
                // Only a Go peer's write is placed against the next holder: ours must stay in their term.
                let go_peer = go_ids.contains(v.identity.as_str());
                let before_next_term = event
                    .filter(|_| go_peer && committed_before_takeover.is_none() && v.may_have_taken_effect())
                    .and_then(|e| checker::before_next_term(&lock_terms, e));
                let mut late = LateWrite {
                    write: v.clone(),
                    frozen,
                    fenced,
                    held,
                    settled,
                    committed_before_takeover,
                    before_next_term,
                    unproven: false,
                };
                if late.committed_before_takeover.is_some() {
                    // Received inside its term; etcd committed it before the next holder's acquiring
                    // write, though the apiserver answered it after (both waited on a paused etcd): no
                    // overlap. Counted and shown next to the verdict, not a violation.
                    report.late_writes.push(late);
                    continue;
                }
                if late.settled.is_some() {
                    // Unanswered, and proven by its object to have taken no effect: counted and shown
                    // next to the verdict, not a violation.
                    report.late_writes.push(late);
                    continue;
                }
                if late.before_next_term.is_some() && late.settled.is_none() {
                    // A Go peer's write after its own term that arrived while the Lease still named it
                    // (the next holder's acquisition unanswered): beyond what an admission-time fence can
                    // refuse. A finding, counted and listed next to the verdict with etcd's order.
                    report.late_writes.push(late);
                    continue;
                }
                if go_peer && late.may_have_taken_effect() && !(200..300).contains(&v.code) {
                    // A Go peer's write whose answer did not tell (a request it canceled as it exited on
                    // losing the Lease, say), received after the next holder's term began, that no proof
                    // settled: unknown either way. A finding, counted and listed next to the verdict.
                    late.unproven = true;
                    report.late_writes.push(late);
                    continue;
                }
                if held && !fenced && v.may_have_taken_effect() {
                    // The one case self-fencing cannot close, made on purpose with the fence off: a
                    // write checked inside the term, delivered after the takeover. Not excused: it is
                    // counted as the self-fencing gap and shown next to the fence-off figure.
                    report.late_writes.push(late);
                    continue;
                }
                if v.may_have_taken_effect() {
                    let what = if v.code == 0 {
                        "never answered, so it may have taken effect"
                    } else {
                        "and the apiserver did not refuse it"
                    };
                    report.violations.push(Violation {
                        reason: format!("{}: {what}", v.reason),
                        ..v
                    });
                } else if fenced && v.code != 403 && !REFUSED_BEFORE_ADMISSION.contains(&v.code) {
                    report.violations.push(Violation {
                        reason: format!(
                            "{}: with the fence in force it was not refused with 403",
                            v.reason
                        ),
                        ..v
                    });
                }
                report.late_writes.push(late);
            }

            let versions: BTreeSet<String> = events
                .iter()
                .filter(|e| e.resource == "leases" && e.name == g.lease() && e.is_write())
                .filter(|e| identities.contains(writer(e)))
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
                if fenced_at(next.start) {
                    report.changes_fenced += 1;
                }
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
        self.problems.extend(unsettled);
        report.late_writes.sort_by_key(|w| w.write.time);
        report.freezes = self
            .pauses
            .iter()
            .map(|p| FreezeRecord {
                identity: p.identity.clone(),
                in_flight: p.in_flight,
                fenced: fenced_at(p.stopped),
                delivered_late: p.delivered_late,
            })
            .collect();
        let peers = self.config.go_peers();
        report.expected = Expected {
            fence: self.config.fence_after.is_some(),
            client_go: peers.contains(&GoPeer::ClientGo),
            go_provider: peers.contains(&GoPeer::Provider),
        };
        // An exit on a lost Lease is not a problem only if the process had a Lease to lose.
        let nop_terms = checker::terms(&events, &Lock::lease(&self.ns, Group::Nop.lease()));
        for r in self.history.iter().filter(|r| r.lost_lease_exit) {
            if !nop_terms.iter().any(|t| t.holder == r.identity) {
                self.problems.push(format!(
                    "{} exited saying it lost the Lease, but held no term of it in the audit log; see {}",
                    r.identity,
                    r.log.display()
                ));
            }
        }
        for peer in GoPeer::ALL {
            if let Some(figures) = self.go_figures(peer, &events, &judged, &report) {
                report.go_peers.insert(peer, figures);
            }
        }
        report.terms_by_implementation = self.terms_by_implementation(&events, from, until);
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

    /// A Go peer's processes, terms, writes and late writes, if it took part.
    fn go_figures(
        &self,
        peer: GoPeer,
        events: &[AuditEvent],
        judged: &[AuditEvent],
        report: &Report,
    ) -> Option<GoPeerFigures> {
        let records: Vec<_> = self.history.iter().filter(|r| r.go == Some(peer)).collect();
        let ids: BTreeSet<&str> = records.iter().map(|r| r.identity.as_str()).collect();
        if ids.is_empty() {
            return None;
        }
        let lock = Lock::lease(&self.ns, Group::Nop.lease());
        let late: Vec<&LateWrite> = report
            .late_writes
            .iter()
            .filter(|w| ids.contains(w.write.identity.as_str()))
            .collect();
        let work = match peer {
            GoPeer::ClientGo => "configmaps",
            GoPeer::Provider => "nopresources",
        };
        let writes = || {
            judged
                .iter()
                .filter(|e| e.is_write() && e.resource != "leases" && ids.contains(writer(e)))
        };
        Some(GoPeerFigures {
            processes: ids.len(),
            lost_lease_exits: records.iter().filter(|r| r.lost_lease_exit).count(),
            terms: checker::terms(events, &lock)
                .iter()
                .filter(|t| ids.contains(t.holder.as_str()))
                .count(),
            writes_checked: writes().count(),
            work_admitted: writes()
                .filter(|e| e.resource == work && (200..300).contains(&e.code))
                .count(),
            late_writes: late.len(),
            late_writes_in_flight: late.iter().filter(|w| w.held).count(),
            late_writes_refused: late
                .iter()
                .filter(|w| w.write.code == 403 || REFUSED_BEFORE_ADMISSION.contains(&w.write.code))
                .count(),
            late_writes_settled: late.iter().filter(|w| w.settled.is_some()).count(),
            late_writes_before_next_term: late.iter().filter(|w| w.before_next_term.is_some()).count(),
            late_writes_unproven: late.iter().filter(|w| w.unproven).count(),
            foreign_releases: checker::foreign_releases(events, &lock)
                .into_iter()
                .filter(|r| ids.contains(r.writer.as_str()))
                .collect(),
            late_writes_before_next_term_overlapping: late
                .iter()
                .filter(|w| w.before_next_term.as_ref().is_some_and(|b| b.overlapped()))
                .count(),
            violations: report
                .violations
                .iter()
                .filter(|v| ids.contains(v.identity.as_str()))
                .count(),
        })
    }

    /// provider-nop's terms that began during the faults, by the implementation that acted in each: the
    /// product (`name` of `name/version (identity)`) in the user agents of the holder's writes inside the
    /// term, other than its Lease writes; `-` for a term in which it wrote nothing else. A term in which
    /// two implementations wrote is a problem (one holder is one process).
    fn terms_by_implementation(
        &mut self,
        events: &[AuditEvent],
        from: Timestamp,
        until: Timestamp,
    ) -> std::collections::BTreeMap<String, usize> {
        let lock = Lock::lease(&self.ns, Group::Nop.lease());
        let mut by = std::collections::BTreeMap::new();
        for t in checker::terms(events, &lock)
            .iter()
            .filter(|t| t.start >= from && t.start <= until)
        {
            let products: BTreeSet<&str> = events
                .iter()
                .filter(|e| e.is_write() && e.resource != "leases" && writer(e) == t.holder)
                .filter(|e| t.covers(e.received, e.stage_time))
                .filter_map(|e| e.user_agent.split('/').next())
                .collect();
            if products.len() > 1 {
                self.problems.push(format!(
                    "in one term of {} on provider-nop's Lease, {} implementations acted: {products:?}",
                    t.holder,
                    products.len()
                ));
            }
            let key = products.into_iter().collect::<Vec<_>>().join("+");
            *by.entry(if key.is_empty() { "-".to_owned() } else { key })
                .or_insert(0) += 1;
        }
        by
    }

    /// Settles a late write whose answer did not tell by reading its object back now
    /// ([`checker::settle`]). Only ConfigMaps qualify: the audit policy records their write bodies. A
    /// read that fails settles nothing, and is a problem of the run (the error).
    async fn settle_by_readback(
        &self,
        judged: &[AuditEvent],
        write: &AuditEvent,
    ) -> Result<Option<Settled>, String> {
        if write.resource != "configmaps" || !write.api_group.is_empty() {
            return Ok(None);
        }
        let api: Api<ConfigMap> = Api::namespaced(self.client.clone(), &write.namespace);
        match api.get_opt(&write.name).await {
            Ok(cm) => {
                let back = Readback {
                    data: cm.map(|cm| serde_json::to_value(cm.data.unwrap_or_default()).unwrap_or_default()),
                    read_at: Timestamp::now(),
                };
                Ok(checker::settle(judged, write, &back))
            }
            Err(e) => Err(format!(
                "could not read back configmap {}/{} to settle a write answered {}: {e}",
                write.namespace, write.name, write.code
            )),
        }
    }

    /// Every write made with a replica slot's ServiceAccount (the fence's probes excepted) must come
    /// from a pod and carry that pod's identity in its user agent ([`checker::check_attribution`]).
    fn misattributed(&self, judged: &[AuditEvent], report: &mut Report) -> Vec<Violation> {
        let users: BTreeSet<String> = self
            .slots
            .iter()
            .map(|s| format!("system:serviceaccount:{}:{}", self.ns, s.service_account()))
            .collect();
        let (checked, violations) = checker::check_attribution(judged, |e| {
            users.contains(&e.user) && !e.pod_name.as_deref().is_some_and(|p| p.starts_with(PROBE_PREFIX))
        });
        report.attributed_writes = checked;
        violations
    }
}
