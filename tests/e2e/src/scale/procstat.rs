//! What `/proc` says about one process: CPU time, resident set now and at its peak, and the resident
//! set once it has settled.

use std::time::{Duration, Instant};

use anyhow::Context;

/// User plus system CPU time of `pid`, in seconds (`/proc/<pid>/stat`).
pub fn cpu_seconds(pid: u32) -> anyhow::Result<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).context("reading /proc/<pid>/stat")?;
    // The command may hold spaces: the fields after it start past the last ')'.
    let rest = stat.rsplit_once(')').map(|(_, r)| r).unwrap_or_default();
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // utime and stime are fields 14 and 15 of the whole line, 12 and 13 after the state's field.
    let ticks: u64 = [11, 12]
        .iter()
        .map(|&i| fields.get(i).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0))
        .sum();
    // /proc counts in USER_HZ, which Linux fixes at 100 for user space whatever the kernel's HZ.
    Ok(ticks as f64 / 100.0)
}

/// A `kB` field of `/proc/<pid>/status` (`VmHWM`, `VmRSS`), in MiB.
fn status_mib(pid: u32, field: &str) -> anyhow::Result<f64> {
    let status =
        std::fs::read_to_string(format!("/proc/{pid}/status")).context("reading /proc/<pid>/status")?;
    let kib: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .with_context(|| format!("no {field} in /proc/{pid}/status"))?;
    Ok(kib as f64 / 1024.0)
}

/// Peak resident set (`VmHWM`) of `pid`, in MiB.
pub fn peak_rss_mib(pid: u32) -> anyhow::Result<f64> {
    status_mib(pid, "VmHWM")
}

/// Resident set now (`VmRSS`) of `pid`, in MiB.
pub fn rss_mib(pid: u32) -> anyhow::Result<f64> {
    status_mib(pid, "VmRSS")
}

/// The resident set of `pid` once it has settled: sampled every 500 ms until the last 2 s of samples
/// lie within 1 MiB of each other (then their highest), or `limit` has passed (then the last sample,
/// and `false`).
pub async fn settled_rss_mib(pid: u32, limit: Duration) -> anyhow::Result<(f64, bool)> {
    let deadline = Instant::now() + limit;
    let mut samples: Vec<f64> = Vec::new();
    loop {
        samples.push(rss_mib(pid)?);
        if let Some(window) = samples.len().checked_sub(5).map(|from| &samples[from..]) {
            let lo = window.iter().copied().fold(f64::INFINITY, f64::min);
            let hi = window.iter().copied().fold(0.0, f64::max);
            if hi - lo < 1.0 {
                return Ok((hi, true));
            }
        }
        if Instant::now() > deadline {
            return Ok((samples.last().copied().unwrap_or_default(), false));
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_this_process() {
        let pid = std::process::id();
        assert!(cpu_seconds(pid).is_ok());
        let (now, peak) = (rss_mib(pid).expect("VmRSS"), peak_rss_mib(pid).expect("VmHWM"));
        assert!(now > 0.0 && peak >= now, "VmRSS {now} MiB, VmHWM {peak} MiB");
    }
}
