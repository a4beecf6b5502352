//! A test bed with a node: the control plane of [`ControlPlane::start_with`] plus containerd (Debian's,
//! with runc and the CNI plugins), kube-scheduler and the kubelet, so that Deployments run as Pods from
//! images imported into the node's containerd, or pulled from the test bed's own OCI registry (on the
//! node's address, over plain HTTP: containerd's `certs.d/<host>/hosts.toml` says so). Nothing is
//! pulled from any other registry: the sandbox image is imported like every other one.
//!
//! Everything lives under the test bed's directory: containerd's root, state and socket, the CNI
//! configuration, the kubelet's root and certificates, the Pods' logs. The network is the test bed's
//! own: a bridge with the node's address (the Pods' gateway), a host-local range on it, a route to the
//! `kubernetes` Service's IP only, and one DNAT rule that sends that IP to the apiserver on the node's
//! address. No Pod has a default route, so no traffic leaves the machine. The cluster's DNS is the
//! harness's (`harness dns`, on port 53 of the node's address, which the kubelet gives every Pod as its
//! nameserver): it answers for Services in [`CLUSTER_DOMAIN`] only, a headless one with its ready
//! endpoints, and refuses every other name.
//!
//! Stopping removes every Pod sandbox through the CRI (so containers, their mounts and their network
//! namespaces go), then stops the kubelet, containerd and the DNS, the control plane, and removes the bridge and
//! the DNAT rule. containerd runs under `harness supervise`, so that it exits with the test process even
//! when that one is killed.

mod config;
mod hold;
mod network;
mod runtime;

use std::{
    net::IpAddr,
    path::{Path, PathBuf},
    time::{Duration, Instant},
};

use k8s_openapi::api::core::v1::Node as NodeObject;
use kube::Api;

pub use hold::Hold;
pub use network::NodeNetwork;
use network::Rule;
pub use runtime::Node;

use crate::{Cluster, Component, ControlPlane, Error, Result, control_plane::Options};

/// The node's name.
pub const NODE_NAME: &str = "testbed-node";
/// The name the sandbox image is imported under (`cargo xtask image --pause` packs it).
pub const PAUSE_IMAGE: &str = "docker.io/crossplane-rs/pause:0.1.0";
/// Where Debian's containernetworking-plugins are.
const CNI_BIN_DIR: &str = "/usr/lib/cni";
/// The cluster's DNS domain: a Pod resolves `<service>.<namespace>` through its search path.
pub const CLUSTER_DOMAIN: &str = "cluster.local";
/// How long the node gets to register and turn Ready.
const READY_TIMEOUT: Duration = Duration::from_secs(180);
/// How long a node component gets to exit after SIGTERM.
const STOP_GRACE: Duration = Duration::from_secs(20);

/// A control plane with a node, its network and its Service rule. Dropping it stops everything.
#[derive(Debug)]
pub struct NodeTestBed {
    control_plane: ControlPlane,
    node: Node,
    network: NodeNetwork,
    rule: Rule,
}

