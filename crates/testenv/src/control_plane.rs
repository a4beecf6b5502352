//! Starting, stopping and disrupting a control plane: etcd, kube-apiserver and a kube-controller-manager
//! limited to the garbage-collector and namespace controllers, each its own process. A control plane for
//! a node ([`Options::node_ip`]) also runs kube-scheduler and the controllers a Deployment needs. Beside
//! them runs the test bed's OCI registry ([`crate::Registry`]), on loopback, or on the node's address
//! when there is a node.

use std::{
    net::{IpAddr, TcpStream},
    path::{Path, PathBuf},
    time::{Duration, Instant},
};

use k8s_openapi::api::core::v1::Namespace;
use kube::Api;
use serde::{Deserialize, Serialize};

use crate::{
    Authenticated, Cluster, Component, Error, Registry, Result,
    certs::Pki,
    kubeconfig::{self, Credentials},
    ports::free_port,
};

/// How long a component gets to start before the start counts as failed.
const START_TIMEOUT: Duration = Duration::from_secs(180);
/// The audit log's size limit in megabytes (1 TB). kube-apiserver rotates its audit log at this size,
/// and `0` does not turn rotation off (it means lumberjack's default, 100 MB); a run never comes near
/// this, and [`AuditLog`](crate::AuditLog) reads rotated files too.
const AUDIT_LOG_MAX_MB: u64 = 1_000_000;
/// How long a component gets to exit after SIGTERM before it is killed.
const STOP_GRACE: Duration = Duration::from_secs(15);

/// The audit policy: the metadata of every request at every stage: when it was received (so that a
/// request the apiserver never answered, cut off by a restart, is still seen), when a long-running
/// request such as a watch started, and when it completed. Besides:
/// - writes to Leases and ConfigMaps record the request body, so that a checker can tell which holder
///   each lock write named (acquire, renew or release), and the response, whose `resourceVersion` places
///   the write in etcd's order of commits;
/// - the writes of ServiceAccounts (the replicas run as Pods with their tokens) record the response for
///   the same reason, but not those to Secrets (their data stays out of the log), Events or CRDs (large,
///   and never judged).
///
/// Managed fields are left out of recorded bodies.
const AUDIT_POLICY: &str = r#"{"apiVersion":"audit.k8s.io/v1","kind":"Policy","omitStages":[],"omitManagedFields":true,"rules":[
{"level":"RequestResponse","verbs":["create","update","patch"],"resources":[{"group":"coordination.k8s.io","resources":["leases"]},{"group":"","resources":["configmaps"]}]},
{"level":"Metadata","resources":[{"group":"","resources":["secrets","events"]},{"group":"events.k8s.io","resources":["events"]},{"group":"apiextensions.k8s.io","resources":["customresourcedefinitions"]}]},
{"level":"RequestResponse","verbs":["create","update","patch","delete"],"userGroups":["system:serviceaccounts"]},
{"level":"Metadata"}]}"#;

/// The controllers every test bed runs: Crossplane's RBAC relies on ClusterRole aggregation, and the
/// package runtime on Deployments that roll out ReplicaSets and Pods and report `Available` (without a
/// node the Pods stay Pending; a test can still mark them Ready).
const CONTROLLERS: &str = "garbage-collector-controller,namespace-controller,clusterrole-aggregation-controller,\
deployment-controller,replicaset-controller";

/// The controllers a node's Deployments need besides [`CONTROLLERS`]: PodDisruptionBudgets, the
/// `kube-root-ca.crt` ConfigMap that projected tokens carry, each namespace's default ServiceAccount, the
/// node's taints, the removal of orphaned Pods, and the EndpointSlices that the cluster's DNS answers a
/// headless Service's name with.
const NODE_CONTROLLERS: &str = "disruption-controller,endpointslice-controller,\
root-ca-certificate-publisher-controller,serviceaccount-controller,node-lifecycle-controller,\
pod-garbage-collector-controller,taint-eviction-controller";

