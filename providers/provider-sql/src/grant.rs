//! Grant: privileges of a role on a database (`role` + `database` + `privileges`, read from the
//! database's ACL) or a role's membership in another role (`role` + `memberOf`, read from
//! `pg_auth_members`). `roleRef`/`databaseRef`/`memberOfRef` and their selectors resolve to the
//! referenced resources' external names. Privilege keywords are checked against a fixed list.

use std::collections::BTreeSet;

use apis::Condition;
use managed::{ExternalCreation, ExternalDelete, ExternalError, ExternalObservation, ExternalUpdate};

use crate::connector::{Db, pg_error};
use crate::kinds::GrantKind;
use crate::sql::{InvalidSql, check_ident, database_privileges, quote_ident};
use crate::types::{GrantOption, GrantParameters};

fn err(e: InvalidSql) -> ExternalError {
    ExternalError::new(e.to_string())
}

/// What a grant's filled fields make it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GrantType {
    /// Privileges on a database.
    Database {
        /// Grantee.
        role: String,
        /// Database.
        database: String,
        /// Normalized privileges.
        privileges: Vec<&'static str>,
        /// WITH GRANT OPTION.
        grant_option: bool,
    },
    /// Membership of `role` in `member_of`.
    Member {
        /// The member.
        role: String,
        /// The group role.
        member_of: String,
        /// WITH ADMIN OPTION.
        admin_option: bool,
    },
}

/// Infers the grant type from the filled fields.
pub fn grant_type(p: &GrantParameters) -> Result<GrantType, ExternalError> {
    let role = p
        .role
        .clone()
        .ok_or_else(|| ExternalError::new("role (or roleRef/roleSelector) is required"))?;
    check_ident("role", &role).map_err(err)?;
    match (&p.database, &p.member_of) {
        (Some(database), None) => {
            check_ident("database", database).map_err(err)?;
            if p.privileges.is_empty() {
                return Err(ExternalError::new(
                    "privileges are required for a grant on a database",
                ));
            }
            if p.with_option == Some(GrantOption::Admin) {
                return Err(ExternalError::new(
                    "withOption ADMIN applies to role membership only",
                ));
            }
            Ok(GrantType::Database {
                role,
                database: database.clone(),
                privileges: database_privileges(&p.privileges).map_err(err)?,
                grant_option: p.with_option == Some(GrantOption::Grant),
            })
        }
        (None, Some(member_of)) => {
            check_ident("memberOf", member_of).map_err(err)?;
            if !p.privileges.is_empty() {
                return Err(ExternalError::new("privileges cannot be combined with memberOf"));
            }
            if p.with_option == Some(GrantOption::Grant) {
                return Err(ExternalError::new("withOption GRANT applies to privileges only"));
            }
            Ok(GrantType::Member {
                role,
                member_of: member_of.clone(),
                admin_option: p.with_option == Some(GrantOption::Admin),
            })
        }
        (Some(_), Some(_)) => Err(ExternalError::new("set either database or memberOf, not both")),
        (None, None) => Err(ExternalError::new(
            "database (or databaseRef/databaseSelector) or memberOf (or memberOfRef/memberOfSelector) is required",
        )),
    }
}

/// Resolves unset role/database/memberOf from their references; true if anything was set.
async fn resolve<K: GrantKind>(db: &Db, mr: &mut K) -> Result<bool, ExternalError> {
    let ns = mr.local_namespace();
    let kube = db.kube.clone();
    let mut changed = false;
    if mr.params().role.is_none() {
        let p = mr.params();
        let v = crate::refs::resolve(
            &kube,
            K::GROUP,
            "Role",
            "roles",
            ns.as_deref(),
            "role",
            p.role_ref.as_ref(),
            p.role_selector.as_ref(),
        )
        .await?;
        changed |= v.is_some();
        mr.params_mut().role = v;
    }
    if mr.params().database.is_none() {
        let p = mr.params();
        let v = crate::refs::resolve(
            &kube,
            K::GROUP,
            "Database",
            "databases",
            ns.as_deref(),
            "database",
            p.database_ref.as_ref(),
            p.database_selector.as_ref(),
        )
        .await?;
        changed |= v.is_some();
        mr.params_mut().database = v;
    }
    if mr.params().member_of.is_none() {
        let p = mr.params();
        let v = crate::refs::resolve(
            &kube,
            K::GROUP,
            "Role",
            "roles",
            ns.as_deref(),
            "memberOf",
            p.member_of_ref.as_ref(),
            p.member_of_selector.as_ref(),
        )
        .await?;
        changed |= v.is_some();
        mr.params_mut().member_of = v;
    }
    Ok(changed)
}

