//! Issue 7, must-show 2 for provider-sql: its generated RBAC is complete. The ClusterRole and the Lease
//! Role of `deploy/provider-sql/` (as `cargo xtask generate` writes them) are bound to a ServiceAccount of
//! its own, and the provider runs under that ServiceAccount's token through its scenario: namespaced
//! Role, Database and Grant with a connection Secret, a cluster-scoped Role with a cluster-scoped
//! ProviderConfig, an update, and deletion of everything including the ProviderConfigs. The apiserver's
//! audit log then holds no 403 for that ServiceAccount.

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, Result, ensure};
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, Role, RoleBinding, RoleRef, Subject};
use kube::api::{DeleteParams, ObjectMeta, Patch, PatchParams, PostParams};
use kube::{Api, Client};
use provider_sql::types::{cluster as legacy, namespaced};
use serde_json::{Value, json};
use testenv::log_dir;
use testenv::postgres::Postgres;
use testenv::support::{Process, cluster, eventually, install_crds, replica_args};
use tokio_postgres::NoTls;

const BIN: &str = env!("CARGO_BIN_EXE_provider-sql");
const SA: &str = "provider-sql";
const WAIT: Duration = Duration::from_secs(60);

fn deploy_file(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../deploy/provider-sql")
        .join(name)
}

/// A generated object of deploy/provider-sql/, renamed into the test's namespace and names.
fn generated<K: serde::de::DeserializeOwned>(file: &str, name: &str, ns: Option<&str>) -> Result<K> {
    let path = deploy_file(file);
    let text = std::fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))?;
    let mut v: Value =
        serde_saphyr::from_str(&text).with_context(|| format!("parsing {}", path.display()))?;
    v["metadata"] = json!({ "name": name });
    if let Some(ns) = ns {
        v["metadata"]["namespace"] = json!(ns);
    }
    Ok(serde_json::from_value(v)?)
}

/// Binds the generated ClusterRole and Lease Role to the ServiceAccount `SA` of `ns`, and returns a
/// kubeconfig with that ServiceAccount's token.
async fn generated_identity(client: &Client, ns: &str) -> Result<PathBuf> {
    let subjects = Some(vec![Subject {
        kind: "ServiceAccount".into(),
        name: SA.into(),
        namespace: Some(ns.into()),
        ..Subject::default()
    }]);
    let cluster_name = format!("{ns}:provider-sql");
    let cr: ClusterRole = generated("clusterrole.yaml", &cluster_name, None)?;
    ensure!(
        cr.rules.as_ref().is_some_and(|r| !r.is_empty()),
        "the generated ClusterRole has no rules"
    );
    Api::<ClusterRole>::all(client.clone())
        .create(&PostParams::default(), &cr)
        .await?;
    Api::<ClusterRoleBinding>::all(client.clone())
        .create(
            &PostParams::default(),
            &ClusterRoleBinding {
                metadata: ObjectMeta {
                    name: Some(cluster_name.clone()),
                    ..ObjectMeta::default()
                },
                role_ref: RoleRef {
                    api_group: Some("rbac.authorization.k8s.io".into()),
                    kind: "ClusterRole".into(),
                    name: cluster_name,
                },
                subjects: subjects.clone(),
            },
        )
        .await?;
    let role: Role = generated("role.yaml", "provider-sql", Some(ns))?;
    Api::<Role>::namespaced(client.clone(), ns)
        .create(&PostParams::default(), &role)
        .await?;
    Api::<RoleBinding>::namespaced(client.clone(), ns)
        .create(
            &PostParams::default(),
            &RoleBinding {
                metadata: ObjectMeta {
                    name: Some("provider-sql".into()),
                    namespace: Some(ns.into()),
                    ..ObjectMeta::default()
                },
                role_ref: RoleRef {
                    api_group: Some("rbac.authorization.k8s.io".into()),
                    kind: "Role".into(),
                    name: "provider-sql".into(),
                },
                subjects,
            },
        )
        .await?;
    Ok(cluster().service_account_kubeconfig(ns, SA).await?)
}

async fn create<K>(api: &Api<K>, v: Value) -> Result<K>
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + serde::Serialize + std::fmt::Debug,
{
    Ok(api
        .create(&PostParams::default(), &serde_json::from_value(v)?)
        .await?)
}

fn is_true(obj: &Value, t: &str) -> bool {
    obj.pointer("/status/conditions")
        .and_then(Value::as_array)
        .is_some_and(|cs| cs.iter().any(|c| c["type"] == t && c["status"] == "True"))
}

