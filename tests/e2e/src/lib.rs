//! End-to-end suites across the crossplane-rs binaries (in `tests/`), the audit-log checker they share
//! ([`checker`]: the apiserver's audit log is the neutral witness of who wrote what, and when), and the
//! scenarios `cargo xtask` runs:
//!
//! - [`suite`] runs the workspace's tests against one control plane (`cargo xtask test`), and the
//!   figure-writing runs of one suite each: [`fencing`], [`metrics_names`], [`conformance`];
//! - [`demo`] runs the whole system live, on a node or as local processes;
//! - [`node`] measures deploy/ as Pods on a real node (`cargo xtask node-bench`);
//! - [`bench`] measures the elector against client-go's, and the function pipeline;
//! - [`chaos`] runs the fault [`schedule`] and judges it with the [`checker`];
//! - [`control_plane`] keeps a control plane running for people and kubectl.
#![forbid(unsafe_code)]

pub mod bench;
pub mod chaos;
pub mod checker;
pub mod churn;
pub mod conformance;
pub mod control_plane;
pub mod demo;
pub mod fencing;
pub mod metrics_names;
pub mod node;
pub mod packages;
pub mod relay;
pub mod scale;
pub mod schedule;
pub mod suite;