/// The ClusterIP of the `kubernetes` Service (the first address of the service range), which Pods
/// reach the apiserver through.
pub const KUBERNETES_SERVICE_IP: &str = "10.0.0.1";

/// How a control plane is started.
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// For a test bed with a node: the node's address, which the apiserver then listens on (instead of
    /// 127.0.0.1) so that Pods reach it. It also enables the ServiceAccount admission plugin (projected
    /// tokens), kube-scheduler and the controllers a Deployment needs.
    pub node_ip: Option<IpAddr>,
}

/// What is written to `testbed.json` in the test bed's directory, so that tests and later `xtask`
/// commands find a running control plane.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct State {
    /// How to reach the cluster.
    #[serde(flatten)]
    pub cluster: Cluster,
    /// etcd's client port.
    pub etcd_port: u16,
    /// etcd's peer port.
    pub etcd_peer_port: u16,
    /// The apiserver's secure port.
    pub apiserver_port: u16,
    /// PIDs of the running components, by name.
    pub pids: Vec<(String, u32)>,
    /// The node's address, for a test bed with a node.
    #[serde(default)]
    pub node_ip: Option<IpAddr>,
    /// The OCI registry's port (on 127.0.0.1, or on the node's address with a node).
    #[serde(default)]
    pub registry_port: u16,
    /// The port of the same registry behind Basic authentication.
    #[serde(default)]
    pub auth_registry_port: u16,
}

impl State {
    /// The state file's path in `dir`.
    pub fn path(dir: &Path) -> PathBuf {
        dir.join("testbed.json")
    }

    /// Reads the state file in `dir`.
    pub fn load(dir: &Path) -> Result<State> {
        let path = State::path(dir);
        let text = std::fs::read_to_string(&path).map_err(Error::io(
            "reading the test bed's state (is the control plane up? `cargo xtask control-plane up`)",
            &path,
        ))?;
        serde_json::from_str(&text).map_err(|source| Error::Parse {
            context: "parsing the test bed's state",
            path,
            source,
        })
    }

    fn save(&self) -> Result<()> {
        let path = State::path(&self.cluster.dir);
        let text = serde_json::to_string_pretty(self).map_err(|source| Error::Parse {
            context: "serializing the test bed's state",
            path: path.clone(),
            source,
        })?;
        std::fs::write(&path, text).map_err(Error::io("writing the test bed's state", &path))
    }
}

/// A running control plane whose processes this value owns. Dropping it kills them, unless it was
/// started detached.
#[derive(Debug)]
pub struct ControlPlane {
    state: State,
    etcd: Component,
    apiserver: Component,
    controller_manager: Component,
    scheduler: Option<Component>,
    registry: Component,
}

impl ControlPlane {
    /// Starts a control plane in `dir` with the harness binary `harness`. With `detached`, its processes
    /// outlive this one (for `cargo xtask control-plane up`); otherwise they exit with it.
    pub async fn start(dir: &Path, harness: &Path, detached: bool) -> Result<ControlPlane> {
        ControlPlane::start_with(dir, harness, detached, &Options::default()).await
    }

