//! Caches kept by watches of what every reconcile of every XR reads: Compositions, CompositionRevisions,
//! Functions and FunctionRevisions, as upstream reads them from its informers instead of asking the
//! apiserver on each reconcile. The composed resources have theirs in [`super::watch`].
//!
//! The definition controller starts them once per term ([`Caches::start`]), as a child of its term:
//! they serve leader work only, so they are gated by the Lease like it, and stop with the term.
//!
//! How a read goes ([`Cache::get`], [`Cache::list`]):
//! - **Not synced yet.** A read waits up to [`SYNC_WAIT`] for the cache's first list; a cache still
//!   not synced then (its list keeps failing) is not read: the read goes to the apiserver, and later
//!   reads do not wait again until it has synced.
//! - **A hit** is served from the cache. It may lag the cluster by a watch event; whatever changed is
//!   reconciled again once the change reaches the cache (CompositionRevisions notify the composite
//!   controllers only after the cache holds the change, [`Caches::revision_changes`]).
//! - **A miss** (no object of that name, no object matching the selector) is confirmed by a live read
//!   before anyone acts on it: an object created a moment ago is never taken for absent, and what is
//!   absent (an error path: no Composition, no revision yet) costs what it cost before.
//!
//! Selection from the cache matches what the live LIST gave: label selectors of the form `k=v,...`
//! (what [`super::fields`] builds) are matched here, anything else is left to the apiserver, and lists
//! are ordered by name, as the apiserver lists cluster-scoped objects.

use std::collections::BTreeMap;
use std::fmt::Debug;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use apis::apiextensions::{Composition, CompositionRevision};
use apis::pkg::{Function, FunctionRevision};
use futures::{FutureExt, StreamExt};
use kube::api::ListParams;
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::watcher;
use kube::{Api, Resource, ResourceExt};
use manager::TermContext;
use serde::de::DeserializeOwned;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::kind_watch;

/// How long a read waits for a cache's first list before it reads from the apiserver instead.
pub const SYNC_WAIT: Duration = Duration::from_secs(5);

/// What happens while a cache's watch fails.
const MEANWHILE: &str = "reads of it are served from what the cache last saw, and misses from the apiserver";

/// The cache of one cluster-scoped kind, with the live API it falls back to.
pub struct Cache<K>
where
    K: Resource<DynamicType = ()> + Clone + 'static,
{
    store: Store<K>,
    api: Api<K>,
    /// Whether a read waited [`SYNC_WAIT`] for the first sync in vain.
    gave_up: AtomicBool,
}

impl<K> Cache<K>
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
{
    /// A cache over `store`, which reads that miss go past to the apiserver through `client`.
    fn new(store: Store<K>, client: &kube::Client) -> Self {
        Self {
            store,
            api: Api::all(client.clone()),
            gave_up: AtomicBool::new(false),
        }
    }

    /// Whether the cache has synced, waiting up to [`SYNC_WAIT`] for it, once: after one wait in vain
    /// (its list keeps failing: the CRD is not installed, or RBAC forbids it), reads no longer wait but
    /// go to the apiserver until it has synced.
    async fn synced(&self) -> bool {
        if let Some(ready) = self.store.wait_until_ready().now_or_never() {
            return ready.is_ok();
        }
        if self.gave_up.load(Ordering::Relaxed) {
            return false;
        }
        let ready = matches!(
            tokio::time::timeout(SYNC_WAIT, self.store.wait_until_ready()).await,
            Ok(Ok(()))
        );
        if !ready {
            self.gave_up.store(true, Ordering::Relaxed);
        }
        ready
    }

    /// The object named `name`: from the cache when it holds it, else from the apiserver (a miss is
    /// confirmed live, see the module's docs).
    pub async fn get(&self, name: &str) -> Result<Option<K>, kube::Error> {
        if self.synced().await
            && let Some(o) = self.store.get(&ObjectRef::new(name))
        {
            return Ok(Some((*o).clone()));
        }
        self.api.get_opt(name).await
    }

    /// The objects whose labels match `selector` (empty: all), ordered by name: from the cache when it
    /// holds any and the selector is one it can match, else from the apiserver.
    pub async fn list(&self, selector: &str) -> Result<Vec<K>, kube::Error> {
        if let Some(terms) = parse_selector(selector)
            && self.synced().await
        {
            let found = sorted(
                self.store
                    .state_filter(|o| matches(&terms, o.labels()))
                    .into_iter()
                    .map(|o| (*o).clone())
                    .collect(),
            );
            if !found.is_empty() {
                return Ok(found);
            }
        }
        let mut lp = ListParams::default();
        if !selector.is_empty() {
            lp = lp.labels(selector);
        }
        Ok(self.api.list(&lp).await?.items)
    }
}

