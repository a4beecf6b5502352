//! Deleting a Deployment's leader Pod again and again, timing each handover, and splitting each one with
//! the audit log into the part before the old leader's release and the part after it.

use std::path::Path;
use std::time::Duration;

use jiff::Timestamp;
use k8s_openapi::api::core::v1::Pod;
use kube::{Api, api::ListParams};
use testenv::{AuditEvent, workload};

use super::cpu;
use crate::bench::stats::pct;

const READY_TIMEOUT: Duration = Duration::from_secs(300);
const HANDOVER_TIMEOUT: Duration = Duration::from_secs(60);
/// How long the deleted leader's log is read again for its shutdown line, after the handover.
const LOG_WAIT: Duration = Duration::from_secs(10);

/// One deletion of the leader's Pod.
#[derive(Debug, Clone)]
pub struct Deletion {
    /// The deleted Pod.
    pub pod: String,
    /// The Lease's next holder.
    pub new_holder: String,
    /// From the delete request to the first event of a watch of the Lease (established before the delete) naming another Pod, in ms.
    pub ms: f64,
    /// Whether the standby (a Pod that ran before the delete) took the Lease, not the replacement.
    pub to_standby: bool,
    /// How long the deleted replica took to stop its leader work before releasing, from its own log
    /// (`stop_ms` of "leader work stopped for shutdown"; none for client-go's candidate).
    pub stop_ms: Option<f64>,
    /// What the machine's processes used while it ran: from just before the bench read the Lease and
    /// started its watch of it (then deleted the Pod) until that watch saw the new holder; `None` when
    /// the scheduler's statistics could not be read.
    pub cpu: Option<cpu::Usage>,
    /// That window's length, in ms.
    pub window_ms: f64,
}

/// The newest log file of `pod`'s container in the node's Pod log directory `pod_logs` (the kubelet's
/// `<namespace>_<pod>_<uid>/<container>/<restarts>.log`), opened: the file stays readable through this
/// handle after the kubelet removes it with the Pod.
fn open_log(pod_logs: &Path, namespace: &str, pod: &str) -> Option<std::fs::File> {
    let prefix = format!("{namespace}_{pod}_");
    let pod_dir = std::fs::read_dir(pod_logs)
        .ok()?
        .filter_map(Result::ok)
        .find(|e| e.file_name().to_string_lossy().starts_with(&prefix))?
        .path();
    let container = std::fs::read_dir(pod_dir)
        .ok()?
        .filter_map(Result::ok)
        .next()?
        .path();
    let restarts = |p: &Path| -> Option<u32> { p.file_stem()?.to_str()?.parse().ok() };
    let newest = std::fs::read_dir(container)
        .ok()?
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| restarts(p).is_some())
        .max_by_key(|p| restarts(p))?;
    std::fs::File::open(newest).ok()
}

