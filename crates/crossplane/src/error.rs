//! The error of one reconcile. Its `Display` is what conditions and Events show: the apiserver's own
//! message and what to do ([`explain`]), never a `Debug` dump.

/// Why a reconcile failed.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A request failed, or the fence refused a write ([`Error::is_not_leader`]).
    #[error("{}", explain(.0))]
    Kube(#[from] kube::Error),
    /// An object could not be (de)serialised.
    #[error(transparent)]
    Json(#[from] serde_json::Error),
    /// Anything else, with a message meant for a condition.
    #[error("{0}")]
    Message(String),
}

impl manager::controller::ReconcileError for Error {
    fn is_not_leader(&self) -> bool {
        Error::is_not_leader(self)
    }

    fn is_conflict(&self) -> bool {
        Error::is_conflict(self)
    }
}

impl Error {
    /// True when the fence refused a write: the term is over.
    pub fn is_not_leader(&self) -> bool {
        match self {
            Self::Kube(e) => manager::fence::is_not_leader(e),
            _ => false,
        }
    }

    /// True for a 409 Conflict: someone else wrote first; retry soon, quietly.
    pub fn is_conflict(&self) -> bool {
        matches!(self, Self::Kube(kube::Error::Api(s)) if s.code == 409)
    }
}

/// True when `e` is a 404.
pub fn is_not_found(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == 404)
}

/// What the core does not have permission for, and how to give it.
const FORBIDDEN_HINT: &str = "the core's ServiceAccount may not do this: grant it with a ClusterRole labelled \
     rbac.crossplane.io/aggregate-to-crossplane: \"true\", which the core's ClusterRole aggregates";

/// A Kubernetes API error as users read it: the apiserver's message and what to do
/// ([`manager::controller::api_error`]; a 403 says how to grant the core the permission).
pub fn explain(e: &kube::Error) -> String {
    match manager::controller::api_error::code(e) {
        Some(403) => format!(
            "{} ({FORBIDDEN_HINT})",
            manager::controller::api_error::message(e)
        ),
        _ => manager::controller::api_error::explain(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_forbidden_write_says_how_to_grant_it_without_a_debug_dump() {
        let mut s = kube::core::Status::failure(
            r#"examples.lack.of.rights "x" is forbidden: User "system:serviceaccount:s:crossplane" cannot patch resource "examples""#,
            "Forbidden",
        );
        s.code = 403;
        let e = Error::Kube(kube::Error::Api(Box::new(s)));
        let shown = e.to_string();
        assert!(
            shown.starts_with(r#"examples.lack.of.rights "x" is forbidden"#),
            "{shown}"
        );
        assert!(shown.contains("aggregate-to-crossplane"), "{shown}");
        assert!(!shown.contains("Status {"), "{shown}");
    }
}
