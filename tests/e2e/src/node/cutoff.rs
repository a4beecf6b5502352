//! The provider-nop leader cut off from the apiserver (an iptables DROP in its Pod's network namespace)
//! past its renew deadline: it steps down, the standby takes over when the Lease expires, and the
//! kubelet's liveness probe, which fails only for a *leading* replica whose renewals are stuck beyond
//! the lease duration and a tolerance, leaves the replica that stepped down alone. Then the network is
//! restored and it rejoins as a standby.

use std::{
    process::Command,
    time::{Duration, Instant},
};

use anyhow::{Context, ensure};
use jiff::Timestamp;
use testenv::workload;

use super::{NAMESPACE, READY_TIMEOUT, leader_pod};

/// What the cut-off showed.
pub struct Cutoff {
    /// The cut-off leader's Pod.
    pub pod: String,
    /// Its last renewal the apiserver received, before the cut, to the cut, in s.
    pub last_renew_before_cut_s: f64,
    /// From its last received renewal to its "stopped leading" log line, in s.
    pub step_down_after_renew_s: f64,
    /// The reason it logged.
    pub reason: String,
    /// Who took the Lease, and how long after the last received renewal, in s.
    pub new_holder: String,
    pub takeover_after_renew_s: f64,
    /// How long the network stayed cut, in s.
    pub cut_for_s: f64,
    /// Its container's restarts during the cut and until it was Ready again after the restore.
    pub restarts: i32,
    /// Its restarts during the whole fault, counted again 30 s after the restore.
    pub restarts_after: i32,
    /// Whether it was Ready again after the restore, with the Lease still held by the other Pod.
    pub rejoined_as_standby: bool,
    /// From the restore to its Pod Ready, in s.
    pub ready_after_restore_s: f64,
    /// Its log lines after the restore that name the new leader ("observed a new leader").
    pub observed_after_restore: bool,
    /// The lease duration, renew deadline and the health tolerance, in s.
    pub lease_s: f64,
    pub renew_deadline_s: f64,
    pub tolerance_s: f64,
    /// The liveness probe's period and failure threshold.
    pub probe: (i64, i64),
}

