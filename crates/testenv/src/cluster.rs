//! A handle on a running test control plane, for tests: clients, namespaces, users and the audit log.

use std::path::{Path, PathBuf};

use k8s_openapi::api::{
    authentication::v1::{BoundObjectReference, TokenRequest, TokenRequestSpec},
    core::v1::{Namespace, Pod, ServiceAccount},
};
use kube::{
    Api, Client, Config,
    api::{ObjectMeta, PostParams},
    config::{KubeConfigOptions, Kubeconfig},
};
use serde::{Deserialize, Serialize};

use crate::{
    Authenticated, ENV_TESTBED, Error, Registry, Result,
    audit::AuditLog,
    kubeconfig::{self, Credentials},
};

/// Where a running control plane is and how to reach it. Cheap to clone; creates a fresh kube client
/// per call, because a kube client belongs to the tokio runtime that made it and every `#[tokio::test]`
/// has its own.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Cluster {
    /// The test bed's directory.
    pub dir: PathBuf,
    /// The Go harness binary (also the client-go `lease-candidate`).
    pub harness: PathBuf,
    /// The apiserver's URL, `https://127.0.0.1:<port>`.
    pub server: String,
    /// The CA that signed the apiserver's serving certificate.
    pub ca: PathBuf,
    /// A kubeconfig for the admin user (group `system:masters`).
    pub admin_kubeconfig: PathBuf,
    /// The apiserver's audit log.
    pub audit_log: PathBuf,
    /// The OCI registry beside the control plane (absent in the state of a test bed started before
    /// it had one).
    #[serde(default)]
    pub registry: Option<Registry>,
}

impl Cluster {
    /// The shared control plane that `cargo xtask test` started, found through [`ENV_TESTBED`].
    ///
    /// Fails, with a message that says to run `cargo xtask test`, when the variable is unset.
    pub fn shared() -> Result<Cluster> {
        let dir = std::env::var_os(ENV_TESTBED).ok_or(Error::NoTestBed { var: ENV_TESTBED })?;
        let state = crate::State::load(Path::new(&dir))?;
        Ok(state.cluster)
    }

    /// An admin client.
    pub async fn client(&self) -> Result<Client> {
        client_from(&self.admin_kubeconfig).await
    }

    /// The admin kubeconfig's path, for `kubectl` and child processes.
    pub fn kubeconfig(&self) -> &Path {
        &self.admin_kubeconfig
    }

    /// The harness binary; `harness lease-candidate` is client-go's elector.
    pub fn harness(&self) -> &Path {
        &self.harness
    }

    /// The test bed's OCI registry. Fails, saying to restart the test bed, when its state names none
    /// (a test bed started by an older build).
    pub fn registry(&self) -> Result<&Registry> {
        self.registry.as_ref().ok_or_else(|| {
            Error::Unexpected(format!(
                "the test bed in {} runs no OCI registry (it was started by an older build); restart it \
                 (`cargo xtask control-plane down`, then `cargo xtask test`)",
                self.dir.display()
            ))
        })
    }

    /// The test bed's registry behind HTTP Basic authentication, with the user and password it accepts.
    /// Fails, saying to restart the test bed, when its state names none (a test bed started by an
    /// older build).
    pub fn authenticated_registry(&self) -> Result<&Authenticated> {
        self.registry()?.authenticated.as_ref().ok_or_else(|| {
            Error::Unexpected(format!(
                "the test bed in {} runs no registry with authentication (it was started by an older \
                 build); restart it (`cargo xtask control-plane down`, then `cargo xtask test`)",
                self.dir.display()
            ))
        })
    }

    /// The audit log.
    pub fn audit(&self) -> AuditLog {
        AuditLog::new(&self.audit_log)
    }

    /// Creates a fresh namespace named `<prefix>-<random>` and returns its name. Tests use one each, so
    /// that they run in parallel without seeing each other's objects.
    pub async fn namespace(&self, prefix: &str) -> Result<String> {
        let api: Api<Namespace> = Api::all(self.client().await?);
        let ns = Namespace {
            metadata: ObjectMeta {
                generate_name: Some(format!("{prefix}-")),
                labels: Some([("crossplane-rs.io/test".to_string(), "true".to_string())].into()),
                ..Default::default()
            },
            ..Default::default()
        };
        let created = api
            .create(&PostParams::default(), &ns)
            .await
            .map_err(Error::kube("creating a test namespace"))?;
        created
            .metadata
            .name
            .ok_or_else(|| Error::Unexpected("the apiserver returned a namespace without a name".into()))
    }

