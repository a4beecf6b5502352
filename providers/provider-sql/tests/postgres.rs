//! provider-sql on the real control plane and a real PostgreSQL, as a process: issue 9's "must show"
//! 1 (lifecycle, psql as the role), 2 (updates), 3 (drift), 4 (deletion order, orphan) and 6 (bad
//! input). Each test starts its own PostgreSQL (`testenv::postgres`) and its own provider replica.

use std::time::Duration;

use anyhow::{Context, Result, ensure};
use apis::condition::{TYPE_READY, TYPE_SYNCED};
use k8s_openapi::api::core::v1::Secret;
use kube::api::{DeleteParams, Patch, PatchParams, PostParams};
use kube::{Api, Client};
use provider_sql::types::{cluster as legacy, namespaced};
use serde_json::{Value, json};
use testenv::log_dir;
use testenv::postgres::Postgres;
use testenv::support::{Process, cluster, eventually, install_crds, replica_args};
use tokio_postgres::NoTls;

const BIN: &str = env!("CARGO_BIN_EXE_provider-sql");
const LEASE: &str = "crossplane-leader-election-provider-sql";
const WAIT: Duration = Duration::from_secs(60);

struct Bed {
    client: Client,
    ns: String,
    pg: Postgres,
    provider: Process,
}

async fn admin(pg: &Postgres) -> Result<tokio_postgres::Client> {
    let (client, conn) = tokio_postgres::connect(&pg.admin_conn_string(), NoTls).await?;
    tokio::spawn(async move {
        let _ = conn.await;
    });
    Ok(client)
}

async fn create<K>(api: &Api<K>, v: Value) -> Result<K>
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + serde::Serialize + std::fmt::Debug,
{
    Ok(api
        .create(&PostParams::default(), &serde_json::from_value(v)?)
        .await?)
}

fn cond(obj: &Value, t: &str) -> Option<(String, String, String)> {
    obj.get("status")?
        .get("conditions")?
        .as_array()?
        .iter()
        .find(|c| c.get("type").and_then(Value::as_str) == Some(t))
        .map(|c| {
            let s = |k: &str| c.get(k).and_then(Value::as_str).unwrap_or_default().to_owned();
            (s("status"), s("reason"), s("message"))
        })
}

/// Waits until condition `t` of `name` has `status` and its message contains `contains`.
async fn wait_cond<K>(
    api: &Api<K>,
    name: &str,
    t: &str,
    status: &str,
    contains: &str,
    p: &Process,
) -> Result<(String, String, String)>
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + serde::Serialize + std::fmt::Debug,
{
    let mut last = None;
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        if let Some(o) = api.get_opt(name).await? {
            let v = serde_json::to_value(o)?;
            last = cond(&v, t);
            if let Some(c) = &last
                && c.0 == status
                && c.2.contains(contains)
            {
                return Ok(c.clone());
            }
        }
        ensure!(
            tokio::time::Instant::now() < deadline,
            "{name}: {t} never became {status} with {contains:?} (last {last:?}); provider log:\n{}",
            p.log_text()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

async fn ready<K>(api: &Api<K>, name: &str, p: &Process) -> Result<()>
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + serde::Serialize + std::fmt::Debug,
{
    wait_cond(api, name, TYPE_READY, "True", "", p).await?;
    wait_cond(api, name, TYPE_SYNCED, "True", "", p).await?;
    Ok(())
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

fn credentials_secret(ns: &str, name: &str, pg: &Postgres, password: &str) -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": { "name": name, "namespace": ns },
        "stringData": {
            "endpoint": pg.host(),
            "port": pg.port().to_string(),
            "username": testenv::postgres::SUPERUSER,
            "password": password,
        },
    })
}

async fn provider_config(client: &Client, ns: &str, name: &str, secret: &str) -> Result<()> {
    let pcs: Api<namespaced::ProviderConfig> = Api::namespaced(client.clone(), ns);
    create(
        &pcs,
        json!({
            "apiVersion": "postgresql.sql.m.crossplane.io/v1alpha1",
            "kind": "ProviderConfig",
            "metadata": { "name": name, "namespace": ns },
            "spec": {
                "credentials": {
                    "source": "PostgreSQLConnectionSecret",
                    "connectionSecretRef": { "name": secret },
                },
                "sslMode": "disable",
            },
        }),
    )
    .await?;
    Ok(())
}

