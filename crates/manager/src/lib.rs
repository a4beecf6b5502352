//! controller-runtime's Manager for kube-rs: Lease-gated runnables, an admin server, clean shutdown and a
//! self-fencing client.
//!
//! A binary flattens [`Args`] into its clap parser, resolves them with its own [`Defaults`], initialises
//! [logging](config::logging), builds a [`Manager`], registers runnables and runs it:
//!
//! ```no_run
//! use clap::Parser;
//! use manager::{Args, BinaryInfo, Defaults, Manager, TermContext};
//!
//! #[derive(Parser)]
//! struct Cli {
//!     #[command(flatten)]
//!     manager: Args,
//! }
//!
//! const DEFAULTS: Defaults = Defaults::new("my-controller-leader-election");
//!
//! # async fn example() -> Result<(), manager::Error> {
//! let cli = Cli::parse();
//! let settings = cli.manager.resolve(&DEFAULTS).unwrap_or_else(|e| e.exit());
//! manager::config::logging::init(settings.log_format, &settings.log_level)?;
//! let binary = BinaryInfo { name: env!("CARGO_PKG_NAME"), version: env!("CARGO_PKG_VERSION") };
//! let mut mgr = Manager::new(settings, binary).await?;
//! mgr.add_gated("my-controller", |ctx: TermContext| async move {
//!     ctx.cancelled().await; // real work writes through ctx.client(), which is fenced
//!     Ok::<(), std::io::Error>(())
//! });
//! mgr.run().await
//! # }
//! ```
//!
//! The smallest complete user is the `configmap-counter` binary in this crate (`src/bin`).
//!
//! Five folders, one concept per module inside each:
//! - [`config`]: what a binary is started with: [`config::args`] (flags), [`config::settings`] (defaults
//!   and validation), [`config::bind`], [`config::compat`] (flags accepted for compatibility),
//!   [`config::logging`], [`config::client`] (the two clients and the user agent);
//! - [`run`]: running it: the [`Manager`], [`run::term`] (what gated work receives), [`run::runnable`]
//!   (always-runnables), [`run::readiness`], [`run::health`], [`run::admin`] (the HTTP endpoints),
//!   [`run::own_pod`] (the leader leaves as soon as its own Pod is deleted), and the crate-private
//!   supervisor, task group and signal handling. Why gating works as it does is in the supervisor's
//!   docs, repeated on [`Manager::run`];
//! - [`controller`]: reconcilers: the [`controller::ControllerBuilder`] (a kube-runtime controller for one
//!   term: wiring, metrics, backoff, error reporting), [`controller::backoff`], [`controller::workqueue`]
//!   (controller-runtime's `workqueue_*`), [`controller::event`] (Kubernetes Events, fenced and
//!   deduplicated), [`controller::api_error`] (API errors in words for users), [`controller::rbac`] (what
//!   a controller needs from the apiserver, declared in code);
//! - [`fence`]: what a write is checked against (the term's guard and the manager's revocation, and
//!   [`fence::is_not_leader`], the one way to ask whether a failed write was refused), and
//!   [`fence::gate`], the layer in the client that is the one place writes are fenced;
//! - [`metrics`]: the registry and controller-runtime's reconcile metrics, [`metrics::process`] (the
//!   `process_*` series the prometheus crate lacks) and [`metrics::rest`] (client-go's
//!   `rest_client_requests_total`).
#![forbid(unsafe_code)]

pub mod config;
pub mod controller;
mod error;
pub mod fence;
pub mod metrics;
pub mod run;

pub use config::args::{Args, LogFormat, OnLostLeadership};
pub use config::bind::BindAddress;
pub use config::client::{BinaryInfo, Clients};
pub use config::settings::{Defaults, ElectionSettings, Settings, UsageError};
pub use election::Timings;
pub use error::Error;
pub use fence::gate::{FenceLayer, fence_client, refusal};
pub use fence::{Fence, NotLeader};
pub use metrics::{Metrics, ReconcileMetrics, ReconcileResult, RestClientMetrics, WorkqueueMetrics};
pub use run::admin::Endpoints;
pub use run::manager::{Manager, ManagerBuilder};
pub use run::readiness::ReadyHandle;
pub use run::runnable::AlwaysContext;
pub use run::task_group::{BoxError, TermEnded};
pub use run::term::{ChildHandle, TermContext, TermInfo};

/// The election crate, re-exported for [`ManagerBuilder::elector`] hooks and guards.
pub use election;
/// Go durations on the command line (`15s`, `500ms`, `1m30s`): the election crate's parser, for every flag.
pub use election::duration;
