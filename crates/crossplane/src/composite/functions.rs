//! The cluster side of the pipeline ([`super::pipeline::Io`]): finding a Function's endpoint, calling
//! it with a deadline over one cached channel per endpoint, and reading the Secrets, resources and
//! schemas ([`super::schemas`]) that steps ask for.
//!
//! Endpoint: a Function annotated `render.crossplane.io/runtime: Development` is dialled at its
//! `render.crossplane.io/runtime-development-target` (default `localhost:9443`); otherwise at the
//! `status.endpoint` of its active FunctionRevision (label `pkg.crossplane.io/package: <function>`).
//! Development endpoints are dialled in plaintext; revision endpoints with mutual TLS ([`super::pki`]).

use std::collections::{BTreeMap, HashMap};
use std::sync::Mutex;
use std::time::Duration;

use apis::pkg::{
    ANNOTATION_RUNTIME, ANNOTATION_RUNTIME_DEVELOPMENT_TARGET, Function, FunctionRevision, LABEL_PACKAGE,
    RUNTIME_DEVELOPMENT,
};
use function::proto::v1;
use k8s_openapi::api::core::v1::Secret;
use kube::api::{DynamicObject, ListParams};
use kube::{Api, ResourceExt};
use serde_json::Value;

use super::cache::Caches;
use super::discovery::Discovery;
use super::pipeline::Io;
use super::pki::{self, Pki};

/// The default deadline of one function call.
pub const DEFAULT_DEADLINE: Duration = Duration::from_secs(20);

/// Function clients, one per endpoint, shared by every XR of the core.
pub struct Functions {
    deadline: Duration,
    namespace: String,
    clients: Mutex<HashMap<String, function::Client>>,
    pki: tokio::sync::OnceCell<Pki>,
    schemas: super::schemas::Cache,
}

impl std::fmt::Debug for Functions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Functions")
            .field("deadline", &self.deadline)
            .field("namespace", &self.namespace)
            .finish_non_exhaustive()
    }
}

impl Functions {
    /// Clients whose calls fail after `deadline`; the CA and server certificates live in `namespace`.
    pub fn new(deadline: Duration, namespace: impl Into<String>) -> Self {
        Self {
            deadline,
            namespace: namespace.into(),
            clients: Mutex::new(HashMap::new()),
            pki: tokio::sync::OnceCell::new(),
            schemas: super::schemas::Cache::default(),
        }
    }

    /// The mTLS client of Function `function` at `endpoint`, issuing its server certificate first.
    async fn tls_client(
        &self,
        client: &kube::Client,
        function: &str,
        endpoint: &str,
    ) -> Result<function::Client, String> {
        let key = format!("tls:{endpoint}");
        // A client exists only once its function's server certificate was ensured: no need to read
        // the Secret again on every call.
        if let Some(c) = self
            .clients
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .get(&key)
        {
            return Ok(c.clone());
        }
        let pki = self
            .pki
            .get_or_try_init(|| Pki::load_or_create(client, &self.namespace))
            .await?;
        pki.ensure_server(client, &self.namespace, function, pki::host(endpoint))
            .await?;
        let mut clients = self
            .clients
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(c) = clients.get(&key) {
            return Ok(c.clone());
        }
        let c = function::Client::mtls(endpoint, &pki.client).map_err(|e| e.to_string())?;
        clients.insert(key, c.clone());
        Ok(c)
    }

    /// The deadline of one call.
    pub fn deadline(&self) -> Duration {
        self.deadline
    }

    /// The client of `endpoint`, created on first use.
    pub fn client(&self, endpoint: &str) -> Result<function::Client, String> {
        let mut clients = self
            .clients
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(c) = clients.get(endpoint) {
            return Ok(c.clone());
        }
        let c = function::Client::insecure(endpoint).map_err(|e| e.to_string())?;
        clients.insert(endpoint.to_owned(), c.clone());
        Ok(c)
    }
}

/// Where a Function answers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Endpoint {
    /// Already running, plaintext (the development annotations).
    Development(String),
    /// The active revision's endpoint, mutual TLS.
    Revision(String),
}

