//! Running a binary: the [`Manager`](manager::Manager) and its supervisor, which starts gated work for each
//! term and stops it, awaited; what gated and always work receive; readiness, liveness and the admin
//! server; signals; the leader's exit on its own Pod's deletion; and the end of `main` ([`exit`]).

pub mod admin;
pub mod exit;
pub mod health;
pub mod manager;
pub mod own_pod;
pub mod readiness;
pub mod runnable;
pub(crate) mod signals;
pub(crate) mod supervisor;
pub(crate) mod task_group;
pub mod term;