/// What the server has: for a database grant, the privileges and whether all are grantable; for a
/// membership, whether it has the admin option. `None`: nothing granted.
async fn read(db: &Db, t: &GrantType) -> Result<Option<(BTreeSet<String>, bool)>, ExternalError> {
    let conn = db.conn().await?;
    let e = |e: tokio_postgres::Error| ExternalError::new(format!("cannot read grant: {}", pg_error(&e)));
    match t {
        GrantType::Database { role, database, .. } => {
            let rows = conn
                .query(
                    "SELECT a.privilege_type::text, a.is_grantable FROM pg_catalog.pg_database d, \
                     LATERAL aclexplode(d.datacl) a JOIN pg_catalog.pg_roles r ON r.oid = a.grantee \
                     WHERE d.datname = $1 AND r.rolname = $2",
                    &[database, role],
                )
                .await
                .map_err(e)?;
            if rows.is_empty() {
                return Ok(None);
            }
            let grantable = rows.iter().all(|r| r.get::<_, bool>(1));
            Ok(Some((
                rows.iter().map(|r| r.get::<_, String>(0)).collect(),
                grantable,
            )))
        }
        GrantType::Member { role, member_of, .. } => {
            let row = conn
                .query_opt(
                    "SELECT bool_or(m.admin_option) FROM pg_catalog.pg_auth_members m \
                     JOIN pg_catalog.pg_roles g ON g.oid = m.roleid JOIN pg_catalog.pg_roles u ON u.oid = m.member \
                     WHERE g.rolname = $1 AND u.rolname = $2 HAVING count(*) > 0",
                    &[member_of, role],
                )
                .await
                .map_err(e)?;
            Ok(row.map(|r| (BTreeSet::new(), r.get::<_, bool>(0))))
        }
    }
}

fn grant_statements(t: &GrantType, revoke_public: bool) -> Result<Vec<String>, ExternalError> {
    match t {
        GrantType::Database {
            role,
            database,
            privileges,
            grant_option,
        } => {
            let r = quote_ident("role", role).map_err(err)?;
            let d = quote_ident("database", database).map_err(err)?;
            let mut out = vec![format!("REVOKE ALL ON DATABASE {d} FROM {r}")];
            out.push(format!(
                "GRANT {} ON DATABASE {d} TO {r}{}",
                privileges.join(", "),
                if *grant_option { " WITH GRANT OPTION" } else { "" }
            ));
            if revoke_public {
                out.push(format!("REVOKE ALL ON DATABASE {d} FROM PUBLIC"));
            }
            Ok(out)
        }
        GrantType::Member {
            role,
            member_of,
            admin_option,
        } => {
            let r = quote_ident("role", role).map_err(err)?;
            let g = quote_ident("memberOf", member_of).map_err(err)?;
            let mut out = vec![format!("REVOKE {g} FROM {r}")];
            out.push(format!(
                "GRANT {g} TO {r}{}",
                if *admin_option { " WITH ADMIN OPTION" } else { "" }
            ));
            Ok(out)
        }
    }
}

/// Observes the grant.
pub async fn observe<K: GrantKind>(db: &Db, mr: &mut K) -> Result<ExternalObservation, ExternalError> {
    let deleting = mr.meta().deletion_timestamp.is_some();
    let resolved = if deleting { false } else { resolve(db, mr).await? };
    let t = match grant_type(mr.params()) {
        Ok(t) => t,
        // A grant being deleted whose references never resolved has nothing to revoke.
        Err(_) if deleting => return Ok(ExternalObservation::default()),
        Err(e) => return Err(e),
    };
    let Some((have, grantable)) = read(db, &t).await? else {
        return Ok(ExternalObservation {
            resource_late_initialized: resolved,
            ..ExternalObservation::default()
        });
    };
    let up_to_date = match &t {
        GrantType::Database {
            privileges,
            grant_option,
            ..
        } => {
            let want: BTreeSet<String> = privileges.iter().map(|s| (*s).to_owned()).collect();
            want == have && grantable == *grant_option
        }
        GrantType::Member { admin_option, .. } => grantable == *admin_option,
    };
    apis::condition::set(mr.conditions_mut(), [Condition::available()]);
    Ok(ExternalObservation {
        resource_exists: true,
        resource_up_to_date: up_to_date,
        resource_late_initialized: resolved,
        diff: (!up_to_date).then(|| format!("have {have:?}, grantable {grantable}")),
        ..ExternalObservation::default()
    })
}

