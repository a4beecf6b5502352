//! What gated work receives: the [`TermContext`], and the [`ChildHandle`]s of runnables it spawns.
//!
//! Every gated runnable is started afresh for each term with a new context. The context carries the term's
//! fencing client, the term's cancellation token and the right to spawn children (for example one
//! controller per XRD) into the same term. When the term ends, the manager cancels the token and awaits
//! every runnable and every child before it releases the Lease, returns to standby or exits.

use std::future::Future;
use std::sync::Arc;

use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::fence::Fence;
use crate::fenced::FencedClient;
use crate::task_group::{BoxError, TaskGroup, TermEnded};

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
    client: FencedClient,
    token: CancellationToken,
    group: TaskGroup,
    info: Arc<TermInfo>,
}

impl TermContext {
    pub(crate) fn new(name: &str, client: FencedClient, group: TaskGroup, info: Arc<TermInfo>) -> Self {
        let token = group.token().clone();
        Self {
            name: name.into(),
            client,
            token,
            group,
            info,
        }
    }

    /// The runnable's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The fencing client: writes are refused once the term has ended.
    pub fn client(&self) -> &FencedClient {
        &self.client
    }

    /// The term's fence.
    pub fn fence(&self) -> &Fence {
        self.client.fence()
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
