//! NopResources changed while a scenario runs: one patch of `spec.forProvider.fields.integerField` at a
//! time, round robin over `<prefix>-0` … `<prefix>-<count - 1>`, until stopped.

use std::{
    sync::{
        Arc,
        atomic::{AtomicBool, Ordering},
    },
    time::Duration,
};

use kube::{
    Api,
    api::{DynamicObject, Patch, PatchParams},
};
use serde_json::json;
use tokio::task::JoinHandle;

/// A running churn.
pub struct Churn {
    running: Arc<AtomicBool>,
    task: JoinHandle<anyhow::Result<u64>>,
}

impl Churn {
    /// Starts changing `count` NopResources named `<prefix>-<i>` in `api`, one every `every`.
    pub fn start(api: Api<DynamicObject>, prefix: &str, count: usize, every: Duration) -> Churn {
        let running = Arc::new(AtomicBool::new(true));
        let prefix = prefix.to_owned();
        let task = {
            let running = running.clone();
            tokio::spawn(async move {
                let mut k = 0u64;
                while running.load(Ordering::Relaxed) {
                    k += 1;
                    let patch = json!({"spec": {"forProvider": {"fields": {"integerField": k}}}});
                    let name = format!("{prefix}-{}", k as usize % count.max(1));
                    api.patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
                        .await
                        .map_err(|e| anyhow::anyhow!("changing NopResource {name}: {e}"))?;
                    tokio::time::sleep(every).await;
                }
                anyhow::Ok(k)
            })
        };
        Churn { running, task }
    }

    /// Stops it; returns how many changes it made, or the first change that failed.
    pub async fn stop(self) -> anyhow::Result<u64> {
        self.running.store(false, Ordering::Relaxed);
        self.task.await?
    }
}
