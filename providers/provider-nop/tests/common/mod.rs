//! provider-nop's own helpers for its process tests; the shared ones (processes, the cluster, polling,
//! `log_dir!`) are `testenv`'s.
#![allow(dead_code)]

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
    manager::config::client::user_agent(&provider_nop::INFO.binary, identity)
}
