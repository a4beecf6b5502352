//! The control plane's CPU weight, for a second series of deletions that separates the machine's share
//! of a handover from the electors'.
//!
//! In a cluster, kube-apiserver, etcd, kube-controller-manager and kube-scheduler run on control-plane
//! machines of their own. The node test bed runs them on the same 2 cores as the kubelet, containerd and
//! every Pod, so the burst a Pod's deletion sets off on the node delays the apiserver's answers too.
//!
//! The kernel's scheduler shares the CPUs between the groups of its `cpu` controller (cgroup v1 here) by
//! their `cpu.shares`: the kubelet puts every Pod under `kubepods` (1 024 per core), and in the root
//! group, where the control plane, the kubelet, containerd, runc and the bench run, it weighs each
//! session as one (autogroups, 1 024). [`raise`] moves every control-plane process into a group of its
//! own with [`SHARES`], so that it gets a CPU first whenever it wants one, the nearest this machine
//! comes to machines of its own; [`lower`] moves them back. The replicas, the kubelet and containerd
//! keep their weights.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use anyhow::{Context, ensure};

use super::cpu::{self, Component};

/// The components that a cluster runs on machines of their own.
pub const CONTROL_PLANE: [Component; 4] = [
    Component::Apiserver,
    Component::Etcd,
    Component::ControllerManager,
    Component::Scheduler,
];

/// The control plane's group, under the `cpu` controller's root.
pub const GROUP: &str = "crossplane-rs-control-plane";

/// The group's `cpu.shares`: 10 times the Pods' `kubepods` on 2 cores (2 048), 20 times a session's.
pub const SHARES: u64 = 20_480;

/// Where cgroup v1 mounts the `cpu` controller.
const CPU_ROOT: &str = "/sys/fs/cgroup/cpu";

/// How many threads of each control-plane component are in the group, of how many there are.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Census {
    /// Per component: (threads in the group, threads).
    pub by: BTreeMap<Component, (usize, usize)>,
}

impl Census {
    /// Threads in the group, and threads, over the whole control plane.
    pub fn total(&self) -> (usize, usize) {
        self.by.values().fold((0, 0), |(a, b), (x, y)| (a + x, b + y))
    }

    /// Whether every thread of every control-plane component is in the group, and each has one.
    pub fn complete(&self) -> bool {
        CONTROL_PLANE
            .iter()
            .all(|c| self.by.get(c).is_some_and(|(at, all)| *all > 0 && at == all))
    }
}

/// The path of a thread's group under the `cpu` controller, from its `/proc/.../cgroup`: the line
/// whose controllers (`1:cpu:/path`, or `cpu,cpuacct` mounted together) include `cpu`.
pub fn parse_cpu_group(text: &str) -> Option<&str> {
    text.lines().find_map(|line| {
        let mut fields = line.splitn(3, ':');
        let (_, controllers, path) = (fields.next()?, fields.next()?, fields.next()?);
        controllers.split(',').any(|c| c == "cpu").then_some(path)
    })
}

/// The `cpu.shares` of the kubelet's group of Pods, `kubepods`; `None` without one.
pub fn pods_shares() -> Option<u64> {
    let text = std::fs::read_to_string(Path::new(CPU_ROOT).join("kubepods").join("cpu.shares")).ok()?;
    text.trim().parse().ok()
}

fn group_dir() -> PathBuf {
    Path::new(CPU_ROOT).join(GROUP)
}

/// Moves every control-plane process into [`GROUP`] with [`SHARES`], then counts, thread by thread,
/// which are in it. A process that ended meanwhile is left out; a machine without the controller, a
/// refusal, or a control plane with a component missing is an error: the series would not measure what
/// it says.
pub fn raise() -> anyhow::Result<Census> {
    ensure!(
        Path::new(CPU_ROOT).join("cpu.shares").exists(),
        "no cgroup v1 `cpu` controller at {CPU_ROOT}: the weighted series moves the control plane into a \
         group of its own there; run it on a machine with cgroup v1, as root"
    );
    let dir = group_dir();
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {} (as root)", dir.display()))?;
    let shares = dir.join("cpu.shares");
    std::fs::write(&shares, SHARES.to_string()).with_context(|| format!("writing {}", shares.display()))?;
    move_to(&dir)?;
    let census = census();
    ensure!(
        census.complete(),
        "not every thread of the control plane is in {} after the move ({census:?}): the weighted series \
         needs kube-apiserver, etcd, kube-controller-manager and kube-scheduler on this machine",
        dir.display()
    );
    Ok(census)
}

/// Moves the control plane back to the controller's root group and removes [`GROUP`].
pub fn lower() -> anyhow::Result<()> {
    move_to(Path::new(CPU_ROOT))?;
    let dir = group_dir();
    if dir.exists() {
        std::fs::remove_dir(&dir).with_context(|| format!("removing {}", dir.display()))?;
    }
    Ok(())
}

/// Writes every control-plane process into `dir`'s `cgroup.procs`, which moves all its threads.
fn move_to(dir: &Path) -> anyhow::Result<()> {
    let procs = dir.join("cgroup.procs");
    let pids: BTreeSet<u32> = control_plane_threads().iter().map(|t| t.pid).collect();
    for pid in pids {
        match std::fs::write(&procs, pid.to_string()) {
            Ok(()) => {}
            // The process ended between the listing and the move.
            Err(e) if e.raw_os_error() == Some(nix::errno::Errno::ESRCH as i32) => {}
            Err(e) => {
                return Err(e).with_context(|| format!("moving process {pid} into {}", procs.display()));
            }
        }
    }
    Ok(())
}

/// How many threads of each control-plane component are in [`GROUP`] now.
pub fn census() -> Census {
    let want = format!("/{GROUP}");
    let mut by: BTreeMap<Component, (usize, usize)> = BTreeMap::new();
    for t in control_plane_threads() {
        let Ok(text) = std::fs::read_to_string(t.dir.join("cgroup")) else {
            continue;
        };
        let e = by.entry(t.component).or_default();
        e.1 += 1;
        if parse_cpu_group(&text) == Some(want.as_str()) {
            e.0 += 1;
        }
    }
    Census { by }
}

fn control_plane_threads() -> Vec<cpu::Thread> {
    cpu::threads_of(Path::new("/proc"), std::process::id())
        .into_iter()
        .filter(|t| CONTROL_PLANE.contains(&t.component))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cpu_group_is_the_line_naming_the_cpu_controller() {
        let v1 = "9:name=systemd:/\n2:cpuacct:/\n1:cpu:/crossplane-rs-control-plane\n0::/\n";
        assert_eq!(parse_cpu_group(v1), Some("/crossplane-rs-control-plane"));
        let together = "4:cpu,cpuacct:/kubepods/burstable/pod1\n";
        assert_eq!(parse_cpu_group(together), Some("/kubepods/burstable/pod1"));
        assert_eq!(parse_cpu_group("2:cpuacct:/\n0::/\n"), None);
        assert_eq!(parse_cpu_group("garbage"), None);
    }

    #[test]
    fn a_census_is_complete_only_with_every_component_all_in_the_group() {
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