impl NodeTestBed {
    /// Starts a test bed with a node in `dir`, with the harness binary `harness`, and imports the
    /// sandbox image `pause_archive` (from `cargo xtask image --pause`). Returns once the node is Ready.
    pub async fn start(dir: &Path, harness: &Path, pause_archive: &Path) -> Result<NodeTestBed> {
        check_prerequisites()?;
        std::fs::create_dir_all(dir).map_err(Error::io("creating the test bed directory", dir))?;
        let dir = dir
            .canonicalize()
            .map_err(Error::io("resolving the test bed directory", dir))?;
        let mut network = NodeNetwork::for_dir(&dir);
        network.create()?;
        let options = Options {
            node_ip: Some(IpAddr::V4(network.node_ip)),
        };
        let control_plane = match ControlPlane::start_with(&dir, harness, false, &options).await {
            Ok(cp) => cp,
            Err(e) => {
                let _ = network.remove();
                return Err(e);
            }
        };
        let rule = Rule::service(
            &network.bridge,
            network.node_ip,
            control_plane.state().apiserver_port,
        );
        let node_dir = dir.join("node");
        let node = Node {
            socket: node_dir.join("containerd.sock"),
            containerd: Component::new("containerd", harness, Vec::new(), node_dir.join("containerd.log")),
            kubelet: Component::new("kubelet", harness, Vec::new(), node_dir.join("kubelet.log")),
            dns: Component::new("dns", harness, Vec::new(), node_dir.join("dns.log")),
            dir: node_dir,
            harness: harness.to_path_buf(),
        };
        let mut bed = NodeTestBed {
            control_plane,
            node,
            network,
            rule,
        };
        let booted = async {
            bed.rule.install("-A")?;
            bed.boot_node(pause_archive).await
        }
        .await;
        match booted {
            Ok(()) => Ok(bed),
            Err(e) => {
                let _ = bed.stop();
                Err(e)
            }
        }
    }

    /// The cluster.
    pub fn cluster(&self) -> &Cluster {
        self.control_plane.cluster()
    }

    /// The control plane.
    pub fn control_plane(&mut self) -> &mut ControlPlane {
        &mut self.control_plane
    }

    /// The node.
    pub fn node(&mut self) -> &mut Node {
        &mut self.node
    }

    /// The network.
    pub fn network(&self) -> &NodeNetwork {
        &self.network
    }

    /// Stops the node, then the control plane, and removes the network.
    pub fn stop(&mut self) -> Result<()> {
        let node = self.node.stop();
        let cp = self.control_plane.stop();
        let rule = self.rule.remove();
        let net = self.network.remove();
        node.and(cp).and(rule).and(net)
    }

