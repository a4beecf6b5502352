//! The `process_*` series of client_golang's process collector that the `prometheus` crate's one lacks:
//! `process_virtual_memory_max_bytes` (the soft limit of the address space, from `/proc/self/limits`)
//! and `process_network_{receive,transmit}_bytes_total` (`IpExt: InOctets/OutOctets` of
//! `/proc/self/net/netstat`, i.e. the process's network namespace, as client_golang reads them). Linux
//! only; a file that cannot be read or parsed leaves its series out of that scrape.

use prometheus::core::{Collector, Desc, Describer};
use prometheus::proto::{Counter, Gauge, Metric, MetricFamily, MetricType};

/// What procfs (Go) reports for `unlimited`: `u64::MAX`.
const UNLIMITED: u64 = u64::MAX;

/// The soft limit on the address space in a `/proc/<pid>/limits` text.
pub fn address_space_limit(limits: &str) -> Option<u64> {
    let line = limits.lines().find_map(|l| l.strip_prefix("Max address space"))?;
    match line.split_whitespace().next()? {
        "unlimited" => Some(UNLIMITED),
        v => v.parse().ok(),
    }
}

/// `(InOctets, OutOctets)` of the `IpExt:` lines of a `/proc/<pid>/net/netstat` text.
pub fn ip_octets(netstat: &str) -> Option<(u64, u64)> {
    let mut lines = netstat.lines().filter_map(|l| l.strip_prefix("IpExt:"));
    let (names, values) = (lines.next()?, lines.next()?);
    let mut received = None;
    let mut sent = None;
    for (name, value) in names.split_whitespace().zip(values.split_whitespace()) {
        match name {
            "InOctets" => received = value.parse().ok(),
            "OutOctets" => sent = value.parse().ok(),
            _ => {}
        }
    }
    Some((received?, sent?))
}

/// The collector of the three series (see the module docs).
pub struct ProcessExtras {
    descs: Vec<Desc>,
}

const MAX_VSIZE: (&str, &str) = (
    "process_virtual_memory_max_bytes",
    "Maximum amount of virtual memory available in bytes.",
);
const RECEIVED: (&str, &str) = (
    "process_network_receive_bytes_total",
    "Number of bytes received by the process over the network.",
);
const SENT: (&str, &str) = (
    "process_network_transmit_bytes_total",
    "Number of bytes sent by the process over the network.",
);

impl ProcessExtras {
    /// The collector for this process.
    pub fn new() -> Result<Self, prometheus::Error> {
        let descs = [MAX_VSIZE, RECEIVED, SENT]
            .into_iter()
            .map(|(name, help)| prometheus::Opts::new(name, help).describe())
            .collect::<Result<_, _>>()?;
        Ok(Self { descs })
    }

    /// The families for the given file contents (`None`: not readable).
    fn families(limits: Option<&str>, netstat: Option<&str>) -> Vec<MetricFamily> {
        let mut out = Vec::new();
        if let Some(max) = limits.and_then(address_space_limit) {
            out.push(family(MAX_VSIZE, MetricType::GAUGE, max as f64));
        }
        if let Some((received, sent)) = netstat.and_then(ip_octets) {
            out.push(family(RECEIVED, MetricType::COUNTER, received as f64));
            out.push(family(SENT, MetricType::COUNTER, sent as f64));
        }
        out
    }
}

fn family((name, help): (&str, &str), kind: MetricType, value: f64) -> MetricFamily {
    let mut m = Metric::default();
    if kind == MetricType::COUNTER {
        let mut c = Counter::default();
        c.set_value(value);
        m.set_counter(c);
    } else {
        let mut g = Gauge::default();
        g.set_value(value);
        m.set_gauge(g);
    }
    let mut f = MetricFamily::default();
    f.set_name(name.to_owned());
    f.set_help(help.to_owned());
    f.set_field_type(kind);
    f.mut_metric().push(m);
    f
}

impl Collector for ProcessExtras {
    fn desc(&self) -> Vec<&Desc> {
        self.descs.iter().collect()
    }

    fn collect(&self) -> Vec<MetricFamily> {
        let limits = std::fs::read_to_string("/proc/self/limits").ok();
        let netstat = std::fs::read_to_string("/proc/self/net/netstat").ok();
        Self::families(limits.as_deref(), netstat.as_deref())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LIMITS: &str = "Limit                     Soft Limit           Hard Limit           Units     \n\
        Max open files            1048576              1048576              files     \n\
        Max address space         unlimited            unlimited            bytes     \n";

    const NETSTAT: &str = "TcpExt: SyncookiesSent SyncookiesRecv\nTcpExt: 0 0\n\
        IpExt: InNoRoutes InTruncatedPkts InOctets OutOctets InMcastOctets\n\
        IpExt: 0 0 6313777582 5721875772 0\n";

    #[test]
    fn parses_limits_and_netstat() {
        assert_eq!(address_space_limit(LIMITS), Some(u64::MAX));
        let limited = LIMITS.replace("unlimited            unlimited", "4096                 8192");
        assert_eq!(address_space_limit(&limited), Some(4096));
        assert_eq!(address_space_limit("Max open files 1 1 files"), None);
        assert_eq!(ip_octets(NETSTAT), Some((6_313_777_582, 5_721_875_772)));
        assert_eq!(ip_octets("IpExt: InOctets\n"), None);
        assert_eq!(ip_octets("IpExt: InOctets OutOctets\nIpExt: 1 x\n"), None);
    }

    #[test]
    fn renders_client_golangs_names() {
        let registry = prometheus::Registry::new();
        registry
            .register(Box::new(ProcessExtras::new().expect("descs")))
            .expect("register");
        let families = ProcessExtras::families(Some(LIMITS), Some(NETSTAT));
        let text = prometheus::TextEncoder::new()
            .encode_to_string(&families)
            .expect("encode");
        assert!(
            text.contains("process_virtual_memory_max_bytes 18446744073709552000"),
            "{text}"
        );
        assert!(
            text.contains("# TYPE process_network_receive_bytes_total counter"),
            "{text}"
        );
        assert!(
            text.contains("process_network_transmit_bytes_total 5721875772"),
            "{text}"
        );
        assert!(ProcessExtras::families(None, None).is_empty());
        #[cfg(target_os = "linux")]
        {
            let live = prometheus::TextEncoder::new()
                .encode_to_string(&registry.gather())
                .expect("encode");
            assert!(live.contains("process_virtual_memory_max_bytes"), "{live}");
        }
    }
}
