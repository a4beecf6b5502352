//! Role: `pg_roles` is the truth. Observe compares every attribute, the connection limit and the
//! run-time parameters with the spec (unset ones are late-initialized from the server), and detects a
//! changed `passwordSecretRef` password by comparing it with the published connection secret. Passwords
//! are sent as SCRAM-SHA-256 verifiers computed here, so the plain text never reaches the server or
//! its log. The connection secret holds `username`, `password`, `endpoint` and `port`.

use apis::Condition;
use k8s_openapi::api::core::v1::Secret;
use kube::Api;
use managed::{
    ConnectionDetails, ExternalCreation, ExternalDelete, ExternalError, ExternalObservation, ExternalUpdate,
};

use crate::connector::{Db, pg_error};
use crate::kinds::{RoleKind, external_name, secret_key_location};
use crate::sql::{check_ident, quote_ident, quote_literal};
use crate::types::{RoleConfigurationParameter, RoleObservation, RolePrivilege};

/// Connection-detail keys.
pub const KEY_USERNAME: &str = "username";
/// Connection-detail keys.
pub const KEY_PASSWORD: &str = "password";
/// Connection-detail keys.
pub const KEY_ENDPOINT: &str = "endpoint";
/// Connection-detail keys.
pub const KEY_PORT: &str = "port";

/// A role as read from `pg_roles`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Observed {
    /// Attributes.
    pub privileges: RolePrivilege,
    /// CONNECTION LIMIT.
    pub connection_limit: i32,
    /// `name=value` entries of `rolconfig`.
    pub config: Vec<RoleConfigurationParameter>,
}

/// The attributes as SQL keywords, one per set field.
pub fn privilege_clauses(p: &RolePrivilege) -> Vec<&'static str> {
    let pick = |v: Option<bool>, yes: &'static str, no: &'static str| v.map(|b| if b { yes } else { no });
    [
        pick(p.super_user, "SUPERUSER", "NOSUPERUSER"),
        pick(p.create_db, "CREATEDB", "NOCREATEDB"),
        pick(p.create_role, "CREATEROLE", "NOCREATEROLE"),
        pick(p.login, "LOGIN", "NOLOGIN"),
        pick(p.inherit, "INHERIT", "NOINHERIT"),
        pick(p.replication, "REPLICATION", "NOREPLICATION"),
        pick(p.bypass_rls, "BYPASSRLS", "NOBYPASSRLS"),
    ]
    .into_iter()
    .flatten()
    .collect()
}

fn fill<T: Copy>(field: &mut Option<T>, observed: T) -> bool {
    if field.is_none() {
        *field = Some(observed);
        true
    } else {
        false
    }
}

/// Late-initializes unset attributes, the connection limit and the parameters; true if anything was set.
pub fn late_initialize(p: &mut crate::types::RoleParameters, o: &Observed) -> bool {
    let d = &mut p.privileges;
    let s = &o.privileges;
    let mut changed = false;
    for (field, observed) in [
        (&mut d.super_user, s.super_user),
        (&mut d.create_db, s.create_db),
        (&mut d.create_role, s.create_role),
        (&mut d.login, s.login),
        (&mut d.inherit, s.inherit),
        (&mut d.replication, s.replication),
        (&mut d.bypass_rls, s.bypass_rls),
    ] {
        if let Some(v) = observed {
            changed |= fill(field, v);
        }
    }
    changed |= fill(&mut p.connection_limit, o.connection_limit);
    if p.configuration_parameters.is_none() {
        p.configuration_parameters = Some(o.config.clone());
        changed = true;
    }
    changed
}

fn sorted(v: &[RoleConfigurationParameter]) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = v.iter().map(|c| (c.name.clone(), c.value.clone())).collect();
    out.sort();
    out
}

