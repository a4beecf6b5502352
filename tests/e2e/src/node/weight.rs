//! The control plane's CPU weight, for a second series of deletions that separates the machine's share
//! of a handover from the electors'.
//!
//! In a cluster, kube-apiserver, etcd, kube-controller-manager and kube-scheduler run on control-plane
//! machines of their own; the node test bed runs them on the same 2 cores as the kubelet, containerd and
//! every Pod, so the burst a Pod's deletion sets off on the node (the kubelet stopping a container and
//! starting its replacement through containerd and runc) delays the apiserver's answers too. Raising
//! the control plane's weight in the kernel's scheduler (its nice value, every thread) gives it the CPU
//! first whenever it wants some, which is the nearest this machine comes to separate machines. It does
//! nothing for the replicas themselves: they stay at the node's weight, beside the burst.

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::{Context, ensure};

use super::cpu::{self, Component};

/// The components that a cluster runs on machines of their own.
pub const CONTROL_PLANE: [Component; 4] = [
    Component::Apiserver,
    Component::Etcd,
    Component::ControllerManager,
    Component::Scheduler,
];

/// The control plane's nice value in the weighted series: a weight of 9 548 against 1 024 at nice 0
/// (the kernel's `sched_prio_to_weight`), 9.3 times that of every other thread.
pub const NICE: i32 = -10;

/// How many threads of each control-plane component are at a nice value, of how many there are.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Census {
    /// Per component: (threads at the value, threads).
    pub by: BTreeMap<Component, (usize, usize)>,
}

impl Census {
    /// Threads at the value, and threads, over the whole control plane.
    pub fn total(&self) -> (usize, usize) {
        self.by.values().fold((0, 0), |(a, b), (x, y)| (a + x, b + y))
    }

    /// Whether every thread of every control-plane component is at the value, and each has one.
    pub fn complete(&self) -> bool {
        CONTROL_PLANE
            .iter()
            .all(|c| self.by.get(c).is_some_and(|(at, all)| *all > 0 && at == all))
    }
}

/// The nice value in a thread's `stat` (`/proc/<pid>/task/<tid>/stat`): the 19th field, counted after
/// the command name in parentheses, which may itself hold spaces and parentheses.
pub fn parse_nice(stat: &str) -> Option<i32> {
    let (_, rest) = stat.rsplit_once(')')?;
    rest.split_whitespace().nth(16)?.parse().ok()
}

/// Sets every thread of the control plane to `nice`, then counts, thread by thread, which are at it.
/// A thread the kernel has no more (it ended between the listing and the call) is left out; any other
/// refusal is an error, and so is a control plane with a component missing: the series would not
/// measure what it says.
pub fn set(nice: i32) -> anyhow::Result<Census> {
    let proc = Path::new("/proc");
    for t in control_plane_threads(proc) {
        let Some(pid) = rustix::process::Pid::from_raw(t.tid as i32) else {
            continue;
        };
        match rustix::process::setpriority_process(Some(pid), nice) {
            Ok(()) | Err(rustix::io::Errno::SRCH) => {}
            Err(e) => {
                return Err(e).with_context(|| {
                    format!(
                        "setting {} (thread {}) to nice {nice}: the bench needs root (CAP_SYS_NICE)",
                        t.component.label(),
                        t.tid
                    )
                });
            }
        }
    }
    let census = census(proc, nice);
    ensure!(
        CONTROL_PLANE
            .iter()
            .all(|c| census.by.get(c).is_some_and(|(_, all)| *all > 0)),
        "no thread found of some control-plane component in /proc ({census:?}): the weighted series \
         needs kube-apiserver, etcd, kube-controller-manager and kube-scheduler on this machine"
    );
    Ok(census)
}

/// How many threads of each control-plane component are at `nice` now.
pub fn census(proc: &Path, nice: i32) -> Census {
    let mut by: BTreeMap<Component, (usize, usize)> = BTreeMap::new();
    for t in control_plane_threads(proc) {
        let Some(value) = std::fs::read_to_string(t.dir.join("stat"))
            .ok()
            .as_deref()
            .and_then(parse_nice)
        else {
            continue;
        };
        let e = by.entry(t.component).or_default();
        e.1 += 1;
        if value == nice {
            e.0 += 1;
        }
    }
    Census { by }
}

fn control_plane_threads(proc: &Path) -> Vec<cpu::Thread> {
    cpu::threads_of(proc, std::process::id())
        .into_iter()
        .filter(|t| CONTROL_PLANE.contains(&t.component))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nice_is_the_nineteenth_field_after_the_name() {
        let stat = "4242 (kube (api) server) S 1 4242 4242 0 -1 4194560 100 0 0 0 5 3 0 0 10 -10 12 0 \
                    123 456 789";
        assert_eq!(parse_nice(stat), Some(-10));
        assert_eq!(
            parse_nice("1 (init) S 1 1 1 0 -1 0 0 0 0 0 0 0 0 0 20 0 1"),
            Some(0)
        );
        assert_eq!(parse_nice("1 (init) S 1"), None);
        assert_eq!(parse_nice("no parenthesis"), None);
    }

    #[test]
    fn this_thread_reads_its_own_nice() {
        let stat = std::fs::read_to_string("/proc/thread-self/stat").expect("/proc on Linux");
        assert!(parse_nice(&stat).is_some(), "{stat}");
    }

    #[test]
    fn a_census_is_complete_only_with_every_component_all_at_the_value() {
        let mut c = Census::default();
        assert!(!c.complete());
        for comp in CONTROL_PLANE {
            c.by.insert(comp, (3, 3));
        }
        assert!(c.complete());
        assert_eq!(c.total(), (12, 12));
        c.by.insert(Component::Etcd, (2, 3));
        assert!(!c.complete());
    }
}
