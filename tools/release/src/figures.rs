//! The README's figures, rendered by `cargo xtask generate` from the JSON files the measuring commands
//! wrote (`cargo xtask chaos` → `docs/reliability.json`, `cargo xtask fencing` → `docs/fencing.json`,
//! `cargo xtask bench` → `docs/benchmarks.json`, `cargo xtask bench --functions` →
//! `docs/functions-benchmark.json`, `cargo xtask metrics-names` → `docs/metrics-names.json`, `cargo xtask package-bench` →
//! `docs/packages.json`, `cargo xtask bench --scale` → `docs/scale.json`), between
//! markers, so that `generate --check` fails when a paragraph and its artifact disagree. Each artifact
//! names the commit it measured ([`crate::provenance`]), and each rendered block says which.

use std::path::Path;

use anyhow::Context;
use serde_json::Value;

/// One generated paragraph: its marker name, its source file under `docs/`, and its renderer.
struct Block {
    name: &'static str,
    source: &'static str,
    render: fn(&Value) -> anyhow::Result<String>,
}

const BLOCKS: [Block; 8] = [
    Block {
        name: "conformance",
        source: "conformance.json",
        render: conformance,
    },
    Block {
        name: "reliability",
        source: "reliability.json",
        render: reliability,
    },
    Block {
        name: "fencing",
        source: "fencing.json",
        render: fencing,
    },
    Block {
        name: "benchmarks",
        source: "benchmarks.json",
        render: benchmarks,
    },
    Block {
        name: "functions",
        source: "functions-benchmark.json",
        render: functions,
    },
    Block {
        name: "metrics",
        source: "metrics-names.json",
        render: metrics,
    },
    Block {
        name: "packages",
        source: "packages.json",
        render: packages,
    },
    Block {
        name: "scale",
        source: "scale.json",
        render: scale,
    },
];

/// `(commit abc123def456, 2 cores, load 1.2)`: where a block's figures come from.
fn origin(j: &Value) -> anyhow::Result<String> {
    let p = at(j, "/provenance")?;
    let commit = at(p, "/commit")?
        .as_str()
        .context("provenance.commit is not a string")?;
    let load = at(p, "/machine/load_average_1_5_15_min/0")?;
    Ok(format!(
        "commit `{}`, {} cores, load {load}",
        commit.get(..12).unwrap_or(commit),
        at(p, "/machine/cores")?
    ))
}

fn float(v: &Value, pointer: &str) -> anyhow::Result<f64> {
    at(v, pointer)?
        .as_f64()
        .with_context(|| format!("{pointer} is not a number"))
}

/// Milliseconds as the README writes them: `13 ms`, `1 238 ms`, or seconds from 10 s on.
fn ms(x: f64) -> String {
    if x >= 10_000.0 {
        format!("{:.1} s", x / 1000.0)
    } else {
        let whole = count(&Value::from(x.round() as u64)).unwrap_or_default();
        format!("{whole} ms")
    }
}

