//! Settling a write whose answer did not tell: one the apiserver never answered (cut off by a restart)
//! or failed with a 5xx other than 503 (a 504 when the request's own deadline passed first, say). Such
//! a write *may* have taken effect, and the checker counts it as a violation unless the object itself
//! or the fence proves otherwise.
//!
//! The first proof ([`settle`]) reads the object back after the run. It holds when
//! 1. every write to the object in the audit log is a full update or create (a patch's body is not the
//!    object, so it proves nothing), and the log records each one's body;
//! 2. the last write the apiserver admitted (2xx) completed before the unsettled write was received;
//! 3. the object read back holds exactly that admitted write's `data`, and no other write in the log
//!    carries the same `data` (the unsettled one included);
//! 4. it was read back after the unsettled write's deadline: the `timeout` of its request, else the
//!    apiserver's 60 s default. After the deadline the apiserver's handler has given the request up.
//!
//! Then the unsettled write took no effect. Had it been persisted, it was persisted after the admitted
//! write (it arrived after that one completed), so the object would hold its `data` or that of a later
//! write; none of those is what was read back.
//!
//! The second proof ([`settle_by_fence`]) needs no read: with the server-side fence in force, the fence
//! had already refused the writer, and nothing named the writer holder again before the write's
//! deadline, so admission refused the write too, if it ran.
//!
//! Nothing else is excused: a write that fails both proofs stays a violation.

use std::time::Duration;

use jiff::{SignedDuration, Timestamp};
use serde_json::Value;
use testenv::AuditEvent;

/// The apiserver's own deadline for a request that names none (kube-apiserver `--request-timeout`).
const DEFAULT_REQUEST_TIMEOUT: Duration = Duration::from_secs(60);

/// An object as read back after the run.
#[derive(Debug, Clone, PartialEq)]
pub struct Readback {
    /// Its `data`, or `None` if it does not exist.
    pub data: Option<Value>,
    /// When it was read.
    pub read_at: Timestamp,
}

/// Why a write with an unknown answer provably took no effect.
#[derive(Debug, Clone, PartialEq)]
pub enum Settled {
    /// The object, read back after the write's deadline, still holds what the last write admitted
    /// before it wrote ([`settle`]).
    ReadBack {
        /// When the last admitted write to the object, whose `data` the object still holds, was received.
        admitted_at: Timestamp,
        /// When the object was read back.
        read_at: Timestamp,
    },
    /// The fence had already refused its writer, and nothing named the writer holder again before the
    /// write's deadline ([`settle_by_fence`]).
    Fenced {
        /// When the apiserver answered the writer's earlier write with the fence's 403.
        refused_at: Timestamp,
    },
}

impl std::fmt::Display for Settled {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Settled::ReadBack { admitted_at, read_at } => write!(
                f,
                "took no effect: read back at {read_at}, the object still holds what the last admitted write \
                 (received {admitted_at}) wrote"
            ),
            Settled::Fenced { refused_at } => write!(
                f,
                "took no effect: the fence refused its writer at {refused_at}, before this write arrived, and no \
                 Lease write named the writer again before this write's deadline, so admission refused this one \
                 too, if it ran"
            ),
        }
    }
}

/// The deadline the apiserver gave a request: its `timeout` query parameter, else the default.
fn deadline(e: &AuditEvent) -> Timestamp {
    let timeout = e
        .request_uri
        .split_once('?')
        .and_then(|(_, query)| query.split('&').find_map(|kv| kv.strip_prefix("timeout=")))
        .and_then(|t| election::duration::parse_duration(t).ok())
        .map_or(DEFAULT_REQUEST_TIMEOUT, |t| t.min(DEFAULT_REQUEST_TIMEOUT));
    e.received
        .checked_add(SignedDuration::try_from(timeout).unwrap_or(SignedDuration::MAX))
        .unwrap_or(Timestamp::MAX)
}

fn same_object(a: &AuditEvent, b: &AuditEvent) -> bool {
    a.api_group == b.api_group
        && a.resource == b.resource
        && a.namespace == b.namespace
        && a.name == b.name
        && a.subresource.is_empty()
        && b.subresource.is_empty()
}

fn data(e: &AuditEvent) -> Option<&Value> {
    e.request_object.as_ref()?.get("data")
}

