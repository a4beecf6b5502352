//! A watch that counts the objects of one kind in a given state (XRDs Established, XRs Ready), and
//! counts its own errors and re-lists too, so that none is dropped silently; and the wait for a count,
//! which fails with a message, never a figure, when the count is not reached in time.

use std::{
    collections::HashSet,
    time::{Duration, Instant},
};

use anyhow::bail;
use futures::StreamExt;
use kube::{
    Api,
    api::DynamicObject,
    runtime::{WatchStreamExt, watcher},
};
use tokio::{sync::watch, task::JoinHandle};

/// What the watch has seen so far.
#[derive(Clone, Debug, Default)]
pub struct Tally {
    /// Objects in the state now.
    pub done: usize,
    /// Errors the watch stream returned (each followed by a retry after a backoff).
    pub errors: usize,
    /// Re-lists after the first list (a watch that had to start over).
    pub restarts: usize,
    /// The last error, in words.
    pub last_error: Option<String>,
}

/// Watches `api` and keeps a [`Tally`] of the objects for which `done` holds; ends when aborted.
pub fn count(
    api: Api<DynamicObject>,
    done: fn(&DynamicObject) -> bool,
) -> (JoinHandle<()>, watch::Receiver<Tally>) {
    let (tx, rx) = watch::channel(Tally::default());
    let task = tokio::spawn(async move {
        let mut seen = HashSet::new();
        let mut lists = 0usize;
        let mut stream = std::pin::pin!(watcher(api, watcher::Config::default()).default_backoff());
        while let Some(event) = stream.next().await {
            match event {
                Ok(watcher::Event::Init) => {
                    lists += 1;
                    if lists > 1 {
                        tx.send_modify(|t| t.restarts += 1);
                    }
                }
                Ok(watcher::Event::InitApply(o) | watcher::Event::Apply(o)) => {
                    let key = (o.metadata.namespace.clone(), o.metadata.name.clone());
                    if done(&o) {
                        seen.insert(key);
                    } else {
                        seen.remove(&key);
                    }
                }
                Ok(watcher::Event::Delete(o)) => {
                    seen.remove(&(o.metadata.namespace, o.metadata.name));
                }
                Ok(watcher::Event::InitDone) => {}
                Err(e) => tx.send_modify(|t| {
                    t.errors += 1;
                    t.last_error = Some(e.to_string());
                }),
            }
            tx.send_if_modified(|t| std::mem::replace(&mut t.done, seen.len()) != seen.len());
        }
    });
    (task, rx)
}

/// Waits until `n` objects are done, at most `limit`; fails, saying how far it got, when not. `who`
/// names the core, `what` the objects and their state ("XRDs Established").
pub async fn wait(
    rx: &mut watch::Receiver<Tally>,
    n: usize,
    limit: Duration,
    who: &str,
    what: &str,
) -> anyhow::Result<()> {
    let started = Instant::now();
    let reached = tokio::time::timeout(limit, rx.wait_for(|t| t.done >= n))
        .await
        .is_ok_and(|r| r.is_ok());
    if reached {
        return Ok(());
    }
    let t = rx.borrow().clone();
    bail!(
        "{who} had {} of {n} {what} after {:.0} s, and the bench gives no figure for it; the watch \
         counting them saw {} errors{} and {} re-lists",
        t.done,
        started.elapsed().as_secs_f64(),
        t.errors,
        t.last_error.map(|e| format!(" (last: {e})")).unwrap_or_default(),
        t.restarts,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The positive control of the verdict: a core that never gets there fails the bench with a
    /// message, not a figure.
    #[tokio::test]
    async fn a_core_that_never_gets_there_fails_the_bench() {
        let (tx, mut rx) = watch::channel(Tally {
            done: 3,
            errors: 1,
            restarts: 0,
            last_error: Some("connection refused".into()),
        });
        let err = wait(
            &mut rx,
            10,
            Duration::from_millis(50),
            "the core",
            "XRDs Established",
        )
        .await
        .expect_err("10 XRDs were never Established");
        let text = err.to_string();
        assert!(text.contains("the core had 3 of 10 XRDs Established"), "{text}");
        assert!(text.contains("1 errors (last: connection refused)"), "{text}");
        tx.send_modify(|t| t.done = 10);
        wait(
            &mut rx,
            10,
            Duration::from_millis(50),
            "the core",
            "XRDs Established",
        )
        .await
        .expect("all 10 are Established");
    }
}
