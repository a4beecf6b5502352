//! Operations: day-two work run by function pipelines (upstream's `internal/controller/ops` and
//! `internal/ops`, API group `ops.crossplane.io`, alpha upstream and, as there, on only with
//! `--enable-operations`).
//!
//! Modules, one concept each:
//! - [`operation`]: the Operation reconciler, which runs the pipeline once, applies what it desires
//!   and records the outcome, retrying failed runs ([`retry`]) up to `spec.retryLimit`;
//! - [`pipeline`]: one run of an operation's pipeline over the function runner;
//! - [`cron`]: the CronOperation reconciler, creating Operations on a [`schedule`];
//! - [`watch`]: the WatchOperation reconciler, keeping one [`watched`] task per WatchOperation that
//!   creates an Operation per change of the kind it watches;
//! - [`template`]: the Operations those two create; [`lifecycle`]: what their Operations say (latest
//!   times, running ones, history to delete).
//!
//! All three controllers are one gated runnable ([`CONTROLLER_NAME`]): they run only while the core
//! holds its Lease, and the watch tasks end with the term.

pub mod cron;
pub mod lifecycle;
pub mod operation;
pub mod pipeline;
pub mod retry;
pub mod schedule;
pub mod template;
pub mod watch;
pub mod watched;

use std::sync::Arc;

use manager::controller::rbac::Rule;
use manager::{BoxError, ReconcileMetrics, TermContext};

use crate::composite::functions::Functions;

/// The name of the gated runnable that runs the Operation, CronOperation and WatchOperation
/// controllers.
pub const CONTROLLER_NAME: &str = "ops";

/// What the ops controllers share.
#[derive(Debug, Clone)]
pub struct Options {
    /// Only objects with these labels are reconciled (test isolation; `--watch-label-selector`).
    pub selector: Option<String>,
    /// Reconcile metrics.
    pub metrics: ReconcileMetrics,
    /// The function runner, shared with the composite controllers.
    pub functions: Arc<Functions>,
}

/// Whether upstream's `--enable-operations` was given (off by default, as upstream: the API is alpha).
pub fn enabled(given: &[manager::config::compat::Given]) -> bool {
    given
        .iter()
        .find(|g| g.name == "enable-operations")
        .is_some_and(|g| g.value != "false")
}

/// What the ops controllers need: the three kinds read and written (status and finalizers too),
/// Operations created and deleted, Functions and their revisions read (capabilities and endpoints),
/// the Secrets of step credentials read, and Events written. The resources an Operation applies or a
/// WatchOperation watches beyond upstream's base rules come from ClusterRoles aggregated to the core.
pub fn rbac_needs() -> Vec<Rule> {
    let all = &["get", "list", "watch", "create", "update", "patch", "delete"];
    vec![
        Rule::kind::<apis::ops::Operation>(&["", "status", "finalizers"], all),
        Rule::kind::<apis::ops::CronOperation>(&["", "status", "finalizers"], all),
        Rule::kind::<apis::ops::WatchOperation>(&["", "status", "finalizers"], all),
        Rule::kind::<apis::pkg::Function>(&[""], &["get", "list", "watch"]),
        Rule::kind::<apis::pkg::FunctionRevision>(&[""], &["get", "list", "watch"]),
        Rule::new("", &["secrets"], &["get"]),
        Rule::new("", &["events"], &["create", "patch"]),
    ]
}

/// Runs the three controllers until the term ends.
pub async fn run(ctx: TermContext, options: Options) -> Result<(), BoxError> {
    let (a, b, c) = tokio::join!(
        operation::run(ctx.clone(), options.clone()),
        cron::run(ctx.clone(), options.clone()),
        watch::run(ctx, options),
    );
    a.and(b).and(c)
}

/// Adds the ops controllers (gated) to `mgr` when `enabled`.
pub fn register(mgr: &mut manager::Manager, enabled: bool, options: Options) {
    if !enabled {
        tracing::debug!("operations are off (upstream's --enable-operations is not given)");
        return;
    }
    mgr.add_gated(CONTROLLER_NAME, move |ctx: TermContext| run(ctx, options.clone()));
}

#[cfg(test)]
mod tests {
    use manager::config::compat::Given;
    use manager::controller::rbac::allows;

    use super::*;

    #[test]
    fn operations_are_off_unless_enabled() {
        let g = |value: &str| Given {
            name: "enable-operations",
            value: value.into(),
            ignored: None,
        };
        assert!(!enabled(&[]));
        assert!(enabled(&[g("true")]));
        assert!(!enabled(&[g("false")]));
    }

    #[test]
    fn the_core_may_run_operations() {
        let r = rbac_needs();
        assert!(allows(&r, "ops.crossplane.io", "operations", "create"));
        assert!(allows(&r, "ops.crossplane.io", "operations/status", "update"));
        assert!(allows(
            &r,
            "ops.crossplane.io",
            "watchoperations/finalizers",
            "update"
        ));
        assert!(allows(&r, "pkg.crossplane.io", "functionrevisions", "list"));
    }
}