/// Grants.
pub async fn create<K: GrantKind>(db: &Db, mr: &mut K) -> Result<ExternalCreation, ExternalError> {
    let t = grant_type(mr.params())?;
    let statements = grant_statements(&t, mr.params().revoke_public_on_db == Some(true))?;
    db.execute("grant", &statements).await?;
    Ok(ExternalCreation::default())
}

/// Revokes and grants again, in one transaction.
pub async fn update<K: GrantKind>(db: &Db, mr: &mut K) -> Result<ExternalUpdate, ExternalError> {
    let t = grant_type(mr.params())?;
    let statements = grant_statements(&t, mr.params().revoke_public_on_db == Some(true))?;
    db.execute("update grant", &statements).await?;
    Ok(ExternalUpdate::default())
}

/// Revokes.
pub async fn delete<K: GrantKind>(db: &Db, mr: &mut K) -> Result<ExternalDelete, ExternalError> {
    let t = grant_type(mr.params())?;
    let statement = match &t {
        GrantType::Database {
            role,
            database,
            privileges,
            ..
        } => format!(
            "REVOKE {} ON DATABASE {} FROM {} CASCADE",
            privileges.join(", "),
            quote_ident("database", database).map_err(err)?,
            quote_ident("role", role).map_err(err)?
        ),
        GrantType::Member { role, member_of, .. } => format!(
            "REVOKE {} FROM {}",
            quote_ident("memberOf", member_of).map_err(err)?,
            quote_ident("role", role).map_err(err)?
        ),
    };
    if read(db, &t).await?.is_none() {
        return Ok(ExternalDelete::default());
    }
    db.execute("revoke", &[statement]).await?;
    Ok(ExternalDelete::default())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(v: serde_json::Value) -> GrantParameters {
        serde_json::from_value(v).expect("parameters")
    }

    #[test]
    fn the_type_follows_the_filled_fields() {
        let t = grant_type(&p(serde_json::json!({
            "role": "r", "database": "d", "privileges": ["ALL"], "withOption": "GRANT"
        })))
        .expect("database grant");
        assert_eq!(
            t,
            GrantType::Database {
                role: "r".into(),
                database: "d".into(),
                privileges: vec!["CONNECT", "CREATE", "TEMPORARY"],
                grant_option: true
            }
        );
        let t = grant_type(&p(
            serde_json::json!({ "role": "r", "memberOf": "g", "withOption": "ADMIN" }),
        ))
        .expect("membership");
        assert_eq!(
            t,
            GrantType::Member {
                role: "r".into(),
                member_of: "g".into(),
                admin_option: true
            }
        );
    }

    #[test]
    fn invalid_combinations_say_why() {
        let msg = |v| grant_type(&p(v)).expect_err("invalid").to_string();
        assert!(msg(serde_json::json!({ "database": "d", "privileges": ["CONNECT"] })).contains("role"));
        assert!(msg(serde_json::json!({ "role": "r", "database": "d" })).contains("privileges are required"));
        assert!(
            msg(serde_json::json!({ "role": "r", "database": "d", "memberOf": "g" })).contains("not both")
        );
        assert!(
            msg(serde_json::json!({ "role": "r", "database": "d", "privileges": ["SELECT; DROP"] }))
                .contains("is not one of")
        );
        assert!(
            msg(serde_json::json!({ "role": "r", "memberOf": "g", "withOption": "GRANT" }))
                .contains("privileges only")
        );
    }

    #[test]
    fn statements_quote_every_identifier() {
        let t = GrantType::Database {
            role: "a\"b".into(),
            database: "c;d".into(),
            privileges: vec!["CONNECT"],
            grant_option: false,
        };
        let s = grant_statements(&t, true).expect("statements");
        assert_eq!(
            s,
            vec![
                "REVOKE ALL ON DATABASE \"c;d\" FROM \"a\"\"b\"".to_owned(),
                "GRANT CONNECT ON DATABASE \"c;d\" TO \"a\"\"b\"".to_owned(),
                "REVOKE ALL ON DATABASE \"c;d\" FROM PUBLIC".to_owned(),
            ]
        );
    }
}
