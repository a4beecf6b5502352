//! Helpers for the process tests: replicas of `configmap-counter`, their JSON logs, HTTP probes, a
//! loopback relay that can cut a replica off, and audit-log queries.
#![allow(dead_code, clippy::unwrap_used)]

use std::io::BufRead;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{Context, Result, anyhow, bail};
use jiff::Timestamp;
use serde_json::Value;
use testenv::process::{Output, Process};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::time::Instant;

pub const BIN: &str = env!("CARGO_BIN_EXE_configmap-counter");

/// Short timings so the tests run in seconds: margin 1 s.
pub const TIMINGS: [&str; 6] = [
    "--lease-duration",
    "3s",
    "--renew-deadline",
    "2s",
    "--retry-period",
    "500ms",
];

/// One log line as it arrived.
#[derive(Debug, Clone)]
pub struct Line {
    /// When the test read it.
    pub at: Instant,
    /// The JSON object, if the line was one.
    pub json: Option<Value>,
    /// The raw text.
    pub raw: String,
}

impl Line {
    pub fn message(&self) -> &str {
        self.json.as_ref().and_then(|j| j["msg"].as_str()).unwrap_or("")
    }

    pub fn field(&self, name: &str) -> &Value {
        self.json.as_ref().map_or(&Value::Null, |j| &j[name])
    }

    pub fn timestamp(&self) -> Option<Timestamp> {
        self.field("ts").as_str()?.parse().ok()
    }
}

/// How to start a replica.
#[derive(Debug, Clone)]
pub struct Opts {
    pub kubeconfig: PathBuf,
    pub lease_kubeconfig: Option<PathBuf>,
    pub namespace: String,
    pub lease: String,
    pub identity: String,
    pub election: bool,
    pub extra: Vec<String>,
    /// Environment variables set for the replica (after the test's own are removed).
    pub env: Vec<(String, String)>,
}

impl Opts {
    pub fn new(kubeconfig: &Path, namespace: &str, lease: &str, identity: &str) -> Self {
        Self {
            kubeconfig: kubeconfig.to_owned(),
            lease_kubeconfig: None,
            namespace: namespace.to_owned(),
            lease: lease.to_owned(),
            identity: identity.to_owned(),
            election: true,
            extra: Vec::new(),
            env: Vec::new(),
        }
    }

    pub fn arg(mut self, a: &str) -> Self {
        self.extra.push(a.to_owned());
        self
    }
}

/// A running `configmap-counter` process.
pub struct Replica {
    pub identity: String,
    process: Process,
    lines: Arc<Mutex<Vec<Line>>>,
    pub exit: Option<ExitStatus>,
}