async fn bed(test: &str) -> Result<Bed> {
    let c = cluster();
    let client = c.client().await?;
    install_crds(&client, &provider_sql::crds()).await?;
    let ns = c.namespace(test).await?;
    let pg = Postgres::start().context("starting PostgreSQL")?;
    let secrets: Api<Secret> = Api::namespaced(client.clone(), &ns);
    create(&secrets, credentials_secret(&ns, "pg-creds", &pg, pg.password())).await?;
    provider_config(&client, &ns, "pg", "pg-creds").await?;
    let identity = format!("{ns}-a");
    let mut args = replica_args(&c, &ns, LEASE, &identity);
    args.extend(["--poll", "2s", "--max-reconcile-rate", "20"].map(String::from));
    let provider = Process::start(BIN, &log_dir!(test), &identity, &args)?;
    Ok(Bed {
        client,
        ns,
        pg,
        provider,
    })
}

fn mr(
    ns: &str,
    kind: &str,
    name: &str,
    for_provider: Value,
    extra_spec: Value,
    external_name: Option<&str>,
) -> Value {
    let mut spec = json!({
        "forProvider": for_provider,
        "providerConfigRef": { "kind": "ProviderConfig", "name": "pg" },
    });
    if let (Some(s), Some(e)) = (spec.as_object_mut(), extra_spec.as_object()) {
        for (k, v) in e {
            s.insert(k.clone(), v.clone());
        }
    }
    let mut metadata = json!({ "name": name, "namespace": ns, "labels": { "test": ns } });
    if let Some(x) = external_name {
        metadata["annotations"] = json!({ "crossplane.io/external-name": x });
    }
    json!({
        "apiVersion": "postgresql.sql.m.crossplane.io/v1alpha1",
        "kind": kind,
        "metadata": metadata,
        "spec": spec,
    })
}

async fn role_row(pg: &tokio_postgres::Client, name: &str) -> Result<Option<(bool, bool, i32)>> {
    Ok(pg
        .query_opt(
            "SELECT rolcanlogin, rolcreatedb, rolconnlimit FROM pg_roles WHERE rolname = $1",
            &[&name],
        )
        .await?
        .map(|r| (r.get(0), r.get(1), r.get(2))))
}

async fn db_exists(pg: &tokio_postgres::Client, name: &str) -> Result<bool> {
    Ok(pg
        .query_opt("SELECT 1 FROM pg_database WHERE datname = $1", &[&name])
        .await?
        .is_some())
}

async fn secret_data(
    client: &Client,
    ns: &str,
    name: &str,
) -> Result<std::collections::BTreeMap<String, String>> {
    let s: Secret = Api::namespaced(client.clone(), ns).get(name).await?;
    Ok(s.data
        .unwrap_or_default()
        .into_iter()
        .map(|(k, v)| (k, String::from_utf8_lossy(&v.0).into_owned()))
        .collect())
}

