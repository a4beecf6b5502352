//! A test bed with a node: the control plane of [`ControlPlane::start_with`] plus containerd (Debian's,
//! with runc and the CNI plugins), kube-scheduler and the kubelet, so that Deployments run as Pods from
//! images imported into the node's containerd. Nothing is pulled from any registry: the sandbox image
//! is imported like every other one.
//!
//! Everything lives under the test bed's directory: containerd's root, state and socket, the CNI
//! configuration, the kubelet's root and certificates, the Pods' logs. The network is the test bed's
//! own: a bridge with the node's address (the Pods' gateway), a host-local range on it, a route to the
//! `kubernetes` Service's IP only, and one DNAT rule that sends that IP to the apiserver on the node's
//! address. No Pod has a default route, so no traffic leaves the machine.
//!
//! Stopping removes every Pod sandbox through the CRI (so containers, their mounts and their network
//! namespaces go), then stops the kubelet and containerd, the control plane, and removes the bridge and
//! the DNAT rule. containerd runs under `harness supervise`, so that it exits with the test process even
//! when that one is killed.

use std::{
    net::{IpAddr, Ipv4Addr},
    path::{Path, PathBuf},
    process::Command,
    time::{Duration, Instant},
};

use k8s_openapi::api::core::v1::Node as NodeObject;
use kube::Api;
use sha2::{Digest, Sha256};

use crate::{
    Cluster, Component, ControlPlane, Error, Result,
    control_plane::{KUBERNETES_SERVICE_IP, Options},
    ports::free_port,
};

/// The node's name.
pub const NODE_NAME: &str = "testbed-node";
/// The name the sandbox image is imported under (`cargo xtask image --pause` packs it).
pub const PAUSE_IMAGE: &str = "docker.io/crossplane-rs/pause:0.1.0";
/// Where Debian's containernetworking-plugins are.
const CNI_BIN_DIR: &str = "/usr/lib/cni";
/// How long the node gets to register and turn Ready.
const READY_TIMEOUT: Duration = Duration::from_secs(180);
/// How long a node component gets to exit after SIGTERM.
const STOP_GRACE: Duration = Duration::from_secs(20);

/// The test bed's own network: a bridge whose address is the node's, and the Pods' range on it.
#[derive(Debug, Clone)]
pub struct NodeNetwork {
    /// The bridge's name.
    pub bridge: String,
    /// The node's address: the bridge's, the Pods' gateway.
    pub node_ip: Ipv4Addr,
    /// The Pods' range (a /24).
    pub subnet: String,
    created: bool,
}

impl NodeNetwork {
    /// The network of the test bed in `dir`: a bridge name and a 10.244.N.0/24 range derived from the
    /// directory, so that two test beds in two directories do not share one.
    pub fn for_dir(dir: &Path) -> NodeNetwork {
        let digest = Sha256::digest(dir.as_os_str().as_encoded_bytes());
        let n = 1 + digest[0] % 250;
        NodeNetwork {
            bridge: format!("cxrs{:02x}{:02x}", digest[1], digest[2]),
            node_ip: Ipv4Addr::new(10, 244, n, 1),
            subnet: format!("10.244.{n}.0/24"),
            created: false,
        }
    }

    /// Creates the bridge with the node's address. Fails if it exists (another test bed in the same
    /// directory still runs, or one was killed before it could clean up: `ip link del <bridge>`).
    pub fn create(&mut self) -> Result<()> {
        if Path::new("/sys/class/net").join(&self.bridge).exists() {
            return Err(Error::Unexpected(format!(
                "the bridge {} exists already: is another test bed with a node running in this \
                 directory? If not, remove it with `ip link del {}`",
                self.bridge, self.bridge
            )));
        }
        ip(&["link", "add", &self.bridge, "type", "bridge"])?;
        self.created = true;
        ip(&[
            "addr",
            "add",
            &format!("{}/24", self.node_ip),
            "dev",
            &self.bridge,
        ])?;
        ip(&["link", "set", &self.bridge, "up"])
    }

    /// Removes the bridge (and so its address and routes), if this value created it.
    pub fn remove(&mut self) -> Result<()> {
        if std::mem::take(&mut self.created) {
            ip(&["link", "del", &self.bridge])?;
        }
        Ok(())
    }
}

/// Runs `ip` with `args`.
fn ip(args: &[&str]) -> Result<()> {
    run("ip", args)
}

