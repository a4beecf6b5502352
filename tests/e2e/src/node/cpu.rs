//! What the machine's processes did while a handover ran: each one's time on a CPU and its time waiting
//! for one, from the kernel's scheduler statistics (`/proc/<pid>/task/<tid>/schedstat`: nanoseconds on a
//! CPU, then nanoseconds runnable on a run queue), summed by component between two snapshots.
//!
//! The node test bed runs every part on the same machine, so the snapshots see the control plane (one
//! multi-call binary, told apart by its first argument), containerd, the replicas and the bench itself.

use std::collections::{BTreeMap, HashMap};
use std::path::Path;

/// What a process is, for the tables.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Component {
    /// kube-apiserver.
    Apiserver,
    /// etcd.
    Etcd,
    /// kube-controller-manager.
    ControllerManager,
    /// kube-scheduler.
    Scheduler,
    /// The kubelet.
    Kubelet,
    /// containerd, its shims and runc.
    Runtime,
    /// provider-nop's replicas (the Deployment whose leader is deleted).
    ProviderNop,
    /// Every other replica of ours (the core, the other providers).
    OtherReplicas,
    /// The bench's own process (it reads the Lease, watches it, deletes the Pod and takes the snapshots).
    Bench,
    /// Everything else: kernel threads, other processes of the machine.
    Other,
}

impl Component {
    /// Every component, in table order.
    pub const ALL: [Component; 10] = [
        Component::Apiserver,
        Component::Etcd,
        Component::ControllerManager,
        Component::Scheduler,
        Component::Kubelet,
        Component::Runtime,
        Component::ProviderNop,
        Component::OtherReplicas,
        Component::Bench,
        Component::Other,
    ];

    /// Its name in a table.
    pub fn label(self) -> &'static str {
        match self {
            Component::Apiserver => "kube-apiserver",
            Component::Etcd => "etcd",
            Component::ControllerManager => "kube-controller-manager",
            Component::Scheduler => "kube-scheduler",
            Component::Kubelet => "kubelet",
            Component::Runtime => "containerd, shims, runc",
            Component::ProviderNop => "provider-nop (ours, both replicas)",
            Component::OtherReplicas => "our other replicas",
            Component::Bench => "the bench",
            Component::Other => "everything else",
        }
    }

    /// The component of a process named `comm` (`/proc/<pid>/comm`), whose first argument is `arg1`.
    pub fn of(comm: &str, arg1: &str, bench_pid: bool) -> Self {
        if bench_pid {
            return Component::Bench;
        }
        match comm {
            "harness" => match arg1 {
                "kube-apiserver" => Component::Apiserver,
                "etcd" => Component::Etcd,
                "kube-controller-manager" => Component::ControllerManager,
                "kube-scheduler" => Component::Scheduler,
                "kubelet" => Component::Kubelet,
                _ => Component::Other,
            },
            "provider-nop" => Component::ProviderNop,
            // `comm` holds at most 15 bytes: provider-kubernetes is `provider-kubern`.
            "crossplane" | "provider-sql" | "provider-kubern" => Component::OtherReplicas,
            c if c.starts_with("containerd") || c == "runc" => Component::Runtime,
            _ => Component::Other,
        }
    }
}

/// Nanoseconds on a CPU and waiting for one, per thread.
#[derive(Debug, Default, Clone)]
pub struct Snapshot {
    threads: HashMap<(u32, u32), (Component, u64, u64)>,
}

/// Time on a CPU and time waiting for one, in ms, per component, over a window.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Usage {
    /// Per component: (on a CPU, waiting for a CPU), in ms.
    pub by: BTreeMap<Component, (f64, f64)>,
}

impl Usage {
    /// The sum over every component: (on a CPU, waiting for one), in ms.
    pub fn total(&self) -> (f64, f64) {
        self.by.values().fold((0.0, 0.0), |(r, w), (a, b)| (r + a, w + b))
    }

    /// One component's (on a CPU, waiting for one), in ms; zero when it did not run.
    pub fn of(&self, c: Component) -> (f64, f64) {
        self.by.get(&c).copied().unwrap_or_default()
    }
}

/// The first two numbers of a `schedstat` file: ns on a CPU, ns waiting on a run queue.
pub fn parse_schedstat(text: &str) -> Option<(u64, u64)> {
    let mut fields = text.split_whitespace().map(str::parse::<u64>);
    Some((fields.next()?.ok()?, fields.next()?.ok()?))
}

/// Reads every thread of every process now. Processes and threads that end while being read are
/// skipped; so is a machine without `/proc` (the snapshot is then empty, and the window shows nothing).
pub fn snapshot() -> Snapshot {
    snapshot_of(Path::new("/proc"), std::process::id())
}

/// One thread of a process in `/proc`.
pub struct Thread {
    /// The process.
    pub pid: u32,
    /// The thread.
    pub tid: u32,
    /// What the process is.
    pub component: Component,
    /// Its directory, `/proc/<pid>/task/<tid>`.
    pub dir: std::path::PathBuf,
}