#[tokio::test]
async fn lifecycle_role_database_grant_and_psql() -> Result<()> {
    let b = bed("sql-life").await?;
    let roles: Api<namespaced::Role> = Api::namespaced(b.client.clone(), &b.ns);
    let dbs: Api<namespaced::Database> = Api::namespaced(b.client.clone(), &b.ns);
    let grants: Api<namespaced::Grant> = Api::namespaced(b.client.clone(), &b.ns);
    create(
        &roles,
        mr(
            &b.ns,
            "Role",
            "app",
            json!({ "privileges": { "login": true } }),
            json!({ "writeConnectionSecretToRef": { "name": "app-conn" } }),
            None,
        ),
    )
    .await?;
    create(
        &dbs,
        mr(
            &b.ns,
            "Database",
            "appdb",
            json!({ "ownerRef": { "name": "app" } }),
            json!({}),
            None,
        ),
    )
    .await?;
    create(
        &grants,
        mr(
            &b.ns,
            "Grant",
            "app-appdb",
            json!({ "privileges": ["CONNECT", "CREATE"], "roleRef": { "name": "app" }, "databaseRef": { "name": "appdb" } }),
            json!({}),
            None,
        ),
    )
    .await?;
    ready(&roles, "app", &b.provider).await?;
    ready(&dbs, "appdb", &b.provider).await?;
    ready(&grants, "app-appdb", &b.provider).await?;

    let pg = admin(&b.pg).await?;
    let (login, createdb, limit) = role_row(&pg, "app").await?.context("role app missing")?;
    ensure!(login && !createdb && limit == -1);
    let owner: String = pg
        .query_one(
            "SELECT pg_get_userbyid(datdba)::text FROM pg_database WHERE datname = 'appdb'",
            &[],
        )
        .await?
        .get(0);
    ensure!(owner == "app", "owner {owner}");
    let privs: Vec<String> = pg
        .query(
            "SELECT a.privilege_type::text FROM pg_database d, aclexplode(d.datacl) a \
             JOIN pg_roles r ON r.oid = a.grantee WHERE d.datname = 'appdb' AND r.rolname = 'app' ORDER BY 1",
            &[],
        )
        .await?
        .iter()
        .map(|r| r.get(0))
        .collect();
    ensure!(privs == ["CONNECT", "CREATE"], "privileges {privs:?}");

    // Late initialization wrote the unset fields back to the spec.
    let role = roles.get("app").await?;
    ensure!(role.spec.for_provider.privileges.super_user == Some(false));
    ensure!(role.spec.for_provider.connection_limit == Some(-1));
    let db = dbs.get("appdb").await?;
    ensure!(db.spec.for_provider.owner.as_deref() == Some("app"));
    ensure!(db.spec.for_provider.encoding.as_deref() == Some("UTF8"));

    // psql as the role, with the connection secret: connect and create a table.
    let conn = secret_data(&b.client, &b.ns, "app-conn").await?;
    for k in ["username", "password", "endpoint", "port"] {
        ensure!(
            conn.contains_key(k),
            "connection secret lacks {k}: {:?}",
            conn.keys()
        );
    }
    ensure!(conn["username"] == "app");
    let out = std::process::Command::new(b.pg.psql())
        .args([
            "-v",
            "ON_ERROR_STOP=1",
            "-X",
            "-h",
            &conn["endpoint"],
            "-p",
            &conn["port"],
            "-U",
            &conn["username"],
            "-d",
            "appdb",
        ])
        .args([
            "-c",
            "CREATE TABLE t (id int); INSERT INTO t VALUES (1); SELECT current_user",
        ])
        .env("PGPASSWORD", &conn["password"])
        .env("PGSSLMODE", "disable")
        .output()?;
    ensure!(
        out.status.success(),
        "psql failed: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    ensure!(String::from_utf8_lossy(&out.stdout).contains("app"));

    // The server's log names the replica that issued the DDL.
    let log = b.pg.log_text();
    let identity = &b.provider.identity;
    ensure!(
        log.lines()
            .any(|l| l.contains(&format!("app={identity} ")) && l.contains("CREATE ROLE")),
        "no CREATE ROLE from app={identity} in the PostgreSQL log:\n{log}"
    );
    ensure!(
        !log.contains(&conn["password"]),
        "the plain password reached the server log"
    );
    Ok(())
}

#[tokio::test]
async fn updates_change_postgres() -> Result<()> {
    let b = bed("sql-upd").await?;
    let roles: Api<namespaced::Role> = Api::namespaced(b.client.clone(), &b.ns);
    let dbs: Api<namespaced::Database> = Api::namespaced(b.client.clone(), &b.ns);
    create(
        &roles,
        mr(
            &b.ns,
            "Role",
            "u",
            json!({ "privileges": { "login": true, "createDb": false }, "connectionLimit": 5 }),
            json!({}),
            None,
        ),
    )
    .await?;
    create(
        &dbs,
        mr(
            &b.ns,
            "Database",
            "udb",
            json!({ "connectionLimit": 3 }),
            json!({}),
            None,
        ),
    )
    .await?;
    ready(&roles, "u", &b.provider).await?;
    ready(&dbs, "udb", &b.provider).await?;
    let pg = admin(&b.pg).await?;
    ensure!(role_row(&pg, "u").await? == Some((true, false, 5)));

    roles
        .patch(
            "u",
            &PatchParams::default(),
            &Patch::Merge(json!({ "spec": { "forProvider": { "privileges": { "createDb": true }, "connectionLimit": 10 } } })),
        )
        .await?;
    dbs.patch(
        "udb",
        &PatchParams::default(),
        &Patch::Merge(
            json!({ "spec": { "forProvider": { "connectionLimit": 7, "allowConnections": false } } }),
        ),
    )
    .await?;
    let pg2 = &pg;
    eventually("role u updated", WAIT, || async move {
        Ok(role_row(pg2, "u").await? == Some((true, true, 10)))
    })
    .await?;
    eventually("database udb updated", WAIT, || async move {
        let r = pg2
            .query_one(
                "SELECT datconnlimit, datallowconn FROM pg_database WHERE datname = 'udb'",
                &[],
            )
            .await?;
        Ok(r.get::<_, i32>(0) == 7 && !r.get::<_, bool>(1))
    })
    .await?;
    ready(&roles, "u", &b.provider).await?;
    Ok(())
}

#[tokio::test]
async fn drift_by_hand_is_reverted() -> Result<()> {
    let b = bed("sql-drift").await?;
    let roles: Api<namespaced::Role> = Api::namespaced(b.client.clone(), &b.ns);
    let grants: Api<namespaced::Grant> = Api::namespaced(b.client.clone(), &b.ns);
    let dbs: Api<namespaced::Database> = Api::namespaced(b.client.clone(), &b.ns);
    create(
        &roles,
        mr(
            &b.ns,
            "Role",
            "d",
            json!({ "privileges": { "login": true }, "connectionLimit": 4 }),
            json!({}),
            None,
        ),
    )
    .await?;
    create(&dbs, mr(&b.ns, "Database", "ddb", json!({}), json!({}), None)).await?;
    create(
        &grants,
        mr(
            &b.ns,
            "Grant",
            "dg",
            json!({ "privileges": ["CONNECT"], "role": "d", "database": "ddb" }),
            json!({}),
            None,
        ),
    )
    .await?;
    ready(&roles, "d", &b.provider).await?;
    ready(&grants, "dg", &b.provider).await?;
    let pg = admin(&b.pg).await?;
    pg.batch_execute(
        "ALTER ROLE d NOLOGIN CREATEDB CONNECTION LIMIT 42; REVOKE CONNECT ON DATABASE ddb FROM d",
    )
    .await?;
    ensure!(role_row(&pg, "d").await? == Some((false, true, 42)));
    let pg2 = &pg;
    eventually("ALTER ROLE reverted", WAIT, || async move {
        Ok(role_row(pg2, "d").await? == Some((true, false, 4)))
    })
    .await?;
    eventually("REVOKE reverted", WAIT, || async move {
        Ok(pg2
            .query_one("SELECT has_database_privilege('d', 'ddb', 'CONNECT')", &[])
            .await?
            .get::<_, bool>(0))
    })
    .await?;
    Ok(())
}

#[tokio::test]
async fn deletion_drops_dependants_first_and_orphan_keeps() -> Result<()> {
    let b = bed("sql-del").await?;
    let roles: Api<namespaced::Role> = Api::namespaced(b.client.clone(), &b.ns);
    let dbs: Api<namespaced::Database> = Api::namespaced(b.client.clone(), &b.ns);
    let grants: Api<namespaced::Grant> = Api::namespaced(b.client.clone(), &b.ns);
    create(
        &roles,
        mr(
            &b.ns,
            "Role",
            "owner",
            json!({ "privileges": { "login": true } }),
            json!({}),
            None,
        ),
    )
    .await?;
    create(&roles, mr(&b.ns, "Role", "member", json!({}), json!({}), None)).await?;
    create(
        &dbs,
        mr(
            &b.ns,
            "Database",
            "odb",
            json!({ "owner": "owner" }),
            json!({}),
            None,
        ),
    )
    .await?;
    create(
        &grants,
        mr(&b.ns, "Grant", "g-db", json!({ "privileges": ["ALL"], "roleRef": { "name": "member" }, "databaseRef": { "name": "odb" } }), json!({}), None),
    )
    .await?;
    create(
        &grants,
        mr(
            &b.ns,
            "Grant",
            "g-member",
            json!({ "roleRef": { "name": "member" }, "memberOfRef": { "name": "owner" } }),
            json!({}),
            None,
        ),
    )
    .await?;
    for g in ["g-db", "g-member"] {
        ready(&grants, g, &b.provider).await?;
    }
    ready(&dbs, "odb", &b.provider).await?;
    let pg = admin(&b.pg).await?;
    let member_of: i64 = pg
        .query_one(
            "SELECT count(*) FROM pg_auth_members m JOIN pg_roles g ON g.oid = m.roleid JOIN pg_roles u ON u.oid = m.member \
             WHERE g.rolname = 'owner' AND u.rolname = 'member'",
            &[],
        )
        .await?
        .get(0);
    ensure!(member_of == 1);

    // PostgreSQL refuses DROP ROLE while privileges or objects depend on the role (SQLSTATE 2BP01). A
    // Role deleted before its dependants reports the refusal and retries with backoff until they are
    // gone. Each step waits for the refusal on the Role's status before the dependants are deleted, so
    // the order is shown by cause, not read from the server's log: first the grantee and its Grants,
    // then the owner and its Database.
    let refused = |name: &'static str| {
        let (roles, p) = (&roles, &b.provider);
        async move {
            wait_cond(roles, name, TYPE_SYNCED, "False", "2BP01", p)
                .await
                .with_context(|| {
                    format!("the drop of Role {name} was not refused while its dependants existed")
                })
        }
    };
    roles.delete("member", &DeleteParams::default()).await?;
    refused("member").await?;
    ensure!(
        role_row(&pg, "member").await?.is_some(),
        "Role member was dropped while Grants depended on it"
    );
    for g in ["g-db", "g-member"] {
        grants.delete(g, &DeleteParams::default()).await?;
    }
    for g in ["g-db", "g-member"] {
        gone(&grants, g).await?;
    }
    gone(&roles, "member")
        .await
        .with_context(|| b.provider.log_text())?;
    ensure!(role_row(&pg, "member").await?.is_none());
    roles.delete("owner", &DeleteParams::default()).await?;
    refused("owner").await?;
    ensure!(
        db_exists(&pg, "odb").await? && role_row(&pg, "owner").await?.is_some(),
        "Role owner was dropped while it owned Database odb"
    );
    dbs.delete("odb", &DeleteParams::default()).await?;
    gone(&dbs, "odb").await?;
    gone(&roles, "owner")
        .await
        .with_context(|| b.provider.log_text())?;
    ensure!(role_row(&pg, "owner").await?.is_none());
    ensure!(!db_exists(&pg, "odb").await?);
    let log = b.pg.log_text();
    let revoke = "REVOKE CONNECT, CREATE, TEMPORARY ON DATABASE \"odb\" FROM \"member\"";
    ensure!(
        log.lines()
            .any(|l| l.contains(revoke) && l.contains("statement:")),
        "the Grant's deletion did not revoke its privileges"
    );

    // Orphan: a namespaced Role without Delete in its policies, and a cluster-scoped Role with
    // deletionPolicy Orphan, stay in PostgreSQL.
    create(
        &roles,
        mr(
            &b.ns,
            "Role",
            "kept",
            json!({}),
            json!({ "managementPolicies": ["Observe", "Create", "Update", "LateInitialize"] }),
            None,
        ),
    )
    .await?;
    let secrets: Api<Secret> = Api::namespaced(b.client.clone(), &b.ns);
    let _ = secrets.get("pg-creds").await?;
    let cluster_pcs: Api<legacy::ProviderConfig> = Api::all(b.client.clone());
    let pc_name = format!("{}-pg", b.ns);
    create(
        &cluster_pcs,
        json!({
            "apiVersion": "postgresql.sql.crossplane.io/v1alpha1",
            "kind": "ProviderConfig",
            "metadata": { "name": pc_name },
            "spec": {
                "credentials": { "source": "PostgreSQLConnectionSecret", "connectionSecretRef": { "name": "pg-creds", "namespace": b.ns } },
                "sslMode": "disable",
            },
        }),
    )
    .await?;
    let legacy_roles: Api<legacy::Role> = Api::all(b.client.clone());
    let legacy_name = format!("{}-legacy", b.ns);
    create(
        &legacy_roles,
        json!({
            "apiVersion": "postgresql.sql.crossplane.io/v1alpha1",
            "kind": "Role",
            "metadata": { "name": legacy_name, "labels": { "test": b.ns } },
            "spec": { "forProvider": {}, "providerConfigRef": { "name": pc_name }, "deletionPolicy": "Orphan" },
        }),
    )
    .await?;
    ready(&roles, "kept", &b.provider).await?;
    ready(&legacy_roles, &legacy_name, &b.provider).await?;
    roles.delete("kept", &DeleteParams::default()).await?;
    legacy_roles
        .delete(&legacy_name, &DeleteParams::default())
        .await?;
    gone(&roles, "kept").await?;
    // The finalizer goes only after the external decision, so once the objects are gone a wrong drop
    // would already have run.
    gone(&legacy_roles, &legacy_name).await?;
    ensure!(
        role_row(&pg, "kept").await?.is_some(),
        "orphaned Role was dropped"
    );
    ensure!(
        role_row(&pg, &legacy_name).await?.is_some(),
        "orphaned legacy Role was dropped"
    );
    Ok(())
}

