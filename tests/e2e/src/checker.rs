//! The audit-log checker: reconstructs each replica's leadership terms from the lock writes in the audit
//! log, then checks that
//!
//! 1. no candidate acquired the lock while another's term was still valid ([`check_lock`]), and
//! 2. every controller write by a replica fell inside one of that replica's terms ([`check_writes`]).
//!
//! It relies on the test bed's audit policy, which records the request body of Lease and ConfigMap
//! writes, so each lock write names its holder. A write is attributed to a replica by the pod its
//! ServiceAccount token is bound to (the authenticated `authentication.kubernetes.io/pod-name`, see
//! [`writer`]), and only where a token names no pod by the user agent `binary/version (identity)`.
//!
//! Every finding carries the apiserver's answer ([`Violation::code`]): a late write that was refused
//! (403 from the server-side fence, 409 from a stale resourceVersion) changed nothing, while one that
//! was admitted (2xx) or never answered (0: cut off by an apiserver restart, outcome unknown) may have.
//! Callers judge by it; a write whose answer did not tell can be settled by reading its object back
//! ([`settle`]).
//!
//! Times come from the apiserver's clock only. A write *happened after* an event when the apiserver
//! received it after the event's response was complete (`received >= stage_time`), which is strict:
//! a term starts when the acquisition's response was sent. A write belongs to a term when the apiserver
//! received it while the term was valid (before the lease expired and before anyone else wrote the
//! lock), and completed it before the next holder's term began. The replica is judged by when its write
//! *arrived*: how long the apiserver then takes (etcd paused, say) is not the replica acting late, but a
//! write still in flight when another holder's term has begun is an overlap, and a violation, unless
//! etcd's own order says otherwise ([`committed_before_takeover`]): when the apiserver recorded the
//! `resourceVersion` of both the write and the next holder's acquiring write, and the write's is the
//! lower, etcd committed it before the takeover, and the two did not overlap. Such writes are no
//! violations, but callers count and show them next to the verdict.
//!
//! A term ends at its holder's own release when the apiserver *received* it (the holder sent it, and
//! nothing of its term may come after), but at another writer's lock write (a takeover, or a foreign
//! release) only once that write was *answered*: the holder cannot know of it before, and by the rule
//! above a write received before then did not happen after it. A takeover's term begins at that same
//! answer, so an overlap with it is still caught; a foreign release (a Go peer thawed from a freeze
//! releasing its successor's term, see [`foreign_releases`]) begins no term, and the holder's writes
//! received while it was in flight are inside the holder's term. [`during_foreign_lock_write`] counts
//! them for the caller to show.

use std::time::Duration;

use jiff::{SignedDuration, Timestamp};
use testenv::AuditEvent;

mod settle;
pub use settle::{Readback, Settled, settle, settle_by_fence};

/// The lock object: a Lease (`leases`) or a ConfigMap (`configmaps`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lock {
    /// `leases` or `configmaps`.
    pub resource: String,
    /// Its namespace.
    pub namespace: String,
    /// Its name.
    pub name: String,
}

impl Lock {
    /// A Lease lock.
    pub fn lease(namespace: &str, name: &str) -> Lock {
        Lock {
            resource: "leases".into(),
            namespace: namespace.into(),
            name: name.into(),
        }
    }

    fn matches(&self, e: &AuditEvent) -> bool {
        e.resource == self.resource
            && e.namespace == self.namespace
            && e.name == self.name
            && e.subresource.is_empty()
    }
}

/// One holder's continuous tenure of the lock, as the audit log shows it.
#[derive(Debug, Clone, PartialEq)]
pub struct Term {
    /// The holder's identity.
    pub holder: String,
    /// When the acquiring write's response was complete.
    pub start: Timestamp,
    /// When the apiserver received the holder's last successful write naming it (acquire or renew).
    pub last_renew: Timestamp,
    /// The lease duration that write recorded.
    pub lease_duration: Duration,
    /// When the apiserver received the next successful write naming someone else (or a release).
    pub next_write: Option<Timestamp>,
    /// When the apiserver answered that write.
    pub next_write_answered: Option<Timestamp>,
    /// Whether that next write was the holder's own release.
    pub released: bool,
    /// When the next term of another holder began (its acquiring write's response was complete).
    pub next_start: Option<Timestamp>,
    /// The `resourceVersion` etcd gave that acquiring write, if the audit log recorded it.
    pub next_start_committed: Option<u64>,
}

