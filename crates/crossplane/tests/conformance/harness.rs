//! One scenario's world, as upstream's suite installs Crossplane: the core runs under a ServiceAccount
//! of its own bound to the generated aggregated ClusterRole `crossplane` (deploy/crossplane), so it may
//! do exactly what upstream's chart lets it do plus what the RBAC manager (running beside it) grants it
//! for each XRD. A function-dummy compatible function of ours (`tests/functions/dummy.py`) serves the
//! pipeline steps. Everything a scenario creates carries its id, so scenarios run in parallel.
//!
//! Waits compare a condition's type, status, reason and observed generation (an unset or zero one counts
//! as current) and ignore the message, like upstream's `ResourcesHaveConditionWithin`, each with
//! upstream's time limit.

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::Context;
use k8s_openapi::api::rbac::v1::ClusterRole;
use kube::api::{DeleteParams, DynamicObject, Patch, PatchParams, PropagationPolicy};
use kube::core::{ApiResource, GroupVersionKind};
use kube::{Api, Client};
use serde_json::{Value, json};

use crate::support::function_process::{Served, serve, venv_bin};
use crate::support::{Process, condition, install_crds, unique, wait_for};

/// The label every object of a scenario carries; the core and the RBAC manager watch only these.
pub const TEST_LABEL: &str = "crossplane-rs.io/test";
/// The field manager of the scenario's own applies (upstream's `FieldManager`).
const FIELD_MANAGER: &str = "crossplane-e2e-tests";

/// A running scenario world.
pub struct World {
    /// The admin client (the suite's own, as upstream's kubectl-like client).
    pub client: Client,
    /// This scenario's id: in group names, Function names and labels.
    pub id: String,
    /// The namespace the core runs in (upstream's `crossplane-system`).
    pub system: String,
    /// The namespace XRs and claims go in (upstream's `default`).
    pub ns: String,
    /// The name of the function-dummy Function.
    pub function: String,
    /// The port of the core's admission webhook (its configuration calls `https://127.0.0.1:<port>`).
    pub webhook_port: u16,
    core: Process,
    /// How the core was started: its kubeconfig, its arguments without the scenario's extra flags,
    /// and the scenario's name (for its log), so that [`World::restart_core`] can start it again.
    core_start: (PathBuf, Vec<String>, String),
    _rbac: Process,
    _function: Served,
    _more: Vec<Served>,
}

/// The core's aggregated ClusterRole and its system part, as `cargo xtask generate` writes them.
fn core_roles() -> anyhow::Result<Vec<ClusterRole>> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../deploy/crossplane");
    ["clusterrole.yaml", "clusterrole-system.yaml"]
        .iter()
        .map(|f| {
            let path = dir.join(f);
            let text =
                std::fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))?;
            serde_saphyr::from_str(&text).with_context(|| format!("parsing {}", path.display()))
        })
        .collect()
}

impl World {
    /// Installs the CRDs and the core's RBAC, and starts the RBAC manager, the core (under its
    /// ServiceAccount) and the function.
    pub async fn start(scenario: &str) -> anyhow::Result<World> {
        Self::start_with(scenario, &[]).await
    }