#[tokio::test]
async fn sql_significant_names_are_quoted() -> Result<()> {
    let b = bed("sql-inject").await?;
    let roles: Api<namespaced::Role> = Api::namespaced(b.client.clone(), &b.ns);
    let dbs: Api<namespaced::Database> = Api::namespaced(b.client.clone(), &b.ns);
    let grants: Api<namespaced::Grant> = Api::namespaced(b.client.clone(), &b.ns);
    let role_name = "we\"ird'; DROP ROLE postgres; -- ünï";
    let db_name = "db'); DROP DATABASE postgres; --\"€";
    let param_value = "x'; DROP ROLE postgres; --\\";
    create(
        &roles,
        mr(
            &b.ns,
            "Role",
            "weird",
            json!({ "privileges": { "login": true }, "configurationParameters": [ { "name": "application_name", "value": param_value } ] }),
            json!({ "writeConnectionSecretToRef": { "name": "weird-conn" } }),
            Some(role_name),
        ),
    )
    .await?;
    create(
        &dbs,
        mr(
            &b.ns,
            "Database",
            "weird-db",
            json!({ "ownerRef": { "name": "weird" } }),
            json!({}),
            Some(db_name),
        ),
    )
    .await?;
    create(
        &grants,
        mr(&b.ns, "Grant", "weird-grant", json!({ "privileges": ["CONNECT"], "roleRef": { "name": "weird" }, "databaseRef": { "name": "weird-db" } }), json!({}), None),
    )
    .await?;
    // A privilege that tries to smuggle SQL is refused with a clear message.
    create(
        &grants,
        mr(&b.ns, "Grant", "evil-grant", json!({ "privileges": ["CONNECT ON DATABASE postgres TO PUBLIC; DROP ROLE postgres; --"], "role": "postgres", "database": "postgres" }), json!({}), None),
    )
    .await?;
    // A name PostgreSQL would truncate is refused too.
    create(
        &roles,
        mr(&b.ns, "Role", "long", json!({}), json!({}), Some(&"x".repeat(64))),
    )
    .await?;
    ready(&roles, "weird", &b.provider).await?;
    ready(&dbs, "weird-db", &b.provider).await?;
    ready(&grants, "weird-grant", &b.provider).await?;
    wait_cond(
        &grants,
        "evil-grant",
        TYPE_SYNCED,
        "False",
        "is not one of",
        &b.provider,
    )
    .await?;
    wait_cond(&roles, "long", TYPE_SYNCED, "False", "at most 63", &b.provider).await?;

    let pg = admin(&b.pg).await?;
    ensure!(
        role_row(&pg, role_name).await?.is_some(),
        "role with the odd name missing"
    );
    ensure!(
        role_row(&pg, "postgres").await?.is_some(),
        "postgres role dropped"
    );
    ensure!(
        db_exists(&pg, db_name).await?,
        "database with the odd name missing"
    );
    ensure!(db_exists(&pg, "postgres").await?, "postgres database dropped");
    let config: Vec<String> = pg
        .query_one("SELECT rolconfig FROM pg_roles WHERE rolname = $1", &[&role_name])
        .await?
        .get(0);
    ensure!(
        config == [format!("application_name={param_value}")],
        "rolconfig {config:?}"
    );
    let owner: String = pg
        .query_one(
            "SELECT pg_get_userbyid(datdba)::text FROM pg_database WHERE datname = $1",
            &[&db_name],
        )
        .await?
        .get(0);
    ensure!(owner == role_name);
    // The role can log in with its connection secret.
    let conn = secret_data(&b.client, &b.ns, "weird-conn").await?;
    ensure!(conn["username"] == role_name);
    let (c, connection) = tokio_postgres::Config::new()
        .host(&conn["endpoint"])
        .port(conn["port"].parse()?)
        .user(&conn["username"])
        .password(&conn["password"])
        .dbname(db_name)
        .connect(NoTls)
        .await
        .context("logging in as the odd role")?;
    tokio::spawn(async move {
        let _ = connection.await;
    });
    let me: String = c.query_one("SELECT current_user::text", &[]).await?.get(0);
    ensure!(me == role_name);
    // A second reconcile finds everything up to date (nothing flaps).
    ensure!(
        !b.pg.log_text().contains("syntax error"),
        "a statement failed to parse:\n{}",
        b.pg.log_text()
    );
    Ok(())
}