/// `objs` ordered by name, as the apiserver lists cluster-scoped objects.
fn sorted<K: Resource>(mut objs: Vec<K>) -> Vec<K> {
    objs.sort_by_key(ResourceExt::name_any);
    objs
}

/// The caches of the composite controllers.
pub struct Caches {
    /// Compositions.
    pub compositions: Cache<Composition>,
    /// CompositionRevisions.
    pub revisions: Cache<CompositionRevision>,
    /// Functions.
    pub functions: Cache<Function>,
    /// FunctionRevisions.
    pub function_revisions: Cache<FunctionRevision>,
    /// Who hears of changed CompositionRevisions.
    revision_subscribers: Subscribers,
}

type Subscribers = Arc<Mutex<Vec<mpsc::UnboundedSender<Arc<CompositionRevision>>>>>;

impl Debug for Caches {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Caches").finish_non_exhaustive()
    }
}

impl Caches {
    /// Starts the watches that keep the caches, as the child `composite/caches` of `term`; they stop
    /// with the term.
    pub fn start(term: &TermContext) -> Result<Arc<Self>, manager::TermEnded> {
        let client = term.client().clone();
        let (compositions, w_compositions) = reflector::store::<Composition>();
        let (revisions, w_revisions) = reflector::store::<CompositionRevision>();
        let (functions, w_functions) = reflector::store::<Function>();
        let (function_revisions, w_function_revisions) = reflector::store::<FunctionRevision>();
        let revision_subscribers: Subscribers = Arc::default();
        let caches = Arc::new(Self {
            compositions: Cache::new(compositions, &client),
            revisions: Cache::new(revisions, &client),
            functions: Cache::new(functions, &client),
            function_revisions: Cache::new(function_revisions, &client),
            revision_subscribers: revision_subscribers.clone(),
        });
        term.spawn_child("composite/caches", move |ctx: TermContext| async move {
            let token = ctx.token().clone();
            let c = ctx.client().clone();
            futures::join!(
                keep(Api::all(c.clone()), w_compositions, &token, |_| {}),
                keep(Api::all(c.clone()), w_revisions, &token, |rev| {
                    notify(&revision_subscribers, rev);
                }),
                keep(Api::all(c.clone()), w_functions, &token, |_| {}),
                keep(Api::all(c), w_function_revisions, &token, |_| {}),
            );
            Ok::<(), manager::BoxError>(())
        })?;
        Ok(caches)
    }

    /// The CompositionRevisions that change from now on (and each one the cache lists again after a
    /// watch failure), each sent once the cache holds it.
    pub fn revision_changes(&self) -> mpsc::UnboundedReceiver<Arc<CompositionRevision>> {
        let (tx, rx) = mpsc::unbounded_channel();
        self.revision_subscribers
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .push(tx);
        rx
    }
}

/// Sends `rev` to every subscriber still listening, forgetting the others.
fn notify(subscribers: &Subscribers, rev: Arc<CompositionRevision>) {
    subscribers
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .retain(|tx| tx.send(rev.clone()).is_ok());
}

/// Keeps the cache that `writer` fills with the objects of `api` until `token` is cancelled, giving each
/// object that changed to `changed` once the cache holds it.
async fn keep<K>(
    api: Api<K>,
    writer: reflector::store::Writer<K>,
    token: &CancellationToken,
    mut changed: impl FnMut(Arc<K>),
) where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
{
    let what = format!("{} (cache of the composite controllers)", K::kind(&()));
    let events = kind_watch::reflected(api, watcher::Config::default(), writer, what, MEANWHILE);
    futures::pin_mut!(events);
    loop {
        let ev = tokio::select! {
            () = token.cancelled() => return,
            ev = events.next() => ev,
        };
        match ev {
            None => return,
            Some(watcher::Event::Apply(o) | watcher::Event::Delete(o) | watcher::Event::InitApply(o)) => {
                changed(Arc::new(o))
            }
            Some(_) => {}
        }
    }
}

