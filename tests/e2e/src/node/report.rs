//! docs/node.md from one node-bench run.

use std::{collections::BTreeMap, fmt::Write as _};

use k8s_openapi::api::core::v1::Pod;
use testenv::workload;

use super::bare::{self, Bare};
use super::cpu::{Component, Usage};
use super::faults::Faults;
use super::handover::{self, Deletion, Split};
use super::migration::Migration;
use super::rolling::Rollout;
use super::{StartTimes, candidate};

/// What one run measured.
pub(super) struct Run<'a> {
    pub(super) deletions: usize,
    pub(super) provenance: &'a serde_json::Value,
    pub(super) times: &'a StartTimes,
    pub(super) all_ready: std::time::Duration,
    pub(super) pods: &'a BTreeMap<String, Vec<Pod>>,
    pub(super) memory: &'a BTreeMap<String, (u64, u64)>,
    pub(super) ours: &'a [Deletion],
    pub(super) theirs: &'a [Deletion],
    pub(super) our_splits: &'a [Split],
    pub(super) their_splits: &'a [Split],
    pub(super) bare: &'a Bare,
    pub(super) rollout: &'a Rollout,
    pub(super) migration: &'a Migration,
    pub(super) faults: &'a Faults,
    pub(super) refused: usize,
}

/// The document.
pub(super) fn document(run: &Run<'_>) -> anyhow::Result<String> {
    let Run {
        deletions,
        provenance,
        times,
        all_ready,
        pods,
        memory,
        ours,
        theirs,
        our_splits,
        their_splits,
        bare,
        rollout,
        migration,
        faults,
        refused,
    } = run;
    let (timings, release_on_cancel, grace) = candidate::provider_nop_conditions()?;
    anyhow::ensure!(
        timings.retry_period == handover::PHASES,
        "handover::PHASES ({:?}) must be the electors' retry period ({:?}): the deletions are spread over \
         one retry period so that they fall at every phase of the leader's renewals, and the document says so",
        handover::PHASES,
        timings.retry_period
    );
    let mut md = String::new();
    writeln!(md, "# deploy/ on a real node")?;
    writeln!(md)?;
    writeln!(
        md,
        "Written by `cargo xtask node-bench --deletions {deletions}` on {} ({} CPUs). Release builds of the \
         images (what users run), imported into the node's containerd; kubelet and kube-scheduler {} from the harness. {}",
        jiff::Timestamp::now().strftime("%Y-%m-%d %H:%M UTC"),
        std::thread::available_parallelism().map(|n| n.get()).unwrap_or(0),
        testenv::KUBERNETES_VERSION,
        release::provenance::markdown_line(provenance),
    )?;
    writeln!(md)?;
    writeln!(md, "| Step | Seconds |")?;
    writeln!(md, "|---|---:|")?;
    writeln!(
        md,
        "| control plane + containerd + kubelet, to a Ready node, cold (containerd's root empty, only the \
         pause image imported) | {:.1} |",
        times.cold.as_secs_f64()
    )?;
    writeln!(
        md,
        "| importing {} images (ours, with the second builds of provider-nop and crossplane, and client-go's candidate), cold | {:.1} |",
        times.images,
        times.imported.as_secs_f64()
    )?;
    writeln!(
        md,
        "| control plane + containerd + kubelet, to a Ready node, warm (a fresh control plane and kubelet; \
         containerd's root kept, with the images in it) | {:.1} |",
        times.warm.as_secs_f64()
    )?;
    writeln!(
        md,
        "| `kubectl apply -k` to 2 Ready Pods per Deployment | {:.1} |",
        all_ready.as_secs_f64()
    )?;
    writeln!(md)?;
    writeln!(md, "## Pods (after the deletions and the faults)")?;
    writeln!(md)?;
    writeln!(
        md,
        "| Deployment | Pod | Restarts | RSS (MiB) | Working set (MiB) |"
    )?;
    writeln!(md, "|---|---|---:|---:|---:|")?;
    let mib = |b: u64| b as f64 / (1024.0 * 1024.0);
    for (app, ps) in *pods {
        for p in ps {
            let (ws, rss) = memory.get(workload::name(p)).copied().unwrap_or((0, 0));
            writeln!(
                md,
                "| {app} | {} | {} | {:.1} | {:.1} |",
                workload::name(p),
                workload::restarts(p),
                mib(rss),
                mib(ws)
            )?;
        }
    }
    writeln!(md)?;
    writeln!(md, "## Handover when the leader's Pod is deleted")?;
    writeln!(md)?;
    writeln!(
        md,
        "`kubectl delete pod` of provider-nop's leader (our replica sees its own Pod's deletionTimestamp and \
         releases its Lease before the kubelet's SIGTERM; client-go's candidate releases on that SIGTERM), \
         timed from the delete request to the first event of a watch of the Lease, established before the \
         delete, naming another Pod (the standby, or the replacement when it wins the race for the released Lease), \
         {deletions} times, each once the Deployment was back to 2 Ready Pods. Before each delete the bench \
         read the Lease, started that watch and made a connection ready for the delete beside the watch's \
         (kube's client speaks HTTP/1.1), then rested {} s to {} s, the rests stepping by the golden ratio \
         through the electors' {} s retry period so that the deletions fall at every phase of the leader's \
         renewals, as deletions at random times do (tests/e2e/src/node/handover.rs).",
        handover::REST.as_secs_f64(),
        (handover::REST + handover::PHASES).as_secs_f64(),
        handover::PHASES.as_secs_f64(),
    )?;
    writeln!(md)?;
    handover_tables(&mut md, ours, theirs, our_splits, their_splits)?;
    cpu_table(&mut md, ours, our_splits)?;
    writeln!(
        md,
        "client-go's candidate ran as a Deployment of 2 replicas in a namespace of its own \
         (`{}`), from a static image of `tests/control-plane/candidate.go` (`go build -tags candidateonly`, \
         `CGO_ENABLED=0`) imported like ours, with provider-nop's conditions: lease duration {:?}, renew \
         deadline {:?}, retry period {:?}, terminationGracePeriodSeconds {grace}, identity from the downward \
         API's POD_NAME, and `ReleaseOnCancel: {release_on_cancel}` (what controller-runtime users set with \
         `LeaderElectionReleaseOnCancel`; it releases the Lease on SIGTERM, as ours also does when no watch \
         of its Pod saw the deletion first).",
        candidate::NAMESPACE,
        timings.lease_duration,
        timings.renew_deadline,
        timings.retry_period,
    )?;
    writeln!(md)?;
    bare::section(&mut md, (ours, our_splits), (theirs, their_splits), bare)?;
    for line in rollout.section() {
        writeln!(md, "{line}")?;
    }
    writeln!(md)?;
    for line in migration.section() {
        writeln!(md, "{line}")?;
    }
    writeln!(md)?;
    writeln!(md, "## Faults only a node gives (provider-nop)")?;
    writeln!(md)?;
    writeln!(md, "| Fault | What happened |")?;
    writeln!(md, "|---|---|")?;
    for (fault, outcome) in &faults.lines {
        writeln!(md, "| {fault} | {outcome} |")?;
    }
    writeln!(md)?;
    for note in &faults.notes {
        writeln!(md, "{note}")?;
        writeln!(md)?;
    }
    writeln!(
        md,
        "Fence refusals (403 for a crossplane-system ServiceAccount, from the audit log) over the whole \
         run: {refused}; late writes of the frozen leader among them: {}.",
        faults.expected_refusals
    )?;
    Ok(md)
}

