//! Database: `pg_database` is the truth. The owner may come from `ownerRef`/`ownerSelector` (a Role of
//! the same group). Owner, allowConnections, connectionLimit and isTemplate are compared and updated;
//! encoding, collation, ctype and tablespace are late-initialized and otherwise fixed at creation, as
//! PostgreSQL allows. Delete clears IS_TEMPLATE first (PostgreSQL refuses to drop a template).

use apis::Condition;
use managed::{ExternalCreation, ExternalDelete, ExternalError, ExternalObservation, ExternalUpdate};

use crate::connector::{Db, pg_error};
use crate::kinds::{DatabaseKind, external_name};
use crate::sql::{check_ident, quote_ident, quote_literal};
use crate::types::DatabaseParameters;

/// A database as read from `pg_database`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Observed {
    /// Owner role name.
    pub owner: String,
    /// Encoding name.
    pub encoding: String,
    /// LC_COLLATE.
    pub lc_collate: String,
    /// LC_CTYPE.
    pub lc_c_type: String,
    /// Tablespace name.
    pub tablespace: String,
    /// ALLOW_CONNECTIONS.
    pub allow_connections: bool,
    /// CONNECTION LIMIT.
    pub connection_limit: i32,
    /// IS_TEMPLATE.
    pub is_template: bool,
}

fn err(e: crate::sql::InvalidSql) -> ExternalError {
    ExternalError::new(e.to_string())
}

async fn read(db: &Db, name: &str) -> Result<Option<Observed>, ExternalError> {
    let conn = db.conn().await?;
    let row = conn
        .query_opt(
            "SELECT pg_catalog.pg_get_userbyid(d.datdba)::text, pg_catalog.pg_encoding_to_char(d.encoding)::text, \
             d.datcollate::text, d.datctype::text, t.spcname::text, d.datallowconn, d.datconnlimit, d.datistemplate \
             FROM pg_catalog.pg_database d JOIN pg_catalog.pg_tablespace t ON t.oid = d.dattablespace \
             WHERE d.datname = $1",
            &[&name],
        )
        .await
        .map_err(|e| ExternalError::new(format!("cannot read database {name:?}: {}", pg_error(&e))))?;
    Ok(row.map(|r| Observed {
        owner: r.get(0),
        encoding: r.get(1),
        lc_collate: r.get(2),
        lc_c_type: r.get(3),
        tablespace: r.get(4),
        allow_connections: r.get(5),
        connection_limit: r.get(6),
        is_template: r.get(7),
    }))
}

/// Late-initializes unset fields; true if anything was set.
pub fn late_initialize(p: &mut DatabaseParameters, o: &Observed) -> bool {
    let mut changed = false;
    let mut fill_s = |f: &mut Option<String>, v: &str| {
        if f.is_none() {
            *f = Some(v.to_owned());
            changed = true;
        }
    };
    fill_s(&mut p.owner, &o.owner);
    fill_s(&mut p.encoding, &o.encoding);
    fill_s(&mut p.lc_collate, &o.lc_collate);
    fill_s(&mut p.lc_c_type, &o.lc_c_type);
    fill_s(&mut p.tablespace, &o.tablespace);
    if p.allow_connections.is_none() {
        p.allow_connections = Some(o.allow_connections);
        changed = true;
    }
    if p.connection_limit.is_none() {
        p.connection_limit = Some(o.connection_limit);
        changed = true;
    }
    if p.is_template.is_none() {
        p.is_template = Some(o.is_template);
        changed = true;
    }
    changed
}

/// The differences in the fields that can be changed.
pub fn differences(p: &DatabaseParameters, o: &Observed) -> Vec<String> {
    let mut out = Vec::new();
    if let Some(owner) = &p.owner
        && owner != &o.owner
    {
        out.push(format!("owner: want {owner:?}, have {:?}", o.owner));
    }
    if let Some(v) = p.allow_connections
        && v != o.allow_connections
    {
        out.push(format!(
            "allowConnections: want {v}, have {}",
            o.allow_connections
        ));
    }
    if let Some(v) = p.connection_limit
        && v != o.connection_limit
    {
        out.push(format!("connectionLimit: want {v}, have {}", o.connection_limit));
    }
    if let Some(v) = p.is_template
        && v != o.is_template
    {
        out.push(format!("isTemplate: want {v}, have {}", o.is_template));
    }
    out
}

async fn resolve_owner<K: DatabaseKind>(db: &Db, mr: &mut K) -> Result<bool, ExternalError> {
    if mr.params().owner.is_some() {
        return Ok(false);
    }
    let ns = mr.local_namespace();
    let p = mr.params();
    let owner = crate::refs::resolve(
        &db.kube,
        K::GROUP,
        "Role",
        "roles",
        ns.as_deref(),
        "owner",
        p.owner_ref.as_ref(),
        p.owner_selector.as_ref(),
    )
    .await?;
    let resolved = owner.is_some();
    if resolved {
        mr.params_mut().owner = owner;
    }
    Ok(resolved)
}