/// What differs between the spec and the server (set fields only).
pub fn differences(p: &crate::types::RoleParameters, o: &Observed) -> Vec<String> {
    let mut out = Vec::new();
    let d = &p.privileges;
    let s = &o.privileges;
    for (name, want, have) in [
        ("superUser", d.super_user, s.super_user),
        ("createDb", d.create_db, s.create_db),
        ("createRole", d.create_role, s.create_role),
        ("login", d.login, s.login),
        ("inherit", d.inherit, s.inherit),
        ("replication", d.replication, s.replication),
        ("bypassRls", d.bypass_rls, s.bypass_rls),
    ] {
        if want.is_some() && want != have {
            out.push(format!("{name}: want {want:?}, have {have:?}"));
        }
    }
    if let Some(limit) = p.connection_limit
        && limit != o.connection_limit
    {
        out.push(format!(
            "connectionLimit: want {limit}, have {}",
            o.connection_limit
        ));
    }
    if let Some(params) = &p.configuration_parameters
        && sorted(params) != sorted(&o.config)
    {
        out.push("configurationParameters differ".to_owned());
    }
    out
}

async fn read(db: &Db, name: &str) -> Result<Option<Observed>, ExternalError> {
    let conn = db.conn().await?;
    let row = conn
        .query_opt(
            "SELECT rolsuper, rolinherit, rolcreaterole, rolcreatedb, rolcanlogin, rolreplication, \
             rolbypassrls, rolconnlimit, rolconfig FROM pg_catalog.pg_roles WHERE rolname = $1",
            &[&name],
        )
        .await
        .map_err(|e| ExternalError::new(format!("cannot read role {name:?}: {}", pg_error(&e))))?;
    let Some(row) = row else {
        return Ok(None);
    };
    let config: Option<Vec<String>> = row.get(8);
    Ok(Some(Observed {
        privileges: RolePrivilege {
            super_user: Some(row.get(0)),
            inherit: Some(row.get(1)),
            create_role: Some(row.get(2)),
            create_db: Some(row.get(3)),
            login: Some(row.get(4)),
            replication: Some(row.get(5)),
            bypass_rls: Some(row.get(6)),
        },
        connection_limit: row.get(7),
        config: config
            .unwrap_or_default()
            .into_iter()
            .map(|kv| {
                let (k, v) = kv.split_once('=').unwrap_or((kv.as_str(), ""));
                RoleConfigurationParameter {
                    name: k.to_owned(),
                    value: v.to_owned(),
                }
            })
            .collect(),
    }))
}

async fn secret_value(
    kube: &kube::Client,
    ns: &str,
    name: &str,
    key: &str,
) -> Result<Option<Vec<u8>>, ExternalError> {
    let secret = Api::<Secret>::namespaced(kube.clone(), ns)
        .get_opt(name)
        .await
        .map_err(|e| ExternalError::wrap(format!("cannot get Secret {ns}/{name}"), e))?;
    Ok(secret
        .and_then(|s| s.data)
        .and_then(|d| d.get(key).map(|b| b.0.clone())))
}

/// The password from `passwordSecretRef`, if set.
async fn desired_password<K: RoleKind>(db: &Db, mr: &K) -> Result<Option<String>, ExternalError> {
    let Some(r) = &mr.params().password_secret_ref else {
        return Ok(None);
    };
    let (ns, name, key) = secret_key_location(mr, r).map_err(ExternalError::new)?;
    let value = secret_value(&db.kube, &ns, &name, &key).await?.ok_or_else(|| {
        ExternalError::new(format!(
            "passwordSecretRef: Secret {ns}/{name} has no key {key:?}"
        ))
    })?;
    String::from_utf8(value).map(Some).map_err(|_| {
        ExternalError::new(format!(
            "passwordSecretRef: Secret {ns}/{name} key {key:?} is not UTF-8"
        ))
    })
}

/// The password last published in the connection secret.
async fn published_password<K: RoleKind>(db: &Db, mr: &K) -> Result<Option<String>, ExternalError> {
    let Some(target) = mr
        .managed_spec()
        .connection_secret(mr.meta().namespace.as_deref())
    else {
        return Ok(None);
    };
    Ok(
        secret_value(&db.kube, &target.namespace, &target.name, KEY_PASSWORD)
            .await?
            .and_then(|v| String::from_utf8(v).ok()),
    )
}