fn benchmarks(j: &Value) -> anyhow::Result<String> {
    let mut s = format!(
        "From a {} `cargo xtask bench` run ({}; {:.0} min), Rust and client-go's own elector (each a \
         stand-alone process) side by side on one apiserver (full table, machine and versions in \
         [docs/benchmarks.md](docs/benchmarks.md), picture in [docs/benchmarks.svg](docs/benchmarks.svg)):\n\n\
         | | crossplane-rs | client-go |\n|---|---|---|\n",
        at(j, "/mode")?.as_str().unwrap_or("?"),
        origin(j)?,
        float(j, "/minutes")?,
    );
    for t in ["15", "60"] {
        let label = at(j, &format!("/timings/{t}"))?
            .as_str()
            .unwrap_or("?")
            .to_owned();
        let rs = at(j, &format!("/graceful/rs_{t}"))?;
        let go = at(j, &format!("/graceful/go_{t}"))?;
        s += &format!(
            "| graceful handover p50 / p99, {label} (n = {}) | {} / {} | {} / {} |\n",
            at(rs, "/n")?,
            ms(float(rs, "/p50_ms")?),
            ms(float(rs, "/p99_ms")?),
            ms(float(go, "/p50_ms")?),
            ms(float(go, "/p99_ms")?),
        );
    }
    for t in ["15", "60"] {
        let label = at(j, &format!("/timings/{t}"))?
            .as_str()
            .unwrap_or("?")
            .to_owned();
        let rs = at(j, &format!("/crash/rs_{t}"))?;
        let go = at(j, &format!("/crash/go_{t}"))?;
        s += &format!(
            "| crash failover p99, {label} (n = {}) | {} | {} |\n",
            at(rs, "/n")?,
            ms(float(rs, "/p99_ms")?),
            ms(float(go, "/p99_ms")?),
        );
    }
    let window = at(j, "/plan/rate_window_s")?;
    let rs = at(j, "/rates/rs_60")?;
    let go = at(j, "/rates/go_60")?;
    s += &format!(
        "| standby requests per minute, 60/50/2 s ({window} s window; watches opened in it) | {:.1} ({}) | {:.1} ({}) |\n",
        float(rs, "/standby_requests_per_min")?,
        at(rs, "/standby_watches_opened")?,
        float(go, "/standby_requests_per_min")?,
        at(go, "/standby_watches_opened")?,
    );
    s += &format!(
        "| leader requests per minute, 60/50/2 s | {:.0} writes, {:.0} reads | {:.0} writes, {:.0} reads |\n",
        float(rs, "/leader_writes_per_min")?,
        float(rs, "/leader_reads_per_min")?,
        float(go, "/leader_writes_per_min")?,
        float(go, "/leader_reads_per_min")?,
    );
    s += &format!(
        "| idle RSS of a standby | {:.1} MiB | {:.1} MiB |\n",
        float(rs, "/standby_idle_rss_kib")? / 1024.0,
        float(go, "/standby_idle_rss_kib")? / 1024.0,
    );
    let (mr, mg) = (at(j, "/many/rs")?, at(j, "/many/go")?);
    s += &format!(
        "| {} candidates on one Lease: requests per minute ({} s window) | {:.0} | {:.0} |\n",
        at(mr, "/candidates")?,
        at(j, "/plan/many_window_s")?,
        float(mr, "/requests_per_min")?,
        float(mg, "/requests_per_min")?,
    );
    let nop = at(j, "/nop")?;
    s += &format!(
        "| provider-nop: {} NopResources to Ready; idle RSS | {:.1} s; {:.1} MiB | – |\n",
        count(at(nop, "/count")?)?,
        float(nop, "/ready_s")?,
        float(nop, "/idle_rss_kib")? / 1024.0,
    );
    let errors = at(j, "/errors")?.as_array().map_or(0, Vec::len);
    if errors > 0 {
        s += &format!("\nThe run reported {errors} errors; see docs/benchmarks.md.\n");
    }
    Ok(s)
}

fn functions(j: &Value) -> anyhow::Result<String> {
    Ok(format!(
        "`cargo xtask bench --functions` writes [docs/functions-benchmark.md](docs/functions-benchmark.md) \
         ({}): {} XRs × {} resources through a 2-step pipeline Ready in {:.1} s with {:.2} function calls \
         per XR; a gRPC round trip costs p50 {:.3} ms / p99 {:.3} ms against {:.3} / {:.3} ms for the \
         in-process step.\n",
        origin(j)?,
        at(j, "/xrs")?,
        at(j, "/resources_per_xr")?,
        float(j, "/total_s")?,
        float(j, "/function_calls_per_xr")?,
        float(j, "/grpc_echo/p50_ms")?,
        float(j, "/grpc_echo/p99_ms")?,
        float(j, "/builtin_patch_and_transform/p50_ms")?,
        float(j, "/builtin_patch_and_transform/p99_ms")?,
    ))
}

