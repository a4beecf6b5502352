//! NopResources changed while a scenario runs: one patch of `spec.forProvider.fields.integerField` at a
//! time, round robin over `<prefix>-0` … `<prefix>-<count - 1>`, until stopped; and the wait, on a watch,
//! until they have all settled afterwards ([`wait_settled`]).

use std::{
    sync::{
        Arc,
        atomic::{AtomicBool, Ordering},
    },
    time::Duration,
};

use std::collections::HashMap;

use anyhow::bail;
use futures::StreamExt;
use kube::{
    Api, ResourceExt,
    api::{DynamicObject, Patch, PatchParams},
    runtime::{WatchStreamExt, watcher},
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

/// Whether NopResource `r` is Ready, and Synced at its last generation (the provider has seen its last
/// change).
pub fn settled(r: &DynamicObject) -> bool {
    let condition = |kind: &str| {
        r.data["status"]["conditions"]
            .as_array()
            .and_then(|cs| cs.iter().find(|c| c["type"] == kind && c["status"] == "True"))
            .cloned()
    };
    condition("Ready").is_some()
        && condition("Synced").is_some_and(|c| c["observedGeneration"].as_i64() == r.metadata.generation)
}

/// Waits on a watch of `api` until `count` NopResources named `<prefix>-…` have [`settled`]; returns how
/// many did. Fails after `timeout` saying how many had, and how many times the watch failed and was
/// retried meanwhile; when it succeeds after retries, it says how many on stderr.
pub async fn wait_settled(
    api: Api<DynamicObject>,
    prefix: &str,
    count: usize,
    timeout: Duration,
) -> anyhow::Result<usize> {
    let mut state: HashMap<String, bool> = HashMap::new();
    let mut failures = 0u32;
    let mut events = watcher(api, watcher::Config::default()).default_backoff().boxed();
    let watch = async {
        while let Some(ev) = events.next().await {
            let (r, present) = match ev {
                Ok(watcher::Event::Apply(r) | watcher::Event::InitApply(r)) => (r, true),
                Ok(watcher::Event::Delete(r)) => (r, false),
                Ok(_) => continue,
                Err(_) => {
                    failures += 1;
                    continue;
                }
            };
            if !r.name_any().starts_with(&format!("{prefix}-")) {
                continue;
            }
            if present {
                state.insert(r.name_any(), settled(&r));
            } else {
                state.remove(&r.name_any());
            }
            if state.values().filter(|s| **s).count() >= count {
                return true;
            }
        }
        false
    };
    let done = tokio::time::timeout(timeout, watch).await.unwrap_or(false);
    let ready = state.values().filter(|s| **s).count();
    if !done {
        bail!(
            "{ready} of {count} NopResources {prefix}-* Ready and Synced at their last generation after {}s \
             (the watch failed and was retried {failures} times)",
            timeout.as_secs()
        );
    }
    if failures > 0 {
        eprintln!(
            "[churn] {ready} of {count} NopResources {prefix}-* settled; the watch failed and was retried \
             {failures} times on the way"
        );
    }
    Ok(ready)
}