/// The iptables rules that drop what the Pod in `netns` sends to the apiserver (through the `kubernetes`
/// Service's IP, or straight to its address).
fn drops(apiserver: std::net::SocketAddrV4) -> Vec<Vec<String>> {
    [
        (testenv::KUBERNETES_SERVICE_IP.to_string(), 443),
        (apiserver.ip().to_string(), apiserver.port()),
    ]
    .into_iter()
    .map(|(ip, port)| {
        [
            "OUTPUT",
            "-p",
            "tcp",
            "-d",
            &ip,
            "--dport",
            &port.to_string(),
            "-j",
            "DROP",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect()
    })
    .collect()
}

fn iptables(netns: &str, op: &str, rule: &[String]) -> anyhow::Result<()> {
    let out = Command::new("ip")
        .args(["netns", "exec", netns, "iptables", "-w", op])
        .args(rule)
        .output()
        .context("running iptables in the Pod's network namespace")?;
    ensure!(
        out.status.success(),
        "iptables {op} {} in {netns} failed: {}",
        rule.join(" "),
        String::from_utf8_lossy(&out.stderr).trim()
    );
    Ok(())
}

/// The named network namespace of the process `pid`.
fn netns_of(pid: u32) -> anyhow::Result<String> {
    let out = Command::new("ip")
        .args(["netns", "identify", &pid.to_string()])
        .output()
        .context("running ip netns identify")?;
    let netns = String::from_utf8_lossy(&out.stdout).trim().to_string();
    ensure!(
        !netns.is_empty(),
        "process {pid} is in no named network namespace"
    );
    Ok(netns)
}

/// `kubectl logs --timestamps` of `pod`: each line's time and text.
fn logs(kubeconfig: &std::path::Path, pod: &str) -> anyhow::Result<Vec<(Timestamp, String)>> {
    let out = testenv::kubectl::run(kubeconfig, &["logs", "--timestamps", "-n", NAMESPACE, pod])?;
    Ok(out
        .lines()
        .filter_map(|l| {
            let (t, rest) = l.split_once(' ')?;
            Some((t.parse().ok()?, rest.to_string()))
        })
        .collect())
}

fn secs(a: Timestamp, b: Timestamp) -> f64 {
    (b.as_millisecond() - a.as_millisecond()) as f64 / 1e3
}

/// The reason of a "stopped leading" log line: what follows `reason=`, up to ` detail=`.
fn reason(line: &str) -> Option<String> {
    let rest = line.split("reason=").nth(1)?;
    let value = rest.split(" detail=").next()?;
    Some(value.trim_matches('"').to_string())
}

/// Cuts the provider-nop leader off, past its renew deadline and past lease + tolerance, and restores it.
pub async fn run(
    bed: &mut testenv::NodeTestBed,
    client: &kube::Client,
    cluster: &testenv::Cluster,
    lease: &str,
) -> anyhow::Result<Cutoff> {
    let (timings, _, _) = super::candidate::provider_nop_conditions()?;
    let tolerance = manager::run::health::DEFAULT_HEALTH_TOLERANCE;
    let probe = liveness_probe()?;
    let leader = leader_pod(client, lease).await?;
    let name = workload::name(&leader).to_string();
    let id = workload::container_id(&leader).context("the leader's container has no ID")?;
    let pid = bed.node().task_pid(&id)?;
    let netns = netns_of(pid)?;
    let restarts_before = workload::restarts(&leader);
    let apiserver =
        std::net::SocketAddrV4::new(bed.network().node_ip, bed.control_plane().state().apiserver_port);
    let rules = drops(apiserver);
    let cut_at = Timestamp::now();
    let cut = Instant::now();
    for r in &rules {
        iptables(&netns, "-I", r)?;
    }
    eprintln!("[node] {name} cut off from the apiserver");
    let outcome = async {
        let (new_holder, _) =
            workload::wait_holder_other_than(client, NAMESPACE, lease, &name, timings.lease_duration * 2)
                .await?;
        let taken_at = Timestamp::now();
        // Held until a leading replica's /healthz would have failed (the last renewal older than lease +
        // tolerance) and the kubelet's probe had its failure threshold of periods to see it.
        let hold_for =
            timings.lease_duration + tolerance + Duration::from_secs((probe.0 * (probe.1 + 1)).max(0) as u64);
        while cut.elapsed() < hold_for {
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
        anyhow::Ok((new_holder, taken_at))
    }
    .await;
    for r in &rules {
        iptables(&netns, "-D", r)?;
    }
    let restored_at = Timestamp::now();
    let restored = Instant::now();
    let cut_for_s = cut.elapsed().as_secs_f64();
    let (new_holder, taken_at) = outcome?;
    eprintln!("[node] {name}'s network restored after {cut_for_s:.1}s; {new_holder} leads");

    // The restore: the Pod Ready again (it never stopped being so: its probes come from the node).
    let restarts = loop {
        let pod = super::provider_nop_pods(client)
            .await?
            .into_iter()
            .find(|p| workload::name(p) == name)
            .with_context(|| format!("{name} is gone"))?;
        if workload::is_ready(&pod) {
            break workload::restarts(&pod) - restarts_before;
        }
        ensure!(
            restored.elapsed() < READY_TIMEOUT,
            "{name} not Ready after the restore"
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    };
    let ready_after_restore_s = restored.elapsed().as_secs_f64();
    // Some time as a standby: it observes the new leader and stays healthy.
    tokio::time::sleep(Duration::from_secs(30)).await;
    let holders = workload::lease_holders(client, NAMESPACE).await?;
    let still = holders.get(lease).cloned().unwrap_or_default();
    let pod = super::provider_nop_pods(client)
        .await?
        .into_iter()
        .find(|p| workload::name(p) == name)
        .with_context(|| format!("{name} is gone"))?;
    let restarts_after = workload::restarts(&pod) - restarts_before;
    let rejoined_as_standby = workload::is_ready(&pod) && workload::holder_pod(&still) != name;

    // Its last renewal the apiserver received before the cut, from the audit log.
    let events = cluster.audit().read()?.events;
    let last_renew = events
        .iter()
        .filter(|e| {
            e.resource == "leases"
                && e.name == lease
                && e.verb == "update"
                && e.code < 300
                && e.agent_identity().map(workload::holder_pod) == Some(name.as_str())
                && e.received <= cut_at
        })
        .map(|e| e.received)
        .max()
        .context("no renewal of the cut-off leader in the audit log")?;
    let log = logs(cluster.kubeconfig(), &name)?;
    let (stepped_at, line) = log
        .iter()
        .find(|(t, l)| *t > cut_at && l.contains("stopped leading") && l.contains("reason="))
        .cloned()
        .with_context(|| format!("{name} logged no \"stopped leading\" after the cut"))?;
    let observed_after_restore = log
        .iter()
        .any(|(t, l)| *t > restored_at && l.contains("observed a new leader"))
        || log
            .iter()
            .any(|(t, l)| *t > cut_at && l.contains("observed a new leader"));
    Ok(Cutoff {
        pod: name,
        last_renew_before_cut_s: secs(last_renew, cut_at),
        step_down_after_renew_s: secs(last_renew, stepped_at),
        reason: reason(&line).unwrap_or_default(),
        new_holder,
        takeover_after_renew_s: secs(last_renew, taken_at),
        cut_for_s,
        restarts,
        restarts_after,
        rejoined_as_standby,
        ready_after_restore_s,
        observed_after_restore,
        lease_s: timings.lease_duration.as_secs_f64(),
        renew_deadline_s: timings.renew_deadline.as_secs_f64(),
        tolerance_s: tolerance.as_secs_f64(),
        probe,
    })
}

/// provider-nop's liveness probe: its period and failure threshold, from deploy/.
fn liveness_probe() -> anyhow::Result<(i64, i64)> {
    let path = testenv::harness::repo_root()
        .join("deploy")
        .join("provider-nop")
        .join("deployment.yaml");
    let text = std::fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))?;
    let d: serde_json::Value = serde_saphyr::from_str(&text).context("parsing provider-nop's Deployment")?;
    let probe = &d["spec"]["template"]["spec"]["containers"][0]["livenessProbe"];
    Ok((
        probe["periodSeconds"].as_i64().unwrap_or(10),
        probe["failureThreshold"].as_i64().unwrap_or(3),
    ))
}

impl Cutoff {
    /// The faults table's row.
    pub fn row(&self) -> (String, String) {
        (
            format!(
                "leader cut off from the apiserver (iptables DROP of what its Pod sends to the apiserver, in \
                 the Pod's network namespace) for {:.0} s: past its renew deadline ({:.0} s) and past the \
                 lease ({:.0} s) + the health tolerance ({:.0} s) + the liveness probe's {} periods of {} s",
                self.cut_for_s,
                self.renew_deadline_s,
                self.lease_s,
                self.tolerance_s,
                self.probe.1,
                self.probe.0
            ),
            format!(
                "{pod} stepped down (\"stopped leading\", reason {reason}) {step:.1} s after its last renewal \
                 the apiserver received (which came {before:.1} s before the cut); {new} took the Lease \
                 {take:.1} s after that renewal, when it expired; the kubelet restarted {pod} {restarts} \
                 time(s) during the cut ({after} counted 30 s after the restore): a replica that stepped \
                 down is a healthy standby; {rejoin}",
                pod = self.pod,
                reason = if self.reason.is_empty() { "?" } else { &self.reason },
                step = self.step_down_after_renew_s,
                before = self.last_renew_before_cut_s,
                new = self.new_holder,
                take = self.takeover_after_renew_s,
                restarts = self.restarts,
                after = self.restarts_after,
                rejoin = if self.rejoined_as_standby {
                    format!(
                        "network restored: Ready {:.1} s later, the Lease still the other Pod's 30 s after, so \
                         it rejoined as a standby{}",
                        self.ready_after_restore_s,
                        if self.observed_after_restore {
                            " (its log: \"observed a new leader\")"
                        } else {
                            ""
                        }
                    )
                } else {
                    "after the restore it did not rejoin as a standby (not Ready, or leading again)"
                        .to_string()
                },
            ),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_reason_of_a_step_down_is_read_from_its_log_line() {
        let line = "WARN election::elector: stopped leading reason=the renew deadline passed without a \
                    successful renew detail=timed out leader=";
        assert_eq!(
            reason(line).as_deref(),
            Some("the renew deadline passed without a successful renew")
        );
        assert_eq!(reason("INFO became leader"), None);
    }
}