/// Observes the database.
pub async fn observe<K: DatabaseKind>(db: &Db, mr: &mut K) -> Result<ExternalObservation, ExternalError> {
    let name = external_name(mr);
    check_ident("database name", &name).map_err(err)?;
    let deleting = mr.meta().deletion_timestamp.is_some();
    let resolved = if deleting {
        false
    } else {
        resolve_owner(db, mr).await?
    };
    let Some(observed) = read(db, &name).await? else {
        return Ok(ExternalObservation {
            resource_late_initialized: resolved,
            ..ExternalObservation::default()
        });
    };
    let late = late_initialize(mr.params_mut(), &observed) || resolved;
    let diff = differences(mr.params(), &observed);
    apis::condition::set(mr.conditions_mut(), [Condition::available()]);
    Ok(ExternalObservation {
        resource_exists: true,
        resource_up_to_date: diff.is_empty(),
        resource_late_initialized: late,
        diff: (!diff.is_empty()).then(|| diff.join("; ")),
        ..ExternalObservation::default()
    })
}

/// Creates the database (outside a transaction, as PostgreSQL requires).
pub async fn create<K: DatabaseKind>(db: &Db, mr: &mut K) -> Result<ExternalCreation, ExternalError> {
    let name = external_name(mr);
    let ident = quote_ident("database name", &name).map_err(err)?;
    let p = mr.params();
    if let Some(owner) = &p.owner {
        // Say so instead of letting PostgreSQL fail the statement (and fill its log with errors).
        let conn = db.conn().await?;
        let found = conn
            .query_opt("SELECT 1 FROM pg_catalog.pg_roles WHERE rolname = $1", &[owner])
            .await
            .map_err(|e| ExternalError::new(format!("cannot read role {owner:?}: {}", pg_error(&e))))?;
        if found.is_none() {
            return Err(ExternalError::new(format!(
                "owner role {owner:?} does not exist (yet)"
            )));
        }
    }
    let mut with = Vec::new();
    if let Some(v) = &p.owner {
        with.push(format!("OWNER {}", quote_ident("owner", v).map_err(err)?));
    }
    if let Some(v) = &p.template {
        with.push(format!("TEMPLATE {}", quote_ident("template", v).map_err(err)?));
    }
    if let Some(v) = &p.encoding {
        with.push(format!("ENCODING {}", quote_literal("encoding", v).map_err(err)?));
    }
    if let Some(v) = &p.lc_collate {
        with.push(format!(
            "LC_COLLATE {}",
            quote_literal("lcCollate", v).map_err(err)?
        ));
    }
    if let Some(v) = &p.lc_c_type {
        with.push(format!("LC_CTYPE {}", quote_literal("lcCType", v).map_err(err)?));
    }
    if let Some(v) = &p.tablespace {
        with.push(format!(
            "TABLESPACE {}",
            quote_ident("tablespace", v).map_err(err)?
        ));
    }
    if let Some(v) = p.allow_connections {
        with.push(format!("ALLOW_CONNECTIONS {v}"));
    }
    if let Some(v) = p.connection_limit {
        with.push(format!("CONNECTION LIMIT {v}"));
    }
    if let Some(v) = p.is_template {
        with.push(format!("IS_TEMPLATE {v}"));
    }
    let statement = if with.is_empty() {
        format!("CREATE DATABASE {ident}")
    } else {
        format!("CREATE DATABASE {ident} WITH {}", with.join(" "))
    };
    db.execute_alone(&format!("create database {name:?}"), &statement)
        .await?;
    Ok(ExternalCreation::default())
}

/// Brings owner, allowConnections, connectionLimit and isTemplate to the spec.
pub async fn update<K: DatabaseKind>(db: &Db, mr: &mut K) -> Result<ExternalUpdate, ExternalError> {
    let name = external_name(mr);
    let ident = quote_ident("database name", &name).map_err(err)?;
    let p = mr.params();
    let mut statements = Vec::new();
    if let Some(v) = &p.owner {
        statements.push(format!(
            "ALTER DATABASE {ident} OWNER TO {}",
            quote_ident("owner", v).map_err(err)?
        ));
    }
    let mut with = Vec::new();
    if let Some(v) = p.allow_connections {
        with.push(format!("ALLOW_CONNECTIONS {v}"));
    }
    if let Some(v) = p.connection_limit {
        with.push(format!("CONNECTION LIMIT {v}"));
    }
    if let Some(v) = p.is_template {
        with.push(format!("IS_TEMPLATE {v}"));
    }
    if !with.is_empty() {
        statements.push(format!("ALTER DATABASE {ident} WITH {}", with.join(" ")));
    }
    db.execute(&format!("update database {name:?}"), &statements)
        .await?;
    Ok(ExternalUpdate::default())
}

/// Drops the database.
pub async fn delete<K: DatabaseKind>(db: &Db, mr: &mut K) -> Result<ExternalDelete, ExternalError> {
    let name = external_name(mr);
    let ident = quote_ident("database name", &name).map_err(err)?;
    if read(db, &name).await?.is_some_and(|o| o.is_template) {
        db.execute(
            &format!("drop database {name:?}"),
            &[format!("ALTER DATABASE {ident} WITH IS_TEMPLATE false")],
        )
        .await?;
    }
    db.execute_alone(
        &format!("drop database {name:?}"),
        &format!("DROP DATABASE IF EXISTS {ident}"),
    )
    .await?;
    Ok(ExternalDelete::default())
}
