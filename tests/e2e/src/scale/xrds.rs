//! `n` namespaced v2 XRDs, each of a group and kind of its own, created at once; a watch counts them
//! Established, and counts its own errors and re-lists too, so that none is dropped silently.

use std::{
    collections::HashSet,
    time::{Duration, Instant},
};

use anyhow::{Context, bail};
use futures::StreamExt;
use kube::{
    Api,
    api::{ApiResource, DynamicObject, GroupVersionKind, PostParams},
    runtime::{WatchStreamExt, watcher},
};
use serde_json::{Value, json};
use tokio::{sync::watch, task::JoinHandle};

/// How many requests create the XRDs at once.
const CREATORS: usize = 16;

/// How long `n` XRDs may take to be Established: 3 minutes, and 2 s more per XRD.
pub fn timeout(n: usize) -> Duration {
    Duration::from_secs(180 + 2 * n as u64)
}

/// The XRD kind.
pub fn api(client: &kube::Client) -> Api<DynamicObject> {
    let gvk = GroupVersionKind::gvk("apiextensions.crossplane.io", "v2", "CompositeResourceDefinition");
    Api::all_with(client.clone(), &ApiResource::from_gvk(&gvk))
}

/// The `i`th XRD: group `s<i>.scale.crossplane-rs.io`, kind `XScale<i>`, namespaced, one version with a
/// small schema.
pub fn xrd(i: usize) -> Value {
    let group = format!("s{i:04}.scale.crossplane-rs.io");
    let plural = format!("xscale{i:04}s");
    json!({
        "apiVersion": "apiextensions.crossplane.io/v2",
        "kind": "CompositeResourceDefinition",
        "metadata": {"name": format!("{plural}.{group}")},
        "spec": {
            "scope": "Namespaced",
            "group": group,
            "names": {"kind": format!("XScale{i:04}"), "plural": plural},
            "versions": [{"name": "v1", "served": true, "referenceable": true, "schema": {"openAPIV3Schema": {
                "type": "object",
                "properties": {"spec": {"type": "object", "properties": {"value": {"type": "string"}}}},
            }}}],
        },
    })
}

/// Creates XRDs `0..n`, [`CREATORS`] at a time; returns when the last create returned.
pub async fn create(api: &Api<DynamicObject>, n: usize) -> anyhow::Result<()> {
    let mut set = tokio::task::JoinSet::new();
    let per = n.div_ceil(CREATORS);
    for w in 0..CREATORS {
        let api = api.clone();
        set.spawn(async move {
            for i in (w * per)..((w + 1) * per).min(n) {
                let obj: DynamicObject = serde_json::from_value(xrd(i))?;
                api.create(&PostParams::default(), &obj)
                    .await
                    .with_context(|| format!("creating XRD number {i}"))?;
            }
            anyhow::Ok(())
        });
    }
    while let Some(r) = set.join_next().await {
        r??;
    }
    Ok(())
}

/// What the watch has seen so far.
#[derive(Clone, Debug, Default)]
pub struct Tally {
    /// XRDs Established now.
    pub established: usize,
    /// Errors the watch stream returned (each followed by a retry after a backoff).
    pub errors: usize,
    /// Re-lists after the first list (a watch that had to start over).
    pub restarts: usize,
    /// The last error, in words.
    pub last_error: Option<String>,
}

fn established(obj: &DynamicObject) -> bool {
    obj.data["status"]["conditions"].as_array().is_some_and(|cs| {
        cs.iter()
            .any(|c| c["type"] == "Established" && c["status"] == "True")
    })
}

/// Watches `api` and keeps a [`Tally`]; the task ends when aborted.
pub fn count(api: Api<DynamicObject>) -> (JoinHandle<()>, watch::Receiver<Tally>) {
    let (tx, rx) = watch::channel(Tally::default());
    let task = tokio::spawn(async move {
        let mut ready = HashSet::new();
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
                    let name = o.metadata.name.clone().unwrap_or_default();
                    if established(&o) {
                        ready.insert(name);
                    } else {
                        ready.remove(&name);
                    }
                }
                Ok(watcher::Event::Delete(o)) => {
                    ready.remove(&o.metadata.name.unwrap_or_default());
                }
                Ok(watcher::Event::InitDone) => {}
                Err(e) => tx.send_modify(|t| {
                    t.errors += 1;
                    t.last_error = Some(e.to_string());
                }),
            }
            tx.send_if_modified(|t| std::mem::replace(&mut t.established, ready.len()) != ready.len());
        }
    });
    (task, rx)
}

/// Waits until `n` XRDs are Established, at most `limit`; fails, saying how far it got, when not.
pub async fn wait(
    rx: &mut watch::Receiver<Tally>,
    n: usize,
    limit: Duration,
    who: &str,
) -> anyhow::Result<()> {
    let started = Instant::now();
    let reached = tokio::time::timeout(limit, rx.wait_for(|t| t.established >= n))
        .await
        .is_ok_and(|r| r.is_ok());
    if reached {
        return Ok(());
    }
    let t = rx.borrow().clone();
    bail!(
        "{who} established {} of {n} XRDs in {:.0} s, and the bench gives no figure for it; the watch \
         counting them saw {} errors{} and {} re-lists",
        t.established,
        started.elapsed().as_secs_f64(),
        t.errors,
        t.last_error.map(|e| format!(" (last: {e})")).unwrap_or_default(),
        t.restarts,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_xrd_has_a_group_and_kind_of_its_own() {
        let (a, b) = (xrd(7), xrd(8));
        assert_eq!(a["metadata"]["name"], "xscale0007s.s0007.scale.crossplane-rs.io");
        assert_ne!(a["spec"]["group"], b["spec"]["group"]);
        assert_ne!(a["spec"]["names"]["kind"], b["spec"]["names"]["kind"]);
        assert!(serde_json::from_value::<DynamicObject>(a).is_ok());
    }

    /// The positive control of the verdict: a core that never establishes its XRDs fails the bench
    /// with a message, not a figure.
    #[tokio::test]
    async fn a_core_that_never_establishes_fails_the_bench() {
        let (tx, mut rx) = watch::channel(Tally {
            established: 3,
            errors: 1,
            restarts: 0,
            last_error: Some("connection refused".into()),
        });
        let err = wait(&mut rx, 10, Duration::from_millis(50), "the core")
            .await
            .expect_err("10 XRDs were never Established");
        let text = err.to_string();
        assert!(text.contains("established 3 of 10 XRDs"), "{text}");
        assert!(text.contains("1 errors (last: connection refused)"), "{text}");
        tx.send_modify(|t| t.established = 10);
        wait(&mut rx, 10, Duration::from_millis(50), "the core")
            .await
            .expect("all 10 are Established");
    }
}
