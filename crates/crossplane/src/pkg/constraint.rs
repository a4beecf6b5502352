//! Semver constraints as packages write them (`crossplane.version`, `dependsOn[].version`), read the
//! way upstream's Masterminds/semver reads them: a leading `v` is allowed everywhere, terms are joined
//! by commas or spaces (all must hold), alternatives by `||`, and a bare version means exactly that
//! version (not Cargo's caret).

use semver::{Version, VersionReq};

/// A parsed constraint.
#[derive(Debug, Clone, PartialEq)]
pub struct Constraint {
    alternatives: Vec<VersionReq>,
    text: String,
}

impl Constraint {
    /// Parses `text`; the error says in words what cannot be read.
    pub fn parse(text: &str) -> Result<Constraint, String> {
        let mut alternatives = Vec::new();
        for alt in text.split("||") {
            let terms = terms(alt);
            if terms.is_empty() {
                return Err(format!("{text:?} has an empty alternative"));
            }
            let req = terms.join(", ");
            let req =
                VersionReq::parse(&req).map_err(|e| format!("{text:?} is not a semver constraint ({e})"))?;
            alternatives.push(req);
        }
        Ok(Constraint {
            alternatives,
            text: text.to_string(),
        })
    }

    /// Whether `version` (with or without a leading `v`) satisfies the constraint. A version that is
    /// not semver satisfies nothing.
    pub fn matches(&self, version: &str) -> bool {
        let Some(v) = parse_version(version) else {
            return false;
        };
        self.alternatives.iter().any(|r| r.matches(&v))
    }
}

impl std::fmt::Display for Constraint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.text)
    }
}

/// A version with or without its leading `v`.
pub fn parse_version(version: &str) -> Option<Version> {
    Version::parse(version.trim().trim_start_matches('v')).ok()
}

/// The terms of one alternative, each with its operator (`=` when none) and without `v`.
fn terms(alt: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let mut pending_op: Option<String> = None;
    for raw in alt.split([',', ' ']).map(str::trim).filter(|s| !s.is_empty()) {
        let op_len = raw
            .find(|c: char| !matches!(c, '<' | '>' | '=' | '~' | '^' | '!'))
            .unwrap_or(raw.len());
        let (op, version) = raw.split_at(op_len);
        if version.is_empty() {
            // An operator written apart from its version (`>= 1.0.0`).
            pending_op = Some(op.to_string());
            continue;
        }
        let op = pending_op.take().unwrap_or_else(|| op.to_string());
        let op = if op.is_empty() { "=".to_string() } else { op };
        let version = version.trim_start_matches('v');
        out.push(format!("{op}{version}"));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_constraints_as_upstream_writes_them() {
        let c = Constraint::parse(">=v1.20.0").expect("parses");
        assert!(c.matches("v2.3.4"));
        assert!(c.matches("1.20.0"));
        assert!(!c.matches("v1.19.9"));
        let exact = Constraint::parse("v0.2.0").expect("parses");
        assert!(exact.matches("v0.2.0"));
        assert!(!exact.matches("v0.2.1"), "a bare version is exact, not a caret");
        let range = Constraint::parse(">=v1.0.0, <v2.0.0").expect("parses");
        assert!(range.matches("v1.5.0") && !range.matches("v2.0.0"));
        let spaced = Constraint::parse(">= 1.0.0 < 2.0.0").expect("parses");
        assert!(spaced.matches("1.2.0") && !spaced.matches("2.1.0"));
        let or = Constraint::parse("<v1.0.0 || >=v3.0.0").expect("parses");
        assert!(or.matches("v0.9.0") && or.matches("v3.1.0") && !or.matches("v2.0.0"));
        assert!(!c.matches("latest"));
        assert!(Constraint::parse(">=banana").is_err());
        assert!(Constraint::parse("").is_err());
    }
}