fn run(program: &str, args: &[&str]) -> Result<()> {
    let out = Command::new(program)
        .args(args)
        .output()
        .map_err(Error::io("running a network tool (iproute2, iptables)", program))?;
    if !out.status.success() {
        return Err(Error::Unexpected(format!(
            "`{program} {}` failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        )));
    }
    Ok(())
}

/// An iptables rule of the test bed, removed again by [`Rule::remove`] (or when dropped).
#[derive(Debug)]
struct Rule {
    table: &'static str,
    spec: Vec<String>,
    installed: bool,
}

impl Rule {
    /// The DNAT rule that sends the `kubernetes` Service's IP, from the bridge, to the apiserver.
    fn service(bridge: &str, node_ip: Ipv4Addr, apiserver_port: u16) -> Rule {
        let spec = [
            "PREROUTING",
            "-i",
            bridge,
            "-d",
            &format!("{KUBERNETES_SERVICE_IP}/32"),
            "-p",
            "tcp",
            "--dport",
            "443",
            "-j",
            "DNAT",
            "--to-destination",
            &format!("{node_ip}:{apiserver_port}"),
            "-m",
            "comment",
            "--comment",
            "crossplane-rs test bed",
        ];
        Rule::new("nat", &spec)
    }

    fn new(table: &'static str, spec: &[&str]) -> Rule {
        Rule {
            table,
            spec: spec.iter().map(|s| s.to_string()).collect(),
            installed: false,
        }
    }

    fn iptables(&self, op: &str) -> Result<()> {
        let mut args = vec!["-w", "-t", self.table, op];
        args.extend(self.spec.iter().map(String::as_str));
        run("iptables", &args)
    }

    fn install(&mut self, op: &str) -> Result<()> {
        self.iptables(op)?;
        self.installed = true;
        Ok(())
    }

    /// Removes the rule, if it is installed.
    fn remove(&mut self) -> Result<()> {
        if std::mem::take(&mut self.installed) {
            self.iptables("-D")?;
        }
        Ok(())
    }
}

impl Drop for Rule {
    fn drop(&mut self) {
        let _ = self.remove();
    }
}

/// What a Pod sends over TCP held back in a queue on its interface, in its network namespace, until
/// [`Hold::release`] lets it go in order: the requests it sends meanwhile reach the apiserver only then,
/// as a leader's do that were in flight when it was frozen or cut off. Only segments that carry data
/// (PSH) wait; acknowledgements, connection set-up and everything else pass, so that the Pod still
/// receives what the apiserver sends it (its watches) and keeps working until it is frozen. Nothing is
/// dropped, so TCP has nothing to retransmit. The queue is a token bucket (`tbf`; this kernel may lack
/// `netem`) at 8 bit/s behind an `htb` class that a `u32` filter on the PSH flag selects; its first
/// tokens are spent at once, and it is released by raising its rate, which keeps what is queued.
/// Removed when dropped.
#[derive(Debug)]
pub struct Hold {
    netns: String,
    installed: bool,
}

/// The queue's size: far more than a Pod sends in a minute of being frozen.
const HOLD_LIMIT: &str = "16mb";

impl Hold {
    /// Holds what the Pod sends whose container's process is `pid` (from [`Node::task_pid`]). `sink` is
    /// a TCP address the Pod reaches (the apiserver's), to which two writes spend the bucket's first
    /// tokens. The network namespace is the Pod sandbox's, so the hold outlives a restart of the
    /// container.
    pub fn install(pid: u32, sink: std::net::SocketAddrV4) -> Result<Hold> {
        let out = Command::new("ip")
            .args(["netns", "identify", &pid.to_string()])
            .output()
            .map_err(Error::io("running `ip netns identify`", "ip"))?;
        let netns = String::from_utf8_lossy(&out.stdout).trim().to_string();
        if netns.is_empty() {
            return Err(Error::Unexpected(format!(
                "process {pid} is in no named network namespace: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            )));
        }
        let mut hold = Hold {
            netns,
            installed: false,
        };
        hold.tc(&[
            "qdisc", "add", "dev", "eth0", "root", "handle", "1:", "htb", "default", "10",
        ])?;
        hold.installed = true;
        for class in ["1:10", "1:20"] {
            hold.tc(&[
                "class", "add", "dev", "eth0", "parent", "1:", "classid", class, "htb", "rate", "10gbit",
            ])?;
        }
        hold.tc(&[
            "qdisc", "add", "dev", "eth0", "parent", "1:20", "handle", "20:", "tbf", "rate", "8bit", "burst",
            "1600", "limit", HOLD_LIMIT,
        ])?;
        // TCP (protocol 6) with PSH (0x08) in the flags, byte 13 of a TCP header after a 20-byte IP header.
        hold.tc(&[
            "filter", "add", "dev", "eth0", "parent", "1:", "protocol", "ip", "prio", "1", "u32", "match",
            "ip", "protocol", "6", "0xff", "match", "u8", "0x08", "0x08", "at", "33", "flowid", "1:20",
        ])?;
        let spend = format!(
            // The peer may reset the connection after the first write: what is left is too little
            // for a request to slip through.
            "exec 3<>/dev/tcp/{}/{}; head -c 1400 /dev/zero >&3; head -c 1400 /dev/zero >&3 2>/dev/null; true",
            sink.ip(),
            sink.port()
        );
        run("ip", &["netns", "exec", &hold.netns, "bash", "-c", &spend])?;
        Ok(hold)
    }

    /// `tc -s qdisc show` of the queue: what it holds (backlog) and what it let go.
    pub fn stats(&self) -> Result<String> {
        let out = Command::new("tc")
            .args([
                "-s",
                "-n",
                &self.netns,
                "qdisc",
                "show",
                "dev",
                "eth0",
                "parent",
                "1:20",
            ])
            .output()
            .map_err(Error::io("running tc", "tc"))?;
        Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
    }

    /// Lets everything held go, in order, at once.
    pub fn release(&mut self) -> Result<()> {
        self.tc(&[
            "qdisc", "change", "dev", "eth0", "parent", "1:20", "handle", "20:", "tbf", "rate", "10gbit",
            "burst", "16mb", "limit", HOLD_LIMIT,
        ])
    }

    /// Removes the queue (what is still in it is dropped).
    pub fn remove(&mut self) -> Result<()> {
        if std::mem::take(&mut self.installed) {
            self.tc(&["qdisc", "del", "dev", "eth0", "root"])?;
        }
        Ok(())
    }

    fn tc(&self, args: &[&str]) -> Result<()> {
        let mut all = vec!["-n", self.netns.as_str()];
        all.extend(args);
        run("tc", &all)
    }
}

impl Drop for Hold {
    fn drop(&mut self) {
        let _ = self.remove();
    }
}

/// The node: containerd and the kubelet.
#[derive(Debug)]
pub struct Node {
    dir: PathBuf,
    harness: PathBuf,
    socket: PathBuf,
    containerd: Component,
    kubelet: Component,
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

    /// Removes every Pod sandbox through the CRI, then stops the kubelet and containerd.
    fn stop(&mut self) -> Result<()> {
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
            for c in [&mut self.node.containerd, &mut self.node.kubelet] {
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

    fn cni_config(&self) -> String {
        serde_json::json!({
            "cniVersion": "1.0.0",
            "name": "testbed",
            "plugins": [
                {
                    "type": "bridge",
                    "bridge": self.network.bridge,
                    "isGateway": true,
                    "ipMasq": false,
                    "hairpinMode": true,
                    "ipam": {
                        "type": "host-local",
                        "ranges": [[{
                            "subnet": self.network.subnet,
                            "gateway": self.network.node_ip.to_string(),
                        }]],
                        // Only the Service range: no default route, so nothing leaves the machine.
                        "routes": [{ "dst": "10.0.0.0/24" }],
                        "dataDir": self.node.dir.join("cni").join("ipam").display().to_string(),
                    },
                },
                { "type": "portmap", "capabilities": { "portMappings": true } },
            ],
        })
        .to_string()
    }

    fn containerd_config(&self) -> String {
        let d = &self.node.dir;
        let p = |sub: &str| d.join(sub).display().to_string();
        format!(
            r#"version = 2
root = "{root}"
state = "{state}"

[grpc]
  address = "{socket}"

[debug]
  address = ""

[metrics]
  address = ""

[plugins."io.containerd.internal.v1.opt"]
  path = "{opt}"

[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "{PAUSE_IMAGE}"
  # Root here may lack CAP_SYS_RESOURCE: without this, runc fails every sandbox.
  restrict_oom_score_adj = true
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "{CNI_BIN_DIR}"
    conf_dir = "{cni}"
    max_conf_num = 1
"#,
            root = p("containerd/root"),
            state = p("containerd/state"),
            socket = self.node.socket.display(),
            opt = p("opt"),
            cni = p("cni"),
        )
    }

    fn kubelet_config(&self) -> Result<String> {
        let d = &self.node.dir;
        Ok(serde_json::json!({
            "apiVersion": "kubelet.config.k8s.io/v1beta1",
            "kind": "KubeletConfiguration",
            // This machine may boot cgroup v1, and root has no systemd to delegate cgroups.
            "failCgroupV1": false,
            "cgroupDriver": "cgroupfs",
            "failSwapOn": false,
            "containerRuntimeEndpoint": self.node.endpoint(),
            "address": self.network.node_ip.to_string(),
            "port": free_port()?,
            "healthzBindAddress": "127.0.0.1",
            "healthzPort": free_port()?,
            "readOnlyPort": 0,
            // The apiserver reaches the kubelet (logs, exec, stats) on the test bed's own bridge.
            "authentication": { "anonymous": { "enabled": true }, "webhook": { "enabled": false } },
            "authorization": { "mode": "AlwaysAllow" },
            "podLogsDir": d.join("pod-logs").display().to_string(),
            "volumePluginDir": d.join("volume-plugins").display().to_string(),
            "resolvConf": "",
            // The imported images are never garbage-collected, and the kubelet evicts nothing on its
            // own: on a shared CI disk (seen with 11% of it free) it took the disk for ephemeral-storage
            // pressure and evicted the Pods. An empty map, not an absent one, turns the defaults off.
            "imageGCHighThresholdPercent": 100,
            "imageGCLowThresholdPercent": 99,
            "evictionHard": {},
            "serializeImagePulls": false,
            "nodeStatusUpdateFrequency": "2s",
            "syncFrequency": "10s",
        })
        .to_string())
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
