//! The node's processes: containerd, the kubelet and the cluster's DNS, and what runs through
//! containerd's CLI.

use std::{
    path::{Path, PathBuf},
    process::Command,
};

use super::{STOP_GRACE, network::run};
use crate::{Component, Error, Result};

/// The node: containerd, the kubelet, and the cluster's DNS that the kubelet points its Pods at.
#[derive(Debug)]
pub struct Node {
    pub(super) dir: PathBuf,
    pub(super) harness: PathBuf,
    pub(super) socket: PathBuf,
    pub(super) containerd: Component,
    pub(super) kubelet: Component,
    pub(super) dns: Component,
}

impl Node {
    /// The CRI endpoint of the node's containerd.
    pub fn endpoint(&self) -> String {
        format!("unix://{}", self.socket.display())
    }

    /// The node's directory (containerd, kubelet, CNI configuration, Pod logs).
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The containerd process.
    pub fn containerd(&mut self) -> &mut Component {
        &mut self.containerd
    }

    /// The kubelet process.
    pub fn kubelet(&mut self) -> &mut Component {
        &mut self.kubelet
    }

    /// Imports the OCI archive `archive` into the node's containerd, under the name in its index.
    pub fn import(&self, archive: &Path) -> Result<()> {
        let out = Command::new("ctr")
            .arg("--address")
            .arg(&self.socket)
            .args(["--namespace", "k8s.io", "images", "import"])
            .arg(archive)
            .output()
            .map_err(Error::io(
                "running `ctr images import` (Debian package containerd)",
                "ctr",
            ))?;
        if !out.status.success() {
            return Err(Error::Unexpected(format!(
                "`ctr images import {}` failed: {}",
                archive.display(),
                String::from_utf8_lossy(&out.stderr).trim()
            )));
        }
        Ok(())
    }

    /// Runs `ctr --namespace k8s.io <args>` against the node's containerd (the namespace the CRI uses),
    /// e.g. `tasks kill --signal SIGKILL <container>` or `tasks pause <container>` (the cgroup freezer),
    /// for faults under the kubelet's feet.
    pub fn ctr(&self, args: &[&str]) -> Result<String> {
        let out = Command::new("ctr")
            .arg("--address")
            .arg(&self.socket)
            .args(["--namespace", "k8s.io"])
            .args(args)
            .output()
            .map_err(Error::io("running ctr (Debian package containerd)", "ctr"))?;
        if !out.status.success() {
            return Err(Error::Unexpected(format!(
                "`ctr {}` failed: {}",
                args.join(" "),
                String::from_utf8_lossy(&out.stderr).trim()
            )));
        }
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    }

    /// The host PID of the running task of container `id`.
    pub fn task_pid(&self, id: &str) -> Result<u32> {
        let list = self.ctr(&["tasks", "ls"])?;
        list.lines()
            .filter_map(|l| {
                let mut fields = l.split_whitespace();
                (fields.next() == Some(id)).then(|| fields.next()?.parse::<u32>().ok())?
            })
            .next()
            .ok_or_else(|| Error::Unexpected(format!("no running task of container {id}:\n{list}")))
    }

    /// The cluster's DNS (`harness dns`), on port 53 of the node's address.
    pub fn dns(&mut self) -> &mut Component {
        &mut self.dns
    }

    /// Removes every Pod sandbox through the CRI, then stops the kubelet and containerd, then the DNS.
    pub(super) fn stop(&mut self) -> Result<()> {
        self.kubelet.stop(STOP_GRACE)?;
        let mut result = Ok(());
        if self.containerd.is_running() {
            let log = self.dir.join("cri-cleanup.log");
            let out = Command::new(&self.harness)
                .args(["cri-cleanup", "--endpoint", &self.endpoint()])
                .output()
                .map_err(Error::io("running `harness cri-cleanup`", &self.harness))?;
            let _ = std::fs::write(&log, &out.stderr);
            if !out.status.success() {
                result = Err(Error::Component {
                    component: "containerd".into(),
                    message: format!(
                        "removing the Pod sandboxes failed: {}",
                        String::from_utf8_lossy(&out.stderr).trim()
                    ),
                    log,
                });
            }
        }
        self.containerd.stop(STOP_GRACE)?;
        self.dns.stop(STOP_GRACE)?;
        result.and(unmount_under(&self.dir))
    }
}

/// Unmounts everything mounted under `dir` (the kubelet bind-mounts its root directory onto itself,
/// and mounts each Pod's volumes), deepest first.
fn unmount_under(dir: &Path) -> Result<()> {
    let mountinfo = std::fs::read_to_string("/proc/self/mountinfo")
        .map_err(Error::io("reading the mount table", "/proc/self/mountinfo"))?;
    let prefix = dir.display().to_string();
    // The fifth field is the mount point, with spaces and the like escaped as octal.
    let mut points: Vec<&str> = mountinfo
        .lines()
        .filter_map(|l| l.split(' ').nth(4))
        .filter(|p| *p == prefix || p.starts_with(&format!("{prefix}/")))
        .collect();
    points.sort_by_key(|p| std::cmp::Reverse(p.len()));
    points.dedup();
    for point in points {
        let status = Command::new("umount")
            .arg(point)
            .status()
            .map_err(Error::io("running umount", point))?;
        if !status.success() {
            run("umount", &["--lazy", point])?;
        }
    }
    Ok(())
}
