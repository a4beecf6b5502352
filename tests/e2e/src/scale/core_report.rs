//! The cores' part of docs/scale.md and docs/scale.json.

use std::fmt::Write as _;

use serde_json::{Value, json};

use super::{
    core::{Core, Run},
    load::Work,
};

/// What bounded a run, only where its own figures show it: the core's CPU when its leader kept 90 % of
/// a core busy over the window, the apiserver's CPU when kube-apiserver and etcd together did; else
/// none.
pub fn bound(run: &Run) -> Option<&'static str> {
    let wall = run.done_seconds.max(f64::MIN_POSITIVE);
    if run.leader.cpu_seconds / wall >= 0.9 {
        Some("CPU (the core)")
    } else if run.apiserver_cpu_seconds / wall >= 0.9 {
        Some("CPU (the apiserver)")
    } else {
        None
    }
}

fn find(runs: &[Run], core: Core, work: Work, n: usize) -> Option<&Run> {
    runs.iter()
        .find(|r| r.core == core && r.work == work && r.count == n)
}

fn counts(runs: &[Run], work: Work) -> Vec<usize> {
    let mut s: Vec<usize> = runs.iter().filter(|r| r.work == work).map(|r| r.count).collect();
    s.sort_unstable();
    s.dedup();
    s
}

/// The median idle resident set of `core`'s leader and standby over its runs.
pub fn idle(runs: &[Run], core: Core) -> Option<(f64, f64)> {
    let median = |mut v: Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v.get(v.len() / 2).copied()
    };
    let of = |f: fn(&Run) -> f64| median(runs.iter().filter(|r| r.core == core).map(f).collect());
    Some((of(|r| r.idle.leader_rss_mib)?, of(|r| r.idle.standby_rss_mib)?))
}

fn ratio(upstream: f64, ours: f64) -> String {
    if ours > 0.0 {
        format!("×{:.1}", upstream / ours)
    } else {
        "–".to_owned()
    }
}

/// The section on cores.
pub fn markdown(runs: &[Run]) -> String {
    let mut md = String::new();
    let _ = writeln!(md, "## Cores: ours against upstream's\n");
    let _ = writeln!(
        md,
        "Each core ran as two replicas, a leader and a standby on Lease `crossplane-leader-election-core`, \
         at its defaults but webhooks off and `--package-runtime External`, on a control plane of its own per row, one core at a time: ours \
         ({}: `crossplane core start`, release build) and upstream's ({}: `crossplane core start` built \
         from Go's module proxy as upstream releases it). Each first ran its own `core init`, which \
         installs its CRDs. **Idle RSS** is the leader's resident set (`VmRSS`) once it answered `/readyz` \
         and 2 s of samples lay within 1 MiB, and the standby's at that moment. Then the bench created N \
         namespaced `apiextensions.crossplane.io/v2` XRDs at once (16 requests at a time), each of a \
         group and kind of its own; or, on a control plane of its own, one XRD and a Composition whose one \
         step is a function, then N XRs at once, each composing 3 ConfigMaps. The function is the Python \
         SDK function of the conformance suite (`crates/crossplane/tests/functions/python.py`), run by the \
         bench on loopback with mutual TLS, its server certificate signed by the core's CA \
         (`crossplane-root-ca`); a Function and an active FunctionRevision whose `status.endpoint` names \
         it are what each core dials, with its own client certificate (both cores run with \
         `--package-runtime External`, so that neither runs the package itself). **Done after** runs \
         from the first create until a watch had seen every XRD `Established=True` (every XR \
         `Ready=True`); the watch's errors and re-lists are counted and shown. **CPU** is user plus \
         system time over that window; **RSS now** is `VmRSS` at its end and **peak** is \
         `VmHWM`; **apiserver CPU** is that of kube-apiserver and etcd over the window; **requests** are the \
         replicas' own (user agent `crossplane/...`, which both send) to the apiserver over the window, \
         Leases apart, from the audit log, per XRD or XR.\n",
        Core::Rust.label(),
        Core::Go.label(),
    );
    idle_table(&mut md, runs);
    for work in [Work::Xrds, Work::Xrs] {
        if !counts(runs, work).is_empty() {
            work_table(&mut md, runs, work);
            ratio_table(&mut md, runs, work);
        }
    }
    let _ = writeln!(
        md,
        "\"Bound by\" is named only where the row's own figures show it: CPU of the core when its leader \
         kept 90 % of a core busy over the window, CPU of the apiserver when kube-apiserver and etcd \
         together did; otherwise it is left empty (–), as the run shows neither (the wait is then the \
         cores' and the apiserver's own pacing, such as waiting for a CRD to be Established)."
    );
    md
}