    /// [`ControlPlane::start`] with `options`.
    pub async fn start_with(
        dir: &Path,
        harness: &Path,
        detached: bool,
        options: &Options,
    ) -> Result<ControlPlane> {
        std::fs::create_dir_all(dir).map_err(Error::io("creating the test bed directory", dir))?;
        let dir = dir
            .canonicalize()
            .map_err(Error::io("resolving the test bed directory", dir))?;
        let extra_sans: Vec<String> = match options.node_ip {
            Some(ip) => vec![ip.to_string(), KUBERNETES_SERVICE_IP.to_string()],
            None => Vec::new(),
        };
        let pki = Pki::generate(&dir.join("pki"), &extra_sans)?;
        let (etcd_port, etcd_peer_port, apiserver_port) = (free_port()?, free_port()?, free_port()?);
        let (registry_port, auth_registry_port) = (free_port()?, free_port()?);
        let registry_auth = registry_credentials(&dir)?;
        let bind: IpAddr = options.node_ip.unwrap_or(IpAddr::from([127, 0, 0, 1]));
        let server = match bind {
            IpAddr::V6(ip) => format!("https://[{ip}]:{apiserver_port}"),
            IpAddr::V4(ip) => format!("https://{ip}:{apiserver_port}"),
        };
        let admin_kubeconfig = dir.join("admin.kubeconfig");
        kubeconfig::write(
            &admin_kubeconfig,
            &server,
            &pki.serving_ca,
            "admin",
            Credentials::Cert {
                cert: &pki.admin_cert,
                key: &pki.admin_key,
            },
        )?;
        let audit_policy = dir.join("audit-policy.json");
        std::fs::write(&audit_policy, AUDIT_POLICY)
            .map_err(Error::io("writing the audit policy", &audit_policy))?;
        let layout = Layout {
            dir: &dir,
            pki: &pki,
            bind,
            server: &server,
            admin_kubeconfig: &admin_kubeconfig,
            node_ip: options.node_ip,
            etcd_port,
            etcd_peer_port,
            apiserver_port,
            registry_port,
            auth_registry_port,
            registry_credentials: &registry_auth.1,
        };
        let (etcd_args, apiserver_args, kcm_args) =
            (layout.etcd(), layout.apiserver(), layout.controller_manager());
        let (registry_args, scheduler_args) = (layout.registry(), layout.scheduler());
        let registry = Registry {
            host: std::net::SocketAddr::new(bind, registry_port).to_string(),
            authenticated: Some(Authenticated {
                host: std::net::SocketAddr::new(bind, auth_registry_port).to_string(),
                username: registry_auth.0.0,
                password: registry_auth.0.1,
            }),
        };
        let audit_log = dir.join("audit.log");
        let component = |name: &str, args: Vec<String>| {
            let mut c = Component::new(name, harness, args, dir.join(format!("{name}.log")));
            if detached {
                c.detach_from_parent();
            }
            c
        };
        let cluster = Cluster {
            dir: dir.clone(),
            harness: harness.to_path_buf(),
            server,
            ca: pki.serving_ca.clone(),
            admin_kubeconfig,
            audit_log,
            registry: Some(registry),
        };
        let mut cp = ControlPlane {
            state: State {
                cluster,
                etcd_port,
                etcd_peer_port,
                apiserver_port,
                pids: Vec::new(),
                node_ip: options.node_ip,
                registry_port,
                auth_registry_port,
            },
            etcd: component("etcd", etcd_args),
            apiserver: component("kube-apiserver", apiserver_args),
            controller_manager: component("kube-controller-manager", kcm_args),
            scheduler: options
                .node_ip
                .map(|_| component("kube-scheduler", scheduler_args)),
            registry: component("registry", registry_args),
        };
        match cp.boot().await {
            Ok(()) => Ok(cp),
            Err(e) => {
                // A failed start leaves nothing behind, detached or not.
                let _ = cp.stop();
                Err(e)
            }
        }
    }

    /// Starts the registry and etcd, then the apiserver, then the controller manager, each once the one
    /// before is ready.
    async fn boot(&mut self) -> Result<()> {
        self.registry.start()?;
        self.etcd.start()?;
        self.wait_etcd()?;
        self.wait_registry()?;
        self.apiserver.start()?;
        self.wait_apiserver().await?;
        self.controller_manager.start()?;
        if let Some(scheduler) = self.scheduler.as_mut() {
            scheduler.start()?;
        }
        self.save()
    }

    /// Starts a private control plane for a test that disrupts it (pausing etcd, restarting the
    /// apiserver), with the harness of the shared test bed. It is torn down when dropped.
    pub async fn private() -> Result<ControlPlane> {
        let shared = Cluster::shared()?;
        let dir = shared
            .dir
            .join("private")
            .join(uuid::Uuid::new_v4().simple().to_string());
        ControlPlane::start(&dir, &shared.harness, false).await
    }