    /// [`World::start`] with more flags for the core (as upstream's suites install Crossplane with
    /// more Helm `args`, e.g. `--enable-operations` for the ops suite).
    pub async fn start_with(scenario: &str, core_flags: &[&str]) -> anyhow::Result<World> {
        let cluster = testenv::Cluster::shared()?;
        let client = cluster.client().await?;
        install_crds(&client).await?;
        let id = unique();
        let system = cluster.namespace("crossplane-system").await?;
        let ns = cluster.namespace("default").await?;

        // The core's ClusterRole as deploy/ ships it (aggregating), bound to this scenario's core.
        let roles: Api<ClusterRole> = Api::all(client.clone());
        let pp = PatchParams::apply(FIELD_MANAGER).force();
        for role in core_roles()? {
            let name = role
                .metadata
                .name
                .clone()
                .context("a ClusterRole without a name")?;
            roles.patch(&name, &pp, &Patch::Apply(&role)).await?;
        }
        let kubeconfig = cluster.service_account_kubeconfig(&system, "crossplane").await?;
        let bindings = dynamic_api(
            &client,
            "rbac.authorization.k8s.io/v1",
            "ClusterRoleBinding",
            "clusterrolebindings",
        );
        apply(&bindings, json!({
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
            "metadata": {"name": format!("crossplane-{id}"), "labels": {TEST_LABEL: id}},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "crossplane"},
            "subjects": [{"kind": "ServiceAccount", "name": "crossplane", "namespace": system}],
        }))
        .await?;
        // The aggregation controller fills the aggregated role in.
        wait_for(
            "the aggregated ClusterRole crossplane",
            Duration::from_secs(30),
            || {
                let roles = roles.clone();
                async move {
                    let role = roles.get("crossplane").await?;
                    let filled = role.rules.unwrap_or_default().iter().any(|r| {
                        r.resources
                            .as_ref()
                            .is_some_and(|rs| rs.iter().any(|x| x == "configmaps"))
                    });
                    Ok(filled.then_some(()))
                }
            },
        )
        .await?;