fn idle_table(md: &mut String, runs: &[Run]) {
    let _ = writeln!(md, "### Idle, with the core's own CRDs installed\n");
    let _ = writeln!(
        md,
        "| Core | Leader idle RSS MiB | Standby idle RSS MiB | Runs |\n|---|---:|---:|---:|"
    );
    for core in [Core::Rust, Core::Go] {
        let Some((leader, standby)) = idle(runs, core) else {
            continue;
        };
        let n = runs.iter().filter(|r| r.core == core).count();
        let _ = writeln!(md, "| {} | {leader:.1} | {standby:.1} | {n} |", core.label());
    }
    if let (Some(ours), Some(up)) = (idle(runs, Core::Rust), idle(runs, Core::Go)) {
        let _ = writeln!(
            md,
            "| upstream over ours | {} | {} | |",
            ratio(up.0, ours.0),
            ratio(up.1, ours.1)
        );
    }
    let _ = writeln!(
        md,
        "\nThe median of each core's runs (one per row below), each measured before its XRDs or XRs; a run \
         whose leader did not settle within 60 s gives its last sample: {}.\n",
        match runs.iter().filter(|r| !r.idle.settled).count() {
            0 => "none did".to_owned(),
            k => format!("{k} did"),
        }
    );
}

fn heading(work: Work) -> (&'static str, &'static str) {
    match work {
        Work::Xrds => ("XRDs until Established", "XRDs"),
        Work::Xrs => (
            "XRs, 3 composed resources each through one function, until Ready",
            "XRs",
        ),
    }
}

/// `get 1.00, list 0.10, ...`: the requests per item by verb.
fn verbs(r: &Run) -> String {
    r.requests
        .iter()
        .map(|(v, k)| format!("{v} {:.2}", *k as f64 / r.count.max(1) as f64))
        .collect::<Vec<_>>()
        .join(", ")
}

fn work_table(md: &mut String, runs: &[Run], work: Work) {
    let (title, what) = heading(work);
    let _ = writeln!(md, "### {title}\n");
    let _ = writeln!(
        md,
        "| {what} | Core | Done after | Created in | Watch errors / re-lists | Leader CPU s | Leader RSS MiB, idle → now (peak) | Standby RSS MiB, now (peak) | Apiserver CPU s | Requests per {} (by verb) | Bound by |\n\
         |---:|---|---:|---:|---:|---:|---:|---:|---:|---|---|",
        what.trim_end_matches('s')
    );
    for n in counts(runs, work) {
        for core in [Core::Rust, Core::Go] {
            let Some(r) = find(runs, core, work, n) else {
                continue;
            };
            let _ = writeln!(
                md,
                "| {n} | {} | {:.1} s | {:.1} s | {} / {} | {:.2} | {:.1} → {:.1} ({:.1}) | {:.1} ({:.1}) | {:.1} | {:.2} ({}) | {} |",
                core.label(),
                r.done_seconds,
                r.create_seconds,
                r.watch_errors,
                r.watch_restarts,
                r.leader.cpu_seconds,
                r.idle.leader_rss_mib,
                r.leader.rss_mib,
                r.leader.peak_rss_mib,
                r.standby.rss_mib,
                r.standby.peak_rss_mib,
                r.apiserver_cpu_seconds,
                r.requests_per_item(),
                verbs(r),
                bound(r).unwrap_or("–"),
            );
        }
    }
    let _ = writeln!(md);
}

fn ratio_table(md: &mut String, runs: &[Run], work: Work) {
    let (_, what) = heading(work);
    let _ = writeln!(md, "Ratios, upstream's figure over ours:\n");
    let _ = writeln!(
        md,
        "| {what} | Time until done | Leader CPU s | Leader RSS now | Leader peak RSS | Requests |\n|---:|---:|---:|---:|---:|---:|"
    );
    for n in counts(runs, work) {
        let (Some(ours), Some(up)) = (find(runs, Core::Rust, work, n), find(runs, Core::Go, work, n)) else {
            continue;
        };
        let _ = writeln!(
            md,
            "| {n} | {} | {} | {} | {} | {} |",
            ratio(up.done_seconds, ours.done_seconds),
            ratio(up.leader.cpu_seconds, ours.leader.cpu_seconds),
            ratio(up.leader.rss_mib, ours.leader.rss_mib),
            ratio(up.leader.peak_rss_mib, ours.leader.peak_rss_mib),
            ratio(up.requests_per_item(), ours.requests_per_item()),
        );
    }
    let _ = writeln!(md);
}

/// The cores' JSON record.
pub fn json(runs: &[Run]) -> Value {
    let idle = |core| {
        idle(runs, core)
            .map(|(leader, standby)| json!({"leader_rss_mib": leader, "standby_rss_mib": standby}))
    };
    json!({
        "idle_median": {"Rust": idle(Core::Rust), "Go": idle(Core::Go)},
        "runs": runs.iter().map(|r| {
            let mut v = serde_json::to_value(r).unwrap_or(Value::Null);
            v["bound_by"] = bound(r).map_or(Value::Null, Value::from);
            v["requests_per_item"] = Value::from(r.requests_per_item());
            v
        }).collect::<Vec<_>>(),
    })
}