/// The `stop_ms` of our replica's "leader work stopped for shutdown" line in its container's log `log`,
/// read once the handover is over: the replica writes it before its release, and the container
/// runtime copies it to the file soon after, so the file is read again until the line is there or
/// `LOG_WAIT` has passed (client-go's candidate writes no such line).
async fn stop_ms(mut log: std::fs::File) -> Option<f64> {
    use std::io::Read;
    let deadline = tokio::time::Instant::now() + LOG_WAIT;
    let mut text = String::new();
    loop {
        let mut more = Vec::new();
        log.read_to_end(&mut more).ok()?;
        text.push_str(&String::from_utf8_lossy(&more));
        if let Some(line) = text
            .lines()
            .find(|l| l.contains("leader work stopped for shutdown"))
        {
            let value = line.split("stop_ms=").nth(1)?;
            return value
                .split(|c: char| !c.is_ascii_digit() && c != '.')
                .next()?
                .parse()
                .ok();
        }
        if tokio::time::Instant::now() >= deadline {
            return None;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The shortest rest between a Deployment back to 2 Ready Pods and the next delete.
pub const REST: Duration = Duration::from_millis(500);
/// The span over which the rests spread: the retry period (2 s) at which both electors' leaders renew.
pub const PHASES: Duration = Duration::from_secs(2);

/// The rest before deletion `i`: [`REST`] plus a share of [`PHASES`] that steps by the golden ratio, so
/// that the deletions fall evenly over every phase of the leader's renewals, as deletions at random
/// times in a cluster do. With a fixed rest they fell in step with the renewals: in the run at 75ed523,
/// 9 of 51 deletions came within 26 ms of a renewal, where an even spread gives about 1.
pub fn rest(i: usize) -> Duration {
    const GOLDEN: f64 = 0.618_033_988_749_895;
    let phase = (i as f64 * GOLDEN).fract();
    REST + PHASES.mul_f64(phase)
}

/// Where the replicas whose leader is deleted come from.
pub enum Pool<'a> {
    /// The Deployment `app`: its ReplicaSet creates a replacement as soon as a Pod is deleted.
    Deployment,
    /// Bare Pods of its template, which nothing replaces until the bench creates the next one, after
    /// the handover ([`bare`](super::bare)).
    Bare(&'a super::bare::Pods),
}

impl Pool<'_> {
    /// The label selector of the replicas of `app`.
    fn selector(&self, app: &str) -> String {
        match self {
            Pool::Deployment => format!("{}={app}", super::bare::NAME_LABEL),
            Pool::Bare(pods) => pods.selector(),
        }
    }

    /// Waits until `app` in `namespace` has 2 Ready replicas again.
    async fn ready(&self, client: &kube::Client, namespace: &str, app: &str) -> anyhow::Result<()> {
        match self {
            Pool::Deployment => {
                workload::wait_deployments(client, namespace, &[app.to_string()], 2, READY_TIMEOUT).await?;
                Ok(())
            }
            Pool::Bare(pods) => pods.ready(READY_TIMEOUT).await,
        }
    }
}

/// Deletes the Pod holding `lease` `n` times, each once `app`'s `pool` in `namespace` is back to 2
/// Ready Pods, and times each handover. The deleted leader's log is read from the node's Pod log
/// directory `pod_logs` after each handover: nothing streams it while the handover is timed.
pub async fn delete_leaders(
    client: &kube::Client,
    pod_logs: &Path,
    (namespace, app, lease): (&str, &str, &str),
    pool: Pool<'_>,
    n: usize,
) -> anyhow::Result<Vec<Deletion>> {
    let pods: Api<Pod> = Api::namespaced(client.clone(), namespace);
    let selector = pool.selector(app);
    let mut out = Vec::new();
    for i in 0..n {
        pool.ready(client, namespace, app).await?;
        let before: Vec<String> = pods
            .list(&ListParams::default().labels(&selector))
            .await?
            .items
            .iter()
            .map(|p| workload::name(p).to_string())
            .collect();
        // The bench's own requests before the delete (the Lease read and watched, a connection made
        // ready for the delete beside the watch's) are made before the rest, out of the timed window.
        let deletion = workload::LeaderDeletion::prepare(client, namespace, lease, HANDOVER_TIMEOUT).await?;
        // The leader's log file, opened before the delete.
        let log = open_log(pod_logs, namespace, deletion.leader_pod());
        // Each deletion starts from a node at rest, and at its own phase of the leader's renewals.
        tokio::time::sleep(rest(i)).await;
        let at_rest = cpu::snapshot();
        let started = std::time::Instant::now();
        let h = deletion.delete().await?;
        let window_ms = started.elapsed().as_secs_f64() * 1e3;
        let cpu = cpu::between(&at_rest, &cpu::snapshot());
        let d = Deletion {
            stop_ms: match log {
                Some(log) => stop_ms(log).await,
                None => None,
            },
            to_standby: before.iter().any(|p| p == workload::holder_pod(&h.new_holder)),
            pod: h.deleted,
            new_holder: h.new_holder,
            ms: h.elapsed.as_secs_f64() * 1e3,
            cpu,
            window_ms,
        };
        eprintln!(
            "[node] {app} {}/{n}: {} deleted, {} leads after {:.0} ms",
            i + 1,
            d.pod,
            d.new_holder,
            d.ms
        );
        out.push(d);
    }
    pool.ready(client, namespace, app).await?;
    Ok(out)
}

/// Our slowest handover on the apiserver's clock, with its split (one whose split is missing counts as
/// the slowest: nothing shows it was fast).
pub fn slowest<'a>(ds: &'a [Deletion], splits: &'a [Split]) -> Option<(&'a Deletion, &'a Split)> {
    ds.iter().zip(splits).max_by(|a, b| {
        let at = |s: &Split| s.handover_ms.unwrap_or(f64::INFINITY);
        at(a.1).total_cmp(&at(b.1))
    })
}

/// A handover split by the audit log: from the delete request to the old leader's release of the Lease
/// (the kubelet's part and the replica's shutdown), and from the release to the next holder's write.
#[derive(Debug, Clone, Copy, Default)]
pub struct Split {
    /// Delete request received to release write received, in ms.
    pub to_release_ms: Option<f64>,
    /// Release write received to the next holder's first write received, in ms.
    pub release_to_taken_ms: Option<f64>,
    /// The whole handover on the apiserver's clock: the delete request received to the next holder's
    /// acquiring write answered (when its term begins, as the checker counts it), in ms.
    pub handover_ms: Option<f64>,
    /// Whether the old leader had a renewal of the Lease in flight after the delete arrived (answered
    /// after it, received before the release): its release then waited for that renewal's answer.
    pub renewal_in_flight: bool,
    /// The handover's five phases, in ms, when the log has all three writes: the apiserver's time on
    /// the delete, the old leader's (the delete answered to its release received: the watch of its
    /// Pod, its stop, its request), the apiserver's time on the release, the next holder's (the release
    /// answered to its acquiring write received: the watch of the Lease, its request), and the
    /// apiserver's time on the acquiring write.
    pub phases: Option<Phases>,
}

/// A handover in five phases, alternating between the apiserver and the replicas (ms each).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Phases {
    /// The delete request received to answered.
    pub delete: f64,
    /// The delete answered to the release received: the old leader's part.
    pub leader: f64,
    /// The release received to answered.
    pub release: f64,
    /// The release answered to the acquiring write received: the next holder's part.
    pub standby: f64,
    /// The acquiring write received to answered.
    pub acquire: f64,
}