/// The handovers of ours and client-go's side by side, their ratio, and each split at the release.
fn handover_tables(
    md: &mut String,
    ours: &[Deletion],
    theirs: &[Deletion],
    our_splits: &[Split],
    their_splits: &[Split],
) -> anyhow::Result<()> {
    let handover = |splits: &[Split]| {
        handover::summary(&splits.iter().filter_map(|s| s.handover_ms).collect::<Vec<f64>>())
    };
    let seen = |ds: &[Deletion]| handover::summary(&ds.iter().map(|d| d.ms).collect::<Vec<f64>>());
    let (o50, o99, omax) = handover(our_splits);
    let (t50, t99, tmax) = handover(their_splits);
    let timed = |splits: &[Split]| splits.iter().filter(|s| s.handover_ms.is_some()).count();
    let standby = |ds: &[Deletion]| ds.iter().filter(|d| d.to_standby).count();
    writeln!(
        md,
        "On the apiserver's own clock (its audit log): from the delete request's arrival to the answer to \
         the new holder's acquiring write, when the new term begins. The bench's own watch of the Lease \
         saw each new holder later, by what its process (a debug build on the same 2 cores) adds: its \
         column shows that too."
    )?;
    writeln!(md)?;
    writeln!(
        md,
        "| Elector | Deletions timed | p50 (ms) | p99 (ms) | max (ms) | seen by the bench's watch, p50 / p99 (ms) | taken by the standby | by the replacement |"
    )?;
    writeln!(md, "|---|---:|---:|---:|---:|---:|---:|---:|")?;
    for (name, ds, splits, p50, p99, max) in [
        ("ours (provider-nop)", ours, our_splits, o50, o99, omax),
        (
            "client-go (lease candidate)",
            theirs,
            their_splits,
            t50,
            t99,
            tmax,
        ),
    ] {
        let (s50, s99, _) = seen(ds);
        writeln!(
            md,
            "| {name} | {} of {} | {p50:.0} | {p99:.0} | {max:.0} | {s50:.0} / {s99:.0} | {} | {} |",
            timed(splits),
            ds.len(),
            standby(ds),
            ds.len() - standby(ds)
        )?;
    }
    writeln!(md)?;
    writeln!(
        md,
        "client-go / ours: p50 ×{:.1}, p99 ×{:.1}. (With {} deletions the p99 is the slowest one.) The goal \
         for ours, p99 ≤ 50 ms: **{}** ({o99:.0} ms).",
        t50 / o50,
        t99 / o99,
        ours.len(),
        if o99 <= 50.0 { "met" } else { "not met" }
    )?;
    writeln!(md)?;
    writeln!(
        md,
        "Each handover split with the audit log at the old leader's release of the Lease: from the delete \
         request to the release write, and from the release to the next holder's write (the electors' own \
         part). Before the release, ours and client-go's differ in what starts the stop: our leader watches \
         its own Pod (POD_NAME, a field-selected watch) and, seeing its deletionTimestamp, stops its leader \
         work and releases at once, before the kubelet's SIGTERM (crates/manager/src/run/own_pod.rs); \
         client-go's candidate releases on the SIGTERM the kubelet sends once it has seen the deletion \
         through its own watch of Pods and stopped the container through containerd."
    )?;
    writeln!(md)?;
    writeln!(
        md,
        "| Elector | delete → release p50 / p99 (ms) | release → next holder p50 / p99 (ms) | split |"
    )?;
    writeln!(md, "|---|---:|---:|---:|")?;
    let (our_parts, their_parts) = (Parts::of(our_splits), Parts::of(their_splits));
    for (name, splits, p) in [
        ("ours", our_splits, &our_parts),
        ("client-go", their_splits, &their_parts),
    ] {
        let ((b50, b99, _), (a50, a99, _)) = (p.before, p.after);
        writeln!(
            md,
            "| {name} | {b50:.0} / {b99:.0} | {a50:.0} / {a99:.0} | {} of {} |",
            p.split,
            splits.len()
        )?;
    }
    writeln!(md)?;
    let in_flight = |splits: &[Split]| splits.iter().filter(|s| s.renewal_in_flight).count();
    writeln!(
        md,
        "Deletions during which the old leader had a renewal of the Lease in flight (answered after the \
         delete arrived, received before the release), so that its release waited for that answer: ours \
         {} of {}, client-go {} of {}. Both leaders renew every {} s.",
        in_flight(our_splits),
        our_splits.len(),
        in_flight(their_splits),
        their_splits.len(),
        handover::PHASES.as_secs_f64(),
    )?;
    writeln!(md)?;
    phases_table(md, our_splits, their_splits, &our_parts, &their_parts)?;
    // Where the spread lies: before the release (the kubelet and the shutdown) or after it (the
    // election).
    let ((tb50, tb99, _), (ta50, ta99, _)) = (their_parts.before, their_parts.after);
    let ((ob50, ob99, _), (oa50, oa99, _)) = (our_parts.before, our_parts.after);
    let stops: Vec<f64> = ours.iter().filter_map(|d| d.stop_ms).collect();
    let (s50, s99, _) = handover::summary(&stops);
    writeln!(
        md,
        "{} Before the release, our replica's own work, stopping its leader work (the controller, awaiting \
         a reconcile in flight, bounded by `--graceful-shutdown-timeout`, so that nothing of it writes after \
         the release, as controller-runtime's manager does before its release on cancel), took p50 {s50:.0} \
         ms, p99 {s99:.0} ms by its own log ({} of {} deletions logged; the log file is read on the node once \
         each handover is over, so that nothing streams it while the handover is timed), of the delete → release p50 \
         {ob50:.0} ms, p99 {ob99:.0} ms. {} client-go's candidate, which has no work to stop, released \
         {tb50:.0} ms (p50), {tb99:.0} ms (p99) after the delete. After the release, our standby, which \
         watches the Lease, took it in {oa50:.0} ms (p50), {oa99:.0} ms (p99).",
        if ob99 >= oa99 {
            format!(
                "Our spread (p99 against p50) lies mostly before the release: from the delete to the release \
                 write p50 {ob50:.0} ms, p99 {ob99:.0} ms."
            )
        } else {
            format!(
                "Our spread (p99 against p50) lies mostly after the release: the standby took the released \
                 Lease in {oa50:.0} ms (p50) but {oa99:.0} ms (p99)."
            )
        },
        stops.len(),
        ours.len(),
        if s99 * 2.0 < ob99 {
            "So most of the time before the release is not the stop of leader work: it is the apiserver's \
             own time on the delete, the delivery of the Pod's deletion to our watch and the wake-up of the \
             process on a 2-core machine shared with ten other Pods, which vary with the machine's load."
        } else {
            "So much of the time before the release is our own stop of leader work."
        }
    )?;
    writeln!(md)?;
    writeln!(
        md,
        "After the release, client-go's Lease went to the next holder {ta50:.0} ms (p50), {ta99:.0} ms (p99) \
         later, to the replacement in {} of {} deletions and to the standby in {}: its standby has no watch \
         and tries to acquire every retry period ({} s, jittered up to ×1.2), while the replacement's \
         elector tries at once when it starts, so the first try often comes from the replacement (the \
         section with no replacement Pod below shows the standby alone). Ours, watching, takes it at once.{}",
        theirs.iter().filter(|d| !d.to_standby).count(),
        theirs.len(),
        theirs.iter().filter(|d| d.to_standby).count(),
        handover::PHASES.as_secs_f64(),
        if ta50 * 2.0 > t50 - o50 {
            " That is most of the difference between the medians above."
        } else {
            ""
        }
    )?;
    writeln!(md)?;
    // Where our slowest handover spent its time.
    if let Some((d, s)) = handover::slowest(ours, our_splits) {
        let part = |x: Option<f64>| x.map(|v| format!("{v:.0} ms")).unwrap_or_else(|| "?".into());
        let phases = s.phases.map_or_else(String::new, |p| {
            format!(
                " In phases: the apiserver on the delete {:.0} ms, the old leader {:.0} ms, the apiserver on \
                 the release {:.0} ms, the next holder {:.0} ms, the apiserver on the acquiring write {:.0} ms.",
                p.delete, p.leader, p.release, p.standby, p.acquire
            )
        });
        writeln!(
            md,
            "Our slowest handover ({} on the apiserver's clock, {:.0} ms seen by the bench; {} deleted): {} \
             from the delete to the release, {} from the release to the next holder ({}).{phases}",
            part(s.handover_ms),
            d.ms,
            d.pod,
            part(s.to_release_ms),
            part(s.release_to_taken_ms),
            if d.to_standby {
                "the standby"
            } else {
                "the replacement Pod"
            }
        )?;
        writeln!(md)?;
    }
    Ok(())
}