/// The conformance table: every upstream scenario of issue 22, and whether it passes here.
fn conformance(j: &Value) -> anyhow::Result<String> {
    let mut s = format!(
        "From `cargo xtask conformance` ({}): {} pass, {} fail, {} cannot run here yet.\n\n\
         | upstream test | file | result | seconds | detail |\n|---|---|---|---|---|\n",
        origin(j)?,
        at(j, "/pass")?,
        at(j, "/fail")?,
        at(j, "/cannot_run")?,
    );
    for t in at(j, "/tests")?.as_array().context("tests")? {
        let seconds = t["seconds"]
            .as_f64()
            .map_or_else(|| "–".to_owned(), |x| format!("{x:.1}"));
        let detail = t["detail"]
            .as_str()
            .unwrap_or("")
            .replace('|', "\\|")
            .replace('\n', " ");
        s += &format!(
            "| {} | `{}` | {} | {seconds} | {detail} |\n",
            t["upstream"].as_str().unwrap_or("?"),
            t["file"].as_str().unwrap_or("?"),
            t["result"].as_str().unwrap_or("?"),
        );
    }
    Ok(s)
}

/// The package manager on the node: install time, and the upgrade's gap ours against upstream's order.
fn packages(j: &Value) -> anyhow::Result<String> {
    Ok(format!(
        "`cargo xtask package-bench` writes [docs/packages.md](docs/packages.md) ({}): an upstream-shaped \
         `Provider` pulled from the test bed's OCI registry is Installed and Healthy {:.1} s after \
         `kubectl apply`, with {} Ready Pods and one leader. A `Function` of our function on the official Go \
         SDK is Healthy {:.1} s after apply, and an XR composes through it, over the cluster's DNS and mutual \
         TLS, {:.1} s after its creation; a `Configuration` that depends on a Provider installs both, the \
         Provider Healthy {:.1} s after the Configuration's apply. Upgrading `spec.package` v1 ↔ v2 under churn, \
         {} times each way, the Lease had no holder for p50 **{}** / p99 {} our way (the old Deployment \
         runs until a new Pod leads), against p50 {} / p99 {} in upstream's order (the old Deployment \
         deleted first); the audit-log checker found {} violations in {} writes of the revisions, and \
         {} requests were refused with 403. {} bad inputs on the node (a missing tag, an image that is not \
         an xpkg, a runtime that never becomes ready) each gave one condition, and the running revision \
         kept leading. The package manager injected the core's CA into provider-kubernetes's conversion \
         webhook.\n",
        origin(j)?,
        float(j, "/install/apply_to_healthy_s")?,
        at(j, "/install/ready_pods")?,
        float(j, "/function/apply_to_healthy_s")?,
        float(j, "/function/xr_ready_s")?,
        float(j, "/configuration/dependency_healthy_s")?,
        at(j, "/ours/upgrades")?,
        ms(float(j, "/ours/no_leader_ms_p50")?),
        ms(float(j, "/ours/no_leader_ms_p99")?),
        ms(float(j, "/upstream_order/no_leader_ms_p50")?),
        ms(float(j, "/upstream_order/no_leader_ms_p99")?),
        at(j, "/violations")?,
        count(at(j, "/writes_checked")?)?,
        at(j, "/refused_403")?,
        at(j, "/bad_inputs")?
            .as_array()
            .context("bad_inputs is not a list")?
            .len(),
    ))
}