#[tokio::test]
async fn wrong_credentials_then_fixed() -> Result<()> {
    let b = bed("sql-creds").await?;
    let secrets: Api<Secret> = Api::namespaced(b.client.clone(), &b.ns);
    create(
        &secrets,
        credentials_secret(&b.ns, "bad-creds", &b.pg, "not-the-password"),
    )
    .await?;
    provider_config(&b.client, &b.ns, "bad", "bad-creds").await?;
    let roles: Api<namespaced::Role> = Api::namespaced(b.client.clone(), &b.ns);
    let mut role = mr(&b.ns, "Role", "c", json!({}), json!({}), None);
    role["spec"]["providerConfigRef"]["name"] = json!("bad");
    create(&roles, role).await?;
    let (_, _, msg) = wait_cond(
        &roles,
        "c",
        TYPE_SYNCED,
        "False",
        "password authentication failed",
        &b.provider,
    )
    .await?;
    ensure!(msg.contains(b.pg.host()), "message names no endpoint: {msg}");
    secrets
        .patch(
            "bad-creds",
            &PatchParams::default(),
            &Patch::Merge(json!({ "stringData": { "password": b.pg.password() } })),
        )
        .await?;
    ready(&roles, "c", &b.provider).await?;
    Ok(())
}

#[tokio::test]
async fn server_stopped_and_restarted() -> Result<()> {
    let mut b = bed("sql-restart").await?;
    let roles: Api<namespaced::Role> = Api::namespaced(b.client.clone(), &b.ns);
    create(&roles, mr(&b.ns, "Role", "before", json!({}), json!({}), None)).await?;
    ready(&roles, "before", &b.provider).await?;
    b.pg.stop()?;
    create(&roles, mr(&b.ns, "Role", "during", json!({}), json!({}), None)).await?;
    let (_, _, msg) = wait_cond(
        &roles,
        "during",
        TYPE_SYNCED,
        "False",
        "cannot connect to PostgreSQL",
        &b.provider,
    )
    .await?;
    ensure!(msg.contains(&b.pg.port().to_string()), "{msg}");
    // The existing role's next poll fails too, and the provider keeps running.
    wait_cond(
        &roles,
        "before",
        TYPE_SYNCED,
        "False",
        "cannot connect",
        &b.provider,
    )
    .await?;
    ensure!(b.provider.is_running(), "the provider exited");
    b.pg.resume()?;
    ready(&roles, "during", &b.provider).await?;
    ready(&roles, "before", &b.provider).await?;
    let pg = admin(&b.pg).await?;
    ensure!(role_row(&pg, "during").await?.is_some());
    Ok(())
}

