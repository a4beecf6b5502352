//! Upstream's core (`crossplane core start`, built by [`testenv::peers::ensure_built`]) as local
//! processes: `core init` first ([`testenv::upstream_core::init`]), with upstream's own CRDs, then replicas run as if in a Pod
//! ([`testenv::peers::in_pod_command`]), which is how upstream's core learns its Lease namespace and
//! identity.

use std::path::Path;
use std::process::Command;

use testenv::peers::Peers;

/// `crossplane core start` of upstream's core at its defaults but webhooks off and package runtime
/// External (as ours), as if in a Pod of
/// `ns` on host `hostname`, its health probes on `health`.
pub fn start(
    peers: &Peers,
    kubeconfig: &Path,
    ns: &str,
    hostname: &str,
    dir: &Path,
    health: u16,
) -> anyhow::Result<Command> {
    let mut cmd = testenv::peers::in_pod_command(&peers.crossplane, ns, hostname);
    cmd.args([
        "core",
        "start",
        "--leader-election",
        "--enable-webhooks=false",
        "--package-runtime=External",
        "--namespace",
        ns,
    ])
    .arg("--xpkg-cache-dir")
    .arg(dir.join(format!("xpkg-{hostname}")))
    .arg("--tls-client-certs-dir")
    .arg(dir.join("tls-client"))
    .args(["--health-probe-port", &health.to_string()])
    .args(["--metrics-port", &testenv::free_port()?.to_string()])
    .args(["--webhook-port", &testenv::free_port()?.to_string()])
    .env("KUBECONFIG", kubeconfig)
    .env("POD_NAMESPACE", ns);
    Ok(cmd)
}