fn ms_between(a: Timestamp, b: Timestamp) -> f64 {
    (b.as_nanosecond() - a.as_nanosecond()) as f64 / 1e6
}

/// Splits deletion `d` of the Pod holding `namespace/lease` with the audit log `events`.
pub fn split(events: &[AuditEvent], namespace: &str, lease: &str, d: &Deletion) -> Split {
    let delete = events.iter().find(|e| {
        e.verb == "delete"
            && e.resource == "pods"
            && e.subresource.is_empty()
            && e.namespace == namespace
            && e.name == d.pod
            && e.code < 300
    });
    let Some(delete) = delete else {
        return Split::default();
    };
    let on_the_lease = |e: &&AuditEvent| {
        e.resource == "leases" && e.namespace == namespace && e.name == lease && e.is_write()
    };
    let lease_write = |e: &&AuditEvent| on_the_lease(e) && e.code < 300 && e.received >= delete.received;
    let release = events
        .iter()
        .filter(lease_write)
        .find(|e| e.lock_holder().as_deref() == Some(""));
    let taken = events
        .iter()
        .filter(lease_write)
        .find(|e| e.lock_holder().as_deref() == Some(d.new_holder.as_str()));
    let renewal_in_flight = release.is_some_and(|r| {
        events.iter().filter(on_the_lease).any(|e| {
            e.lock_holder().is_some_and(|h| workload::holder_pod(&h) == d.pod)
                && e.stage_time >= delete.received
                && e.received <= r.received
        })
    });
    let phases = release.zip(taken).map(|(r, t)| Phases {
        delete: ms_between(delete.received, delete.stage_time),
        leader: ms_between(delete.stage_time, r.received),
        release: ms_between(r.received, r.stage_time),
        standby: ms_between(r.stage_time, t.received),
        acquire: ms_between(t.received, t.stage_time),
    });
    Split {
        renewal_in_flight,
        phases,
        handover_ms: taken.map(|a| ms_between(delete.received, a.stage_time)),
        to_release_ms: release.map(|r| ms_between(delete.received, r.received)),
        release_to_taken_ms: release
            .zip(taken)
            .map(|(r, t)| ms_between(r.received, t.received)),
    }
}

