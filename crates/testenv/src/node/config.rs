//! The node's configuration files: the CNI network, containerd's and the kubelet's.

use super::{CLUSTER_DOMAIN, CNI_BIN_DIR, NodeTestBed, PAUSE_IMAGE};
use crate::{Result, ports::free_port};

impl NodeTestBed {
    pub(super) fn cni_config(&self) -> String {
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

    pub(super) fn containerd_config(&self) -> String {
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
  [plugins."io.containerd.grpc.v1.cri".registry]
    config_path = "{certs}"
"#,
            root = p("containerd/root"),
            state = p("containerd/state"),
            socket = self.node.socket.display(),
            opt = p("opt"),
            cni = p("cni"),
            certs = p("certs.d"),
        )
    }

    pub(super) fn kubelet_config(&self) -> Result<String> {
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
            // Pods resolve Services through the harness's DNS on the node's address.
            "clusterDNS": [self.network.node_ip.to_string()],
            "clusterDomain": CLUSTER_DOMAIN,
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