/// A label selector of equality terms (`k=v` or `k==v`, comma-separated; empty: everything), or `None`
/// when it holds anything else or a term the apiserver would refuse: such a selector is left to the
/// apiserver, which matches it or says what is wrong with it.
pub fn parse_selector(selector: &str) -> Option<Vec<(String, String)>> {
    if selector.trim().is_empty() {
        return Some(Vec::new());
    }
    selector
        .split(',')
        .map(|term| {
            let (k, v) = term.split_once("==").or_else(|| term.split_once('='))?;
            let (k, v) = (k.trim(), v.trim());
            (valid_key(k) && valid_value(v)).then(|| (k.to_owned(), v.to_owned()))
        })
        .collect()
}

/// Whether `labels` satisfy every term.
pub fn matches(terms: &[(String, String)], labels: &BTreeMap<String, String>) -> bool {
    terms.iter().all(|(k, v)| labels.get(k) == Some(v))
}

/// A label key: an optional DNS-subdomain prefix and `/`, then a name of at most 63 characters.
fn valid_key(k: &str) -> bool {
    let (prefix, name) = k.rsplit_once('/').unwrap_or(("", k));
    let prefix_ok = prefix.len() <= 253
        && prefix
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '.');
    let name_ok = !name.is_empty() && valid_value(name);
    (k.rsplit_once('/').is_none() || !prefix.is_empty()) && prefix_ok && name_ok
}

/// A label value: empty, or at most 63 alphanumerics, `-`, `_` and `.`, beginning and ending with an
/// alphanumeric.
fn valid_value(v: &str) -> bool {
    let alnum = |c: Option<char>| c.is_some_and(|c| c.is_ascii_alphanumeric());
    v.is_empty()
        || (v.len() <= 63
            && alnum(v.chars().next())
            && alnum(v.chars().last())
            && v.chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.')))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    #[test]
    fn equality_selectors_match_as_the_apiserver_does() {
        let terms = parse_selector("crossplane.io/composition-name=c,env==prod").expect("parses");
        assert_eq!(
            terms,
            vec![
                ("crossplane.io/composition-name".to_owned(), "c".to_owned()),
                ("env".to_owned(), "prod".to_owned())
            ]
        );
        assert!(matches(
            &terms,
            &labels(&[
                ("crossplane.io/composition-name", "c"),
                ("env", "prod"),
                ("x", "y")
            ])
        ));
        // Every term must hold; a missing label does not equal anything.
        assert!(!matches(
            &terms,
            &labels(&[("crossplane.io/composition-name", "c")])
        ));
        assert!(!matches(
            &terms,
            &labels(&[("crossplane.io/composition-name", "c"), ("env", "dev")])
        ));
        // An empty value matches only a label that is there and empty.
        let empty = parse_selector("a=").expect("parses");
        assert!(matches(&empty, &labels(&[("a", "")])) && !matches(&empty, &labels(&[])));
    }

    #[test]
    fn an_empty_selector_matches_everything() {
        let terms = parse_selector("").expect("parses");
        assert!(terms.is_empty() && matches(&terms, &labels(&[])));
    }

    #[test]
    fn selectors_the_cache_cannot_match_are_left_to_the_apiserver() {
        for s in [
            "a!=b", "a in (b)", "a", "!a", "a=b,", "a=b c", "a=-b", "/a=b", "a=b=c",
        ] {
            assert_eq!(parse_selector(s), None, "{s}");
        }
        // The positive control: the same keys as plain equalities parse.
        assert!(parse_selector("a=b,x.io/a=b").is_some());
    }

    #[test]
    fn lists_are_ordered_by_name() {
        let rev = |n: &str| -> CompositionRevision {
            serde_json::from_value(serde_json::json!({
                "apiVersion": "apiextensions.crossplane.io/v1", "kind": "CompositionRevision",
                "metadata": {"name": n}, "spec": {"revision": 1, "compositeTypeRef": {"apiVersion": "a/v1", "kind": "X"}}
            }))
            .expect("revision")
        };
        let names: Vec<String> = sorted(vec![rev("c-2"), rev("a"), rev("c-1")])
            .iter()
            .map(ResourceExt::name_any)
            .collect();
        assert_eq!(names, ["a", "c-1", "c-2"]);
    }
}
