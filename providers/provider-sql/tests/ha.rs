//! provider-sql as two replicas (processes) sharing one Lease against a real PostgreSQL: issue 9's
//! "must show" 5. The leader is killed while 50 Roles and 50 Databases are being created; everything
//! ends Ready, each object was created exactly once, PostgreSQL logged no error, and only the leader of
//! the moment issued SQL (PostgreSQL's log, by application_name) and wrote to the apiserver (audit log).

use std::time::Duration;

use anyhow::{Context, Result, ensure};
use jiff::Timestamp;
use k8s_openapi::api::core::v1::Secret;
use kube::api::{ListParams, PostParams};
use kube::{Api, Client};
use provider_sql::types::namespaced;
use serde_json::{Value, json};
use testenv::log_dir;
use testenv::postgres::Postgres;
use testenv::support::{
    Process, cluster, eventually, fast_lease_args, install_crds, lease_holder, replica_args, wait_holder,
};
use tokio_postgres::NoTls;

const BIN: &str = env!("CARGO_BIN_EXE_provider-sql");
const LEASE: &str = "crossplane-leader-election-provider-sql";
const COUNT: usize = 50;

fn replica(ns: &str, name: &str) -> Result<Process> {
    let c = cluster();
    let identity = format!("{ns}-{name}");
    let mut args = replica_args(&c, ns, LEASE, &identity);
    args.extend(["--poll", "30s", "--max-reconcile-rate", "10"].map(String::from));
    args.extend(fast_lease_args());
    Ok(Process::start(BIN, &log_dir!("sql-ha"), &identity, &args)?)
}

async fn create<K>(api: &Api<K>, v: Value) -> Result<K>
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + serde::Serialize + std::fmt::Debug,
{
    Ok(api
        .create(&PostParams::default(), &serde_json::from_value(v)?)
        .await?)
}

fn ready_and_synced(conditions: &[apis::Condition]) -> bool {
    apis::condition::is_true(conditions, "Ready") && apis::condition::is_true(conditions, "Synced")
}

async fn all_ready(client: &Client, ns: &str) -> Result<(usize, usize)> {
    let roles: Api<namespaced::Role> = Api::namespaced(client.clone(), ns);
    let dbs: Api<namespaced::Database> = Api::namespaced(client.clone(), ns);
    let r = roles
        .list(&ListParams::default())
        .await?
        .items
        .iter()
        .filter(|r| {
            ready_and_synced(
                r.status
                    .as_ref()
                    .map(|s| s.resource_status.conditions.as_slice())
                    .unwrap_or(&[]),
            )
        })
        .count();
    let d = dbs
        .list(&ListParams::default())
        .await?
        .items
        .iter()
        .filter(|r| {
            ready_and_synced(
                r.status
                    .as_ref()
                    .map(|s| s.resource_status.conditions.as_slice())
                    .unwrap_or(&[]),
            )
        })
        .count();
    Ok((r, d))
}

