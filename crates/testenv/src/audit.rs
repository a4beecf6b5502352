//! A typed reader of the apiserver's audit log: the neutral witness of who wrote what, and when.
//!
//! The apiserver writes one JSON `audit.k8s.io/v1` Event per line, at level Metadata, for the stages
//! `ResponseStarted` (long-running requests such as watches) and `ResponseComplete`. Lines that do not
//! parse (for example a line cut short while the apiserver writes it) are skipped and counted.

use std::path::{Path, PathBuf};

use jiff::Timestamp;
use serde::Deserialize;

use crate::{Error, Result};

/// One audited request.
#[derive(Debug, Clone, PartialEq)]
pub struct AuditEvent {
    /// The request's audit ID; the stages of one request share it.
    pub audit_id: String,
    /// `ResponseStarted`, `ResponseComplete` or `Panic`.
    pub stage: String,
    /// The Kubernetes verb: get, list, watch, create, update, patch, delete, ...
    pub verb: String,
    /// The request URI.
    pub request_uri: String,
    /// The authenticated user name, e.g. `system:serviceaccount:ns:name`.
    pub user: String,
    /// The user's groups.
    pub groups: Vec<String>,
    /// The User-Agent header, which names the binary, its version and its identity.
    pub user_agent: String,
    /// The API group of the object, empty for the core group.
    pub api_group: String,
    /// The resource, e.g. `leases`.
    pub resource: String,
    /// The subresource, e.g. `status`.
    pub subresource: String,
    /// The namespace, empty for cluster-scoped requests.
    pub namespace: String,
    /// The object's name, empty for collections.
    pub name: String,
    /// The HTTP response code, 0 when none was recorded.
    pub code: i32,
    /// When the apiserver received the request.
    pub received: Timestamp,
    /// When this stage was reached.
    pub stage_time: Timestamp,
    /// The request body, recorded for writes to Leases and ConfigMaps (the lock objects).
    pub request_object: Option<serde_json::Value>,
}

impl AuditEvent {
    /// For a write to a lock object, the holder the written record names: `spec.holderIdentity` of a
    /// Lease, or `holderIdentity` in the leader annotation of a ConfigMap. `Some("")` is a release (or
    /// a record without a holder); `None` means the body names no lock record.
    pub fn lock_holder(&self) -> Option<String> {
        let body = self.request_object.as_ref()?;
        match self.resource.as_str() {
            "leases" => Some(
                body.pointer("/spec/holderIdentity")
                    .and_then(|h| h.as_str())
                    .unwrap_or_default()
                    .to_string(),
            ),
            "configmaps" => {
                let raw = body
                    .pointer("/metadata/annotations/control-plane.alpha.kubernetes.io~1leader")?
                    .as_str()?;
                let record: serde_json::Value = serde_json::from_str(raw).ok()?;
                Some(
                    record
                        .get("holderIdentity")
                        .and_then(|h| h.as_str())
                        .unwrap_or_default()
                        .to_string(),
                )
            }
            _ => None,
        }
    }

    /// For a write to a Lease, the `leaseDurationSeconds` of the written record.
    pub fn lock_duration_seconds(&self) -> Option<i64> {
        let body = self.request_object.as_ref()?;
        body.pointer("/spec/leaseDurationSeconds")
            .or_else(|| body.pointer("/leaseDurationSeconds"))
            .and_then(|d| d.as_i64())
    }

    /// The identity in the user agent `binary/version (identity)`, which every crossplane-rs binary and
    /// the client-go candidate send.
    pub fn agent_identity(&self) -> Option<&str> {
        let open = self.user_agent.rfind('(')?;
        let rest = &self.user_agent[open + 1..];
        rest.strip_suffix(')').or_else(|| rest.split(')').next())
    }

    /// Whether the verb changes state.
    pub fn is_write(&self) -> bool {
        matches!(
            self.verb.as_str(),
            "create" | "update" | "patch" | "delete" | "deletecollection"
        )
    }
}

/// The audit log of one control plane.
#[derive(Debug, Clone)]
pub struct AuditLog {
    path: PathBuf,
}

/// The result of reading the log.
#[derive(Debug, Clone, Default)]
pub struct AuditRead {
    /// The completed requests (stage `ResponseComplete` or `Panic`), in log order.
    pub events: Vec<AuditEvent>,
    /// How many lines did not parse.
    pub skipped: usize,
}

impl AuditLog {
    /// The log at `path`.
    pub fn new(path: impl Into<PathBuf>) -> Self {
        AuditLog { path: path.into() }
    }

    /// Its path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Reads every completed request from the log.
    pub fn read(&self) -> Result<AuditRead> {
        let text =
            std::fs::read_to_string(&self.path).map_err(Error::io("reading the audit log", &self.path))?;
        Ok(parse(&text, false))
    }

    /// Reads every event, including `ResponseStarted` stages of long-running requests such as watches.
    pub fn read_all_stages(&self) -> Result<AuditRead> {
        let text =
            std::fs::read_to_string(&self.path).map_err(Error::io("reading the audit log", &self.path))?;
        Ok(parse(&text, true))
    }

