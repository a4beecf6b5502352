//! The RunFunction protocol of composition functions (`apiextensions.fn.proto.v1`
//! `FunctionRunnerService`, and the same contract under `v1beta1`).
//!
//! - [`proto`]: the message types, client and server generated from `proto/` at build time (by the
//!   pure-Rust protox compiler: no `protoc` needed);
//! - [`structs`]: JSON values to and from `google.protobuf.Struct`, the protocol's resource encoding;
//! - [`client`]: a client that calls a function with a deadline and falls back to `v1beta1` when a
//!   function serves only that.
//!
//! This crate knows the wire protocol only; what a pipeline does with responses is the core's business.
#![forbid(unsafe_code)]

pub mod client;
pub mod proto;
pub mod structs;

pub use client::{CallError, Client, Tls};
pub use prost_types;
pub use proto::v1::{RunFunctionRequest, RunFunctionResponse};