    /// The running control plane recorded in `dir`, adopted by PID (for `cargo xtask control-plane down`).
    pub fn adopt(dir: &Path) -> Result<ControlPlane> {
        let state = State::load(dir)?;
        let pid = |name: &str| {
            state
                .pids
                .iter()
                .find(|(n, _)| n == name)
                .map(|(_, p)| *p)
                .unwrap_or(0)
        };
        let harness = state.cluster.harness.clone();
        let c = |name: &str| Component::adopt(name, &harness, dir.join(format!("{name}.log")), pid(name));
        let scheduler = (pid("kube-scheduler") != 0).then(|| c("kube-scheduler"));
        Ok(ControlPlane {
            registry: c("registry"),
            etcd: c("etcd"),
            apiserver: c("kube-apiserver"),
            controller_manager: c("kube-controller-manager"),
            scheduler,
            state,
        })
    }

    /// How to reach it.
    pub fn cluster(&self) -> &Cluster {
        &self.state.cluster
    }

    /// Its recorded state.
    pub fn state(&self) -> &State {
        &self.state
    }

    /// The etcd process.
    pub fn etcd(&mut self) -> &mut Component {
        &mut self.etcd
    }

    /// The kube-apiserver process.
    pub fn apiserver(&mut self) -> &mut Component {
        &mut self.apiserver
    }

    /// The kube-controller-manager process.
    pub fn controller_manager(&mut self) -> &mut Component {
        &mut self.controller_manager
    }

    /// The OCI registry process.
    pub fn registry_process(&mut self) -> &mut Component {
        &mut self.registry
    }

    /// Restarts the apiserver with the same flags, port and certificates, and waits until it is ready.
    pub async fn restart_apiserver(&mut self) -> Result<()> {
        self.apiserver.restart(STOP_GRACE)?;
        self.wait_apiserver().await?;
        self.save()
    }

    /// Whether each component is running, by name.
    pub fn status(&mut self) -> Vec<(String, Option<u32>, bool)> {
        [&mut self.etcd, &mut self.apiserver, &mut self.controller_manager]
            .into_iter()
            .chain(self.scheduler.as_mut())
            .chain(std::iter::once(&mut self.registry))
            .map(|c| {
                let running = c.is_running();
                (c.name().to_string(), c.pid(), running)
            })
            .collect()
    }

    /// Stops every component: the scheduler and controller manager, then the apiserver, then etcd, then
    /// the registry.
    pub fn stop(&mut self) -> Result<()> {
        if let Some(scheduler) = self.scheduler.as_mut() {
            scheduler.stop(STOP_GRACE)?;
        }
        self.controller_manager.stop(STOP_GRACE)?;
        self.apiserver.stop(STOP_GRACE)?;
        self.etcd.stop(STOP_GRACE)?;
        self.registry.stop(STOP_GRACE)
    }

    fn save(&mut self) -> Result<()> {
        self.state.pids = [&self.etcd, &self.apiserver, &self.controller_manager]
            .into_iter()
            .chain(self.scheduler.as_ref())
            .chain(std::iter::once(&self.registry))
            .filter_map(|c| c.pid().map(|p| (c.name().to_string(), p)))
            .collect();
        self.state.save()
    }

