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
        let stale = remove_stale_rules(&self.bridge)?;
        if stale > 0 {
            eprintln!(
                "[node] removed {stale} iptables rule(s) for bridge {} that a test bed killed before it \
                 could clean up left behind",
                self.bridge
            );
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

/// Removes the test bed's rules for `bridge` from the nat table's PREROUTING chain, and returns how
/// many there were. Called only when the bridge does not exist, so no running test bed owns them: they
/// were left by one that was killed, and would send the Pods of this one to its dead apiserver.
fn remove_stale_rules(bridge: &str) -> Result<usize> {
    let listing = output("iptables", &["-w", "-t", "nat", "-S", "PREROUTING"])?;
    let stale = stale_rules(&listing, bridge);
    for rule in &stale {
        let mut args = vec!["-w", "-t", "nat", "-D"];
        args.extend(rule.iter().map(String::as_str));
        run("iptables", &args)?;
    }
    Ok(stale.len())
}

/// The rules of `iptables -S` output `listing` that the test bed installed for `bridge`, as the
/// arguments that follow `-A`.
fn stale_rules(listing: &str, bridge: &str) -> Vec<Vec<String>> {
    listing
        .lines()
        .filter(|l| l.contains("crossplane-rs test bed"))
        .filter_map(|l| shlex::split(l.strip_prefix("-A ")?))
        .filter(|words| words.windows(2).any(|w| w[0] == "-i" && w[1] == bridge))
        .collect()
}

/// Runs `ip` with `args`.
pub(super) fn ip(args: &[&str]) -> Result<()> {
    run("ip", args)
}

pub(super) fn run(program: &str, args: &[&str]) -> Result<()> {
    output(program, args).map(drop)
}

/// Runs `program` with `args` and returns what it wrote to stdout.
fn output(program: &str, args: &[&str]) -> Result<String> {
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
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_this_bridges_test_bed_rules_are_stale() {
        let listing = "-P PREROUTING ACCEPT\n\
            -A PREROUTING -d 10.0.0.1/32 -i cxrse555 -p tcp -m tcp --dport 443 -m comment --comment \"crossplane-rs test bed\" -j DNAT --to-destination 10.244.109.1:42983\n\
            -A PREROUTING -d 10.0.0.1/32 -i cxrs0001 -p tcp -m tcp --dport 443 -m comment --comment \"crossplane-rs test bed\" -j DNAT --to-destination 10.244.3.1:1\n\
            -A PREROUTING -i cxrse555 -j ACCEPT\n";
        let stale = stale_rules(listing, "cxrse555");
        assert_eq!(stale.len(), 1);
        assert_eq!(stale[0][0], "PREROUTING");
        assert!(
            stale[0].contains(&"crossplane-rs test bed".to_string()),
            "{:?}",
            stale[0]
        );
        assert_eq!(stale[0].last().map(String::as_str), Some("10.244.109.1:42983"));
        assert!(stale_rules(listing, "cxrs9999").is_empty());
    }
}
