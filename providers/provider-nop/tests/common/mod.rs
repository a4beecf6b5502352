//! Helpers for provider process tests: the shared ones from `testenv::support`, and where this test
//! crate's process logs go.
#![allow(dead_code, unused_imports)]

use std::path::PathBuf;

pub use testenv::support::{
    Process, assert_failover_writes, cluster, eventually, fast_lease_args, install_crds, lease_holder,
    replica_args, wait_holder,
};

/// Where process logs of a test go.
pub fn log_dir(test: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join("provider-logs")
        .join(test)
}

/// Whether a NopResource is Ready and Synced.
pub fn ready_and_synced(r: &provider_nop::types::NopResource) -> bool {
    let cs = r
        .status
        .as_ref()
        .map(|s| s.resource_status.conditions.as_slice())
        .unwrap_or(&[]);
    apis::condition::is_true(cs, "Ready") && apis::condition::is_true(cs, "Synced")
}

/// The user agent replica `identity` of provider-nop sends, as the audit log records it.
pub fn user_agent(identity: &str) -> String {
    manager::client::user_agent(&provider_nop::INFO.binary, identity)
}