impl Term {
    /// The latest moment the holder may act: the next lock write (its own release when received,
    /// another writer's when answered), or its lease's expiry after the last renew, whichever comes
    /// first.
    pub fn valid_until(&self) -> Timestamp {
        let expiry = self
            .last_renew
            .checked_add(SignedDuration::try_from(self.lease_duration).unwrap_or(SignedDuration::MAX))
            .unwrap_or(Timestamp::MAX);
        match self.ended_by_lock_write() {
            Some(next) if next < expiry => next,
            _ => expiry,
        }
    }

    /// When the next lock write ended the term: the holder's own release when the apiserver received
    /// it, another writer's write when the apiserver answered it.
    fn ended_by_lock_write(&self) -> Option<Timestamp> {
        // Both are set together, when the next lock write is found.
        if self.released {
            self.next_write
        } else {
            self.next_write_answered
        }
    }

    /// Whether a write received at `received` and completed at `completed` lies inside the term: received
    /// while the term was valid, and completed before another holder's term began.
    pub fn covers(&self, received: Timestamp, completed: Timestamp) -> bool {
        received >= self.start
            && received <= self.valid_until()
            && self.next_start.is_none_or(|next| completed <= next)
    }
}

/// A finding of the checker.
#[derive(Debug, Clone, PartialEq)]
pub struct Violation {
    /// When the offending write was received.
    pub time: Timestamp,
    /// The authenticated user.
    pub user: String,
    /// The user agent's identity.
    pub identity: String,
    /// The object written, `resource namespace/name`.
    pub object: String,
    /// Who held the lock at that time, if anyone.
    pub holder: Option<String>,
    /// What is wrong.
    pub reason: String,
    /// The apiserver's answer: its HTTP status, 0 if it never answered (the request was cut off).
    pub code: i32,
}

impl Violation {
    /// Whether the write may have taken effect: the apiserver admitted it (2xx), never answered (0), or
    /// failed in a way that may come after the write was persisted (5xx other than 503).
    pub fn may_have_taken_effect(&self) -> bool {
        self.code == 0 || (200..300).contains(&self.code) || (self.code >= 500 && self.code != 503)
    }
}

/// Who made a write: the pod its token is bound to (authenticated), else the identity in its user
/// agent, else nobody (`""`).
pub fn writer(e: &AuditEvent) -> &str {
    e.pod_name
        .as_deref()
        .or_else(|| e.agent_identity())
        .unwrap_or_default()
}

impl std::fmt::Display for Violation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} {} ({}) wrote {} while the holder was {}: {} (HTTP {})",
            self.time,
            self.identity,
            self.user,
            self.object,
            self.holder.as_deref().unwrap_or("nobody"),
            self.reason,
            self.code
        )
    }
}

/// The successful writes to the lock, in the order the apiserver completed them.
fn lock_writes<'a>(events: &'a [AuditEvent], lock: &Lock) -> Vec<&'a AuditEvent> {
    let mut writes: Vec<&AuditEvent> = events
        .iter()
        .filter(|e| {
            lock.matches(e) && e.is_write() && (200..300).contains(&e.code) && e.lock_holder().is_some()
        })
        .collect();
    writes.sort_by_key(|e| e.stage_time);
    writes
}

/// Which version acted in each of `terms`: per term, its holder and the versions (comma-separated, sorted)
/// in the user agents (`name/version ...`) of the holder's writes within the term. A term with two
/// versions means two builds acted under one holder's term; a term with none wrote nothing.
pub fn versions_per_term(events: &[AuditEvent], terms: &[Term]) -> Vec<(String, String)> {
    terms
        .iter()
        .map(|t| {
            let mut versions: Vec<&str> = events
                .iter()
                .filter(|e| e.is_write() && e.agent_identity() == Some(t.holder.as_str()))
                .filter(|e| t.covers(e.received, e.stage_time))
                .filter_map(|e| {
                    e.user_agent
                        .split_once('/')
                        .map(|(_, v)| v.split(' ').next().unwrap_or(v))
                })
                .collect();
            versions.sort_unstable();
            versions.dedup();
            (t.holder.clone(), versions.join(","))
        })
        .collect()
}

