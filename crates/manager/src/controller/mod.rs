//! Reconcilers: the [`ControllerBuilder`] (one reconcile policy for every controller), per-object
//! backoff, controller-runtime's work-queue metrics, Kubernetes Events, API errors in words, and the
//! RBAC a controller declares.

pub mod api_error;
pub mod backoff;
mod builder;
pub mod event;
pub mod rbac;
pub mod workqueue;

pub use builder::*;
