//! A Pod's outgoing data held back in a queue, for the faults that freeze or cut off a leader.

use std::process::Command;

use super::network::run;
use crate::{Error, Result};

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