impl Replica {
    pub fn spawn(opts: &Opts) -> Result<Replica> {
        let mut cmd = Command::new(BIN);
        cmd.env_remove("POD_NAME")
            .env_remove("POD_NAMESPACE")
            .env_remove("LEADER_ELECTION")
            .env_remove("WATCH_NAMESPACE")
            .env_remove("KUBECONFIG")
            .arg("--kubeconfig")
            .arg(&opts.kubeconfig)
            .args(["--namespace", &opts.namespace])
            .args(["--leader-election-namespace", &opts.namespace])
            .args(["--leader-election-id", &opts.lease])
            .args(["--leader-election-identity", &opts.identity])
            .args(["--log-format", "json", "--log-level"])
            .arg(std::env::var("MANAGER_TEST_LOG").unwrap_or_else(|_| "info,kube=warn".to_owned()))
            .args([
                "--metrics-bind-address",
                "127.0.0.1:0",
                "--health-probe-bind-address",
                "127.0.0.1:0",
            ])
            .args(["--resync-period", "200ms", "--graceful-shutdown-timeout", "10s"])
            .args(TIMINGS)
            .args(&opts.extra)
            .envs(opts.env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        if opts.election {
            cmd.arg("--leader-election");
        }
        if let Some(lk) = &opts.lease_kubeconfig {
            cmd.arg("--leader-election-kubeconfig").arg(lk);
        }
        let name = format!("configmap-counter {}", opts.identity);
        let mut process = Process::spawn(&name, cmd, Path::new(BIN), Output::AsConfigured)
            .with_context(|| format!("spawning {BIN}"))?;
        let stderr = process.take_stderr().ok_or_else(|| anyhow!("no stderr"))?;
        let lines: Arc<Mutex<Vec<Line>>> = Arc::default();
        let sink = lines.clone();
        let id = opts.identity.clone();
        std::thread::spawn(move || {
            for raw in std::io::BufReader::new(stderr).lines() {
                let Ok(raw) = raw else { break };
                if std::env::var_os("MANAGER_TEST_ECHO").is_some() {
                    eprintln!("[{id}] {raw}");
                }
                let json = serde_json::from_str(&raw).ok();
                sink.lock().unwrap().push(Line {
                    at: Instant::now(),
                    json,
                    raw,
                });
            }
        });
        Ok(Replica {
            identity: opts.identity.clone(),
            process,
            lines,
            exit: None,
        })
    }

    pub fn pid(&self) -> Option<i32> {
        i32::try_from(self.process.pid()).ok()
    }

    pub fn lines(&self) -> Vec<Line> {
        self.lines.lock().unwrap().clone()
    }

    /// Lines whose message contains `text`.
    pub fn find(&self, text: &str) -> Vec<Line> {
        self.lines()
            .into_iter()
            .filter(|l| l.message().contains(text) || l.raw.contains(text))
            .collect()
    }

    /// Waits until a line whose message contains `text` appears after the `skip` first such lines.
    pub async fn wait_for_nth(&self, text: &str, skip: usize, timeout: Duration) -> Result<Line> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(l) = self.find(text).into_iter().nth(skip) {
                return Ok(l);
            }
            if Instant::now() >= deadline {
                bail!(
                    "{}: no log line #{} containing {text:?} within {timeout:?}; log:\n{}",
                    self.identity,
                    skip + 1,
                    self.dump()
                );
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    pub async fn wait_for(&self, text: &str, timeout: Duration) -> Result<Line> {
        self.wait_for_nth(text, 0, timeout).await
    }

    pub fn dump(&self) -> String {
        self.lines()
            .iter()
            .map(|l| l.raw.as_str())
            .collect::<Vec<_>>()
            .join("\n")
    }

    /// The address serving `endpoints` (`Probes` or `Metrics`), from the log.
    pub async fn admin_addr(&self, endpoints: &str) -> Result<String> {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            for l in self.find("admin endpoint bound") {
                if l.field("endpoints").as_str() == Some(endpoints) {
                    return Ok(l.field("addr").as_str().unwrap_or_default().to_owned());
                }
            }
            if Instant::now() >= deadline {
                bail!("{}: no admin address in the log:\n{}", self.identity, self.dump());
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    pub fn signal(&mut self, sig: nix::sys::signal::Signal) -> Result<()> {
        Ok(self.process.signal(sig)?)
    }

    pub async fn wait_exit(&mut self, timeout: Duration) -> Result<ExitStatus> {
        if let Some(s) = self.exit {
            return Ok(s);
        }
        let status = self.process.wait_exit_async(timeout).await.map_err(|_| {
            anyhow!(
                "{} did not exit within {timeout:?}; log:\n{}",
                self.identity,
                self.dump()
            )
        })?;
        self.exit = Some(status);
        Ok(status)
    }

    pub fn try_exit(&mut self) -> Option<ExitStatus> {
        if self.exit.is_none() {
            self.exit = self.process.try_exit();
        }
        self.exit
    }

    /// Whether this replica currently leads, judging by its own log.
    pub fn leads(&self) -> bool {
        let mut leading = false;
        for l in self.lines() {
            match l.message() {
                m if m.contains("leader work started") => leading = true,
                m if m.contains("leader work stopped") => leading = false,
                _ => {}
            }
        }
        leading
    }

    /// The wall-clock intervals in which this replica's leader work ran: from "leader work started" to
    /// "leader work stopped" (open-ended while it still runs).
    pub fn work_intervals(&self) -> Vec<(Timestamp, Option<Timestamp>)> {
        let mut out: Vec<(Timestamp, Option<Timestamp>)> = Vec::new();
        for l in self.lines() {
            let Some(ts) = l.timestamp() else { continue };
            if l.message().contains("leader work started") {
                out.push((ts, None));
            } else if l.message().contains("leader work stopped")
                && let Some(last) = out.last_mut()
                && last.1.is_none()
            {
                last.1 = Some(ts);
            }
        }
        out
    }
}

/// Waits until exactly one of `replicas` leads (by its log) and returns its index.
pub async fn wait_for_leader(replicas: &[&Replica], timeout: Duration) -> Result<usize> {
    let deadline = Instant::now() + timeout;
    loop {
        let leading: Vec<usize> = (0..replicas.len()).filter(|&i| replicas[i].leads()).collect();
        if leading.len() == 1 {
            return Ok(leading[0]);
        }
        if leading.len() > 1 {
            bail!("more than one replica leads: {leading:?}");
        }
        if Instant::now() >= deadline {
            bail!("no leader within {timeout:?}");
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// `GET http://addr/path`: status and body.
pub async fn http_get(addr: &str, path: &str) -> Result<(u16, String)> {
    let mut s = TcpStream::connect(addr).await?;
    s.write_all(format!("GET {path} HTTP/1.1\r\nHost: test\r\nConnection: close\r\n\r\n").as_bytes())
        .await?;
    let mut buf = String::new();
    s.read_to_string(&mut buf).await?;
    let code = buf
        .split(' ')
        .nth(1)
        .and_then(|c| c.parse().ok())
        .ok_or_else(|| anyhow!("bad response {buf:?}"))?;
    let body = buf
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_owned())
        .unwrap_or_default();
    Ok((code, body))
}

/// The value of a sample line `name{labels} value` in Prometheus text, matching all `labels`.
pub fn metric(text: &str, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
    text.lines().filter(|l| !l.starts_with('#')).find_map(|l| {
        let (series, value) = l.rsplit_once(' ')?;
        let (n, rest) = series.split_once('{').unwrap_or((series, ""));
        if n != name || !labels.iter().all(|(k, v)| rest.contains(&format!("{k}=\"{v}\""))) {
            return None;
        }
        value.parse().ok()
    })
}

/// A loopback TCP relay to the apiserver that can be cut (every connection dropped, new ones
/// black-holed) and healed.
pub struct Relay {
    pub addr: std::net::SocketAddr,
    cut: watch::Sender<bool>,
}

impl Relay {
    pub async fn start(upstream: String) -> Result<Relay> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let (cut, cut_rx) = watch::channel(false);
        tokio::spawn(async move {
            while let Ok((mut down, _)) = listener.accept().await {
                let mut cut_rx = cut_rx.clone();
                let upstream = upstream.clone();
                tokio::spawn(async move {
                    if *cut_rx.borrow_and_update() {
                        // Black hole: hold the connection until healed, then drop it.
                        let _ = cut_rx.wait_for(|c| !*c).await;
                        return;
                    }
                    let Ok(mut up) = TcpStream::connect(&upstream).await else {
                        return;
                    };
                    tokio::select! {
                        _ = tokio::io::copy_bidirectional(&mut down, &mut up) => {}
                        _ = cut_rx.wait_for(|c| *c) => {}
                    }
                });
            }
        });
        Ok(Relay { addr, cut })
    }

    pub fn cut(&self) {
        self.cut.send_replace(true);
    }

    pub fn heal(&self) {
        self.cut.send_replace(false);
    }
}

/// A copy of `kubeconfig` whose server is `https://<relay>`.
pub fn relayed_kubeconfig(kubeconfig: &Path, server: &str, relay: &Relay, out: &Path) -> Result<PathBuf> {
    let text = std::fs::read_to_string(kubeconfig)?;
    let relayed = format!("https://{}", relay.addr);
    if !text.contains(server) {
        bail!("the kubeconfig does not name {server}");
    }
    std::fs::write(out, text.replace(server, &relayed))?;
    Ok(out.to_owned())
}

/// The identity in a user agent `configmap-counter/<version> (<identity>)`.
pub fn identity_of(user_agent: &str) -> Option<&str> {
    let rest = user_agent.strip_prefix("configmap-counter/")?;
    let (_, id) = rest.split_once(" (")?;
    id.strip_suffix(')')
}

/// Completed writes to the ConfigMap `name` in `namespace`, in the audit log, with the writer's identity.
pub fn audited_writes(
    cluster: &testenv::Cluster,
    namespace: &str,
    name: &str,
) -> Result<Vec<(String, Timestamp, i32)>> {
    let read = cluster.audit().read()?;
    Ok(read
        .events
        .into_iter()
        .filter(|e| e.is_write() && e.resource == "configmaps" && e.namespace == namespace && e.name == name)
        .map(|e| {
            (
                identity_of(&e.user_agent).unwrap_or(&e.user_agent).to_owned(),
                e.received,
                e.code,
            )
        })
        .collect())
}

/// Reads the ConfigMap `name`'s data field `key`.
pub async fn config_map_field(
    client: &kube::Client,
    namespace: &str,
    name: &str,
    key: &str,
) -> Result<Option<String>> {
    let api: kube::Api<k8s_openapi::api::core::v1::ConfigMap> =
        kube::Api::namespaced(client.clone(), namespace);
    Ok(api
        .get_opt(name)
        .await?
        .and_then(|cm| cm.data)
        .and_then(|d| d.get(key).cloned()))
}

/// Polls until the ConfigMap `name`'s `key` satisfies `pred`.
pub async fn wait_config_map(
    client: &kube::Client,
    namespace: &str,
    name: &str,
    key: &str,
    timeout: Duration,
    pred: impl Fn(&str) -> bool,
) -> Result<String> {
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(v) = config_map_field(client, namespace, name, key).await?
            && pred(&v)
        {
            return Ok(v);
        }
        if Instant::now() >= deadline {
            bail!("{namespace}/{name} {key} did not reach the expected value within {timeout:?}");
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