    /// Creates the ServiceAccount `name` in `namespace` (if missing), asks the TokenRequest API for a
    /// token, and writes a kubeconfig that authenticates with it. The account starts with no RBAC.
    pub async fn service_account_kubeconfig(&self, namespace: &str, name: &str) -> Result<PathBuf> {
        self.ensure_service_account(namespace, name).await?;
        self.token_kubeconfig(namespace, name, None).await
    }

    /// Like [`Cluster::service_account_kubeconfig`], but the token is bound to the Pod `pod` (created
    /// in `namespace` if missing, as a placeholder that never runs: the test bed has no nodes), as a
    /// pod's projected token is. The apiserver then names the pod in the user's extra
    /// `authentication.kubernetes.io/pod-name`.
    pub async fn pod_kubeconfig(&self, namespace: &str, service_account: &str, pod: &str) -> Result<PathBuf> {
        let api: Api<Pod> = Api::namespaced(self.client().await?, namespace);
        let placeholder: Pod = serde_json::from_value(serde_json::json!({
            "metadata": { "name": pod },
            "spec": {
                "serviceAccountName": service_account,
                "automountServiceAccountToken": false,
                "containers": [{ "name": "placeholder", "image": "registry.invalid/placeholder" }],
            },
        }))
        .map_err(|e| Error::Unexpected(format!("placeholder pod: {e}")))?;
        self.ensure_service_account(namespace, service_account).await?;
        let created = match api.create(&PostParams::default(), &placeholder).await {
            Ok(p) => p,
            Err(kube::Error::Api(s)) if s.code == 409 => api
                .get(pod)
                .await
                .map_err(Error::kube(format!("reading Pod {namespace}/{pod}")))?,
            Err(e) => return Err(Error::kube(format!("creating Pod {namespace}/{pod}"))(e)),
        };
        let bound = BoundObjectReference {
            api_version: Some("v1".into()),
            kind: Some("Pod".into()),
            name: Some(pod.into()),
            uid: created.metadata.uid,
        };
        self.token_kubeconfig(namespace, service_account, Some(bound))
            .await
    }

    async fn ensure_service_account(&self, namespace: &str, name: &str) -> Result<()> {
        let api: Api<ServiceAccount> = Api::namespaced(self.client().await?, namespace);
        let sa = ServiceAccount {
            metadata: ObjectMeta {
                name: Some(name.to_string()),
                ..Default::default()
            },
            ..Default::default()
        };
        match api.create(&PostParams::default(), &sa).await {
            Ok(_) => Ok(()),
            Err(kube::Error::Api(s)) if s.code == 409 => Ok(()),
            Err(e) => Err(Error::kube(format!("creating ServiceAccount {namespace}/{name}"))(e)),
        }
    }

    /// Writes a kubeconfig with a token of the existing ServiceAccount `namespace/name`, bound to `bound`
    /// when given.
    async fn token_kubeconfig(
        &self,
        namespace: &str,
        name: &str,
        bound: Option<BoundObjectReference>,
    ) -> Result<PathBuf> {
        let api: Api<ServiceAccount> = Api::namespaced(self.client().await?, namespace);
        let file = match &bound {
            Some(b) => format!(
                "{namespace}.{name}.{}.kubeconfig",
                b.name.as_deref().unwrap_or_default()
            ),
            None => format!("{namespace}.{name}.kubeconfig"),
        };
        let request = TokenRequest {
            spec: Some(TokenRequestSpec {
                audiences: None,
                expiration_seconds: Some(24 * 3600),
                bound_object_ref: bound,
            }),
            ..Default::default()
        };
        let token = api
            .create_token_request(name, &PostParams::default(), &request)
            .await
            .map_err(Error::kube(format!(
                "requesting a token for ServiceAccount {namespace}/{name}"
            )))?
            .status
            .and_then(|s| s.token)
            .ok_or_else(|| {
                Error::Unexpected(format!("TokenRequest for {namespace}/{name} returned no token"))
            })?;
        let dir = self.dir.join("users");
        std::fs::create_dir_all(&dir).map_err(Error::io("creating the users directory", &dir))?;
        let path = dir.join(file);
        let user = format!("system:serviceaccount:{namespace}:{name}");
        kubeconfig::write(&path, &self.server, &self.ca, &user, Credentials::Token(&token))?;
        Ok(path)
    }
}

/// A kube client from a kubeconfig file.
pub async fn client_from(path: &Path) -> Result<Client> {
    let kc = Kubeconfig::read_from(path).map_err(|e| Error::Kube {
        context: format!("reading kubeconfig {}", path.display()),
        source: kube::Error::InferKubeconfig(e),
    })?;
    let config = Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default())
        .await
        .map_err(|e| Error::Kube {
            context: format!("loading kubeconfig {}", path.display()),
            source: kube::Error::InferKubeconfig(e),
        })?;
    Client::try_from(config).map_err(Error::kube("building a kube client"))
}
