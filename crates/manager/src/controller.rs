//! Driving a kube-runtime [`Controller`](kube::runtime::Controller) for one term: [`drive`].
//!
//! Two gaps of kube-runtime that every controller of a manager would otherwise hit:
//!
//! - **Stopping before the cache synced.** `Controller::graceful_shutdown_on` ends the trigger stream
//!   and waits for in-flight reconciles, but kube holds the reconcile runner until the controller's
//!   cache has synced, and that wait does not end with the trigger stream. A controller whose first
//!   list never succeeds — its CustomResourceDefinition is not installed, or RBAC forbids the list — so
//!   ignores the end of its term, until the manager aborts it at the stop margin (a lost term) or at
//!   `--graceful-shutdown-timeout` (a SIGTERM, 30 s by default). [`drive`] drops such a controller as
//!   soon as the term ends: with its cache unsynced it has reconciled nothing, so nothing is cut short.
//! - **Watch errors are silent.** The controller stream yields the watchers' errors, and the watcher's
//!   own retry warnings are quieted by [`logging`](crate::logging). [`drive`] reports them: a Forbidden
//!   names the permission to grant, a 404 asks whether the CRD is installed; at most one warning per
//!   minute, the rest at debug level.

use std::time::Duration;

use futures::{FutureExt, Stream, StreamExt};
use kube::runtime::{controller, reflector::Store, watcher};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

/// How often the same controller warns about failing watches.
const WARN_EVERY: Duration = Duration::from_secs(60);

/// Drives `controller` (the stream of `Controller::run`, built with `graceful_shutdown_on(token)`) to
/// its end, logging watch errors under the controller's `name`. When `token` is cancelled while `store`
/// (the controller's cache, from `Controller::store`) has not synced yet, the controller is dropped at
/// once instead of waiting for a sync that may never come. Returns whether it was dropped that way.
pub async fn drive<K, T, E1, E2>(
    name: &str,
    token: &CancellationToken,
    store: Store<K>,
    controller: impl Stream<Item = Result<T, controller::Error<E1, E2>>>,
) -> bool
where
    K: kube::runtime::reflector::Lookup + Clone + 'static,
    K::DynamicType: Eq + std::hash::Hash + Clone,
    E1: std::error::Error + 'static,
    E2: std::error::Error + 'static,
{
    let mut last_warning: Option<Instant> = None;
    let run = controller.for_each(|item| {
        if let Err(controller::Error::QueueError(e)) = &item {
            let loud = last_warning.is_none_or(|at| at.elapsed() >= WARN_EVERY);
            if loud {
                last_warning = Some(Instant::now());
                tracing::warn!(controller = name, "{}", watch_error_message(e));
            } else {
                tracing::debug!(controller = name, error = %chain(e), "watch failed again");
            }
        }
        futures::future::ready(())
    });
    let unsynced_stop = async {
        token.cancelled().await;
        if store.wait_until_ready().now_or_never().is_none() {
            return;
        }
        // Synced: kube's graceful shutdown finishes in-flight reconciles and ends the stream.
        std::future::pending::<()>().await;
    };
    tokio::select! {
        () = run => false,
        () = unsynced_stop => {
            tracing::info!(controller = name, "stopped before its cache synced (nothing was reconciled)");
            true
        }
    }
}

/// What a failing watch means and what to do about it.
fn watch_error_message(e: &(dyn std::error::Error + 'static)) -> String {
    let status = find_status(e);
    match status {
        Some(s) if s.is_forbidden() => format!(
            "cannot list or watch a resource this controller needs: forbidden; grant this process's \
             service account list and watch on it (a ClusterRole rule, bound to the service account) \
             ({})",
            s.message
        ),
        Some(s) if s.is_not_found() => format!(
            "cannot list or watch a resource this controller needs: the apiserver does not serve it; is \
             its CustomResourceDefinition installed? ({})",
            s.message
        ),
        _ => format!(
            "cannot list or watch a resource this controller needs; retrying with backoff: {}",
            chain(e)
        ),
    }
}

/// The apiserver's Status in an error's source chain, if any.
fn find_status<'a>(e: &'a (dyn std::error::Error + 'static)) -> Option<&'a kube::core::Status> {
    let mut current: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(err) = current {
        if let Some(kube::Error::Api(s)) = err.downcast_ref::<kube::Error>() {
            return Some(&**s);
        }
        if let Some(w) = err.downcast_ref::<watcher::Error>() {
            match w {
                watcher::Error::InitialListFailed(kube::Error::Api(s))
                | watcher::Error::WatchStartFailed(kube::Error::Api(s))
                | watcher::Error::WatchFailed(kube::Error::Api(s)) => return Some(&**s),
                watcher::Error::WatchError(s) => return Some(&**s),
                _ => {}
            }
        }
        current = err.source();
    }
    None
}

/// An error and its sources, `a: b: c`, skipping a source whose text its parent already shows.
fn chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut out = e.to_string();
    let mut current = e.source();
    while let Some(err) = current {
        let text = err.to_string();
        if !out.contains(&text) {
            out.push_str(": ");
            out.push_str(&text);
        }
        current = err.source();
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, thiserror::Error)]
    #[error("outer")]
    struct Outer(#[source] std::io::Error);

    #[test]
    fn chain_joins_sources_without_repeats() {
        let e = Outer(std::io::Error::new(
            std::io::ErrorKind::ConnectionRefused,
            "refused",
        ));
        assert_eq!(chain(&e), "outer: refused");
    }

    #[test]
    fn forbidden_and_not_found_say_what_to_do() {
        let status = |code: u16, reason: &str| {
            kube::core::Status::failure(&format!("{reason} message"), reason).with_code(code)
        };
        let forbidden =
            watcher::Error::InitialListFailed(kube::Error::Api(Box::new(status(403, "Forbidden"))));
        let m = watch_error_message(&forbidden);
        assert!(
            m.contains("grant this process's service account list and watch"),
            "{m}"
        );
        assert!(m.contains("Forbidden message"), "{m}");
        let missing = watcher::Error::InitialListFailed(kube::Error::Api(Box::new(status(404, "NotFound"))));
        let m = watch_error_message(&missing);
        assert!(m.contains("CustomResourceDefinition installed"), "{m}");
    }
}