/// Whether `write` (an unknown answer) provably took no effect, by the object `back` read back after the
/// run and every request in `events` (answered or not). See the module's documentation for the proof.
pub fn settle(events: &[AuditEvent], write: &AuditEvent, back: &Readback) -> Option<Settled> {
    let to_object: Vec<&AuditEvent> = events
        .iter()
        .filter(|e| e.is_write() && same_object(e, write))
        .collect();
    let full_bodies = to_object
        .iter()
        .all(|e| matches!(e.verb.as_str(), "create" | "update") && data(e).is_some());
    if !full_bodies || back.read_at <= deadline(write) {
        return None;
    }
    let admitted = to_object
        .iter()
        .filter(|e| (200..300).contains(&e.code))
        .max_by_key(|e| e.stage_time)?;
    let held = back.data.as_ref()?;
    let carrying = to_object.iter().filter(|e| data(e) == Some(held)).count();
    (admitted.stage_time < write.received && data(admitted) == Some(held) && carrying == 1).then_some(
        Settled::ReadBack {
            admitted_at: admitted.received,
            read_at: back.read_at,
        },
    )
}

/// Settles a write with an unknown answer, received with the server-side fence in force, by the fence
/// itself. The fence admits a write only while the Lease its policy reads names the writer's pod. The
/// proof holds when
/// 1. an earlier write by the same writer, other than to the lock, was refused with 403 and answered
///    before this write was received: its writers are cluster-admin, so only the fence refuses them,
///    and at that moment the policy's Lease named another holder;
/// 2. no successful write of the lock naming the writer as holder was answered after that refusal
///    began and received before this write's deadline: the Lease the policy reads moves forward only,
///    so it named someone else whenever this write's admission ran.
///
/// Then admission refused this write, if the request got that far. A write the apiserver admitted (2xx)
/// is never settled: its answer tells. Nothing else is excused.
pub fn settle_by_fence(events: &[AuditEvent], write: &AuditEvent, lock: &super::Lock) -> Option<Settled> {
    if (200..300).contains(&write.code) {
        return None;
    }
    let writer = super::writer(write);
    let refusal = events
        .iter()
        .filter(|e| e.is_write() && e.code == 403 && super::writer(e) == writer)
        .filter(|e| !lock.matches(e) && e.stage_time < write.received)
        .max_by_key(|e| e.stage_time)?;
    let until = deadline(write);
    let named_again = events.iter().any(|e| {
        lock.matches(e)
            && e.is_write()
            && (200..300).contains(&e.code)
            && e.lock_holder().as_deref() == Some(writer)
            && e.stage_time >= refusal.received
            && e.received <= until
    });
    (!named_again).then_some(Settled::Fenced {
        refused_at: refusal.stage_time,
    })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn at(ms: i64) -> Timestamp {
        let base: Timestamp = "2026-12-04T10:00:00Z".parse().unwrap_or(Timestamp::UNIX_EPOCH);
        base.checked_add(SignedDuration::from_millis(ms)).unwrap_or(base)
    }

    fn write(ms: i64, code: i32, n: u32) -> AuditEvent {
        AuditEvent {
            audit_id: format!("{ms}"),
            stage: "ResponseComplete".into(),
            verb: "update".into(),
            request_uri: "/api/v1/namespaces/ns/configmaps/work?timeout=1s".into(),
            user: "u".into(),
            groups: vec![],
            user_agent: "lease-candidate/v1 (go-1)".into(),
            api_group: String::new(),
            resource: "configmaps".into(),
            subresource: String::new(),
            namespace: "ns".into(),
            name: "work".into(),
            code,
            received: at(ms),
            stage_time: at(ms + 5),
            request_object: Some(json!({"data": {"writer": "go-1", "n": n.to_string()}})),
            pod_name: None,
            committed: None,
        }
    }

    fn back(ms: i64, n: u32) -> Readback {
        Readback {
            data: Some(json!({"writer": "go-1", "n": n.to_string()})),
            read_at: at(ms),
        }
    }

    #[test]
    fn an_unknown_answer_after_the_last_admitted_write_is_settled_by_the_object() {
        let log = vec![write(0, 200, 1), write(100, 200, 2), write(5000, 504, 3)];
        let settled = settle(&log, &log[2], &back(10_000, 2));
        assert_eq!(
            settled,
            Some(Settled::ReadBack {
                admitted_at: at(100),
                read_at: at(10_000)
            })
        );
    }

    #[test]
    fn an_object_holding_the_unknown_writes_data_is_not_settled() {
        // The positive control: the 504 write did take effect.
        let log = vec![write(0, 200, 1), write(5000, 504, 2)];
        assert_eq!(settle(&log, &log[1], &back(10_000, 2)), None);
    }

    #[test]
    fn a_read_before_the_deadline_or_of_a_missing_object_settles_nothing() {
        let log = vec![write(0, 200, 1), write(5000, 504, 2)];
        assert_eq!(settle(&log, &log[1], &back(5500, 1)), None);
        let mut gone = back(10_000, 1);
        gone.data = None;
        assert_eq!(settle(&log, &log[1], &gone), None);
        // Without a timeout of its own, the apiserver's 60 s apply.
        let mut no_timeout = log.clone();
        no_timeout[1].request_uri = "/api/v1/namespaces/ns/configmaps/work".into();
        assert_eq!(settle(&no_timeout, &no_timeout[1], &back(10_000, 1)), None);
        assert!(settle(&no_timeout, &no_timeout[1], &back(66_000, 1)).is_some());
    }

    #[test]
    fn a_patch_or_an_admitted_write_after_it_settles_nothing() {
        let mut log = vec![write(0, 200, 1), write(5000, 504, 2)];
        log[0].verb = "patch".into();
        assert_eq!(settle(&log, &log[1], &back(10_000, 1)), None);
        // Admitted after the unknown write arrived: the order of the two is not known.
        let log = vec![write(5000, 504, 2), write(5002, 200, 1)];
        assert_eq!(settle(&log, &log[0], &back(10_000, 1)), None);
        // Two writes carrying the same data: the object cannot tell them apart.
        let log = vec![write(0, 200, 1), write(5000, 504, 1)];
        assert_eq!(settle(&log, &log[1], &back(10_000, 1)), None);
    }

    fn lease_write(ms: i64, holder: &str) -> AuditEvent {
        let mut e = write(ms, 200, 0);
        e.resource = "leases".into();
        e.api_group = "coordination.k8s.io".into();
        e.name = "lock".into();
        e.request_uri = "/apis/coordination.k8s.io/v1/namespaces/ns/leases/lock".into();
        e.request_object = Some(json!({"spec": {"holderIdentity": holder, "leaseDurationSeconds": 4}}));
        e
    }

    #[test]
    fn an_unknown_answer_after_the_fence_refused_its_writer_is_settled_by_the_fence() {
        let lock = crate::checker::Lock::lease("ns", "lock");
        // go-1's write at 1000 was refused (403); its write at 2000 got a 504.
        let log = vec![lease_write(0, "go-2"), write(1000, 403, 1), write(2000, 504, 2)];
        assert_eq!(
            settle_by_fence(&log, &log[2], &lock),
            Some(Settled::Fenced { refused_at: at(1005) })
        );
        // Positive controls: an admitted write, no refusal before it, or go-1 named holder again before
        // its deadline.
        let admitted = vec![write(1000, 403, 1), write(2000, 200, 2)];
        assert_eq!(settle_by_fence(&admitted, &admitted[1], &lock), None);
        let unrefused = vec![lease_write(0, "go-2"), write(2000, 504, 2)];
        assert_eq!(settle_by_fence(&unrefused, &unrefused[1], &lock), None);
        let refused_after = vec![write(2000, 504, 2), write(2100, 403, 1)];
        assert_eq!(settle_by_fence(&refused_after, &refused_after[0], &lock), None);
        let reacquired = vec![
            write(1000, 403, 1),
            lease_write(1500, "go-1"),
            write(2000, 504, 2),
        ];
        assert_eq!(settle_by_fence(&reacquired, &reacquired[2], &lock), None);
        let mut other_writer = log[1].clone();
        other_writer.user_agent = "lease-candidate/v1 (go-3)".into();
        let by_another = vec![other_writer, log[2].clone()];
        assert_eq!(settle_by_fence(&by_another, &by_another[1], &lock), None);
    }
}
