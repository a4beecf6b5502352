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