/// The handovers of one elector split at the release: each part's p50, p99 and max (ms).
struct Parts {
    /// The delete to the release.
    before: (f64, f64, f64),
    /// The release to the next holder's write.
    after: (f64, f64, f64),
    /// The delete to the next holder's write.
    to_taken: (f64, f64, f64),
    /// How many handovers had both parts.
    split: usize,
}

impl Parts {
    fn of(splits: &[Split]) -> Self {
        let series = |f: &dyn Fn(&Split) -> Option<f64>| splits.iter().filter_map(f).collect::<Vec<f64>>();
        let after = series(&|s| s.release_to_taken_ms);
        Self {
            before: handover::summary(&series(&|s| s.to_release_ms)),
            after: handover::summary(&after),
            to_taken: handover::summary(&series(&|s| Some(s.to_release_ms? + s.release_to_taken_ms?))),
            split: after.len(),
        }
    }
}

/// Each handover in its five phases, alternating between the apiserver and the replicas.
fn phases_table(
    md: &mut String,
    our_splits: &[Split],
    their_splits: &[Split],
    our_parts: &Parts,
    their_parts: &Parts,
) -> anyhow::Result<()> {
    writeln!(
        md,
        "The same handovers in five phases, alternating between the apiserver (its own time on each of the \
         three writes, from the request's arrival to its answer, by its audit log) and the replicas (from \
         one write's answer to the next write's arrival: the watch that carries the news, the process \
         waking up, its request). The apiserver's phases are the same work for every elector: a delete and \
         two Lease updates."
    )?;
    writeln!(md)?;
    writeln!(
        md,
        "| Elector | delete (apiserver) | old leader | release (apiserver) | next holder | acquiring write (apiserver) | the apiserver's three writes | the replicas' two parts |"
    )?;
    writeln!(md, "|---|---:|---:|---:|---:|---:|---:|---:|")?;
    for (name, splits) in [("ours", our_splits), ("client-go", their_splits)] {
        let phases: Vec<handover::Phases> = splits.iter().filter_map(|s| s.phases).collect();
        let cell = |f: &dyn Fn(&handover::Phases) -> f64| {
            let (p50, p99, _) = handover::summary(&phases.iter().map(f).collect::<Vec<f64>>());
            format!("{p50:.0} / {p99:.0}")
        };
        writeln!(
            md,
            "| {name} (p50 / p99 ms, {} of {}) | {} | {} | {} | {} | {} | {} | {} |",
            phases.len(),
            splits.len(),
            cell(&|p| p.delete),
            cell(&|p| p.leader),
            cell(&|p| p.release),
            cell(&|p| p.standby),
            cell(&|p| p.acquire),
            cell(&|p| p.delete + p.release + p.acquire),
            cell(&|p| p.leader + p.standby),
        )?;
    }
    writeln!(md)?;
    // When each elector's two Lease writes arrive, counted from the delete's arrival (p50).
    let (or, oa) = (our_parts.before.0, our_parts.to_taken.0);
    let (tr, ta) = (their_parts.before.0, their_parts.to_taken.0);
    writeln!(
        md,
        "The apiserver's time on the same Lease write depends on when it arrives. Ours arrive {or:.0} ms \
         (the release) and {oa:.0} ms (the acquiring write) after the delete (p50), inside the burst of work \
         that the deletion itself sets off on the same 2 cores: the ReplicaSet controller creating the \
         replacement Pod, the scheduler binding it, the kubelet stopping the old container and starting the \
         new one. client-go's arrive {tr:.0} ms and {ta:.0} ms after it, the acquiring write once that burst \
         is over."
    )?;
    writeln!(md)?;
    Ok(())
}