/// Every thread of every process in `proc` now, told apart by component (`bench` is the bench's own
/// pid). Processes and threads that end while being listed are skipped; a machine without `/proc`
/// lists none.
pub fn threads_of(proc: &Path, bench: u32) -> Vec<Thread> {
    let mut out = Vec::new();
    let Ok(entries) = std::fs::read_dir(proc) else {
        return out;
    };
    for entry in entries.filter_map(Result::ok) {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let dir = entry.path();
        let comm = std::fs::read_to_string(dir.join("comm")).unwrap_or_default();
        let cmdline = std::fs::read(dir.join("cmdline")).unwrap_or_default();
        let arg1 = cmdline
            .split(|b| *b == 0)
            .nth(1)
            .map(String::from_utf8_lossy)
            .unwrap_or_default();
        let component = Component::of(comm.trim(), &arg1, pid == bench);
        let Ok(tasks) = std::fs::read_dir(dir.join("task")) else {
            continue;
        };
        for task in tasks.filter_map(Result::ok) {
            if let Ok(tid) = task.file_name().to_string_lossy().parse::<u32>() {
                out.push(Thread {
                    pid,
                    tid,
                    component,
                    dir: task.path(),
                });
            }
        }
    }
    out
}

fn snapshot_of(proc: &Path, bench: u32) -> Snapshot {
    let mut threads = HashMap::new();
    for t in threads_of(proc, bench) {
        let stat = std::fs::read_to_string(t.dir.join("schedstat")).unwrap_or_default();
        if let Some((run, wait)) = parse_schedstat(&stat) {
            threads.insert((t.pid, t.tid), (t.component, run, wait));
        }
    }
    Snapshot { threads }
}

/// What each component used between `before` and `after`: a thread that started in between counts
/// from zero, one that ended in between is not counted. `None` when either snapshot read no thread
/// (no `/proc`, or no `schedstat` in it): the window was not measured, which is not the same as idle.
pub fn between(before: &Snapshot, after: &Snapshot) -> Option<Usage> {
    if before.threads.is_empty() || after.threads.is_empty() {
        return None;
    }
    let mut by: BTreeMap<Component, (f64, f64)> = BTreeMap::new();
    for (key, (component, run, wait)) in &after.threads {
        let (run0, wait0) = before.threads.get(key).map_or((0, 0), |(_, r, w)| (*r, *w));
        let e = by.entry(*component).or_default();
        e.0 += run.saturating_sub(run0) as f64 / 1e6;
        e.1 += wait.saturating_sub(wait0) as f64 / 1e6;
    }
    Some(Usage { by })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schedstat_is_run_then_wait() {
        assert_eq!(parse_schedstat("123 456 7\n"), Some((123, 456)));
        assert_eq!(parse_schedstat("123"), None);
        assert_eq!(parse_schedstat("x 1 2"), None);
    }

    #[test]
    fn components_by_name_and_argument() {
        assert_eq!(
            Component::of("harness", "kube-apiserver", false),
            Component::Apiserver
        );
        assert_eq!(Component::of("harness", "kubelet", false), Component::Kubelet);
        assert_eq!(Component::of("harness", "registry", false), Component::Other);
        assert_eq!(Component::of("containerd-shim", "", false), Component::Runtime);
        assert_eq!(Component::of("runc", "", false), Component::Runtime);
        assert_eq!(Component::of("provider-nop", "", false), Component::ProviderNop);
        assert_eq!(
            Component::of("provider-kubern", "", false),
            Component::OtherReplicas
        );
        assert_eq!(Component::of("provider-nop", "", true), Component::Bench);
        assert_eq!(Component::of("kworker/0:1", "", false), Component::Other);
    }

    #[test]
    fn usage_counts_new_threads_from_zero_and_drops_ended_ones() {
        let mut before = Snapshot::default();
        before
            .threads
            .insert((1, 1), (Component::Apiserver, 1_000_000, 0));
        before.threads.insert((2, 2), (Component::Etcd, 5_000_000, 0));
        let mut after = Snapshot::default();
        after
            .threads
            .insert((1, 1), (Component::Apiserver, 4_000_000, 2_000_000));
        after
            .threads
            .insert((3, 3), (Component::Apiserver, 1_000_000, 500_000));
        let u = between(&before, &after).expect("both snapshots read threads");
        assert_eq!(u.of(Component::Apiserver), (4.0, 2.5));
        assert_eq!(u.of(Component::Etcd), (0.0, 0.0));
        assert_eq!(u.total(), (4.0, 2.5));
    }

    #[test]
    fn an_empty_snapshot_measures_nothing() {
        let mut read = Snapshot::default();
        read.threads.insert((1, 1), (Component::Apiserver, 1, 0));
        assert_eq!(between(&Snapshot::default(), &read), None);
        assert_eq!(between(&read, &Snapshot::default()), None);
    }

    #[test]
    fn this_machine_has_threads_to_read() {
        // The node test bed runs on Linux: the bench's own threads are always there.
        let s = snapshot();
        assert!(
            s.threads.values().any(|(c, _, _)| *c == Component::Bench),
            "no thread of this process in /proc"
        );
    }
}