    fn wait_etcd(&mut self) -> Result<()> {
        let start = Instant::now();
        let addr = format!("127.0.0.1:{}", self.state.etcd_port);
        loop {
            if TcpStream::connect(&addr).is_ok() {
                return Ok(());
            }
            self.check_alive(true)?;
            if start.elapsed() > START_TIMEOUT {
                return Err(timeout("etcd to listen", START_TIMEOUT));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Waits until the registry answers `GET /v2/` with 200.
    fn wait_registry(&mut self) -> Result<()> {
        let start = Instant::now();
        let addr = match &self.state.cluster.registry {
            Some(r) => r.host.clone(),
            None => format!("127.0.0.1:{}", self.state.registry_port),
        };
        loop {
            if registry_answers(&addr) {
                return Ok(());
            }
            if !self.registry.is_running() {
                let c = &self.registry;
                return Err(Error::Component {
                    component: c.name().to_string(),
                    message: format!(
                        "exited during start-up; last lines of its log:\n{}",
                        log_tail(c.log(), 15)
                    ),
                    log: c.log().to_path_buf(),
                });
            }
            if start.elapsed() > START_TIMEOUT {
                return Err(timeout("the OCI registry to answer GET /v2/", START_TIMEOUT));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Waits for `/readyz` and for the `default` namespace.
    async fn wait_apiserver(&mut self) -> Result<()> {
        let start = Instant::now();
        let client = self.cluster().client().await?;
        loop {
            let ready = client
                .request_text(
                    http::Request::get("/readyz")
                        .body(Vec::new())
                        .map_err(|e| Error::Unexpected(format!("building a /readyz request: {e}")))?,
                )
                .await
                .is_ok_and(|body| body.trim() == "ok");
            if ready {
                let namespaces: Api<Namespace> = Api::all(client.clone());
                if matches!(namespaces.get_opt("default").await, Ok(Some(_))) {
                    return Ok(());
                }
            }
            self.check_alive(false)?;
            if start.elapsed() > START_TIMEOUT {
                return Err(timeout(
                    "kube-apiserver to be ready with namespace default",
                    START_TIMEOUT,
                ));
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    fn check_alive(&mut self, etcd_only: bool) -> Result<()> {
        let mut list = vec![&mut self.etcd];
        if !etcd_only {
            list.push(&mut self.apiserver);
        }
        for c in list {
            if !c.is_running() {
                let tail = log_tail(c.log(), 15);
                return Err(Error::Component {
                    component: c.name().to_string(),
                    message: format!("exited during start-up; last lines of its log:\n{tail}"),
                    log: c.log().to_path_buf(),
                });
            }
        }
        Ok(())
    }
}

/// Picks the authenticated registry's user and a random password and writes `user:password` to a file
/// only this user may read, for `harness registry --auth-credentials` (so the password is on no command
/// line). Returns them and the file.
fn registry_credentials(dir: &Path) -> Result<((String, String), PathBuf)> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let (user, password) = (
        "crossplane-rs-tests".to_string(),
        uuid::Uuid::new_v4().simple().to_string(),
    );
    let path = dir.join("registry-credentials");
    std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(&path)
        .and_then(|mut f| f.write_all(format!("{user}:{password}\n").as_bytes()))
        .map_err(Error::io("writing the registry's credentials", &path))?;
    Ok(((user, password), path))
}

/// Whether an OCI registry at `addr` answers `GET /v2/` with 200 (the distribution spec's version check).
fn registry_answers(addr: &str) -> bool {
    use std::io::{Read, Write};
    let Ok(mut s) = TcpStream::connect(addr) else {
        return false;
    };
    let _ = s.set_read_timeout(Some(Duration::from_secs(2)));
    let request = format!("GET /v2/ HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n");
    if s.write_all(request.as_bytes()).is_err() {
        return false;
    }
    let mut head = [0u8; 12];
    s.read_exact(&mut head).is_ok() && head.starts_with(b"HTTP/1.1 200")
}

fn timeout(what: &str, after: Duration) -> Error {
    Error::Timeout {
        what: what.to_string(),
        seconds: after.as_secs(),
    }
}

fn log_tail(path: &Path, lines: usize) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

/// Where the components of one control plane live and listen, from which their arguments follow.
struct Layout<'a> {
    dir: &'a Path,
    pki: &'a Pki,
    bind: IpAddr,
    server: &'a str,
    admin_kubeconfig: &'a Path,
    node_ip: Option<IpAddr>,
    etcd_port: u16,
    etcd_peer_port: u16,
    apiserver_port: u16,
    registry_port: u16,
    auth_registry_port: u16,
    /// The file holding the authenticated registry's `user:password`.
    registry_credentials: &'a Path,
}

fn arg(k: &str, v: &dyn std::fmt::Display) -> String {
    format!("--{k}={v}")
}

impl Layout<'_> {
    fn etcd(&self) -> Vec<String> {
        vec![
            "etcd".to_string(),
            arg("data-dir", &self.dir.join("etcd").display()),
            arg("client-port", &self.etcd_port),
            arg("peer-port", &self.etcd_peer_port),
        ]
    }

    fn apiserver(&self) -> Vec<String> {
        let pki = self.pki;
        let mut args = vec![
            "kube-apiserver".to_string(),
            arg("etcd-servers", &format!("http://127.0.0.1:{}", self.etcd_port)),
            arg("bind-address", &self.bind),
            arg("advertise-address", &self.bind),
            arg("secure-port", &self.apiserver_port),
            arg("tls-cert-file", &pki.serving_cert.display()),
            arg("tls-private-key-file", &pki.serving_key.display()),
            arg("client-ca-file", &pki.client_ca.display()),
            arg("service-account-issuer", &self.server),
            arg("service-account-key-file", &pki.sa_pub.display()),
            arg("service-account-signing-key-file", &pki.sa_key.display()),
            arg("authorization-mode", &"RBAC"),
            arg("service-cluster-ip-range", &"10.0.0.0/24"),
            arg("endpoint-reconciler-type", &"none"),
            arg("allow-privileged", &"true"),
            arg("audit-policy-file", &self.dir.join("audit-policy.json").display()),
            arg("audit-log-path", &self.dir.join("audit.log").display()),
            arg("audit-log-format", &"json"),
            arg("audit-log-maxsize", &AUDIT_LOG_MAX_MB),
            arg("audit-log-mode", &"blocking"),
            arg("v", &0),
        ];
        // Without a node nothing mounts a token, and the plugin's wait for each namespace's default
        // ServiceAccount would only slow the suites; with one, Pods need it for their projected tokens.
        match self.node_ip {
            None => args.push(arg("disable-admission-plugins", &"ServiceAccount")),
            // The kubelet is reached (logs, exec, stats) at the node's address, never by a DNS lookup.
            Some(_) => args.push(arg("kubelet-preferred-address-types", &"InternalIP")),
        }
        args
    }

    fn controller_manager(&self) -> Vec<String> {
        let controllers = match self.node_ip {
            Some(_) => format!("{CONTROLLERS},{NODE_CONTROLLERS}"),
            None => CONTROLLERS.to_string(),
        };
        let mut args = vec![
            "kube-controller-manager".to_string(),
            arg("kubeconfig", &self.admin_kubeconfig.display()),
            arg("controllers", &controllers),
            arg("leader-elect", &"false"),
            arg("secure-port", &0),
            arg("use-service-account-credentials", &"false"),
            arg("v", &0),
        ];
        if self.node_ip.is_some() {
            args.push(arg("root-ca-file", &self.pki.serving_ca.display()));
        }
        args
    }

    /// With a node, the registry listens on the node's address: containerd pulls from it in the host's
    /// network namespace, and Pods (the core's package manager) reach it as their gateway.
    fn registry(&self) -> Vec<String> {
        vec![
            "registry".to_string(),
            arg(
                "address",
                &std::net::SocketAddr::new(self.bind, self.registry_port),
            ),
            arg("disk", &self.dir.join("registry").display()),
            arg(
                "auth-address",
                &std::net::SocketAddr::new(self.bind, self.auth_registry_port),
            ),
            arg("auth-credentials", &self.registry_credentials.display()),
        ]
    }

    fn scheduler(&self) -> Vec<String> {
        let kubeconfig = self.admin_kubeconfig.display();
        vec![
            "kube-scheduler".to_string(),
            arg("kubeconfig", &kubeconfig),
            arg("authentication-kubeconfig", &kubeconfig),
            arg("authorization-kubeconfig", &kubeconfig),
            arg("leader-elect", &"false"),
            arg("secure-port", &0),
            arg("v", &0),
        ]
    }
}
