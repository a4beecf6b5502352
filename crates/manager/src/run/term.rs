//! What gated work receives: the [`TermContext`], and the [`ChildHandle`]s of runnables it spawns.
//!
//! Every gated runnable is started afresh for each term with a new context. The context carries the term's
//! client (kube's own, with the term's fence layer in its stack) and fence, the term's cancellation token and the right to spawn children (for example one
//! controller per XRD) into the same term. When the term ends, the manager cancels the token and awaits
//! every runnable and every child before it releases the Lease, returns to standby or exits.

use std::future::Future;
use std::sync::Arc;

use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use kube::Api;

use crate::fence::Fence;
use crate::run::task_group::{BoxError, TaskGroup, TermEnded};

/// Facts about a term, for logs and for work that wants to record who wrote.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TermInfo {
    /// This replica's identity.
    pub identity: String,
    /// `namespace/name` of the Lease; `None` with leader election off.
    pub lease: Option<String>,
    /// The Lease's `leaseTransitions` when this term began; `None` with leader election off.
    pub transitions: Option<i32>,
    /// When the manager started the term's work.
    pub started: Instant,
}

/// The context of one gated runnable (or child) in one term. Cheap to clone.
#[derive(Clone)]
pub struct TermContext {
    name: Arc<str>,
    client: kube::Client,
    fence: Fence,
    token: CancellationToken,
    group: TaskGroup,
    info: Arc<TermInfo>,
}

impl TermContext {
    pub(crate) fn new(
        name: &str,
        client: kube::Client,
        fence: Fence,
        group: TaskGroup,
        info: Arc<TermInfo>,
    ) -> Self {
        let token = group.token().clone();
        Self {
            name: name.into(),
            client,
            fence,
            token,
            group,
            info,
        }
    }

    /// The runnable's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The term's client, kube's own: its stack holds the term's fence layer, so a write is refused once
    /// the term has ended (with an error [`crate::fence::is_not_leader`] recognises). Watches, caches and
    /// kube's own event recorder use it too.
    pub fn client(&self) -> &kube::Client {
        &self.client
    }

    /// An [`Api`] over the term's client for a namespaced resource in `ns`.
    pub fn namespaced<K>(&self, ns: &str) -> Api<K>
    where
        K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope>,
        K::DynamicType: Default,
    {
        Api::namespaced(self.client.clone(), ns)
    }

    /// An [`Api`] over the term's client for a cluster-scoped resource, or a namespaced one across all
    /// namespaces.
    pub fn all<K>(&self) -> Api<K>
    where
        K: kube::Resource,
        K::DynamicType: Default,
    {
        Api::all(self.client.clone())
    }

    /// The term's fence: [`Fence::check`] before work that writes somewhere else than the apiserver (an
    /// external system), or that should not start once the term is over.
    pub fn fence(&self) -> &Fence {
        &self.fence
    }

    /// Cancelled when this runnable must stop (the term ended, shutdown, or its [`ChildHandle`] stopped it).
    pub fn token(&self) -> &CancellationToken {
        &self.token
    }

    /// Resolves when this runnable must stop.
    pub async fn cancelled(&self) {
        self.token.cancelled().await;
    }

    /// True once this runnable must stop.
    pub fn is_cancelled(&self) -> bool {
        self.token.is_cancelled()
    }

    /// Facts about the term.
    pub fn term(&self) -> &TermInfo {
        &self.info
    }

    /// Starts a child runnable in the same term. It stops when the term ends (and is awaited with the rest),
    /// or earlier through the returned handle. Fails with [`TermEnded`] once the term is stopping.
    pub fn spawn_child<F, Fut, E>(&self, name: impl Into<String>, run: F) -> Result<ChildHandle, TermEnded>
    where
        F: FnOnce(TermContext) -> Fut,
        Fut: Future<Output = Result<(), E>> + Send + 'static,
        E: Into<BoxError>,
    {
        let name: String = name.into();
        let token = self.token.child_token();
        let done = CancellationToken::new();
        let ctx = TermContext {
            name: name.as_str().into(),
            client: self.client.clone(),
            fence: self.fence.clone(),
            token: token.clone(),
            group: self.group.clone(),
            info: self.info.clone(),
        };
        let fut = run(ctx);
        self.group
            .spawn(name.clone(), token.clone(), done.clone(), async move {
                fut.await.map_err(Into::into)
            })?;
        tracing::debug!(parent = %self.name, child = %name, "child runnable started");
        Ok(ChildHandle { name, token, done })
    }
}

/// A child runnable started with [`TermContext::spawn_child`].
#[derive(Debug, Clone)]
pub struct ChildHandle {
    name: String,
    token: CancellationToken,
    done: CancellationToken,
}

impl ChildHandle {
    /// The child's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Asks the child to stop (cancels its token); the term goes on.
    pub fn stop(&self) {
        self.token.cancel();
    }

    /// True once the child's future has ended (returned, failed, or was aborted).
    pub fn is_finished(&self) -> bool {
        self.done.is_cancelled()
    }

    /// Resolves when the child's future has ended.
    pub async fn finished(&self) {
        self.done.cancelled().await;
    }
}