/// Reconstructs the terms of every holder of `lock`.
pub fn terms(events: &[AuditEvent], lock: &Lock) -> Vec<Term> {
    let mut terms: Vec<Term> = Vec::new();
    for w in lock_writes(events, lock) {
        let holder = w.lock_holder().unwrap_or_default();
        let duration = Duration::from_secs(w.lock_duration_seconds().unwrap_or(0).max(0).unsigned_abs());
        match terms.last_mut() {
            Some(t) if t.next_write.is_none() && t.holder == holder => {
                t.last_renew = w.received;
                t.lease_duration = duration;
            }
            last => {
                if let Some(t) = last
                    && t.next_write.is_none()
                {
                    t.next_write = Some(w.received);
                    t.next_write_answered = Some(w.stage_time);
                    t.released = holder.is_empty() && writer(w) == t.holder;
                }
                if !holder.is_empty() {
                    for t in terms.iter_mut().rev() {
                        if t.next_start.is_some() {
                            break;
                        }
                        if t.holder != holder {
                            t.next_start = Some(w.stage_time);
                            t.next_start_committed = w.committed;
                        }
                    }
                    terms.push(Term {
                        holder,
                        start: w.stage_time,
                        last_renew: w.received,
                        lease_duration: duration,
                        next_write: None,
                        next_write_answered: None,
                        released: false,
                        next_start: None,
                        next_start_committed: None,
                    });
                }
            }
        }
    }
    terms
}

/// Checks the lock itself: every successful lock write was made by the holder it names (or by the
/// holder releasing), and no acquisition happened while the previous holder's lease was still valid,
/// unless that holder had released it.
pub fn check_lock(events: &[AuditEvent], lock: &Lock) -> Vec<Violation> {
    let mut out = Vec::new();
    let mut current: Option<(String, Timestamp, Duration)> = None; // holder, last write received, duration
    for w in lock_writes(events, lock) {
        let holder = w.lock_holder().unwrap_or_default();
        let writer = writer(w).to_string();
        let violation = |reason: String, held: Option<String>| Violation {
            time: w.received,
            user: w.user.clone(),
            identity: writer.clone(),
            object: format!("{} {}/{}", lock.resource, lock.namespace, lock.name),
            holder: held,
            reason,
            code: w.code,
        };
        if !holder.is_empty() && holder != writer {
            out.push(violation(
                format!("a lock write by {writer} names {holder} as holder"),
                None,
            ));
        }
        if let Some((prev, last, duration)) = &current
            && !holder.is_empty()
            && prev != &holder
        {
            let expiry = last
                .checked_add(SignedDuration::try_from(*duration).unwrap_or(SignedDuration::MAX))
                .unwrap_or(Timestamp::MAX);
            if w.received < expiry {
                out.push(violation(
                    format!("acquired before the lease of {prev} expired at {expiry}"),
                    Some(prev.clone()),
                ));
            }
        }
        let duration = Duration::from_secs(w.lock_duration_seconds().unwrap_or(0).max(0).unsigned_abs());
        current = (!holder.is_empty()).then_some((holder, w.received, duration));
    }
    out
}

/// For a write that [`check_writes`] finds outside its writer's terms only because the apiserver
/// answered it after the next holder's term had begun (it was received inside the term): the
/// `resourceVersion`s etcd gave it and the next holder's acquiring write, when the write's is the lower.
/// etcd then committed the write before the takeover, so the two did not overlap; this is what happens
/// when etcd stalls (a pause, a slow disk) with both requests waiting on it, and the apiserver answers
/// them in another order than etcd committed them. `None` when the write was not received inside one of
/// its writer's terms, when either version is unknown (a refused write, a log without responses), or
/// when the write committed after the takeover: then the overlap is real.
pub fn committed_before_takeover(terms: &[Term], e: &AuditEvent) -> Option<(u64, u64)> {
    let identity = writer(e);
    let term = terms.iter().find(|t| {
        t.holder == identity
            && e.received >= t.start
            && e.received <= t.valid_until()
            && t.next_start.is_some_and(|next| e.stage_time > next)
    })?;
    let (write, takeover) = (e.committed?, term.next_start_committed?);
    (write < takeover).then_some((write, takeover))
}

