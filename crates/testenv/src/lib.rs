//! The Rust side of the crossplane-rs test bed.
//!
//! Every integration test in the workspace runs against a real kube-apiserver backed by a real etcd,
//! built from Go modules in `tests/control-plane` (the *harness*). This crate:
//!
//! - builds the harness once and caches it under `target/harness/` ([`harness`]);
//! - starts etcd, kube-apiserver and a kube-controller-manager limited to the garbage-collector,
//!   namespace and ClusterRole-aggregation controllers (Crossplane's RBAC relies on aggregation) as
//!   separate processes on free loopback ports, with generated certificates,
//!   RBAC authorization, a service-account issuer and a Metadata-level audit log ([`ControlPlane`]),
//!   and beside them an OCI registry on loopback that package tests push to and fetch from ([`Registry`]),
//!   also served behind HTTP Basic authentication ([`Authenticated`]);
//! - stops, kills, pauses (SIGSTOP), resumes and restarts each of them separately, touching only
//!   processes it started ([`Component`]);
//! - gives tests a handle on the cluster ([`Cluster`]): an admin client, a fresh namespace per test,
//!   kubeconfigs for limited ServiceAccounts, and a typed reader of the audit log ([`audit`]).
//!
//! `cargo xtask test` starts one control plane for the whole run and points the tests at it with the
//! environment variable [`ENV_TESTBED`]. A test that needs the cluster and finds the variable unset fails
//! with a message saying to run `cargo xtask test`; it never skips. Tests that disrupt the control plane
//! (pausing etcd, restarting the apiserver) start a private one with [`ControlPlane::private`], so that
//! the shared one stays healthy for the tests running beside them.
#![forbid(unsafe_code)]

pub mod audit;
pub mod cargo;
mod certs;
mod cluster;
mod component;
mod control_plane;
mod error;
pub mod go_candidate;
pub mod harness;
pub mod helm;
mod kubeconfig;
pub mod kubectl;
pub mod node;
pub mod peers;
mod ports;
mod registry;
pub use ports::{free_port, http_get};
pub mod postgres;
pub mod process;
pub mod support;
pub mod upstream_core;
pub mod workload;

pub use audit::{AuditEvent, AuditLog};
pub use cluster::{Cluster, client_from};
pub use component::Component;
pub use control_plane::{ControlPlane, KUBERNETES_SERVICE_IP, Options as ControlPlaneOptions, State};
pub use error::{Error, Result};
pub use go_candidate::{CandidateEvent, CandidateOptions, GoCandidate, monotonic_ns};
pub use node::{Hold, Node, NodeNetwork, NodeTestBed};
pub use registry::{Authenticated, Registry};

/// The environment variable through which `cargo xtask test` tells tests where the shared test bed is:
/// the directory that holds its `testbed.json`.
pub const ENV_TESTBED: &str = "CROSSPLANE_RS_TESTBED";

/// The Kubernetes version the harness is pinned to (see `tests/control-plane/go.mod`).
pub const KUBERNETES_VERSION: &str = "v1.36.3";

/// The etcd version the harness is pinned to (`go.etcd.io/etcd/server/v3` in `tests/control-plane/go.mod`).
pub const ETCD_VERSION: &str = "v3.7.1";