fn details(db: &Db, name: &str, password: Option<&str>) -> ConnectionDetails {
    let mut d = ConnectionDetails::new();
    d.insert(KEY_USERNAME.to_owned(), name.as_bytes().to_vec());
    d.insert(KEY_ENDPOINT.to_owned(), db.endpoint.as_bytes().to_vec());
    d.insert(KEY_PORT.to_owned(), db.port.as_bytes().to_vec());
    if let Some(p) = password {
        d.insert(KEY_PASSWORD.to_owned(), p.as_bytes().to_vec());
    }
    d
}

fn password_clause(password: &str) -> Result<String, ExternalError> {
    let verifier = postgres_protocol::password::scram_sha_256(password.as_bytes());
    quote_literal("password", &verifier)
        .map(|l| format!("PASSWORD {l}"))
        .map_err(|e| ExternalError::new(e.to_string()))
}

fn config_statements(
    ident: &str,
    params: &[RoleConfigurationParameter],
) -> Result<Vec<String>, ExternalError> {
    let mut out = vec![format!("ALTER ROLE {ident} RESET ALL")];
    for c in params {
        let name = quote_ident("configuration parameter name", &c.name)
            .map_err(|e| ExternalError::new(e.to_string()))?;
        let value = quote_literal("configuration parameter value", &c.value)
            .map_err(|e| ExternalError::new(e.to_string()))?;
        out.push(format!("ALTER ROLE {ident} SET {name} TO {value}"));
    }
    Ok(out)
}

/// Observes the role.
pub async fn observe<K: RoleKind>(db: &Db, mr: &mut K) -> Result<ExternalObservation, ExternalError> {
    let name = external_name(mr);
    check_ident("role name", &name).map_err(|e| ExternalError::new(e.to_string()))?;
    let Some(observed) = read(db, &name).await? else {
        return Ok(ExternalObservation::default());
    };
    let late = late_initialize(mr.params_mut(), &observed);
    let mut diff = differences(mr.params(), &observed);
    let desired_pw = desired_password(db, mr).await?;
    let mut publish_pw = desired_pw.clone();
    if let Some(want) = &desired_pw
        && published_password(db, mr).await?.as_ref() != Some(want)
    {
        diff.push("password changed".to_owned());
        publish_pw = None;
    }
    let mut clauses: Vec<String> = privilege_clauses(&observed.privileges)
        .into_iter()
        .map(String::from)
        .collect();
    clauses.push(format!("CONNECTION LIMIT {}", observed.connection_limit));
    mr.set_observation(RoleObservation {
        privileges_as_clauses: clauses,
        configuration_parameters: observed.config.clone(),
    });
    apis::condition::set(mr.conditions_mut(), [Condition::available()]);
    Ok(ExternalObservation {
        resource_exists: true,
        resource_up_to_date: diff.is_empty(),
        resource_late_initialized: late,
        connection_details: details(db, &name, publish_pw.as_deref()),
        diff: (!diff.is_empty()).then(|| diff.join("; ")),
        poll_after: None,
    })
}

/// Creates the role, with a generated password unless `passwordSecretRef` names one.
pub async fn create<K: RoleKind>(db: &Db, mr: &mut K) -> Result<ExternalCreation, ExternalError> {
    let name = external_name(mr);
    let ident = quote_ident("role name", &name).map_err(|e| ExternalError::new(e.to_string()))?;
    let password = match desired_password(db, mr).await? {
        Some(p) => p,
        None => format!(
            "{}{}",
            uuid::Uuid::new_v4().simple(),
            uuid::Uuid::new_v4().simple()
        ),
    };
    let p = mr.params();
    let mut clauses: Vec<String> = privilege_clauses(&p.privileges)
        .into_iter()
        .map(String::from)
        .collect();
    if let Some(limit) = p.connection_limit {
        clauses.push(format!("CONNECTION LIMIT {limit}"));
    }
    clauses.push(password_clause(&password)?);
    let mut statements = vec![format!("CREATE ROLE {ident} WITH {}", clauses.join(" "))];
    if let Some(params) = &p.configuration_parameters
        && !params.is_empty()
    {
        statements.extend(config_statements(&ident, params)?);
    }
    db.execute(&format!("create role {name:?}"), &statements).await?;
    Ok(ExternalCreation {
        connection_details: details(db, &name, Some(&password)),
    })
}