        let selector = format!("{TEST_LABEL}={id}");
        let rbac = Process::start(
            cluster.kubeconfig(),
            &["rbac", "start", "--watch-label-selector", &selector],
            &format!("conformance-rbac-{scenario}-{id}"),
        )?;
        // The core's webhook, out of the cluster: the apiserver calls it on loopback.
        let webhook_port = crate::support::function_process::free_port()?;
        let (port, url) = (
            webhook_port.to_string(),
            format!("https://127.0.0.1:{webhook_port}"),
        );
        let base_args = [
            "core",
            "start",
            "--watch-label-selector",
            &selector,
            "--namespace",
            &system,
            "--webhook-port",
            &port,
            "--webhook-url",
            &url,
        ];
        let base_args: Vec<String> = base_args.iter().map(|a| (*a).to_owned()).collect();
        let mut core_args: Vec<&str> = base_args.iter().map(String::as_str).collect();
        core_args.extend_from_slice(core_flags);
        let core = Process::start(
            &kubeconfig,
            &core_args,
            &format!("conformance-core-{scenario}-{id}"),
        )?;
        let python = venv_bin("python")?;
        let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/functions/dummy.py");
        let script = script.display().to_string();
        let function = serve(python, &[&script], &format!("dummy-{scenario}-{id}")).await?;
        let name = format!("function-dummy-{id}");
        let functions = dynamic_api(&client, "pkg.crossplane.io/v1", "Function", "functions");
        apply(&functions, json!({
            "apiVersion": "pkg.crossplane.io/v1", "kind": "Function",
            "metadata": {"name": name, "labels": {TEST_LABEL: id},
                         "annotations": {"render.crossplane.io/runtime": "Development",
                                         "render.crossplane.io/runtime-development-target": function.address}},
            "spec": {"package": "xpkg.crossplane.io/crossplane-contrib/function-dummy:v0.4.1"},
        }))
        .await?;
        Ok(World {
            client,
            id,
            system,
            ns,
            function: name,
            webhook_port,
            core,
            core_start: (kubeconfig.to_path_buf(), base_args, scenario.to_owned()),
            _rbac: rbac,
            _function: function,
            _more: Vec::new(),
        })
    }

    /// Upgrades the core as upstream's suite upgrades Crossplane with Helm (`HelmUpgradeCrossplaneToBase`
    /// with other `args`): the running core is stopped as its pod would be (SIGTERM, killed after 30 s)
    /// and started again with `core_flags` instead of the flags it had; like upstream's
    /// `DeploymentPodIsRunningMustNotChangeWithin(10s)`, the new process must then run for 10 s.
    /// Returns how long the upgrade took.
    pub async fn restart_core(&mut self, core_flags: &[&str]) -> anyhow::Result<Duration> {
        let start = std::time::Instant::now();
        let core = &mut self.core;
        tokio::task::block_in_place(|| core.stop(Duration::from_secs(30)));
        let (kubeconfig, base, scenario) = &self.core_start;
        let mut args: Vec<&str> = base.iter().map(String::as_str).collect();
        args.extend_from_slice(core_flags);
        self.core = Process::start(
            kubeconfig,
            &args,
            &format!("conformance-core-{scenario}-{}-upgraded", self.id),
        )?;
        let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
        while tokio::time::Instant::now() < deadline {
            anyhow::ensure!(
                self.core.is_running(),
                "the upgraded core exited within 10 s; see {}",
                self.core.log.display()
            );
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
        Ok(start.elapsed())
    }

    /// Serves one more function of ours, `tests/functions/<script>`, as Function `<name>-<id>` (the
    /// development annotations point at it), and returns the Function's name.
    pub async fn serve_function(&mut self, script: &str, name: &str) -> anyhow::Result<String> {
        let python = venv_bin("python")?;
        let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("tests/functions")
            .join(script);
        let path = path.display().to_string();
        let served = serve(python, &[&path], &format!("{name}-{}", self.id)).await?;
        let function = format!("{name}-{}", self.id);
        let functions = dynamic_api(&self.client, "pkg.crossplane.io/v1", "Function", "functions");
        apply(&functions, json!({
            "apiVersion": "pkg.crossplane.io/v1", "kind": "Function",
            "metadata": {"name": function, "labels": {TEST_LABEL: self.id},
                         "annotations": {"render.crossplane.io/runtime": "Development",
                                         "render.crossplane.io/runtime-development-target": served.address}},
            "spec": {"package": format!("xpkg.crossplane.io/crossplane-contrib/{name}:v0.0.0")},
        }))
        .await?;
        self._more.push(served);
        Ok(function)
    }

    /// The labels every object of this scenario carries.
    pub fn labels(&self) -> Value {
        json!({TEST_LABEL: self.id})
    }

    /// A dynamic API for `api_version`/`kind` (discovered), in `namespace` or cluster-wide.
    pub async fn api(
        &self,
        api_version: &str,
        kind: &str,
        namespace: Option<&str>,
    ) -> anyhow::Result<Api<DynamicObject>> {
        let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
        let gvk = GroupVersionKind::gvk(group, version, kind);
        let (ar, _) = kube::discovery::pinned_kind(&self.client, &gvk)
            .await
            .with_context(|| format!("discovering {api_version} {kind}"))?;
        Ok(match namespace {
            Some(ns) => Api::namespaced_with(self.client.clone(), ns, &ar),
            None => Api::all_with(self.client.clone(), &ar),
        })
    }

    /// The API of `obj` (its apiVersion, kind and namespace).
    pub async fn api_of(&self, obj: &Value) -> anyhow::Result<Api<DynamicObject>> {
        let api_version = obj["apiVersion"].as_str().context("apiVersion")?;
        let kind = obj["kind"].as_str().context("kind")?;
        self.api(
            api_version,
            kind,
            obj.pointer("/metadata/namespace").and_then(Value::as_str),
        )
        .await
    }

    /// Server-side applies `obj` (upstream's `ApplyResources`).
    pub async fn apply(&self, obj: &Value) -> anyhow::Result<DynamicObject> {
        apply(&self.api_of(obj).await?, obj.clone()).await
    }

    /// Applies each of `objs`, then waits until each exists (upstream's `ResourcesCreatedWithin`, 30 s),
    /// retrying an apply whose kind is not served yet (an XR right after its XRD).
    pub async fn apply_all(&self, objs: &[Value]) -> anyhow::Result<()> {
        for obj in objs {
            let what = describe(obj);
            wait_for(&format!("{what} applied"), Duration::from_secs(30), || async {
                match self.apply(obj).await {
                    Ok(_) => Ok(Some(())),
                    Err(e) if not_served_yet(&e) => Ok(None),
                    Err(e) => Err(e.context(format!("applying {what}"))),
                }
            })
            .await?;
        }
        Ok(())
    }

    /// The current state of `obj`.
    pub async fn get(&self, obj: &Value) -> anyhow::Result<Value> {
        let name = obj
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .context("name")?;
        Ok(serde_json::to_value(self.api_of(obj).await?.get(name).await?)?)
    }

    /// Waits until `obj` has a condition of `type_` with `status` and `reason` (message ignored) that
    /// was observed at the object's current generation; a condition without `observedGeneration` (or
    /// with 0) counts as current, as upstream's `ResourcesHaveConditionWithin` treats it.
    pub async fn has_condition(
        &self,
        limit: Duration,
        obj: &Value,
        type_: &str,
        status: &str,
        reason: &str,
    ) -> anyhow::Result<Value> {
        let what = format!("{} to have {type_}={status} reason {reason}", describe(obj));
        let last = std::sync::Mutex::new(Value::Null);
        let r = wait_for(&what, limit, || async {
            let o = self.get(obj).await?;
            let c = condition(&o, type_);
            if let Ok(mut l) = last.lock() {
                *l = o.pointer("/status/conditions").cloned().unwrap_or(Value::Null);
            }
            let generation = o.pointer("/metadata/generation").and_then(Value::as_i64);
            Ok(c.filter(|c| {
                let observed = c["observedGeneration"].as_i64().filter(|g| *g != 0);
                c["status"] == status
                    && c["reason"] == reason
                    && (observed.is_none() || observed == generation)
            }))
        })
        .await;
        r.map_err(|e| {
            let seen = last.lock().map(|l| l.to_string()).unwrap_or_default();
            e.context(format!("last conditions seen: {seen}"))
        })
    }

    /// Waits until the field at JSON pointer `pointer` of `obj` is `want` (`Value::Null`: absent),
    /// upstream's `ResourcesHaveFieldValueWithin`.
    pub async fn has_field(
        &self,
        limit: Duration,
        obj: &Value,
        pointer: &str,
        want: &Value,
    ) -> anyhow::Result<()> {
        let what = format!("{} to have {pointer} = {want}", describe(obj));
        wait_for(&what, limit, || async {
            let o = self.get(obj).await?;
            let got = o.pointer(pointer).cloned().unwrap_or(Value::Null);
            Ok((got == *want).then_some(()))
        })
        .await
    }

    /// Watches `obj` for `window` and fails if `changed(before, now)` holds for any version of it seen
    /// meanwhile (upstream's `ClaimUnderTestMustNotChangeWithin` compares the generation,
    /// `CompositeUnderTestMustNotChangeWithin` the resourceVersion). Returns how many versions it saw.
    pub async fn must_not_change(
        &self,
        window: Duration,
        obj: &Value,
        changed: impl Fn(&Value, &Value) -> bool,
    ) -> anyhow::Result<usize> {
        use futures::StreamExt;
        let name = obj
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .context("name")?;
        let api = self.api_of(obj).await?;
        let before = self.get(obj).await?;
        let rv = before["metadata"]["resourceVersion"]
            .as_str()
            .context("resourceVersion")?
            .to_owned();
        let params = kube::api::WatchParams::default()
            .fields(&format!("metadata.name={name}"))
            .timeout(window.as_secs().try_into().unwrap_or(u32::MAX).saturating_add(10));
        let mut events = api.watch(&params, &rv).await?.boxed();
        let deadline = tokio::time::Instant::now() + window;
        let mut seen = 0;
        loop {
            match tokio::time::timeout_at(deadline, events.next()).await {
                Err(_) => return Ok(seen),
                Ok(None) => anyhow::bail!(
                    "the watch of {} ended before {window:?} had passed",
                    describe(obj)
                ),
                Ok(Some(event)) => match event? {
                    kube::api::WatchEvent::Modified(o) | kube::api::WatchEvent::Added(o) => {
                        seen += 1;
                        let now = serde_json::to_value(o)?;
                        anyhow::ensure!(
                            !changed(&before, &now),
                            "{} changed within {window:?}, but it should not have: resourceVersion {} became {}, \
                             generation {} became {}",
                            describe(obj),
                            before["metadata"]["resourceVersion"],
                            now["metadata"]["resourceVersion"],
                            before["metadata"]["generation"],
                            now["metadata"]["generation"]
                        );
                    }
                    kube::api::WatchEvent::Deleted(_) => anyhow::bail!("{} was deleted", describe(obj)),
                    kube::api::WatchEvent::Bookmark(_) => {}
                    kube::api::WatchEvent::Error(e) => {
                        anyhow::bail!("the watch of {} failed: {}", describe(obj), e.message)
                    }
                },
            }
        }
    }

    /// Deletes each of `objs` (foreground propagation) and waits until all are gone
    /// (upstream's `DeleteResourcesWithPropagationPolicy` and `ResourcesDeletedWithin`).
    pub async fn delete_all(&self, limit: Duration, objs: &[Value]) -> anyhow::Result<()> {
        self.delete_all_with(limit, objs, PropagationPolicy::Foreground)
            .await
    }

    /// [`World::delete_all`] with the propagation policy `policy` (upstream's `DeleteResources`, which
    /// deletes in the background).
    pub async fn delete_all_with(
        &self,
        limit: Duration,
        objs: &[Value],
        policy: PropagationPolicy,
    ) -> anyhow::Result<()> {
        let dp = DeleteParams {
            propagation_policy: Some(policy),
            ..DeleteParams::default()
        };
        for obj in objs {
            let name = obj
                .pointer("/metadata/name")
                .and_then(Value::as_str)
                .context("name")?;
            match self.api_of(obj).await?.delete(name, &dp).await {
                Ok(_) => {}
                Err(kube::Error::Api(s)) if s.code == 404 => {}
                Err(e) => return Err(e.into()),
            }
        }
        for obj in objs {
            let name = obj
                .pointer("/metadata/name")
                .and_then(Value::as_str)
                .context("name")?;
            let api = self.api_of(obj).await?;
            wait_for(&format!("{} deleted", describe(obj)), limit, || async {
                Ok(api.get_opt(name).await?.is_none().then_some(()))
            })
            .await?;
        }
        Ok(())
    }
}