/// How a holder's term ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TermEnd {
    /// Its lease lapsed before anyone wrote the lock.
    Lapsed,
    /// It released the lock.
    Released,
    /// Someone else wrote the lock.
    Overwritten,
}

impl std::fmt::Display for TermEnd {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            TermEnd::Lapsed => "its lease lapsed",
            TermEnd::Released => "its own release arrived",
            TermEnd::Overwritten => "the next Lease write arrived",
        })
    }
}

/// For a write that arrived after its writer's last term had ended (see [`before_next_term`]): how and
/// when that term ended, and the next holder's term, with etcd's order of the two writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NextTerm {
    /// When the writer's term ended ([`Term::valid_until`]).
    pub ended: Timestamp,
    /// How it ended.
    pub end: TermEnd,
    /// When the next holder's term began.
    pub start: Timestamp,
    /// The `resourceVersion` etcd gave the write, if recorded.
    pub write: Option<u64>,
    /// The `resourceVersion` etcd gave the next holder's acquiring write, if recorded.
    pub acquired: Option<u64>,
}

impl NextTerm {
    /// Whether the write may have overlapped the next holder's term: etcd committed it after the
    /// acquiring write, or either version is unknown.
    pub fn overlapped(&self) -> bool {
        match (self.write, self.acquired) {
            (Some(w), Some(a)) => w > a,
            _ => true,
        }
    }
}

/// For a write outside its writer's terms that arrived after its writer's last term had ended and
/// before the next holder's term began: that next term, with etcd's order of the two writes. While the
/// next holder's acquisition is unanswered the Lease may still name the writer, so a check at admission
/// (the server-side fence) can admit the write. `None` when the write arrived after the next term
/// began, or when nobody acquired after its writer's last term.
pub fn before_next_term(terms: &[Term], e: &AuditEvent) -> Option<NextTerm> {
    let identity = writer(e);
    let term = terms
        .iter()
        .rev()
        .find(|t| t.holder == identity && t.start <= e.received)?;
    let start = term.next_start?;
    let ended = term.valid_until();
    let end = match term.ended_by_lock_write() {
        Some(next) if next == ended && term.released => TermEnd::Released,
        Some(next) if next == ended => TermEnd::Overwritten,
        _ => TermEnd::Lapsed,
    };
    (e.received < start).then_some(NextTerm {
        ended,
        end,
        start,
        write: e.committed,
        acquired: term.next_start_committed,
    })
}

/// A release of the lock by a writer it did not name: the last successful lock write before it named
/// another holder, and this one, by someone else, names nobody.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ForeignRelease {
    /// When the release was received.
    pub time: Timestamp,
    /// Who released.
    pub writer: String,
    /// Whose term it ended.
    pub holder: String,
}

/// Every successful release of `lock` by a writer other than its holder at that moment (see
/// [`ForeignRelease`]). client-go's `tryRelease` re-reads the lock but judges leadership by the record it
/// observed before, so a leader that lost the lock without seeing its successor releases the successor's
/// term.
pub fn foreign_releases(events: &[AuditEvent], lock: &Lock) -> Vec<ForeignRelease> {
    let mut out = Vec::new();
    let mut holder = String::new();
    for w in lock_writes(events, lock) {
        let named = w.lock_holder().unwrap_or_default();
        let writer = writer(w);
        if named.is_empty() && !holder.is_empty() && holder != writer {
            out.push(ForeignRelease {
                time: w.received,
                writer: writer.to_owned(),
                holder: holder.clone(),
            });
        }
        holder = named;
    }
    out
}

