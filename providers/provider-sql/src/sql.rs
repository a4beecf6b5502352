//! Building SQL safely. Queries take their values as bound parameters (`$1`). Utility statements
//! (`CREATE ROLE`, `GRANT`, …) cannot take parameters, so every identifier goes through [`quote_ident`]
//! and every literal through [`quote_literal`]; privilege keywords are checked against a fixed list
//! before they are written. Nothing from a spec is ever spliced into SQL any other way.

/// PostgreSQL keeps identifiers up to 63 bytes (NAMEDATALEN − 1) and silently truncates longer ones.
pub const MAX_IDENTIFIER_BYTES: usize = 63;

/// A name or value that cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum InvalidSql {
    /// An empty identifier.
    #[error("{what} must not be empty")]
    Empty {
        /// What it names.
        what: &'static str,
    },
    /// Contains NUL.
    #[error("{what} {value:?} contains a NUL character")]
    Nul {
        /// What it names.
        what: &'static str,
        /// The value.
        value: String,
    },
    /// Longer than PostgreSQL keeps.
    #[error("{what} {value:?} is {len} bytes long; PostgreSQL allows at most 63")]
    TooLong {
        /// What it names.
        what: &'static str,
        /// The value.
        value: String,
        /// Its length in bytes.
        len: usize,
    },
    /// An unknown privilege keyword.
    #[error("privilege {0:?} is not one of CREATE, TEMPORARY, TEMP, CONNECT, ALL, ALL PRIVILEGES")]
    Privilege(String),
}

/// Checks that `name` is a usable identifier (not empty, no NUL, at most 63 bytes).
pub fn check_ident(what: &'static str, name: &str) -> Result<(), InvalidSql> {
    if name.is_empty() {
        return Err(InvalidSql::Empty { what });
    }
    if name.contains('\0') {
        return Err(InvalidSql::Nul {
            what,
            value: name.to_owned(),
        });
    }
    if name.len() > MAX_IDENTIFIER_BYTES {
        return Err(InvalidSql::TooLong {
            what,
            value: name.to_owned(),
            len: name.len(),
        });
    }
    Ok(())
}

/// A double-quoted identifier: `"` doubled inside, always quoted (so case and every character survive).
pub fn quote_ident(what: &'static str, name: &str) -> Result<String, InvalidSql> {
    check_ident(what, name)?;
    Ok(format!("\"{}\"", name.replace('"', "\"\"")))
}

/// A string literal in escape-string syntax: `E'…'` with `\` and `'` escaped, so it means the same
/// whatever `standard_conforming_strings` is.
pub fn quote_literal(what: &'static str, value: &str) -> Result<String, InvalidSql> {
    if value.contains('\0') {
        return Err(InvalidSql::Nul {
            what,
            value: value.to_owned(),
        });
    }
    Ok(format!("E'{}'", value.replace('\\', "\\\\").replace('\'', "\\'")))
}

/// The privileges a database grant may name, normalized: `ALL` and `ALL PRIVILEGES` expand to
/// `CONNECT`, `CREATE`, `TEMPORARY`; `TEMP` is `TEMPORARY`. Sorted, without duplicates.
pub fn database_privileges(privileges: &[String]) -> Result<Vec<&'static str>, InvalidSql> {
    let mut out = Vec::new();
    for p in privileges {
        match p.as_str() {
            "CONNECT" => out.push("CONNECT"),
            "CREATE" => out.push("CREATE"),
            "TEMPORARY" | "TEMP" => out.push("TEMPORARY"),
            "ALL" | "ALL PRIVILEGES" => out.extend(["CONNECT", "CREATE", "TEMPORARY"]),
            other => return Err(InvalidSql::Privilege(other.to_owned())),
        }
    }
    out.sort_unstable();
    out.dedup();
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identifiers_are_always_quoted_and_escaped() {
        assert_eq!(quote_ident("role", "app").as_deref(), Ok("\"app\""));
        assert_eq!(
            quote_ident("role", "a\"; DROP ROLE postgres; --").as_deref(),
            Ok("\"a\"\"; DROP ROLE postgres; --\"")
        );
        assert_eq!(quote_ident("role", "ünï-cødé").as_deref(), Ok("\"ünï-cødé\""));
        assert!(matches!(quote_ident("role", ""), Err(InvalidSql::Empty { .. })));
        assert!(matches!(quote_ident("role", "a\0b"), Err(InvalidSql::Nul { .. })));
        assert!(matches!(
            quote_ident("role", &"x".repeat(64)),
            Err(InvalidSql::TooLong { len: 64, .. })
        ));
        assert!(quote_ident("role", &"x".repeat(63)).is_ok());
        // 22 three-byte characters are 66 bytes.
        assert!(quote_ident("role", &"€".repeat(22)).is_err());
    }

    #[test]
    fn literals_escape_quotes_and_backslashes() {
        assert_eq!(quote_literal("v", "it's").as_deref(), Ok("E'it\\'s'"));
        assert_eq!(quote_literal("v", "a\\'b").as_deref(), Ok("E'a\\\\\\'b'"));
        assert!(quote_literal("v", "\0").is_err());
    }

    #[test]
    fn privileges_are_checked_and_normalized() {
        let p = |v: &[&str]| database_privileges(&v.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>());
        assert_eq!(p(&["CONNECT", "CREATE"]), Ok(vec!["CONNECT", "CREATE"]));
        assert_eq!(p(&["ALL"]), Ok(vec!["CONNECT", "CREATE", "TEMPORARY"]));
        assert_eq!(p(&["TEMP", "TEMPORARY"]), Ok(vec!["TEMPORARY"]));
        assert!(p(&["CONNECT; DROP ROLE x"]).is_err());
        assert!(p(&["connect"]).is_err());
    }
}
