//! One WatchOperation's watch (upstream's `internal/controller/ops/watched`): a task that watches the
//! kind the WatchOperation names (in its namespace, with its labels) and creates an Operation for each
//! change it sees: every object of the first list, every later version, and every deletion (with a
//! synthetic resourceVersion, [`apis::ops::RESOURCE_VERSION_DELETED`]).
//!
//! For each change it reads the WatchOperation again (gone, deleted or paused: nothing), applies its
//! `concurrencyPolicy` to the Operations still running, and creates the Operation named after the change
//! ([`super::template::watch_operation_name`]) unless it exists already, so seeing a change twice (a
//! re-list) runs it once. The watch is [`kind_watch::events`]: a failure is retried with backoff, and
//! counted and logged in words. The task lives in the term: it ends when the term's token is cancelled or
//! when the WatchOperation controller stops it.

use std::time::Duration;

use apis::ops::{self, ConcurrencyPolicy, Operation, WatchOperation, WatchSpec};
use futures::StreamExt;
use jiff::Timestamp;
use kube::api::PostParams;
use kube::core::{ApiResource, DynamicObject};
use kube::runtime::watcher;
use kube::{Api, ResourceExt};
use tokio_util::sync::CancellationToken;

use super::cron::{delete_operation, operations, paused};
use super::lifecycle;
use super::template::{Watched, watch_operation, watch_operation_name};
use crate::composite::kind_watch;
use crate::error::Error;

/// Tries of one change before it is given up (each a second apart).
const TRIES: usize = 3;

/// What happens while the watch fails, for its log.
const MEANWHILE: &str = "no Operation starts for its changes";

/// The label selector of a watch, `k=v,...` (None when it selects everything).
pub fn label_selector(spec: &WatchSpec) -> Option<String> {
    (!spec.match_labels.is_empty()).then(|| {
        spec.match_labels
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join(",")
    })
}

/// The API a watch reads: the namespace's for a namespaced kind with one given, else every namespace.
pub fn api(
    client: &kube::Client,
    resource: &ApiResource,
    namespaced: bool,
    spec: &WatchSpec,
) -> Api<DynamicObject> {
    if namespaced && !spec.namespace.is_empty() {
        Api::namespaced_with(client.clone(), &spec.namespace, resource)
    } else {
        Api::all_with(client.clone(), resource)
    }
}

fn watched(spec: &WatchSpec, obj: &DynamicObject, deleted: bool) -> Watched {
    Watched {
        api_version: spec.api_version.clone(),
        kind: spec.kind.clone(),
        namespace: obj.namespace().unwrap_or_default(),
        name: obj.name_any(),
        uid: if deleted {
            String::new()
        } else {
            obj.uid().unwrap_or_default()
        },
        resource_version: if deleted {
            ops::RESOURCE_VERSION_DELETED.to_owned()
        } else {
            obj.resource_version().unwrap_or_default()
        },
        deleted: deleted
            .then(|| Timestamp::from_second(Timestamp::now().as_second()).unwrap_or(Timestamp::UNIX_EPOCH)),
    }
}

/// Watches for WatchOperation `name` until `token` is cancelled.
pub async fn run(
    client: kube::Client,
    name: String,
    spec: WatchSpec,
    api: Api<DynamicObject>,
    token: CancellationToken,
) {
    let mut wc = watcher::Config::default();
    if let Some(s) = label_selector(&spec) {
        wc = wc.labels(&s);
    }
    let what = format!("{} for WatchOperation {name}", spec.kind);
    let mut events = kind_watch::events(api, wc, what, MEANWHILE).boxed();
    loop {
        let event = tokio::select! {
            () = token.cancelled() => break,
            e = events.next() => e,
        };
        let change = match event {
            None => break,
            Some(watcher::Event::Apply(o) | watcher::Event::InitApply(o)) => watched(&spec, &o, false),
            Some(watcher::Event::Delete(o)) => watched(&spec, &o, true),
            Some(_) => continue,
        };
        for attempt in 1..=TRIES {
            match handle(&client, &name, &change).await {
                Ok(Handled::Stop) => return,
                Ok(Handled::Done) => break,
                Err(e) if e.is_not_leader() => return,
                Err(e) => {
                    tracing::warn!(watchoperation = %name, resource = %change.name, attempt, "cannot create the Operation for a change: {e}");
                    tokio::select! {
                        () = token.cancelled() => return,
                        () = tokio::time::sleep(Duration::from_secs(1)) => {}
                    }
                }
            }
        }
    }
}

enum Handled {
    /// The change is dealt with.
    Done,
    /// The WatchOperation is gone: stop watching.
    Stop,
}

async fn handle(client: &kube::Client, name: &str, change: &Watched) -> Result<Handled, Error> {
    let Some(wo) = Api::<WatchOperation>::all(client.clone()).get_opt(name).await? else {
        return Ok(Handled::Stop);
    };
    if wo.metadata.deletion_timestamp.is_some() {
        return Ok(Handled::Stop);
    }
    if paused(&wo) {
        return Ok(Handled::Done);
    }
    let ops = operations(client, ops::LABEL_WATCH_OPERATION, name).await?;
    let running = lifecycle::running(&ops);
    if !running.is_empty() {
        match wo.spec.concurrency_policy.unwrap_or_default() {
            ConcurrencyPolicy::Allow => {}
            ConcurrencyPolicy::Forbid => return Ok(Handled::Done),
            ConcurrencyPolicy::Replace => {
                for r in &running {
                    delete_operation(client, r).await?;
                }
            }
        }
    }
    let op_name = watch_operation_name(name, change);
    if ops.iter().any(|o| o.name_any() == op_name) {
        return Ok(Handled::Done);
    }
    let op = watch_operation(&wo, change, op_name);
    match Api::<Operation>::all(client.clone())
        .create(&PostParams::default(), &op)
        .await
    {
        Ok(_) => Ok(Handled::Done),
        Err(kube::Error::Api(s)) if s.code == 409 && s.reason == "AlreadyExists" => Ok(Handled::Done),
        Err(e) => Err(e.into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_selector_joins_the_labels() {
        let mut spec = WatchSpec::default();
        assert_eq!(label_selector(&spec), None);
        spec.match_labels.insert("test".into(), "basic-watchop".into());
        spec.match_labels.insert("a".into(), "b".into());
        assert_eq!(label_selector(&spec).as_deref(), Some("a=b,test=basic-watchop"));
    }
}
