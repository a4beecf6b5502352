//! controller-runtime's reconcile metrics (`controller_runtime_reconcile_*`) for this crate's
//! controllers, including the dynamic `composite/<xrd>` ones.

use std::future::Future;
use std::sync::Arc;

use kube::runtime::controller::Action;
use manager::{ReconcileMetrics, ReconcileResult};

use crate::error::Error;

/// Times and counts the reconciles of one controller.
#[derive(Clone)]
pub struct Recorder {
    metrics: ReconcileMetrics,
    controller: Arc<str>,
}

impl std::fmt::Debug for Recorder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Recorder")
            .field("controller", &self.controller)
            .finish()
    }
}

impl Recorder {
    /// A recorder for `controller`; its series start at zero.
    pub fn new(metrics: ReconcileMetrics, controller: &str) -> Self {
        metrics.register_controller(controller);
        Self {
            metrics,
            controller: controller.into(),
        }
    }

    /// Runs one reconcile and records its result and duration.
    pub async fn time(
        &self,
        reconcile: impl Future<Output = Result<Action, Error>>,
    ) -> Result<Action, Error> {
        let timer = self.metrics.start(&self.controller);
        let result = reconcile.await;
        timer.finish(result_of(&result));
        result
    }
}

/// The controller-runtime result label of a reconcile.
pub fn result_of(result: &Result<Action, Error>) -> ReconcileResult {
    match result {
        Err(_) => ReconcileResult::Error,
        Ok(a) if *a == Action::await_change() => ReconcileResult::Success,
        Ok(_) => ReconcileResult::RequeueAfter,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn results_map_to_controller_runtime_labels() {
        assert_eq!(result_of(&Ok(Action::await_change())), ReconcileResult::Success);
        assert_eq!(
            result_of(&Ok(Action::requeue(Duration::from_secs(1)))),
            ReconcileResult::RequeueAfter
        );
        assert_eq!(
            result_of(&Err(Error::Message("x".into()))),
            ReconcileResult::Error
        );
    }
}