/// Where Function `name` answers, from its annotations or its active revision: read from `caches` when
/// given (the composite controllers'; a miss is confirmed live, see [`super::cache`]), else from the
/// apiserver (Operations, which run seldom).
pub async fn endpoint(
    client: &kube::Client,
    caches: Option<&Caches>,
    name: &str,
) -> Result<Endpoint, String> {
    let f = match caches {
        Some(c) => c.functions.get(name).await,
        None => Api::<Function>::all(client.clone()).get_opt(name).await,
    };
    let f = f
        .map_err(|e| format!("cannot get Function {name:?}: {}", crate::error::explain(&e)))?
        .ok_or_else(|| {
            format!(
                "Function {name:?} not found: install it (pkg.crossplane.io/v1 Function), or for a function \
                 that is already running annotate a Function with {ANNOTATION_RUNTIME}: {RUNTIME_DEVELOPMENT} \
                 and {ANNOTATION_RUNTIME_DEVELOPMENT_TARGET}: host:port"
            )
        })?;
    if f.annotations().get(ANNOTATION_RUNTIME).map(String::as_str) == Some(RUNTIME_DEVELOPMENT) {
        return Ok(Endpoint::Development(
            f.annotations()
                .get(ANNOTATION_RUNTIME_DEVELOPMENT_TARGET)
                .cloned()
                .unwrap_or_else(|| "localhost:9443".into()),
        ));
    }
    let selector = format!("{LABEL_PACKAGE}={name}");
    let list = match caches {
        Some(c) => c.function_revisions.list(&selector).await,
        None => Api::<FunctionRevision>::all(client.clone())
            .list(&ListParams::default().labels(&selector))
            .await
            .map(|l| l.items),
    };
    let list = list.map_err(|e| {
        format!(
            "cannot list the FunctionRevisions of Function {name:?}: {}",
            crate::error::explain(&e)
        )
    })?;
    list.iter()
        .filter(|r| r.spec.desired_state == "Active")
        .find_map(|r| r.status.as_ref()?.endpoint.clone().filter(|e| !e.is_empty()))
        .map(Endpoint::Revision)
        .ok_or_else(|| {
            format!("Function {name:?} has no active FunctionRevision with an endpoint yet: wait for it to become healthy")
        })
}

/// The pipeline's access to the cluster for one XR.
pub struct ClusterIo<'a> {
    /// The client reads go through.
    pub client: &'a kube::Client,
    /// Kinds of required resources.
    pub discovery: &'a Discovery,
    /// Function clients.
    pub functions: &'a Functions,
    /// Where Functions and FunctionRevisions are read from; `None`: from the apiserver.
    pub caches: Option<&'a Caches>,
}

impl Io for ClusterIo<'_> {
    async fn call(
        &self,
        function: &str,
        req: v1::RunFunctionRequest,
    ) -> Result<v1::RunFunctionResponse, String> {
        let c = match endpoint(self.client, self.caches, function).await? {
            Endpoint::Development(ep) => self.functions.client(&ep)?,
            Endpoint::Revision(ep) => self.functions.tls_client(self.client, function, &ep).await?,
        };
        c.run(req, self.functions.deadline)
            .await
            .map_err(|e| e.to_string())
    }

    async fn required(&self, sel: &v1::ResourceSelector) -> Result<Vec<Value>, String> {
        let kind = self
            .discovery
            .resolve(self.client, &sel.api_version, &sel.kind)
            .await
            .map_err(|e| e.to_string())?;
        let c = self.client.clone();
        let api: Api<DynamicObject> = match (&sel.namespace, kind.namespaced) {
            (Some(ns), true) => Api::namespaced_with(c, ns, &kind.resource),
            _ => Api::all_with(c, &kind.resource),
        };
        let objs = match &sel.r#match {
            Some(v1::resource_selector::Match::MatchName(n)) => api
                .get_opt(n)
                .await
                .map_err(|e| crate::error::explain(&e))?
                .into_iter()
                .collect(),
            Some(v1::resource_selector::Match::MatchLabels(l)) => {
                let s: Vec<String> = l.labels.iter().map(|(k, v)| format!("{k}={v}")).collect();
                api.list(&ListParams::default().labels(&s.join(",")))
                    .await
                    .map_err(|e| crate::error::explain(&e))?
                    .items
            }
            None => {
                return Err(format!(
                    "requirement for {} has neither matchName nor matchLabels",
                    sel.kind
                ));
            }
        };
        objs.iter()
            .map(|o| serde_json::to_value(o).map_err(|e| e.to_string()))
            .collect()
    }

    async fn schema(&self, sel: &v1::SchemaSelector) -> Result<Option<Value>, String> {
        super::schemas::fetch(self.client, &self.functions.schemas, &sel.api_version, &sel.kind).await
    }

    async fn secret(&self, namespace: &str, name: &str) -> Result<BTreeMap<String, Vec<u8>>, String> {
        let api: Api<Secret> = Api::namespaced(self.client.clone(), namespace);
        let s = api
            .get_opt(name)
            .await
            .map_err(|e| {
                format!(
                    "cannot get Secret {namespace}/{name}: {}",
                    crate::error::explain(&e)
                )
            })?
            .ok_or_else(|| format!("Secret {namespace}/{name} not found"))?;
        Ok(s.data
            .unwrap_or_default()
            .into_iter()
            .map(|(k, v)| (k, v.0))
            .collect())
    }
}
