//! End-to-end suites across the crossplane-rs binaries (in `tests/`), and the audit-log checker they
//! share ([`checker`]): the apiserver's audit log is the neutral witness of who wrote what, and when.
#![forbid(unsafe_code)]

pub mod checker;
pub mod relay;
pub mod schedule;