/// p50, p99 and max of `xs` (NaN when empty).
pub fn summary(xs: &[f64]) -> (f64, f64, f64) {
    let max = xs.iter().copied().fold(f64::NAN, f64::max);
    (pct(xs, 50.0), pct(xs, 99.0), max)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(verb: &str, resource: &str, name: &str, at: &str, holder: Option<&str>) -> AuditEvent {
        let at: Timestamp = at.parse().expect("a time");
        AuditEvent {
            audit_id: String::new(),
            stage: "ResponseComplete".into(),
            verb: verb.into(),
            request_uri: "/".into(),
            user: "u".into(),
            groups: Vec::new(),
            user_agent: "a".into(),
            api_group: String::new(),
            resource: resource.into(),
            subresource: String::new(),
            namespace: "ns".into(),
            name: name.into(),
            code: 200,
            received: at,
            stage_time: at,
            request_object: holder.map(|h| serde_json::json!({"spec": {"holderIdentity": h}})),
            pod_name: None,
            committed: None,
        }
    }

    #[test]
    fn the_rests_spread_over_the_renewal_period() {
        let phases: Vec<f64> = (0..50)
            .map(|i| (rest(i) - REST).as_secs_f64() / PHASES.as_secs_f64())
            .collect();
        assert!(phases.iter().all(|p| (0.0..1.0).contains(p)));
        // Every tenth of the period gets its share of 50 deletions, give or take one.
        for tenth in 0..10 {
            let n = phases
                .iter()
                .filter(|p| (**p * 10.0).floor() as usize == tenth)
                .count();
            assert!((4..=6).contains(&n), "tenth {tenth}: {n}");
        }
    }

    #[test]
    fn a_handover_splits_at_the_release() {
        let events = [
            event("update", "leases", "l", "2026-01-01T00:00:00.000Z", Some("a")),
            event("delete", "pods", "a", "2026-01-01T00:00:01.000Z", None),
            event("update", "leases", "l", "2026-01-01T00:00:01.400Z", Some("")),
            event("update", "leases", "l", "2026-01-01T00:00:01.450Z", Some("b")),
        ];
        let d = Deletion {
            pod: "a".into(),
            new_holder: "b".into(),
            ms: 460.0,
            to_standby: true,
            stop_ms: None,
            cpu: None,
            window_ms: 470.0,
        };
        let s = split(&events, "ns", "l", &d);
        assert_eq!(s.to_release_ms.map(f64::round), Some(400.0));
        assert_eq!(s.release_to_taken_ms.map(f64::round), Some(50.0));
        // The whole handover ends when the acquiring write was answered (here as it was received).
        assert_eq!(s.handover_ms.map(f64::round), Some(450.0));
        // In phases: here every write is answered as it arrives, so the apiserver's phases are 0.
        let p = s.phases.expect("all three writes are in the log");
        assert_eq!(
            [p.delete, p.leader, p.release, p.standby, p.acquire].map(f64::round),
            [0.0, 400.0, 0.0, 50.0, 0.0]
        );
        assert!(!s.renewal_in_flight);
        // A renewal of the old leader answered after the delete arrived: the release waited for it.
        let mut renewed = events.to_vec();
        let mut r = event("update", "leases", "l", "2026-01-01T00:00:00.990Z", Some("a"));
        r.stage_time = "2026-01-01T00:00:01.010Z".parse().expect("a time");
        renewed.insert(1, r);
        assert!(split(&renewed, "ns", "l", &d).renewal_in_flight);
        // Without the new holder's write in the log, the handover is not timed.
        let s = split(&events[..3], "ns", "l", &d);
        assert_eq!(s.handover_ms, None);
        assert_eq!(s.phases, None);
    }
}