#[tokio::test]
async fn missing_role_reference_then_created() -> Result<()> {
    let b = bed("sql-ref").await?;
    let roles: Api<namespaced::Role> = Api::namespaced(b.client.clone(), &b.ns);
    let grants: Api<namespaced::Grant> = Api::namespaced(b.client.clone(), &b.ns);
    create(
        &grants,
        mr(
            &b.ns,
            "Grant",
            "late",
            json!({ "roleRef": { "name": "later" }, "memberOf": "pg_read_all_data" }),
            json!({}),
            None,
        ),
    )
    .await?;
    wait_cond(&grants, "late", TYPE_SYNCED, "False", "not found", &b.provider).await?;
    create(&roles, mr(&b.ns, "Role", "later", json!({}), json!({}), None)).await?;
    ready(&grants, "late", &b.provider).await?;
    let g = grants.get("late").await?;
    ensure!(
        g.spec.for_provider.role.as_deref() == Some("later"),
        "reference not resolved into the spec"
    );
    Ok(())
}

async fn can_login(pg: &Postgres, user: &str, password: &str) -> bool {
    match tokio_postgres::connect(&pg.conn_string(user, password, "postgres"), NoTls).await {
        Ok((c, conn)) => {
            tokio::spawn(async move {
                let _ = conn.await;
            });
            c.query_one("SELECT 1", &[]).await.is_ok()
        }
        Err(_) => false,
    }
}

