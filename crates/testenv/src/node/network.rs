//! The test bed's own network: a bridge with the node's address, the Pods' range on it, and the
//! iptables rule that sends the `kubernetes` Service's IP to the apiserver.

use std::{net::Ipv4Addr, path::Path, process::Command};

use sha2::{Digest, Sha256};

use crate::{Error, Result, control_plane::KUBERNETES_SERVICE_IP};

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
pub(super) fn ip(args: &[&str]) -> Result<()> {
    run("ip", args)
}

pub(super) fn run(program: &str, args: &[&str]) -> Result<()> {
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
pub(super) struct Rule {
    table: &'static str,
    spec: Vec<String>,
    installed: bool,
}

impl Rule {
    /// The DNAT rule that sends the `kubernetes` Service's IP, from the bridge, to the apiserver.
    pub(super) fn service(bridge: &str, node_ip: Ipv4Addr, apiserver_port: u16) -> Rule {
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

    pub(super) fn install(&mut self, op: &str) -> Result<()> {
        self.iptables(op)?;
        self.installed = true;
        Ok(())
    }

    /// Removes the rule, if it is installed.
    pub(super) fn remove(&mut self) -> Result<()> {
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
