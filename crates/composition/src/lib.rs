//! The patch-and-transform engine: pure functions, no I/O.
//!
//! This crate starts empty: the engine arrives with the core issue.
#![forbid(unsafe_code)]