/// The writes selected by `is_controller_write` that their writer's term covers only because another
/// writer's lock write ending it was still in flight: received after that write arrived and before it
/// was answered (see the module's notes). Callers show how many next to the verdict.
pub fn during_foreign_lock_write<'a>(
    terms: &[Term],
    events: &'a [AuditEvent],
    lock: &Lock,
    is_controller_write: impl Fn(&AuditEvent) -> bool,
) -> Vec<&'a AuditEvent> {
    events
        .iter()
        .filter(|e| e.is_write() && !lock.matches(e) && is_controller_write(e))
        .filter(|e| {
            let identity = writer(e);
            terms.iter().any(|t| {
                t.holder == identity
                    && !t.released
                    && t.covers(e.received, e.stage_time)
                    && t.next_write.is_some_and(|arrived| e.received > arrived)
            })
        })
        .collect()
}

/// Checks that every write selected by `is_controller_write` was made by a replica inside one of its own
/// terms of `lock`, whatever the apiserver answered (each finding has the answer in
/// [`Violation::code`]). The replica is the write's [`writer`]. `events` may include requests that
/// were never answered (code 0); their completion is taken to be their arrival.
pub fn check_writes(
    events: &[AuditEvent],
    lock: &Lock,
    is_controller_write: impl Fn(&AuditEvent) -> bool,
) -> Vec<Violation> {
    check_writes_in(&terms(events, lock), events, lock, is_controller_write)
}

/// [`check_writes`] against `terms` already built from `events` with [`terms`], for a caller that
/// needs the terms too.
pub fn check_writes_in(
    terms: &[Term],
    events: &[AuditEvent],
    lock: &Lock,
    is_controller_write: impl Fn(&AuditEvent) -> bool,
) -> Vec<Violation> {
    events
        .iter()
        .filter(|e| e.is_write() && !lock.matches(e) && is_controller_write(e))
        .filter_map(|e| {
            let identity = writer(e);
            let inside = terms
                .iter()
                .any(|t| t.holder == identity && t.covers(e.received, e.stage_time));
            if inside {
                return None;
            }
            let holder = terms
                .iter()
                .find(|t| t.start <= e.received && e.received <= t.valid_until())
                .map(|t| t.holder.clone());
            Some(Violation {
                time: e.received,
                user: e.user.clone(),
                identity: identity.to_string(),
                object: format!("{} {}/{}", e.resource, e.namespace, e.name),
                holder,
                reason: format!("{} outside any term of {identity}", e.verb),
                code: e.code,
            })
        })
        .collect()
}