/// At scale: per size, providers ours against the crossplane-runtime peer, and per XRD count, cores
/// ours against upstream's (each part when the artifact holds it).
fn scale(j: &Value) -> anyhow::Result<String> {
    let mut parts = Vec::new();
    let runs = at(j, "/runs")?.as_array().context("runs is not a list")?;
    if !runs.is_empty() {
        parts.push(scale_providers(j, runs)?);
    }
    let cores = match j.pointer("/cores/runs") {
        Some(c) => c.as_array().context("cores.runs is not a list")?.as_slice(),
        None => &[],
    };
    if let Some(h) = j.pointer("/handovers").and_then(Value::as_array)
        && !h.is_empty()
    {
        parts.push(scale_handovers(h)?);
    }
    if !cores.is_empty() {
        parts.push(scale_cores(j, cores)?);
    }
    Ok(format!(
        "`cargo xtask bench --scale` writes [docs/scale.md](docs/scale.md) ({}): {}\n",
        origin(j)?,
        parts.join(" ")
    ))
}

/// The sorted, distinct values of `field` in `runs`.
fn counts_of(runs: &[Value], field: &str) -> Vec<u64> {
    let mut sizes: Vec<u64> = runs.iter().filter_map(|r| r[field].as_u64()).collect();
    sizes.sort_unstable();
    sizes.dedup();
    sizes
}

/// The run of `who` (`field_who`) at `n` (`field_n`).
fn run_of<'a>(
    runs: &'a [Value],
    field_who: &str,
    who: &str,
    field_n: &str,
    n: u64,
) -> anyhow::Result<&'a Value> {
    runs.iter()
        .find(|r| r[field_who] == who && r[field_n].as_u64() == Some(n))
        .with_context(|| format!("no run of {who} at {n}"))
}

fn scale_providers(j: &Value, runs: &[Value]) -> anyhow::Result<String> {
    let mut parts = Vec::new();
    for size in counts_of(runs, "size") {
        let ours = run_of(runs, "provider", "Rust", "size", size)?;
        let peer = run_of(runs, "provider", "Go", "size", size)?;
        parts.push(format!(
            "{} NopResources Ready in {:.1} s against {:.1} s, leader CPU {:.1} s against {:.1} s, leader \
             peak RSS {:.0} MiB against {:.0} MiB, {:.2} requests per resource against {:.2}",
            count(&Value::from(size))?,
            float(ours, "/ready_seconds")?,
            float(peer, "/ready_seconds")?,
            float(ours, "/leader/cpu_seconds")?,
            float(peer, "/leader/cpu_seconds")?,
            float(ours, "/leader/peak_rss_mib")?,
            float(peer, "/leader/peak_rss_mib")?,
            float(ours, "/requests_per_resource")?,
            float(peer, "/requests_per_resource")?,
        ));
    }
    Ok(format!(
        "provider-nop against our NopResource provider on crossplane-runtime (Go), two replicas each on a \
         control plane of its own, both at `--max-reconcile-rate {}`. Ours against the peer: {}.",
        at(j, "/flags/max_reconcile_rate")?,
        parts.join("; "),
    ))
}

/// The nearest-rank median of `field` over `samples`.
fn median_of(samples: &Value, field: &str) -> anyhow::Result<f64> {
    let mut v: Vec<f64> = samples
        .as_array()
        .context("handover samples are not a list")?
        .iter()
        .filter_map(|s| s[field].as_f64())
        .collect();
    anyhow::ensure!(!v.is_empty(), "no handover samples with {field}");
    v.sort_by(f64::total_cmp);
    Ok(v[(v.len() - 1) / 2])
}

fn scale_handovers(all: &[Value]) -> anyhow::Result<String> {
    let of = |imp: &str| {
        all.iter()
            .find(|h| h["imp"] == imp)
            .with_context(|| format!("no handovers of {imp}"))
    };
    let (ours, peer) = (of("Rust")?, of("Go")?);
    Ok(format!(
        "Handovers under load, from the signal to the new leader's first reconcile that wrote (p50, each \
         side at its default lease: {} s and {} s): on SIGTERM {:.0} ms against {:.0} ms, on SIGKILL {:.1} s \
         against {:.1} s.",
        at(ours, "/lease_duration_seconds")?,
        at(peer, "/lease_duration_seconds")?,
        median_of(at(ours, "/graceful")?, "first_reconcile_ms")?,
        median_of(at(peer, "/graceful")?, "first_reconcile_ms")?,
        median_of(at(ours, "/crash")?, "first_reconcile_ms")? / 1000.0,
        median_of(at(peer, "/crash")?, "first_reconcile_ms")? / 1000.0,
    ))
}