/// `Kind namespace/name` of an object, for messages.
pub fn describe(obj: &Value) -> String {
    let kind = obj["kind"].as_str().unwrap_or("object");
    let name = obj
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or("");
    match obj.pointer("/metadata/namespace").and_then(Value::as_str) {
        Some(ns) => format!("{kind} {ns}/{name}"),
        None => format!("{kind} {name}"),
    }
}

/// Whether `e` says the kind is not served (yet): discovery finds nothing, or a 404 for the resource.
fn not_served_yet(e: &anyhow::Error) -> bool {
    e.chain().any(|c| {
        let s = c.to_string();
        s.contains("discovering")
            || matches!(c.downcast_ref::<kube::Error>(), Some(kube::Error::Api(s)) if s.code == 404)
    })
}

/// The dynamic API of a cluster-scoped kind whose plural is known.
fn dynamic_api(client: &Client, api_version: &str, kind: &str, plural: &str) -> Api<DynamicObject> {
    let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
    let ar = ApiResource {
        group: group.into(),
        version: version.into(),
        api_version: api_version.into(),
        kind: kind.into(),
        plural: plural.into(),
    };
    Api::all_with(client.clone(), &ar)
}

/// Server-side applies `obj` with the suite's field manager.
async fn apply(api: &Api<DynamicObject>, obj: Value) -> anyhow::Result<DynamicObject> {
    let o: DynamicObject = serde_json::from_value(obj)?;
    let name = o.metadata.name.clone().context("name")?;
    Ok(api
        .patch(
            &name,
            &PatchParams::apply(FIELD_MANAGER).force(),
            &Patch::Apply(&o),
        )
        .await?)
}