/// Checks that every write selected by `is_replica_write` (the writes of the replicas' ServiceAccounts)
/// was sent with a token bound to a pod, and carries that pod's name as the identity in its user agent:
/// a replica that claims another's identity, or a client of a replica that sends a user agent without
/// it, is caught. Returns how many writes were checked, and one violation per write that fails.
pub fn check_attribution(
    events: &[AuditEvent],
    is_replica_write: impl Fn(&AuditEvent) -> bool,
) -> (usize, Vec<Violation>) {
    let mut checked = 0;
    let mut out = Vec::new();
    for e in events.iter().filter(|e| e.is_write() && is_replica_write(e)) {
        checked += 1;
        let reason = match e.pod_name.as_deref() {
            None => "its token is bound to no pod, so it cannot be attributed".to_owned(),
            Some(pod) if e.agent_identity() == Some(pod) => continue,
            Some(pod) => format!(
                "its user agent {:?} lacks the identity of the pod {pod} that sent it",
                e.user_agent
            ),
        };
        out.push(Violation {
            time: e.received,
            user: e.user.clone(),
            identity: writer(e).to_owned(),
            object: format!("{} {}/{}", e.resource, e.namespace, e.name),
            holder: None,
            reason,
            code: e.code,
        });
    }
    (checked, out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ev(t_ms: i64, agent: &str, resource: &str, name: &str, holder: Option<&str>) -> AuditEvent {
        let base: Timestamp = "2026-11-29T10:00:00Z".parse().unwrap_or(Timestamp::UNIX_EPOCH);
        let at = |ms: i64| base.checked_add(SignedDuration::from_millis(ms)).unwrap_or(base);
        AuditEvent {
            audit_id: format!("{t_ms}"),
            stage: "ResponseComplete".into(),
            verb: "update".into(),
            request_uri: String::new(),
            user: "u".into(),
            groups: vec![],
            user_agent: format!("bin/0.1.0 ({agent})"),
            api_group: String::new(),
            resource: resource.into(),
            subresource: String::new(),
            namespace: "ns".into(),
            name: name.into(),
            code: 200,
            received: at(t_ms),
            stage_time: at(t_ms + 5),
            request_object: holder
                .map(|h| serde_json::json!({"spec": {"holderIdentity": h, "leaseDurationSeconds": 4}})),
            pod_name: None,
            committed: None,
        }
    }

    fn lease(t: i64, agent: &str, holder: &str) -> AuditEvent {
        ev(t, agent, "leases", "lock", Some(holder))
    }

    fn write(t: i64, agent: &str) -> AuditEvent {
        ev(t, agent, "configmaps", "work", None)
    }

    #[test]
    fn writes_inside_terms_pass() {
        let log = vec![
            lease(0, "a", "a"),
            write(100, "a"),
            lease(1000, "a", "a"),
            lease(1500, "a", ""),
            lease(1600, "b", "b"),
            write(1700, "b"),
        ];
        let lock = Lock::lease("ns", "lock");
        assert_eq!(terms(&log, &lock).len(), 2);
        assert!(check_lock(&log, &lock).is_empty());
        assert!(check_writes(&log, &lock, |_| true).is_empty());
    }

    #[test]
    fn a_write_by_a_non_leader_is_a_violation() {
        let log = vec![lease(0, "a", "a"), write(100, "b")];
        let v = check_writes(&log, &Lock::lease("ns", "lock"), |_| true);
        assert_eq!(v.len(), 1);
        assert_eq!(v[0].identity, "b");
        assert_eq!(v[0].holder.as_deref(), Some("a"));
    }

    #[test]
    fn a_write_after_the_next_holder_acquired_is_a_violation() {
        // a's lease expires at 4000; b acquires at 4100; a writes at 4200.
        let log = vec![lease(0, "a", "a"), lease(4100, "b", "b"), write(4200, "a")];
        let lock = Lock::lease("ns", "lock");
        assert!(check_lock(&log, &lock).is_empty());
        assert_eq!(check_writes(&log, &lock, |_| true).len(), 1);
    }

    fn delayed(t_ms: i64, done_ms: i64, agent: &str) -> AuditEvent {
        let mut e = write(t_ms, agent);
        e.stage_time = e.received + SignedDuration::from_millis(done_ms - t_ms);
        e
    }

    #[test]
    fn a_write_the_apiserver_finishes_late_counts_by_its_arrival() {
        // a's lease (4 s from its renew at 0) expires at 4000. Its write arrives at 1000, inside the
        // term; etcd stalls and the apiserver completes it at 4500, before b's term begins at 5005.
        let log = vec![
            lease(0, "a", "a"),
            delayed(1000, 4500, "a"),
            lease(5000, "b", "b"),
        ];
        let lock = Lock::lease("ns", "lock");
        assert!(check_writes(&log, &lock, |_| true).is_empty());
        // Completed after b's term began: the two overlap.
        let log = vec![
            lease(0, "a", "a"),
            delayed(1000, 5100, "a"),
            lease(5000, "b", "b"),
        ];
        let v = check_writes(&log, &lock, |_| true);
        assert_eq!(v.len(), 1, "{v:?}");
        // Arrived after the lease expired: late, whoever holds the lock.
        let log = vec![lease(0, "a", "a"), delayed(4100, 4200, "a")];
        assert_eq!(check_writes(&log, &lock, |_| true).len(), 1);
    }

    #[test]
    fn a_write_answered_after_the_takeover_but_committed_before_it_is_told_apart() {
        // etcd stalls with a's write (received at 1000) and b's acquisition (at 5000) waiting on it; the
        // apiserver answers b first (5005), then a's write (5100).
        let committed = |mut e: AuditEvent, rv: u64| {
            e.committed = Some(rv);
            e
        };
        let lock = Lock::lease("ns", "lock");
        let log = |write_rv: Option<u64>, takeover_rv: u64| {
            let mut w = delayed(1000, 5100, "a");
            w.committed = write_rv;
            vec![
                committed(lease(0, "a", "a"), 10),
                w,
                committed(lease(5000, "b", "b"), takeover_rv),
            ]
        };
        // Committed first (11 < 12): no overlap, but still outside the term by its answer.
        let before = log(Some(11), 12);
        let v = check_writes(&before, &lock, |_| true);
        assert_eq!(v.len(), 1, "{v:?}");
        let terms = terms(&before, &lock);
        assert_eq!(committed_before_takeover(&terms, &before[1]), Some((11, 12)));
        // Positive controls: committed after the takeover, or with no version recorded, it overlaps.
        let after = log(Some(13), 12);
        assert_eq!(
            committed_before_takeover(&super::terms(&after, &lock), &after[1]),
            None
        );
        let unknown = log(None, 12);
        assert_eq!(
            committed_before_takeover(&super::terms(&unknown, &lock), &unknown[1]),
            None
        );
        // A write received after the lease expired is late whatever etcd's order.
        let mut late = delayed(4100, 5100, "a");
        late.committed = Some(11);
        let expired = vec![
            committed(lease(0, "a", "a"), 10),
            late,
            committed(lease(5000, "b", "b"), 12),
        ];
        assert_eq!(
            committed_before_takeover(&super::terms(&expired, &lock), &expired[1]),
            None
        );
    }

    #[test]
    fn a_write_after_its_term_and_before_the_next_is_placed_by_etcd_order() {
        // a's lease (4 s from its renew at 0) lapses at 4000; a writes at 4100, after its term; b
        // acquires at 5000, its term beginning at 5005.
        let committed = |mut e: AuditEvent, rv: u64| {
            e.committed = Some(rv);
            e
        };
        let lock = Lock::lease("ns", "lock");
        let log = |received: i64, write_rv: Option<u64>| {
            let mut w = delayed(received, received + 100, "a");
            w.committed = write_rv;
            let mut events = vec![
                committed(lease(0, "a", "a"), 10),
                w,
                committed(lease(5000, "b", "b"), 12),
            ];
            events.sort_by_key(|e| e.received);
            events
        };
        let before = log(4100, Some(11));
        assert_eq!(check_writes(&before, &lock, |_| true).len(), 1);
        let terms = terms(&before, &lock);
        let next = before_next_term(&terms, &before[1]);
        assert_eq!(next.map(|n| (n.write, n.acquired)), Some((Some(11), Some(12))));
        assert_eq!(next.map(|n| n.overlapped()), Some(false));
        assert_eq!(next.map(|n| n.end), Some(TermEnd::Lapsed));
        // a released before writing: its term ended by its own release.
        let mut released = before.clone();
        released.insert(1, committed(lease(3000, "a", ""), 10));
        let next = before_next_term(&super::terms(&released, &lock), &released[2]);
        assert_eq!(next.map(|n| n.end), Some(TermEnd::Released));
        // Committed after b's acquiring write, or with no version recorded: it may have overlapped.
        let after = log(4100, Some(13));
        let next = before_next_term(&super::terms(&after, &lock), &after[1]);
        assert_eq!(next.map(|n| n.overlapped()), Some(true));
        let unknown = log(4100, None);
        let next = before_next_term(&super::terms(&unknown, &lock), &unknown[1]);
        assert_eq!(next.map(|n| n.overlapped()), Some(true));
        // Positive controls: arrived after b's term began, it is placed nowhere; so is a write when
        // nobody acquired after a, and one by a writer that never held the lock.
        let late = log(5100, Some(13));
        assert_eq!(late[2].name, "work");
        assert_eq!(before_next_term(&super::terms(&late, &lock), &late[2]), None);
        let alone = vec![committed(lease(0, "a", "a"), 10), before[1].clone()];
        assert_eq!(before_next_term(&super::terms(&alone, &lock), &alone[1]), None);
        let mut stranger = before[1].clone();
        stranger.user_agent = "x/1 (c)".into();
        assert_eq!(before_next_term(&terms, &stranger), None);
    }

    #[test]
    fn a_write_while_a_foreign_release_is_in_flight_is_inside_the_term_and_counted() {
        let lock = Lock::lease("ns", "lock");
        // b holds; a (stale) releases b's term: received at 1000, answered at 1030.
        let mut release = lease(1000, "a", "");
        release.stage_time = release.received + SignedDuration::from_millis(30);
        let log = vec![
            lease(0, "b", "b"),
            release,
            // b's write received at 1010, while the release was in flight (answered at 1015).
            write(1010, "b"),
        ];
        let terms = super::terms(&log, &lock);
        assert!(check_writes(&log, &lock, |_| true).is_empty());
        let counted = during_foreign_lock_write(&terms, &log, &lock, |_| true);
        assert_eq!(counted.len(), 1, "{counted:?}");
        // Positive control: received after the release was answered, it is a violation.
        let log = vec![log[0].clone(), log[1].clone(), write(1031, "b")];
        let v = check_writes(&log, &lock, |_| true);
        assert_eq!(v.len(), 1, "{v:?}");
        // The holder's own release ends its term when received, as before.
        let mut own = lease(1000, "b", "");
        own.stage_time = own.received + SignedDuration::from_millis(30);
        let log = vec![lease(0, "b", "b"), own, write(1010, "b")];
        assert_eq!(check_writes(&log, &lock, |_| true).len(), 1);
    }

    #[test]
    fn a_release_by_another_than_the_holder_is_found() {
        let lock = Lock::lease("ns", "lock");
        // a holds, b takes over after expiry, then a (stale) releases b's term; b's own release is fine.
        let log = vec![
            lease(0, "a", "a"),
            lease(5000, "b", "b"),
            lease(5500, "a", ""),
            lease(6000, "c", "c"),
            lease(7000, "c", ""),
        ];
        let found = foreign_releases(&log, &lock);
        assert_eq!(found.len(), 1, "{found:?}");
        assert_eq!((found[0].writer.as_str(), found[0].holder.as_str()), ("a", "b"));
    }

    #[test]
    fn the_authenticated_pod_names_the_writer_and_the_outcome_is_kept() {
        // b's token is bound to pod b, whatever its user agent claims; the fence refused its write.
        let mut w = write(100, "a");
        w.pod_name = Some("b".into());
        w.code = 403;
        let log = vec![lease(0, "a", "a"), w];
        let v = check_writes(&log, &Lock::lease("ns", "lock"), |_| true);
        assert_eq!(v.len(), 1, "{v:?}");
        assert_eq!(v[0].identity, "b");
        assert_eq!(v[0].code, 403);
        assert!(!v[0].may_have_taken_effect());
        let cut = Violation {
            code: 0,
            ..v[0].clone()
        };
        assert!(cut.may_have_taken_effect());
    }

    #[test]
    fn a_user_agent_without_the_pods_identity_is_caught() {
        let mut own = write(100, "b");
        own.pod_name = Some("b".into());
        let mut claims_a = write(200, "a");
        claims_a.pod_name = Some("b".into());
        let unbound = write(300, "b");
        let (checked, v) = check_attribution(&[own, claims_a, unbound], |_| true);
        assert_eq!(checked, 3);
        assert_eq!(v.len(), 2, "{v:?}");
        assert!(
            v[0].reason.contains("lacks the identity of the pod b"),
            "{}",
            v[0]
        );
        assert!(v[1].reason.contains("bound to no pod"), "{}", v[1]);
    }

    #[test]
    fn an_early_takeover_is_a_violation() {
        let log = vec![lease(0, "a", "a"), lease(2000, "b", "b")];
        let v = check_lock(&log, &Lock::lease("ns", "lock"));
        assert_eq!(v.len(), 1, "{v:?}");
        assert!(v[0].reason.contains("before the lease of a expired"));
    }

    #[test]
    fn a_write_naming_someone_else_is_a_violation() {
        let log = vec![lease(0, "a", "b")];
        assert_eq!(check_lock(&log, &Lock::lease("ns", "lock")).len(), 1);
    }
}