async fn ready<K>(api: &Api<K>, name: &str, p: &Process) -> Result<()>
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + serde::Serialize + std::fmt::Debug,
{
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        if let Some(o) = api.get_opt(name).await? {
            let v = serde_json::to_value(o)?;
            if is_true(&v, "Ready") && is_true(&v, "Synced") {
                return Ok(());
            }
        }
        ensure!(
            tokio::time::Instant::now() < deadline,
            "{name} never became Ready and Synced; provider log:\n{}",
            p.log_text()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

async fn gone<K>(api: &Api<K>, name: &str) -> Result<()>
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    let api = api.clone();
    let name = name.to_owned();
    eventually(&format!("{name} deleted"), WAIT, move || {
        let api = api.clone();
        let name = name.clone();
        async move { Ok(api.get_opt(&name).await?.is_none()) }
    })
    .await?;
    Ok(())
}

fn mr(ns: &str, kind: &str, name: &str, for_provider: Value, extra_spec: Value) -> Value {
    let mut spec = json!({
        "forProvider": for_provider,
        "providerConfigRef": { "kind": "ProviderConfig", "name": "pg" },
    });
    if let (Some(s), Some(e)) = (spec.as_object_mut(), extra_spec.as_object()) {
        for (k, v) in e {
            s.insert(k.clone(), v.clone());
        }
    }
    json!({
        "apiVersion": "postgresql.sql.m.crossplane.io/v1alpha1",
        "kind": kind,
        "metadata": { "name": name, "namespace": ns, "labels": { "test": ns } },
        "spec": spec,
    })
}

#[tokio::test]
async fn runs_its_scenario_with_the_generated_rbac_and_no_403() -> Result<()> {
    let c = cluster();
    let client = c.client().await?;
    install_crds(&client, &provider_sql::crds()).await?;
    let ns = c.namespace("sql-rbac").await?;
    let kubeconfig = generated_identity(&client, &ns).await?;

    let pg = Postgres::start().context("starting PostgreSQL")?;
    let secrets: Api<Secret> = Api::namespaced(client.clone(), &ns);
    create(
        &secrets,
        json!({
            "apiVersion": "v1", "kind": "Secret",
            "metadata": { "name": "pg-creds", "namespace": ns },
            "stringData": { "endpoint": pg.host(), "port": pg.port().to_string(),
                            "username": testenv::postgres::SUPERUSER, "password": pg.password() },
        }),
    )
    .await?;
    let pcs: Api<namespaced::ProviderConfig> = Api::namespaced(client.clone(), &ns);
    create(
        &pcs,
        json!({
            "apiVersion": "postgresql.sql.m.crossplane.io/v1alpha1", "kind": "ProviderConfig",
            "metadata": { "name": "pg", "namespace": ns },
            "spec": { "credentials": { "source": "PostgreSQLConnectionSecret",
                                       "connectionSecretRef": { "name": "pg-creds" } },
                      "sslMode": "disable" },
        }),
    )
    .await?;
    let cluster_pcs: Api<legacy::ProviderConfig> = Api::all(client.clone());
    let cluster_pc = format!("{ns}-pg");
    create(
        &cluster_pcs,
        json!({
            "apiVersion": "postgresql.sql.crossplane.io/v1alpha1", "kind": "ProviderConfig",
            "metadata": { "name": cluster_pc },
            "spec": { "credentials": { "source": "PostgreSQLConnectionSecret",
                                       "connectionSecretRef": { "name": "pg-creds", "namespace": ns } },
                      "sslMode": "disable" },
        }),
    )
    .await?;

    // The provider, under its generated ServiceAccount only (not the admin kubeconfig).
    let identity = format!("{ns}-a");
    let mut args = replica_args(&c, &ns, "crossplane-leader-election-provider-sql", &identity);
    let at = args
        .iter()
        .position(|a| a == "--kubeconfig")
        .context("--kubeconfig")?;
    args[at + 1] = kubeconfig.display().to_string();
    args.extend(["--poll", "2s", "--max-reconcile-rate", "20"].map(String::from));
    let provider = Process::start(BIN, &log_dir!("sql-rbac"), &identity, &args)?;

    let roles: Api<namespaced::Role> = Api::namespaced(client.clone(), &ns);
    let dbs: Api<namespaced::Database> = Api::namespaced(client.clone(), &ns);
    let grants: Api<namespaced::Grant> = Api::namespaced(client.clone(), &ns);
    let legacy_roles: Api<legacy::Role> = Api::all(client.clone());
    let legacy_name = format!("{ns}-legacy");
    create(
        &roles,
        mr(
            &ns,
            "Role",
            "app",
            json!({ "privileges": { "login": true } }),
            json!({ "writeConnectionSecretToRef": { "name": "app-conn" } }),
        ),
    )
    .await?;
    create(
        &dbs,
        mr(
            &ns,
            "Database",
            "appdb",
            json!({ "ownerRef": { "name": "app" } }),
            json!({}),
        ),
    )
    .await?;
    create(
        &grants,
        mr(
            &ns,
            "Grant",
            "app-appdb",
            json!({ "privileges": ["CONNECT"], "roleRef": { "name": "app" }, "databaseRef": { "name": "appdb" } }),
            json!({}),
        ),
    )
    .await?;
    create(
        &legacy_roles,
        json!({
            "apiVersion": "postgresql.sql.crossplane.io/v1alpha1", "kind": "Role",
            "metadata": { "name": legacy_name, "labels": { "test": ns } },
            "spec": { "forProvider": {}, "providerConfigRef": { "name": cluster_pc } },
        }),
    )
    .await?;
    ready(&roles, "app", &provider).await?;
    ready(&dbs, "appdb", &provider).await?;
    ready(&grants, "app-appdb", &provider).await?;
    ready(&legacy_roles, &legacy_name, &provider).await?;
    ensure!(
        secrets.get_opt("app-conn").await?.is_some(),
        "no connection Secret"
    );

    // An update reaches PostgreSQL.
    roles
        .patch(
            "app",
            &PatchParams::default(),
            &Patch::Merge(json!({ "spec": { "forProvider": { "privileges": { "createDb": true } } } })),
        )
        .await?;
    let (admin, conn) = tokio_postgres::connect(&pg.admin_conn_string(), NoTls).await?;
    tokio::spawn(async move {
        let _ = conn.await;
    });
    eventually("CREATEDB granted to app", WAIT, || {
        let admin = &admin;
        async move {
            let row = admin
                .query_opt("SELECT rolcreatedb FROM pg_roles WHERE rolname = 'app'", &[])
                .await?;
            Ok(row.is_some_and(|r| r.get::<_, bool>(0)))
        }
    })
    .await?;

    // Deletion, then the ProviderConfigs (their finalizers go once no usage is left).
    grants.delete("app-appdb", &DeleteParams::default()).await?;
    gone(&grants, "app-appdb").await?;
    dbs.delete("appdb", &DeleteParams::default()).await?;
    gone(&dbs, "appdb").await?;
    roles.delete("app", &DeleteParams::default()).await?;
    legacy_roles
        .delete(&legacy_name, &DeleteParams::default())
        .await?;
    gone(&roles, "app").await?;
    gone(&legacy_roles, &legacy_name).await?;
    pcs.delete("pg", &DeleteParams::default()).await?;
    cluster_pcs.delete(&cluster_pc, &DeleteParams::default()).await?;
    gone(&pcs, "pg").await?;
    gone(&cluster_pcs, &cluster_pc).await?;
    ensure!(
        provider.log_text().lines().all(|l| !l.contains("forbidden")),
        "the provider logged a forbidden request:\n{}",
        provider.log_text()
    );
    drop(provider);

    let user = format!("system:serviceaccount:{ns}:{SA}");
    let mine = c.audit().by_user(&user)?;
    let writes = mine.iter().filter(|e| e.is_write() && e.code < 300).count();
    let denied: Vec<String> = mine
        .iter()
        .filter(|e| e.code == 403)
        .map(|e| {
            format!(
                "{} {}/{} {} ns={:?} name={:?}",
                e.verb, e.resource, e.subresource, e.api_group, e.namespace, e.name
            )
        })
        .collect();
    eprintln!(
        "provider-sql under its generated RBAC: {} requests, {writes} successful writes, {} denied",
        mine.len(),
        denied.len()
    );
    ensure!(writes > 10, "only {writes} successful writes");
    ensure!(
        denied.is_empty(),
        "requests denied to provider-sql:\n{}",
        denied.join("\n")
    );
    let name = format!("{ns}:provider-sql");
    let _ = Api::<ClusterRoleBinding>::all(client.clone())
        .delete(&name, &DeleteParams::default())
        .await;
    let _ = Api::<ClusterRole>::all(client.clone())
        .delete(&name, &DeleteParams::default())
        .await;
    Ok(())
}
