//! A kind's controller runs only while its CRD is established (crossplane-runtime's
//! `customresourcesgate`): a provider installed as a package may have its managed-resource CRDs held
//! back as Inactive ManagedResourceDefinitions, and the CRD of one appears only when it is activated.
//!
//! [`while_established`] watches the one CRD by name. It starts the controller when the CRD is
//! established, stops it (its token cancelled, its in-flight reconciles finished) if the CRD goes away
//! or stops being established, and starts it again when it is back; each transition is logged once, and
//! a watch error once until the watch recovers. Where the CRD is installed beforehand, the controller
//! starts as soon as the first list sees it. A provider that may not watch CRDs (403, an RBAC of before
//! MRDs) runs its controller at once, as it did before, and says once which rule would let it wait.

use std::future::Future;

use futures::StreamExt;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::Api;
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, Event};
use tokio_util::sync::CancellationToken;

/// Whether `crd` is `Established=True`.
pub fn established(crd: &CustomResourceDefinition) -> bool {
    crd.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Established" && c.status == "True"))
}

/// What the CRD's watch said: whether it is there and established, once known.
#[derive(Debug, Default)]
struct Seen {
    /// During a (re)list: what the list has shown so far.
    listing: Option<bool>,
    /// The current answer, once a list has completed.
    now: Option<bool>,
}

impl Seen {
    /// Takes one watch event; returns the answer when the event settles one.
    fn take(&mut self, event: &Event<CustomResourceDefinition>) -> Option<bool> {
        match event {
            Event::Init => {
                self.listing = Some(false);
                None
            }
            Event::InitApply(crd) => {
                self.listing = Some(established(crd));
                None
            }
            Event::InitDone => {
                self.now = Some(self.listing.take().unwrap_or(false));
                self.now
            }
            Event::Apply(crd) => {
                self.now = Some(established(crd));
                self.now
            }
            Event::Delete(_) => {
                self.now = Some(false);
                self.now
            }
        }
    }
}

/// The apiserver's Status in a watch error, if it answered with one.
fn status(e: &watcher::Error) -> Option<&kube::core::Status> {
    match e {
        watcher::Error::InitialListFailed(kube::Error::Api(s))
        | watcher::Error::WatchStartFailed(kube::Error::Api(s))
        | watcher::Error::WatchFailed(kube::Error::Api(s)) => Some(s),
        watcher::Error::WatchError(s) => Some(s),
        _ => None,
    }
}

/// Runs `run` (given a token that is cancelled to stop it) while CRD `crd` is established, until
/// `token` is cancelled; `controller` names the controller in logs.
pub async fn while_established<F, Fut>(
    client: kube::Client,
    crd: &str,
    controller: &str,
    token: &CancellationToken,
    mut run: F,
) where
    F: FnMut(CancellationToken) -> Fut,
    Fut: Future<Output = ()> + Send + 'static,
{
    let api: Api<CustomResourceDefinition> = Api::all(client);
    let wc = watcher::Config::default().fields(&format!("metadata.name={crd}"));
    let mut events = std::pin::pin!(watcher::watcher(api, wc).default_backoff());
    let mut seen = Seen::default();
    let mut running: Option<(CancellationToken, tokio::task::JoinHandle<()>)> = None;
    let mut waiting_logged = false;
    let mut error_logged = false;
    loop {
        let event = tokio::select! {
            () = token.cancelled() => break,
            e = events.next() => e,
        };
        let Some(event) = event else { break };
        let event = match event {
            Ok(e) => {
                error_logged = false;
                e
            }
            Err(e) => {
                if running.is_none() && seen.now.is_none() && status(&e).is_some_and(|s| s.code == 403) {
                    tracing::warn!(
                        controller,
                        crd,
                        error = %manager::controller::api_error::explain_watch(&e),
                        "not allowed to watch the CustomResourceDefinition; starting the controller without \
                         waiting for it (grant get, list and watch on customresourcedefinitions for the provider \
                         to wait until an Inactive ManagedResourceDefinition is activated)"
                    );
                    let child = token.child_token();
                    run(child).await;
                    return;
                }
                if !error_logged {
                    tracing::warn!(controller, crd, error = %manager::controller::api_error::explain_watch(&e), "cannot watch the CustomResourceDefinition; retrying (the provider needs get, list and watch on customresourcedefinitions)");
                    error_logged = true;
                }
                continue;
            }
        };
        let Some(up) = seen.take(&event) else {
            continue;
        };
        match (&running, up) {
            (None, true) => {
                tracing::info!(
                    controller,
                    crd,
                    "the CustomResourceDefinition is established; starting the controller"
                );
                let child = token.child_token();
                let handle = tokio::spawn(run(child.clone()));
                running = Some((child, handle));
                waiting_logged = false;
            }
            (Some(_), false) => {
                if let Some((child, handle)) = running.take() {
                    child.cancel();
                    let _ = handle.await;
                }
                tracing::info!(
                    controller,
                    crd,
                    "the CustomResourceDefinition is gone or no longer established; stopped the controller until it is back"
                );
                waiting_logged = true;
            }
            (None, false) if !waiting_logged => {
                tracing::info!(
                    controller,
                    crd,
                    "waiting for the CustomResourceDefinition to be established before starting the controller (an Inactive ManagedResourceDefinition has none until it is activated)"
                );
                waiting_logged = true;
            }
            _ => {}
        }
    }
    if let Some((child, handle)) = running.take() {
        child.cancel();
        let _ = handle.await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn crd(established: bool) -> CustomResourceDefinition {
        serde_json::from_value(json!({
            "metadata": {"name": "nopresources.nop.crossplane.io"},
            "spec": {"group": "nop.crossplane.io", "scope": "Cluster",
                "names": {"kind": "NopResource", "plural": "nopresources"}, "versions": []},
            "status": {"conditions": [{"type": "Established",
                "status": if established { "True" } else { "False" }}]},
        }))
        .expect("a CRD")
    }

    #[test]
    fn the_gate_opens_on_an_established_crd_and_closes_when_it_goes() {
        let mut seen = Seen::default();
        assert_eq!(seen.take(&Event::Init), None);
        assert_eq!(seen.take(&Event::InitDone), Some(false), "no CRD: closed");
        assert_eq!(
            seen.take(&Event::Apply(crd(false))),
            Some(false),
            "not yet established"
        );
        assert_eq!(seen.take(&Event::Apply(crd(true))), Some(true));
        assert_eq!(seen.take(&Event::Delete(crd(true))), Some(false));
        // A relist that finds it.
        assert_eq!(seen.take(&Event::Init), None);
        assert_eq!(seen.take(&Event::InitApply(crd(true))), None);
        assert_eq!(seen.take(&Event::InitDone), Some(true));
    }
}