/// The cores' runs of `work` ("xrds" or "xrs"), as one clause per count.
fn scale_work(runs: &[Value], work: &str, what: &str) -> anyhow::Result<Vec<String>> {
    let runs: Vec<Value> = runs.iter().filter(|r| r["work"] == work).cloned().collect();
    let mut parts = Vec::new();
    for n in counts_of(&runs, "count") {
        let ours = run_of(&runs, "core", "Rust", "count", n)?;
        let up = run_of(&runs, "core", "Go", "count", n)?;
        parts.push(format!(
            "{} {what} in {:.1} s against {:.1} s, leader CPU {:.1} s against {:.1} s, leader RSS {:.0} MiB \
             against {:.0} MiB",
            count(&Value::from(n))?,
            float(ours, "/done_seconds")?,
            float(up, "/done_seconds")?,
            float(ours, "/leader/cpu_seconds")?,
            float(up, "/leader/cpu_seconds")?,
            float(ours, "/leader/rss_mib")?,
            float(up, "/leader/rss_mib")?,
        ));
    }
    Ok(parts)
}

fn scale_cores(j: &Value, runs: &[Value]) -> anyhow::Result<String> {
    let mut parts = scale_work(runs, "xrds", "XRDs Established")?;
    parts.extend(scale_work(
        runs,
        "xrs",
        "XRs composing 3 resources each through one function Ready",
    )?);
    Ok(format!(
        "The cores, ours (`crossplane core start`) against upstream's (v2.3.4, Go), two replicas each at \
         their defaults on a control plane of its own per count: leader idle RSS with its own CRDs {:.0} \
         MiB against {:.0} MiB; {}.",
        float(j, "/cores/idle_median/Rust/leader_rss_mib")?,
        float(j, "/cores/idle_median/Go/leader_rss_mib")?,
        parts.join("; "),
    ))
}

fn metrics(j: &Value) -> anyhow::Result<String> {
    let upstream = at(j, "/upstream_names")?.as_u64().context("upstream_names")?;
    let served = at(j, "/served")?.as_u64().context("served")?;
    Ok(format!(
        "[docs/metrics-names.md](docs/metrics-names.md), written by `cargo xtask metrics-names` from a real \
         scrape of provider-nop ({}), lists upstream's names beside ours: {served} of {upstream} served; \
         of the other {}, the fixture marks {} as lacking and {} as not applicable.\n",
        origin(j)?,
        upstream - served,
        at(j, "/lacking")?,
        at(j, "/not_applicable")?,
    ))
}

fn begin(name: &str, source: &str) -> String {
    format!("<!-- figures:{name}:begin (cargo xtask generate, from docs/{source}) -->")
}

fn end(name: &str) -> String {
    format!("<!-- figures:{name}:end -->")
}

/// `current` with every figure block re-rendered from `docs`.
pub fn readme(current: &str, docs: &Path) -> anyhow::Result<String> {
    let mut out = current.to_owned();
    for b in BLOCKS {
        let path = docs.join(b.source);
        let text = std::fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))?;
        let json: Value =
            serde_json::from_str(&text).with_context(|| format!("parsing {}", path.display()))?;
        let rendered =
            (b.render)(&json).with_context(|| format!("rendering figures from {}", path.display()))?;
        out = replace_block(&out, &begin(b.name, b.source), &end(b.name), &rendered)?;
    }
    Ok(out)
}