    async fn boot_node(&mut self, pause_archive: &Path) -> Result<()> {
        let dir = self.node.dir.clone();
        for sub in [
            "containerd",
            "cni",
            "kubelet",
            "pod-logs",
            "volume-plugins",
            "opt",
            "certs.d",
        ] {
            let d = dir.join(sub);
            std::fs::create_dir_all(&d).map_err(Error::io("creating a node directory", &d))?;
        }
        let write = |name: &str, text: String| {
            let path = dir.join(name);
            std::fs::write(&path, text).map_err(Error::io("writing a node configuration", &path))?;
            Ok::<PathBuf, Error>(path)
        };
        write("cni/10-testbed.conflist", self.cni_config())?;
        if let Some(registry) = &self.control_plane.cluster().registry {
            let host = &registry.host;
            let hosts = dir.join("certs.d").join(host);
            std::fs::create_dir_all(&hosts).map_err(Error::io("creating a node directory", &hosts))?;
            write(
                &format!("certs.d/{host}/hosts.toml"),
                format!(
                    "# The test bed's registry serves plain HTTP on the node's address.\n\
                     server = \"http://{host}\"\n\n[host.\"http://{host}\"]\n  capabilities = [\"pull\", \"resolve\"]\n"
                ),
            )?;
        }
        let containerd_config = write("containerd.toml", self.containerd_config())?;
        let kubelet_config = write("kubelet.json", self.kubelet_config()?)?;

        let containerd = &mut self.node.containerd;
        *containerd = Component::new(
            "containerd",
            &self.node.harness,
            vec![
                "supervise".into(),
                "--".into(),
                "containerd".into(),
                "--config".into(),
                containerd_config.display().to_string(),
            ],
            dir.join("containerd.log"),
        );
        containerd.start()?;
        let start = Instant::now();
        while !self.node.socket.exists() {
            if !self.node.containerd.is_running() {
                return Err(exited(&mut self.node.containerd));
            }
            if start.elapsed() > Duration::from_secs(60) {
                return Err(Error::Timeout {
                    what: "containerd's socket".into(),
                    seconds: 60,
                });
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        self.node.import(pause_archive)?;

        let cluster = self.control_plane.cluster().clone();
        self.node.dns = Component::new(
            "dns",
            &self.node.harness,
            vec![
                "dns".into(),
                format!("--address={}:53", self.network.node_ip),
                format!("--kubeconfig={}", cluster.admin_kubeconfig.display()),
                format!("--domain={CLUSTER_DOMAIN}"),
            ],
            dir.join("dns.log"),
        );
        self.node.dns.start()?;
        self.node.kubelet = Component::new(
            "kubelet",
            &self.node.harness,
            vec![
                "kubelet".into(),
                format!("--config={}", kubelet_config.display()),
                format!("--kubeconfig={}", cluster.admin_kubeconfig.display()),
                format!("--root-dir={}", dir.join("kubelet").display()),
                format!("--cert-dir={}", dir.join("kubelet").join("pki").display()),
                format!("--hostname-override={NODE_NAME}"),
                format!("--node-ip={}", self.network.node_ip),
                "--v=0".into(),
            ],
            dir.join("kubelet.log"),
        );
        self.node.kubelet.start()?;
        self.wait_ready().await
    }

    /// Waits until the node is registered and Ready.
    async fn wait_ready(&mut self) -> Result<()> {
        let client = self.control_plane.cluster().client().await?;
        let nodes: Api<NodeObject> = Api::all(client);
        let start = Instant::now();
        loop {
            let node = nodes.get_opt(NODE_NAME).await.ok().flatten();
            let ready = node
                .as_ref()
                .and_then(|n| n.status.as_ref()?.conditions.as_ref())
                .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"));
            if ready {
                return Ok(());
            }
            for c in [
                &mut self.node.containerd,
                &mut self.node.kubelet,
                &mut self.node.dns,
            ] {
                if !c.is_running() {
                    return Err(exited(c));
                }
            }
            if start.elapsed() > READY_TIMEOUT {
                return Err(Error::Component {
                    component: "kubelet".into(),
                    message: format!(
                        "node {NODE_NAME} not Ready after {}s; last lines of the kubelet's log:\n{}",
                        READY_TIMEOUT.as_secs(),
                        log_tail(self.node.kubelet.log(), 20)
                    ),
                    log: self.node.kubelet.log().to_path_buf(),
                });
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    }
}

impl Drop for NodeTestBed {
    fn drop(&mut self) {
        let _ = self.stop();
    }
}

/// Fails with one message naming the Debian packages when a node's tools are missing.
pub fn check_prerequisites() -> Result<()> {
    let on_path = |name: &str| {
        std::env::var_os("PATH")
            .is_some_and(|paths| std::env::split_paths(&paths).any(|dir| dir.join(name).is_file()))
    };
    let mut missing = Vec::new();
    for (tool, package) in [
        ("containerd", "containerd"),
        ("ctr", "containerd"),
        ("runc", "runc"),
        ("ip", "iproute2"),
        ("iptables", "iptables"),
    ] {
        if !on_path(tool) && !Path::new("/usr/sbin").join(tool).is_file() {
            missing.push(package);
        }
    }
    if !Path::new(CNI_BIN_DIR).join("bridge").is_file() {
        missing.push("containernetworking-plugins");
    }
    missing.dedup();
    if missing.is_empty() {
        Ok(())
    } else {
        Err(Error::Unexpected(format!(
            "a node needs {}; `cargo xtask test` installs them (apt-get install {})",
            missing.join(", "),
            missing.join(" ")
        )))
    }
}

fn exited(c: &mut Component) -> Error {
    Error::Component {
        component: c.name().to_string(),
        message: format!(
            "exited during start-up; last lines of its log:\n{}",
            log_tail(c.log(), 20)
        ),
        log: c.log().to_path_buf(),
    }
}

fn log_tail(path: &Path, lines: usize) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}
