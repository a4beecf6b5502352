//! Registered runnables: *gated* ones (run only while leading, restarted for each term) and *always* ones
//! (caches, servers: run once, on every replica).

use std::future::Future;
use std::sync::Arc;

use futures::future::BoxFuture;
use tokio_util::sync::CancellationToken;

use crate::run::readiness::ReadyHandle;
use crate::run::task_group::BoxError;
use crate::run::term::TermContext;

/// A gated runnable: called once per term.
pub(crate) type GatedFn = Arc<dyn Fn(TermContext) -> BoxFuture<'static, Result<(), BoxError>> + Send + Sync>;

/// An always-runnable: called once.
pub(crate) type AlwaysFn = Box<dyn FnOnce(AlwaysContext) -> BoxFuture<'static, Result<(), BoxError>> + Send>;

pub(crate) fn gated<F, Fut, E>(run: F) -> GatedFn
where
    F: Fn(TermContext) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<(), E>> + Send + 'static,
    E: Into<BoxError>,
{
    Arc::new(move |ctx| {
        let fut = run(ctx);
        Box::pin(async move { fut.await.map_err(Into::into) })
    })
}

pub(crate) fn always<F, Fut, E>(run: F) -> AlwaysFn
where
    F: FnOnce(AlwaysContext) -> Fut + Send + 'static,
    Fut: Future<Output = Result<(), E>> + Send + 'static,
    E: Into<BoxError>,
{
    Box::new(move |ctx| {
        let fut = run(ctx);
        Box::pin(async move { fut.await.map_err(Into::into) })
    })
}

/// The context of an always-runnable.
#[derive(Clone)]
pub struct AlwaysContext {
    pub(crate) name: Arc<str>,
    pub(crate) client: kube::Client,
    pub(crate) token: CancellationToken,
    pub(crate) ready: ReadyHandle,
}

impl AlwaysContext {
    /// The runnable's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The manager's (unfenced) client. Always-runnables must not make leader-only writes.
    pub fn client(&self) -> &kube::Client {
        &self.client
    }

    /// Cancelled at shutdown, after gated work has stopped.
    pub fn token(&self) -> &CancellationToken {
        &self.token
    }

    /// Resolves at shutdown.
    pub async fn cancelled(&self) {
        self.token.cancelled().await;
    }

    /// Marks this runnable synced. `/readyz` answers ready once every always-runnable has done so.
    pub fn mark_ready(&self) {
        self.ready.mark_ready();
    }

    /// The readiness handle, to mark from elsewhere (e.g. a task the runnable spawns).
    pub fn ready_handle(&self) -> &ReadyHandle {
        &self.ready
    }
}