#[tokio::test]
async fn password_from_secret_and_its_rotation() -> Result<()> {
    let b = bed("sql-pw").await?;
    let secrets: Api<Secret> = Api::namespaced(b.client.clone(), &b.ns);
    create(
        &secrets,
        json!({ "apiVersion": "v1", "kind": "Secret", "metadata": { "name": "pw", "namespace": b.ns }, "stringData": { "pw": "first 'secret' \\ one" } }),
    )
    .await?;
    let roles: Api<namespaced::Role> = Api::namespaced(b.client.clone(), &b.ns);
    create(
        &roles,
        mr(
            &b.ns,
            "Role",
            "p",
            json!({ "privileges": { "login": true }, "passwordSecretRef": { "name": "pw", "key": "pw" } }),
            json!({ "writeConnectionSecretToRef": { "name": "p-conn" } }),
            None,
        ),
    )
    .await?;
    ready(&roles, "p", &b.provider).await?;
    ensure!(
        can_login(&b.pg, "p", "first 'secret' \\ one").await,
        "cannot log in with the first password"
    );
    ensure!(secret_data(&b.client, &b.ns, "p-conn").await?["password"] == "first 'secret' \\ one");
    secrets
        .patch(
            "pw",
            &PatchParams::default(),
            &Patch::Merge(json!({ "stringData": { "pw": "second" } })),
        )
        .await?;
    let pg = &b.pg;
    eventually("the new password works", WAIT, || async move {
        Ok(can_login(pg, "p", "second").await)
    })
    .await
    .with_context(|| b.provider.log_text())?;
    ensure!(
        !can_login(&b.pg, "p", "first 'secret' \\ one").await,
        "the old password still works"
    );
    let b2 = &b;
    eventually("connection secret has the new password", WAIT, || async move {
        Ok(secret_data(&b2.client, &b2.ns, "p-conn").await?["password"] == "second")
    })
    .await?;
    ensure!(
        !b.pg.log_text().contains("second'"),
        "a plain password reached the server log"
    );
    Ok(())
}

