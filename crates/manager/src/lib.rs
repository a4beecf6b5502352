//! controller-runtime's Manager for kube-rs: Lease-gated runnables, an admin server, clean shutdown and a
//! self-fencing client.
//!
//! A binary flattens [`Args`] into its clap parser, resolves them with its own [`Defaults`], initialises
//! [logging], builds a [`Manager`], registers runnables and runs it:
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
//! manager::logging::init(settings.log_format, &settings.log_level)?;
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
//! Modules, one concept each: [`api_error`] (API errors in words for users), [`args`] (flags), [`settings`] (defaults and validation), [`logging`],
//! [`client`] (the two clients and the user agent), [`controller`] (a kube-runtime controller for
//! one term: wiring, metrics, backoff, error reporting), [`event`] (Kubernetes Events, fenced and deduplicated), [`backoff`] (per-object backoff and jitter), [`gate`] (the fence layer in the client: the one place writes are fenced), [`fence`]
//! (what the layer checks: the term's guard and the manager's revocation, and [`fence::is_not_leader`], the
//! one way to ask whether a failed write was refused),
//! [`term`] (what gated work receives), [`runnable`] (always-runnables), [`readiness`], [`health`],
//! [`metrics`] (the registry and controller-runtime's reconcile metrics), [`workqueue`] (controller-runtime's
//! `workqueue_*`), [`process_metrics`] (the `process_*` series the prometheus crate lacks), [`rest_metrics`] (client-go's `rest_client_requests_total`), [`own_pod`] (the leader leaves as soon as its own Pod is deleted), [`admin`] (the HTTP endpoints), and the crate-private supervisor, task group and signal
//! handling. Why gating works as it does is in the supervisor's docs, repeated on [`Manager::run`].
#![forbid(unsafe_code)]

pub mod admin;
pub mod api_error;
pub mod args;
pub mod backoff;
pub mod bind;
pub mod client;
pub mod compat;
pub mod controller;
mod error;
pub mod event;
pub mod fence;
pub mod gate;
pub mod health;
pub mod logging;
mod manager;
pub mod metrics;
pub mod own_pod;
pub mod process_metrics;
pub mod rbac;
pub mod readiness;
pub mod rest_metrics;
pub mod runnable;
pub mod settings;
mod signals;
mod supervisor;
mod task_group;
pub mod term;
pub mod workqueue;

pub use admin::Endpoints;
pub use args::{Args, LogFormat, OnLostLeadership};
pub use bind::BindAddress;
pub use client::{BinaryInfo, Clients};
pub use election::Timings;
pub use error::Error;
pub use fence::{Fence, NotLeader};
pub use gate::{FenceLayer, fence_client, refusal};
pub use manager::{Manager, ManagerBuilder};
pub use metrics::{Metrics, ReconcileMetrics, ReconcileResult, RestClientMetrics, WorkqueueMetrics};
pub use readiness::ReadyHandle;
pub use runnable::AlwaysContext;
pub use settings::{Defaults, ElectionSettings, Settings, UsageError};
pub use task_group::{BoxError, TermEnded};
pub use term::{ChildHandle, TermContext, TermInfo};

/// The election crate, re-exported for [`ManagerBuilder::elector`] hooks and guards.
pub use election;
/// Go durations on the command line (`15s`, `500ms`, `1m30s`): the election crate's parser, for every flag.
pub use election::duration;