fn replace_block(text: &str, begin: &str, end: &str, body: &str) -> anyhow::Result<String> {
    let start = text
        .find(begin)
        .with_context(|| format!("README.md lacks the marker {begin}"))?;
    let stop = text
        .find(end)
        .with_context(|| format!("README.md lacks the marker {end}"))?;
    anyhow::ensure!(stop > start, "README.md has {end} before {begin}");
    Ok(format!("{}{begin}\n{body}{}", &text[..start], &text[stop..]))
}

/// A count as the README writes it: thousands separated by a space (`6 712`).
fn count(v: &Value) -> anyhow::Result<String> {
    let n = v.as_u64().with_context(|| format!("{v} is not a count"))?;
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(' ');
        }
        out.push(c);
    }
    Ok(out)
}

fn at<'a>(v: &'a Value, pointer: &str) -> anyhow::Result<&'a Value> {
    v.pointer(pointer).with_context(|| format!("no {pointer}"))
}

fn n(v: &Value, pointer: &str) -> anyhow::Result<String> {
    count(at(v, pointer)?)
}

/// The answers to frozen leaders' late writes, as `1 × 403, 12 × 409`.
fn codes(v: &Value) -> String {
    v.as_object()
        .map(|m| {
            m.iter()
                .map(|(code, k)| format!("{} × {code}", k.as_u64().unwrap_or(0)))
                .collect::<Vec<_>>()
                .join(", ")
        })
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "none".to_owned())
}

fn reliability(j: &Value) -> anyhow::Result<String> {
    let controls = at(j, "/verdict_controls")?
        .as_array()
        .context("verdict_controls")?;
    let held = controls.iter().filter(|c| c["held"] == true).count();
    let mut s = format!(
        "From the last run there ({}; verdict {}, {held} of {} controls held, {} min): {} faults, {} \
         leadership changes, **{} violations in {} controller writes** ({} with the fence off: {} \
         violations; {} with it on: {} violations). With the fence off, {} freezes caught a leader's writes \
         in flight: {} of them arrived after the takeover, {} refused with 409/404 and **{} admitted** (the \
         gap self-fencing cannot close, counted here and not excused; with the fence on it would be a \
         violation). {} late writes in all, {} of them from frozen leaders, answered {}; {} refused by the \
         fence with 403.",
        origin(j)?,
        at(j, "/verdict")?.as_str().unwrap_or("?"),
        controls.len(),
        at(j, "/minutes")?.as_str().unwrap_or("?"),
        n(j, "/faults")?,
        n(j, "/leadership_changes")?,
        n(j, "/violations")?,
        n(j, "/writes_checked")?,
        n(j, "/fence_off/writes_checked")?,
        n(j, "/fence_off/violations")?,
        n(j, "/fence_on/writes_checked")?,
        n(j, "/fence_on/violations")?,
        n(j, "/fence_off/freezes_with_writes_in_flight")?,
        n(j, "/fence_off/held_writes_delivered_late")?,
        n(j, "/fence_off/held_writes_refused")?,
        n(j, "/fence_off/self_fencing_gap")?,
        n(j, "/late_writes")?,
        n(j, "/frozen_writes")?,
        codes(at(j, "/frozen_writes_by_code")?),
        n(j, "/fence_on/fence_refusals")?,
    );
    let peer = |name: &str| j.get(name).filter(|g| !g.is_null());
    let number = |v: &Value, pointer: &str| -> anyhow::Result<u64> {
        at(v, pointer)?
            .as_u64()
            .with_context(|| format!("{pointer} is not a count"))
    };
    let mut peer_violations = 0;
    for go in ["client_go", "go_provider"].iter().filter_map(|name| peer(name)) {
        peer_violations += number(go, "/violations")?;
    }
    s += &format!(
        " Of the violations, {} by our replicas and {peer_violations} by the Go peers.",
        number(j, "/violations")?.saturating_sub(peer_violations)
    );
    let late = |go: &Value| -> anyhow::Result<String> {
        Ok(format!(
            "{} of them were late: {} refused, {} whose answer did not tell proven to have taken no effect, {} \
             admitted after its own term but before the next holder's term began (findings, listed in the \
             report; {} of them committed after the next holder's acquiring write), {} whose answer did not \
             tell and that nothing proves either way (findings), {} violations; it released the Lease {} times \
             while another replica held it",
            n(go, "/late_writes")?,
            n(go, "/late_writes_refused")?,
            n(go, "/late_writes_settled")?,
            n(go, "/late_writes_before_next_term")?,
            n(go, "/late_writes_before_next_term_overlapping")?,
            n(go, "/late_writes_unproven")?,
            n(go, "/violations")?,
            n(go, "/foreign_releases")?,
        ))
    };
    if let Some(go) = peer("client_go") {
        s += &format!(
            " client-go's candidate led {} terms and sent {} writes; {}.",
            n(go, "/terms")?,
            n(go, "/writes_checked")?,
            late(go)?,
        );
    }
    if let Some(go) = peer("go_provider") {
        s += &format!(
            " The Go provider (provider-nop-go) led {} terms and sent {} writes ({} of its NopResource work \
             admitted); {}; {} of its processes exited on losing the Lease and were restarted.",
            n(go, "/terms")?,
            n(go, "/writes_checked")?,
            n(go, "/work_admitted")?,
            late(go)?,
            n(go, "/lost_lease_exits")?,
        );
    }
    s += &format!(
        " {} of {} resources Ready, {} lost; {} audited requests, {} unparsable lines.\n",
        n(j, "/resources/ready")?,
        n(j, "/resources/expected")?,
        n(j, "/resources/lost")?,
        n(j, "/audit_log/requests")?,
        n(j, "/audit_log/unparsable_lines")?,
    );
    Ok(s)
}