/// What the machine's processes did during our handovers, by component, and in the slowest one.
fn cpu_table(md: &mut String, ours: &[Deletion], our_splits: &[Split]) -> anyhow::Result<()> {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get()) as f64;
    // Only the deletions whose scheduler statistics were read; how many is said next to the figures.
    let read: Vec<(&Deletion, &Usage)> = ours.iter().filter_map(|d| Some((d, d.cpu.as_ref()?))).collect();
    let windows: Vec<f64> = read.iter().map(|(d, _)| d.window_ms).collect();
    let busy: Vec<f64> = read.iter().map(|(_, u)| u.total().0).collect();
    let share: Vec<f64> = read
        .iter()
        .filter(|(d, _)| d.window_ms > 0.0)
        .map(|(d, u)| 100.0 * u.total().0 / (cores * d.window_ms))
        .collect();
    let (w50, w99, _) = handover::summary(&windows);
    let (b50, b99, _) = handover::summary(&busy);
    let (s50, s99, _) = handover::summary(&share);
    writeln!(
        md,
        "What the machine did during our handovers: each process's time on a CPU and its time runnable but \
         waiting for one, from the kernel's scheduler statistics (`/proc/<pid>/task/<tid>/schedstat`), read \
         by the bench just before it deleted the Pod (its watch of the Lease and the connection for the \
         delete made ready before the rest), and again once that watch saw the new holder ({} of {} deletions read): a window of p50 {w50:.0} ms, p99 \
         {w99:.0} ms, longer than the handover itself. In it, all processes together used p50 {b50:.0} ms, \
         p99 {b99:.0} ms of CPU, {s50:.0} % (p50) and {s99:.0} % (p99) of the {cores:.0} cores.",
        read.len(),
        ours.len()
    )?;
    writeln!(md)?;
    let slowest = handover::slowest(ours, our_splits);
    let slowest_usage = slowest.and_then(|(d, _)| d.cpu.as_ref());
    writeln!(
        md,
        "| Process | on a CPU, p50 / p99 (ms) | waiting for a CPU, p50 / p99 (ms) | in our slowest handover{}: on a CPU / waiting (ms) |",
        slowest
            .map(|(d, s)| format!(
                " ({} ms on the apiserver's clock, a window of {:.0} ms)",
                s.handover_ms
                    .map_or_else(|| "?".to_string(), |v| format!("{v:.0}")),
                d.window_ms
            ))
            .unwrap_or_default()
    )?;
    writeln!(md, "|---|---:|---:|---:|")?;
    let row = |label: &str, f: &dyn Fn(&Usage) -> (f64, f64)| -> String {
        let (r50, r99, _) = handover::summary(&read.iter().map(|(_, u)| f(u).0).collect::<Vec<f64>>());
        let (q50, q99, _) = handover::summary(&read.iter().map(|(_, u)| f(u).1).collect::<Vec<f64>>());
        let worst = slowest_usage.map_or_else(
            || "not read".to_string(),
            |u| format!("{:.1} / {:.1}", f(u).0, f(u).1),
        );
        format!("| {label} | {r50:.1} / {r99:.1} | {q50:.1} / {q99:.1} | {worst} |")
    };
    for c in Component::ALL {
        writeln!(md, "{}", row(c.label(), &|u| u.of(c)))?;
    }
    writeln!(md, "{}", row("all", &|u| u.total()))?;
    writeln!(md)?;
    let apiserver: Vec<f64> = read.iter().map(|(_, u)| u.of(Component::Apiserver).0).collect();
    let ours_cpu: Vec<f64> = read.iter().map(|(_, u)| u.of(Component::ProviderNop).0).collect();
    let (a50, _, _) = handover::summary(&apiserver);
    let (o50, _, _) = handover::summary(&ours_cpu);
    writeln!(
        md,
        "The replicas that hand over use little of it: p50 {o50:.1} ms of CPU for both provider-nop replicas, \
         against {a50:.1} ms for the apiserver, which serves the deletion's whole burst (the ReplicaSet \
         controller's new Pod, the scheduler's binding, the disruption controller's update of the \
         PodDisruptionBudget, the kubelet's status updates and Events) besides our three writes."
    )?;
    writeln!(md)?;
    Ok(())
}
