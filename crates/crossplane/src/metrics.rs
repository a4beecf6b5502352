//! controller-runtime's reconcile metrics (`controller_runtime_reconcile_*`) and work queue series
//! (`workqueue_*`, see [`manager::workqueue`]) for the dynamic `composite/<xrd>` controllers; the others
//! get theirs from [`manager::controller::ControllerBuilder`].

use std::future::Future;
use std::sync::Arc;

use kube::runtime::controller::Action;
use manager::ReconcileMetrics;
use manager::controller::{Failure, guarded, result_of};

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
        if let Some(w) = metrics.workqueue() {
            w.register_controller(controller);
        }
        Self {
            metrics,
            controller: controller.into(),
        }
    }

    /// Runs one reconcile and records its result and duration; a panic becomes an error.
    pub async fn time(
        &self,
        reconcile: impl Future<Output = Result<Action, Error>>,
    ) -> Result<Action, Error> {
        let work = self.metrics.workqueue().map(|w| w.start(&self.controller));
        let timer = self.metrics.start(&self.controller);
        // A panic is recovered and counted, and the XR retried, as controller-runtime does by default.
        let result = match guarded(reconcile, None).await {
            Ok(action) => Ok(action),
            Err(Failure::Reconcile(e)) => Err(e),
            Err(e) => {
                self.metrics.panicked(&self.controller);
                Err(Error::Message(e.to_string()))
            }
        };
        timer.finish(result_of(&result));
        drop(work);
        // As the error policy: every failure but the end of the term is requeued.
        if let (Err(e), Some(w)) = (&result, self.metrics.workqueue())
            && !e.is_not_leader()
        {
            w.retry(&self.controller);
        }
        result
    }
}