fn fencing(j: &Value) -> anyhow::Result<String> {
    let a = at(j, "/tests/refuses_pods_that_do_not_hold_the_lease")?;
    let b = at(j, "/tests/refuses_writes_delayed_past_the_takeover")?;
    Ok(format!(
        "From the last run there ({}): the replica without election sent {} writes and had {} admitted; the \
         frozen leader had {} writes admitted before the takeover, and of the {} it had in flight that \
         arrived after it, {} were admitted, {} refused by the fence (403) and {} by the stale \
         resourceVersion check before it (409); of the {} writes held past a takeover by a candidate that \
         writes nothing else, {} came back 403, {} were admitted, and {} of {} objects were unchanged.\n",
        origin(j)?,
        n(a, "/rogue_writes")?,
        n(a, "/rogue_admitted")?,
        n(a, "/frozen_leader_admitted_before_takeover")?,
        n(a, "/frozen_leader_writes_after_takeover")?,
        n(a, "/frozen_leader_admitted_after_takeover")?,
        n(a, "/frozen_leader_refused_after_takeover")?,
        n(a, "/frozen_leader_conflict_after_takeover")?,
        n(b, "/late_writes")?,
        n(b, "/refused_403")?,
        n(b, "/admitted")?,
        n(b, "/objects_unchanged")?,
        n(b, "/held_creates")?,
    ))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn counts_group_thousands_with_a_space() -> anyhow::Result<()> {
        assert_eq!(count(&json!(7))?, "7");
        assert_eq!(count(&json!(6712))?, "6 712");
        assert_eq!(count(&json!(46740))?, "46 740");
        assert_eq!(count(&json!(1234567))?, "1 234 567");
        assert!(count(&json!("x")).is_err());
        Ok(())
    }

    #[test]
    fn a_block_is_replaced_between_its_markers_only() -> anyhow::Result<()> {
        let text = "a\n<!-- b -->\nold\n<!-- e -->\nz\n";
        assert_eq!(
            replace_block(text, "<!-- b -->", "<!-- e -->", "new\n")?,
            "a\n<!-- b -->\nnew\n<!-- e -->\nz\n"
        );
        assert!(replace_block("no markers", "<!-- b -->", "<!-- e -->", "x").is_err());
        Ok(())
    }

    #[test]
    fn scale_renders_the_cores_beside_the_providers_or_alone() -> anyhow::Result<()> {
        let provenance =
            json!({"commit": "0123456789abcdef", "machine": {"cores": 2, "load_average_1_5_15_min": [1.5]}});
        let core = |who: &str, secs: f64, rss: f64| {
            json!({"core": who, "work": "xrds", "count": 10, "done_seconds": secs,
                   "leader": {"cpu_seconds": 0.5, "rss_mib": rss, "peak_rss_mib": rss}})
        };
        let cores = json!({"idle_median": {"Rust": {"leader_rss_mib": 16.0}, "Go": {"leader_rss_mib": 80.0}},
                           "runs": [core("Rust", 2.0, 20.0), core("Go", 9.0, 90.0)]});
        let alone = scale(&json!({"provenance": provenance, "runs": [], "cores": cores}))?;
        assert!(
            alone.contains("ours (`crossplane core start`) against upstream's"),
            "{alone}"
        );
        assert!(
            alone.contains(
                "idle RSS with its own CRDs 16 MiB against 80 MiB; 10 XRDs Established in 2.0 s against 9.0 s"
            ),
            "{alone}"
        );
        assert!(!alone.contains("NopResources"), "{alone}");
        let missing = json!({"provenance": provenance, "runs": [], "cores": {"idle_median": {}, "runs": [core("Rust", 2.0, 20.0)]}});
        assert!(
            scale(&missing).is_err(),
            "a count measured for one core only is an error"
        );
        Ok(())
    }

    #[test]
    fn scale_renders_the_handovers_by_their_medians() -> anyhow::Result<()> {
        let provenance =
            json!({"commit": "0123456789abcdef", "machine": {"cores": 2, "load_average_1_5_15_min": [1.5]}});
        let samples = |ms: &[f64]| {
            json!(
                ms.iter()
                    .map(|m| json!({"first_reconcile_ms": m}))
                    .collect::<Vec<_>>()
            )
        };
        let handovers = json!([
            {"imp": "Rust", "lease_duration_seconds": 60, "graceful": samples(&[140.0, 120.0, 900.0]),
             "crash": samples(&[60035.0, 60079.0])},
            {"imp": "Go", "lease_duration_seconds": 15, "graceful": samples(&[15900.0, 15400.0, 18600.0]),
             "crash": samples(&[15674.0, 17795.0])},
        ]);
        let text = scale(&json!({"provenance": provenance, "runs": [], "handovers": handovers}))?;
        assert!(
            text.contains("default lease: 60 s and 15 s): on SIGTERM 140 ms against 15900 ms, on SIGKILL 60.0 s against 15.7 s"),
            "{text}"
        );
        let empty = json!([{"imp": "Rust", "lease_duration_seconds": 60, "graceful": [], "crash": []},
                           {"imp": "Go", "lease_duration_seconds": 15, "graceful": [], "crash": []}]);
        assert!(
            scale(&json!({"provenance": provenance, "runs": [], "handovers": empty})).is_err(),
            "handovers without samples give no figure"
        );
        Ok(())
    }

    #[test]
    fn the_committed_artifacts_render() -> anyhow::Result<()> {
        let docs = testenv::harness::repo_root().join("docs");
        for b in BLOCKS {
            let json: Value = serde_json::from_str(&std::fs::read_to_string(docs.join(b.source))?)?;
            let text = (b.render)(&json)?;
            // A paragraph ends with a full stop, a table with its last row.
            assert!(
                text.ends_with(".\n") || text.ends_with("|\n"),
                "{}: {text}",
                b.name
            );
        }
        Ok(())
    }
}