/// Brings attributes, connection limit, parameters and (when it changed) the password to the spec.
pub async fn update<K: RoleKind>(db: &Db, mr: &mut K) -> Result<ExternalUpdate, ExternalError> {
    let name = external_name(mr);
    let ident = quote_ident("role name", &name).map_err(|e| ExternalError::new(e.to_string()))?;
    let observed = read(db, &name)
        .await?
        .ok_or_else(|| ExternalError::new(format!("role {name:?} disappeared")))?;
    let desired_pw = desired_password(db, mr).await?;
    let pw_changed = match &desired_pw {
        Some(want) => published_password(db, mr).await?.as_ref() != Some(want),
        None => false,
    };
    let p = mr.params();
    let mut clauses: Vec<String> = privilege_clauses(&p.privileges)
        .into_iter()
        .map(String::from)
        .collect();
    if let Some(limit) = p.connection_limit {
        clauses.push(format!("CONNECTION LIMIT {limit}"));
    }
    if pw_changed && let Some(pw) = &desired_pw {
        clauses.push(password_clause(pw)?);
    }
    let mut statements = Vec::new();
    if !clauses.is_empty() {
        statements.push(format!("ALTER ROLE {ident} WITH {}", clauses.join(" ")));
    }
    if let Some(params) = &p.configuration_parameters
        && sorted(params) != sorted(&observed.config)
    {
        statements.extend(config_statements(&ident, params)?);
    }
    db.execute(&format!("update role {name:?}"), &statements).await?;
    Ok(ExternalUpdate {
        connection_details: details(db, &name, desired_pw.as_deref()),
    })
}

/// Drops the role. PostgreSQL refuses while objects or privileges depend on it; the error says so and
/// the delete is retried with backoff, so dependants (Grants, Databases) go first.
pub async fn delete<K: RoleKind>(db: &Db, mr: &mut K) -> Result<ExternalDelete, ExternalError> {
    let name = external_name(mr);
    let ident = quote_ident("role name", &name).map_err(|e| ExternalError::new(e.to_string()))?;
    db.execute(
        &format!("drop role {name:?}"),
        &[format!("DROP ROLE IF EXISTS {ident}")],
    )
    .await?;
    Ok(ExternalDelete::default())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::RoleParameters;

    fn observed() -> Observed {
        Observed {
            privileges: RolePrivilege {
                super_user: Some(false),
                create_db: Some(false),
                create_role: Some(false),
                login: Some(true),
                inherit: Some(true),
                replication: Some(false),
                bypass_rls: Some(false),
            },
            connection_limit: -1,
            config: vec![],
        }
    }

    #[test]
    fn late_init_fills_only_unset_fields_and_then_matches() {
        let mut p = RoleParameters {
            privileges: RolePrivilege {
                create_db: Some(true),
                ..RolePrivilege::default()
            },
            ..RoleParameters::default()
        };
        let o = observed();
        assert!(late_initialize(&mut p, &o));
        assert_eq!(p.privileges.create_db, Some(true));
        assert_eq!(p.privileges.login, Some(true));
        assert_eq!(p.connection_limit, Some(-1));
        assert_eq!(
            differences(&p, &o),
            vec!["createDb: want Some(true), have Some(false)".to_owned()]
        );
        assert!(!late_initialize(&mut p, &o));
    }

    #[test]
    fn clauses_follow_set_fields() {
        let p = RolePrivilege {
            login: Some(true),
            super_user: Some(false),
            ..RolePrivilege::default()
        };
        assert_eq!(privilege_clauses(&p), vec!["NOSUPERUSER", "LOGIN"]);
    }
}