    /// The completed requests whose user is `user`, as a convenience.
    pub fn by_user(&self, user: &str) -> Result<Vec<AuditEvent>> {
        Ok(self
            .read()?
            .events
            .into_iter()
            .filter(|e| e.user == user)
            .collect())
    }
}

/// Parses audit-log text. Public for unit tests of consumers.
pub fn parse(text: &str, all_stages: bool) -> AuditRead {
    let mut out = AuditRead::default();
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        match serde_json::from_str::<RawEvent>(line) {
            Ok(raw) => {
                if all_stages || raw.stage == "ResponseComplete" || raw.stage == "Panic" {
                    out.events.push(raw.into());
                }
            }
            Err(_) => out.skipped += 1,
        }
    }
    out
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct RawEvent {
    #[serde(rename = "auditID")]
    audit_id: String,
    stage: String,
    #[serde(default)]
    verb: String,
    #[serde(rename = "requestURI", default)]
    request_uri: String,
    #[serde(default)]
    user: RawUser,
    #[serde(default)]
    user_agent: String,
    #[serde(default)]
    object_ref: RawObjectRef,
    #[serde(default)]
    response_status: RawStatus,
    request_received_timestamp: Timestamp,
    stage_timestamp: Timestamp,
    #[serde(default)]
    request_object: Option<serde_json::Value>,
}

#[derive(Deserialize, Default)]
struct RawUser {
    #[serde(default)]
    username: String,
    #[serde(default)]
    groups: Vec<String>,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct RawObjectRef {
    #[serde(default)]
    resource: String,
    #[serde(default)]
    subresource: String,
    #[serde(default)]
    namespace: String,
    #[serde(default)]
    name: String,
    #[serde(default)]
    api_group: String,
}

#[derive(Deserialize, Default)]
struct RawStatus {
    #[serde(default)]
    code: i32,
}

impl From<RawEvent> for AuditEvent {
    fn from(r: RawEvent) -> Self {
        AuditEvent {
            audit_id: r.audit_id,
            stage: r.stage,
            verb: r.verb,
            request_uri: r.request_uri,
            user: r.user.username,
            groups: r.user.groups,
            user_agent: r.user_agent,
            api_group: r.object_ref.api_group,
            resource: r.object_ref.resource,
            subresource: r.object_ref.subresource,
            namespace: r.object_ref.namespace,
            name: r.object_ref.name,
            code: r.response_status.code,
            received: r.request_received_timestamp,
            stage_time: r.stage_timestamp,
            request_object: r.request_object,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LINE: &str = r#"{"kind":"Event","apiVersion":"audit.k8s.io/v1","level":"Metadata","auditID":"a1","stage":"ResponseComplete","requestURI":"/apis/coordination.k8s.io/v1/namespaces/ns/leases/l","verb":"update","user":{"username":"system:serviceaccount:ns:sa","groups":["system:serviceaccounts"]},"sourceIPs":["127.0.0.1"],"userAgent":"provider-nop/0.1.0 (p-1)","objectRef":{"resource":"leases","namespace":"ns","name":"l","apiGroup":"coordination.k8s.io","apiVersion":"v1"},"responseStatus":{"metadata":{},"code":409},"requestReceivedTimestamp":"2026-11-29T10:00:00.123456Z","stageTimestamp":"2026-11-29T10:00:00.130000Z"}"#;

    #[test]
    fn parses_a_complete_event() {
        let read = parse(LINE, false);
        assert_eq!(read.skipped, 0);
        let e = &read.events[0];
        assert_eq!(e.verb, "update");
        assert_eq!(e.user, "system:serviceaccount:ns:sa");
        assert_eq!(e.user_agent, "provider-nop/0.1.0 (p-1)");
        assert_eq!(
            (e.resource.as_str(), e.namespace.as_str(), e.name.as_str()),
            ("leases", "ns", "l")
        );
        assert_eq!(e.code, 409);
        assert!(e.is_write());
        assert_eq!(e.agent_identity(), Some("p-1"));
        assert_eq!(e.lock_holder(), None);
    }

    #[test]
    fn reads_the_holder_of_lock_writes() {
        let lease = LINE.replace(
            r#""responseStatus""#,
            r#""requestObject":{"spec":{"holderIdentity":"p-1","leaseDurationSeconds":15}},"responseStatus""#,
        );
        let e = &parse(&lease, false).events[0];
        assert_eq!(e.lock_holder().as_deref(), Some("p-1"));
        assert_eq!(e.lock_duration_seconds(), Some(15));
    }

    #[test]
    fn skips_started_stages_and_garbage() {
        let started = LINE.replace("ResponseComplete", "ResponseStarted");
        let text = format!("{started}\n{{not json\n{LINE}\n");
        let read = parse(&text, false);
        assert_eq!(read.events.len(), 1);
        assert_eq!(read.skipped, 1);
        assert_eq!(parse(&text, true).events.len(), 2);
    }
}