#[tokio::test]
async fn leader_killed_mid_work_everything_ready_once() -> Result<()> {
    let c = cluster();
    let client = c.client().await?;
    install_crds(&client, &provider_sql::crds()).await?;
    let ns = c.namespace("sql-ha").await?;
    let pg = Postgres::start()?;
    let secrets: Api<Secret> = Api::namespaced(client.clone(), &ns);
    create(
        &secrets,
        json!({
            "apiVersion": "v1", "kind": "Secret",
            "metadata": { "name": "pg-creds", "namespace": ns },
            "stringData": { "endpoint": pg.host(), "port": pg.port().to_string(), "username": "postgres", "password": pg.password() },
        }),
    )
    .await?;
    let pcs: Api<namespaced::ProviderConfig> = Api::namespaced(client.clone(), &ns);
    create(
        &pcs,
        json!({
            "apiVersion": "postgresql.sql.m.crossplane.io/v1alpha1", "kind": "ProviderConfig",
            "metadata": { "name": "pg", "namespace": ns },
            "spec": { "credentials": { "source": "PostgreSQLConnectionSecret", "connectionSecretRef": { "name": "pg-creds" } }, "sslMode": "disable" },
        }),
    )
    .await?;

    let mut a = replica(&ns, "a")?;
    let id_a = a.identity.clone();
    wait_holder(&client, &ns, LEASE, &id_a, Duration::from_secs(20))
        .await
        .with_context(|| a.log_text())?;
    let b = replica(&ns, "b")?;
    let id_b = b.identity.clone();
    tokio::time::sleep(Duration::from_secs(1)).await;

    let roles: Api<namespaced::Role> = Api::namespaced(client.clone(), &ns);
    let dbs: Api<namespaced::Database> = Api::namespaced(client.clone(), &ns);
    let spec = |fp: Value| json!({ "forProvider": fp, "providerConfigRef": { "kind": "ProviderConfig", "name": "pg" } });
    for i in 0..COUNT {
        create(
            &dbs,
            json!({
                "apiVersion": "postgresql.sql.m.crossplane.io/v1alpha1", "kind": "Database",
                "metadata": { "name": format!("hadb{i}"), "namespace": ns, "labels": { "test": ns } },
                "spec": spec(json!({ "owner": format!("har{i}") })),
            }),
        )
        .await?;
        create(
            &roles,
            json!({
                "apiVersion": "postgresql.sql.m.crossplane.io/v1alpha1", "kind": "Role",
                "metadata": { "name": format!("har{i}"), "namespace": ns, "labels": { "test": ns } },
                "spec": spec(json!({ "privileges": { "login": true } })),
            }),
        )
        .await?;
    }

    // Kill the leader once it has done part of the work.
    let (admin, conn) = tokio_postgres::connect(&pg.admin_conn_string(), NoTls).await?;
    tokio::spawn(async move {
        let _ = conn.await;
    });
    let admin = &admin;
    eventually("some roles created", Duration::from_secs(60), || async move {
        let n: i64 = admin
            .query_one("SELECT count(*) FROM pg_roles WHERE rolname LIKE 'har%'", &[])
            .await?
            .get(0);
        Ok(n >= 5)
    })
    .await
    .with_context(|| a.log_text())?;
    a.kill();
    let killed_at = Timestamp::now();
    let (r_at_kill, d_at_kill) = all_ready(&client, &ns).await?;
    ensure!(
        r_at_kill + d_at_kill < 2 * COUNT,
        "the work was finished before the kill; nothing was tested"
    );

    let client2 = client.clone();
    let ns2 = ns.clone();
    eventually("everything Ready", Duration::from_secs(240), || {
        let client = client2.clone();
        let ns = ns2.clone();
        async move { Ok(all_ready(&client, &ns).await? == (COUNT, COUNT)) }
    })
    .await
    .with_context(|| b.log_text())?;
    ensure!(
        lease_holder(&client, &ns, LEASE).await? == Some(id_b.clone()),
        "b does not lead"
    );

    // PostgreSQL: every object exactly once, no error, and SQL only from the leader of the moment.
    let roles_n: i64 = admin
        .query_one("SELECT count(*) FROM pg_roles WHERE rolname LIKE 'har%'", &[])
        .await?
        .get(0);
    let dbs_n: i64 = admin
        .query_one("SELECT count(*) FROM pg_database WHERE datname LIKE 'hadb%'", &[])
        .await?
        .get(0);
    ensure!(
        roles_n == COUNT as i64 && dbs_n == COUNT as i64,
        "{roles_n} roles, {dbs_n} databases"
    );
    let log = pg.log_text();
    let errors: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("ERROR:") || l.contains("FATAL:") || l.contains("PANIC:"))
        .collect();
    ensure!(
        errors.is_empty(),
        "errors in the PostgreSQL log:\n{}",
        errors.join("\n")
    );
    for i in 0..COUNT {
        let creates_role = log.matches(&format!("CREATE ROLE \"har{i}\" ")).count();
        let creates_db = log.matches(&format!("CREATE DATABASE \"hadb{i}\" ")).count();
        ensure!(creates_role == 1, "role har{i} created {creates_role} times");
        ensure!(creates_db == 1, "database hadb{i} created {creates_db} times");
    }
    let ddl: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("statement:"))
        .filter_map(|l| l.split(" app=").nth(1)?.split(' ').next())
        .collect();
    ensure!(
        ddl.iter().all(|app| *app == id_a || *app == id_b),
        "SQL from an unknown application: {ddl:?}"
    );
    let first_b_sql = ddl
        .iter()
        .position(|app| *app == id_b)
        .context("b issued no SQL")?;
    ensure!(
        ddl[first_b_sql..].iter().all(|app| *app == id_b),
        "a issued SQL after b started: {ddl:?}"
    );
    ensure!(
        ddl[..first_b_sql].iter().any(|app| *app == id_a),
        "a issued no SQL before it was killed"
    );

    // The apiserver: b wrote nothing while a lived, and every write of a was received before b's first
    // (a request a sent just before the kill may reach the apiserver a moment after it).
    let events = c.audit().read()?.events;
    let writes: Vec<_> = events
        .iter()
        .filter(|e| e.namespace == ns && e.api_group == namespaced::GROUP && e.is_write())
        .collect();
    let by = |id: &str| -> Vec<Timestamp> {
        writes
            .iter()
            .filter(|e| e.agent_identity() == Some(id))
            .map(|e| e.received)
            .collect()
    };
    let (writes_a, writes_b) = (by(&id_a), by(&id_b));
    let last_a = writes_a.iter().max().context("no writes by a")?;
    let first_b = writes_b.iter().min().context("no writes by b")?;
    ensure!(
        *first_b >= killed_at,
        "b wrote at {first_b} while a led (killed at {killed_at})"
    );
    ensure!(
        last_a < first_b,
        "a wrote at {last_a}, after b's first write at {first_b}"
    );
    eprintln!(
        "ready at the kill: {r_at_kill} roles, {d_at_kill} databases; writes: a {}, b {}; SQL statements: a {}, b {}",
        writes_a.len(),
        writes_b.len(),
        first_b_sql,
        ddl.len() - first_b_sql
    );
    drop(b);
    Ok(())
}