#[tokio::test]
async fn default_ssl_mode_verify_full_refuses_a_plain_server() -> Result<()> {
    let b = bed("sql-tls").await?;
    let pcs: Api<namespaced::ProviderConfig> = Api::namespaced(b.client.clone(), &b.ns);
    create(
        &pcs,
        json!({
            "apiVersion": "postgresql.sql.m.crossplane.io/v1alpha1",
            "kind": "ProviderConfig",
            "metadata": { "name": "tls", "namespace": b.ns },
            "spec": { "credentials": { "source": "PostgreSQLConnectionSecret", "connectionSecretRef": { "name": "pg-creds" } } },
        }),
    )
    .await?;
    let pc = pcs.get("tls").await?;
    ensure!(pc.spec.config.ssl_mode == provider_sql::types::SslMode::VerifyFull);
    let roles: Api<namespaced::Role> = Api::namespaced(b.client.clone(), &b.ns);
    let mut role = mr(&b.ns, "Role", "t", json!({}), json!({}), None);
    role["spec"]["providerConfigRef"]["name"] = json!("tls");
    create(&roles, role).await?;
    wait_cond(&roles, "t", TYPE_SYNCED, "False", "TLS", &b.provider).await?;
    let pg = admin(&b.pg).await?;
    ensure!(role_row(&pg, "t").await?.is_none());
    Ok(())
}
