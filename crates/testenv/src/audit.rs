//! A typed reader of the apiserver's audit log: the neutral witness of who wrote what, and when.
//!
//! The apiserver writes one JSON `audit.k8s.io/v1` Event per line, at level Metadata, for the stages
//! `RequestReceived`, `ResponseStarted` (long-running requests such as watches) and `ResponseComplete`.
//! The reader reads the files the apiserver rotated away (`audit-<time>.log`) before the current one,
//! so that nothing is lost even if the log was rotated. Lines that do not parse (for example a line cut
//! short when the apiserver was killed) are skipped and counted; the last line of the current file is
//! ignored while it is still being written (no newline yet). Stages of one request share an audit ID:
//! [`AuditRead::events`] holds each completed request once, and [`AuditRead::cut_off`] each request
//! that was received but never answered (the apiserver stopped first).

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
    /// The pod a ServiceAccount token is bound to (`authentication.kubernetes.io/pod-name` in the
    /// user's extra), which tells apart replicas that share a ServiceAccount.
    pub pod_name: Option<String>,
    /// For a write the apiserver answered with the object, the `resourceVersion` etcd gave it: the
    /// write's place in etcd's one order of commits, across all objects. Recorded (policy level
    /// `RequestResponse`) for writes to the lock objects and for the writes of ServiceAccounts; `None`
    /// otherwise, and for a refused write or one answered with a `Status`.
    pub committed: Option<u64>,
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
    /// The completed requests (stage `ResponseComplete` or `Panic`), each once, in log order; with
    /// [`AuditLog::read_all_stages`], every stage of every request.
    pub events: Vec<AuditEvent>,
    /// Requests received but never answered: a `RequestReceived` stage and no later one (cut off by an
    /// apiserver restart, or still in progress when the log was read); only writes, unless all stages
    /// were read. Their `code` is 0 and their `stage_time` is when they were received.
    pub cut_off: Vec<AuditEvent>,
    /// How many lines did not parse.
    pub skipped: usize,
    /// How many files were read (the current one and any rotated ones).
    pub files: usize,
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

    /// Reads every completed request from the log, and the requests that were cut off.
    pub fn read(&self) -> Result<AuditRead> {
        Ok(parse_files(&self.texts()?, false))
    }

    /// Reads every event of every stage, `RequestReceived` and `ResponseStarted` included.
    pub fn read_all_stages(&self) -> Result<AuditRead> {
        Ok(parse_files(&self.texts()?, true))
    }

    /// Like [`AuditLog::read`], but parses only the lines that contain `needle` (e.g.
    /// `"resource":"leases"`): much faster on a large log when only some requests matter.
    pub fn read_containing(&self, needle: &str) -> Result<AuditRead> {
        Ok(parse_lines(&self.texts()?, false, |l| l.contains(needle)))
    }

    /// Like [`AuditLog::read_all_stages`], but parses only the lines that contain `needle`: a
    /// long-running request (a watch) is there from its `ResponseStarted` on.
    pub fn read_all_stages_containing(&self, needle: &str) -> Result<AuditRead> {
        Ok(parse_lines(&self.texts()?, true, |l| l.contains(needle)))
    }

    /// The files rotated away (`<stem>-<time>.<ext>` beside the log, oldest first), then the log.
    fn files(&self) -> Result<Vec<PathBuf>> {
        let dir = self.path.parent().unwrap_or(Path::new("."));
        let stem = self.path.file_stem().and_then(|s| s.to_str()).unwrap_or("audit");
        let ext = self.path.extension().and_then(|s| s.to_str()).unwrap_or("log");
        let prefix = format!("{stem}-");
        let suffix = format!(".{ext}");
        let mut rotated: Vec<PathBuf> = std::fs::read_dir(dir)
            .map_err(Error::io("listing the audit log's directory", dir))?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| {
                p.file_name()
                    .and_then(|n| n.to_str())
                    .is_some_and(|n| n.starts_with(&prefix) && n.ends_with(&suffix))
            })
            .collect();
        // lumberjack names backups by their rotation time (`2006-01-02T15-04-05.000`): name order is
        // time order.
        rotated.sort();
        rotated.push(self.path.clone());
        Ok(rotated)
    }

    fn texts(&self) -> Result<Vec<String>> {
        self.files()?
            .iter()
            .map(|p| std::fs::read_to_string(p).map_err(Error::io("reading the audit log", p)))
            .collect()
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

/// Parses audit-log text (one file). Public for unit tests of consumers.
pub fn parse(text: &str, all_stages: bool) -> AuditRead {
    parse_files(&[text.to_owned()], all_stages)
}

/// Parses the texts of the rotated files and the current one, in order. The last line of the last
/// text is ignored if it has no newline yet (the apiserver is writing it). Without `all_stages`, the
/// `RequestReceived` stage of a read (get, list, watch) is skipped unparsed: only writes can be cut off
/// in a way that matters.
pub fn parse_files(texts: &[String], all_stages: bool) -> AuditRead {
    parse_lines(texts, all_stages, |_| true)
}

/// The verbs of reads, as they appear in a line.
const READ_VERBS: [&str; 3] = [r#""verb":"get""#, r#""verb":"list""#, r#""verb":"watch""#];

fn parse_lines(texts: &[String], all_stages: bool, keep: impl Fn(&str) -> bool) -> AuditRead {
    let mut out = AuditRead {
        files: texts.len(),
        ..AuditRead::default()
    };
    let mut raw_events = Vec::new();
    for (i, text) in texts.iter().enumerate() {
        let mut lines: Vec<&str> = text.split('\n').collect();
        // `split` leaves the text after the last newline: empty when the file ends with one.
        let tail = lines.pop().unwrap_or_default();
        if i + 1 < texts.len() && !tail.trim().is_empty() {
            lines.push(tail);
        }
        for line in lines.into_iter().filter(|l| !l.trim().is_empty()) {
            if !keep(line)
                || (!all_stages
                    && line.contains(r#""stage":"RequestReceived""#)
                    && READ_VERBS.iter().any(|v| line.contains(v)))
            {
                continue;
            }
            match serde_json::from_str::<RawEvent>(line) {
                Ok(raw) => raw_events.push(AuditEvent::from(raw)),
                Err(_) => out.skipped += 1,
            }
        }
    }
    let mut answered = std::collections::HashSet::new();
    for e in &raw_events {
        if e.stage != "RequestReceived" {
            answered.insert(e.audit_id.clone());
        }
    }
    let mut completed = std::collections::HashSet::new();
    for e in raw_events {
        let complete = e.stage == "ResponseComplete" || e.stage == "Panic";
        if e.stage == "RequestReceived" && !answered.contains(&e.audit_id) {
            out.cut_off.push(AuditEvent { code: 0, ..e.clone() });
        }
        if all_stages || (complete && completed.insert(e.audit_id.clone())) {
            out.events.push(e);
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
    #[serde(default)]
    response_object: Option<RawResponse>,
}

/// Only what the checker needs of a recorded response: its kind and resourceVersion.
#[derive(Deserialize, Default)]
struct RawResponse {
    #[serde(default)]
    kind: String,
    #[serde(default)]
    metadata: RawMeta,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct RawMeta {
    #[serde(default)]
    resource_version: String,
}

impl RawResponse {
    /// The resourceVersion of a returned object (not of a `Status`), as etcd's revision.
    fn committed(&self) -> Option<u64> {
        (self.kind != "Status")
            .then(|| self.metadata.resource_version.parse().ok())
            .flatten()
    }
}

#[derive(Deserialize, Default)]
struct RawUser {
    #[serde(default)]
    username: String,
    #[serde(default)]
    groups: Vec<String>,
    #[serde(default)]
    extra: std::collections::BTreeMap<String, Vec<String>>,
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
        let pod_name = r
            .user
            .extra
            .get("authentication.kubernetes.io/pod-name")
            .and_then(|v| v.first())
            .cloned();
        let committed = match r.response_status.code {
            200..=299 => r.response_object.as_ref().and_then(RawResponse::committed),
            _ => None,
        };
        AuditEvent {
            pod_name,
            committed,
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
        let read = parse(&format!("{LINE}\n"), false);
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
        assert_eq!(e.committed, None, "refused, and no response recorded");
    }

    #[test]
    fn reads_the_resource_version_a_successful_write_committed() {
        let ok = LINE.replace(
            r#""responseStatus":{"metadata":{},"code":409}"#,
            r#""responseObject":{"kind":"Lease","metadata":{"resourceVersion":"4711"}},"responseStatus":{"metadata":{},"code":200}"#,
        );
        assert_eq!(parse(&format!("{ok}\n"), false).events[0].committed, Some(4711));
        // A Status carries no object's version, and a refused write committed nothing.
        let status = ok.replace(r#""kind":"Lease""#, r#""kind":"Status""#);
        assert_eq!(parse(&format!("{status}\n"), false).events[0].committed, None);
        let refused = ok.replace(r#""code":200"#, r#""code":409"#);
        assert_eq!(parse(&format!("{refused}\n"), false).events[0].committed, None);
    }

    #[test]
    fn reads_the_holder_of_lock_writes() {
        let lease = LINE.replace(
            r#""responseStatus""#,
            r#""requestObject":{"spec":{"holderIdentity":"p-1","leaseDurationSeconds":15}},"responseStatus""#,
        );
        let e = &parse(&format!("{lease}\n"), false).events[0];
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

    #[test]
    fn a_request_never_answered_is_cut_off_and_each_request_counts_once() {
        let received = LINE.replace("ResponseComplete", "RequestReceived");
        let lost = received.replace(r#""a1""#, r#""a2""#);
        let text = format!("{received}\n{lost}\n{LINE}\n{LINE}\n");
        let read = parse(&text, false);
        assert_eq!(read.events.len(), 1, "a1 once");
        assert_eq!(read.cut_off.len(), 1);
        assert_eq!(read.cut_off[0].audit_id, "a2");
        assert_eq!(read.cut_off[0].code, 0);
        assert_eq!(parse(&text, true).events.len(), 4);
    }

    #[test]
    fn reads_rotated_files_first_and_ignores_a_line_being_written() {
        let second = LINE.replace(r#""a1""#, r#""a2""#);
        // A cut line followed by more lines is garbage; the unfinished last line is not.
        let texts = [
            format!("{LINE}\n{{\"kind\":\"Ev\n"),
            format!("{second}\n{}", &LINE[..40]),
        ];
        let read = parse_files(&texts, false);
        assert_eq!(read.files, 2);
        let ids: Vec<&str> = read.events.iter().map(|e| e.audit_id.as_str()).collect();
        assert_eq!(ids, ["a1", "a2"]);
        assert_eq!(read.skipped, 1);
    }

    #[test]
    fn the_log_follows_rotated_files() -> std::result::Result<(), Box<dyn std::error::Error>> {
        let dir = std::env::temp_dir().join(format!("audit-rotation-{}", std::process::id()));
        std::fs::create_dir_all(&dir)?;
        let second = LINE.replace(r#""a1""#, r#""a2""#);
        std::fs::write(dir.join("audit-2026-11-29T10-00-00.000.log"), format!("{LINE}\n"))?;
        std::fs::write(dir.join("audit.log"), format!("{second}\n"))?;
        std::fs::write(dir.join("other.log"), "not an audit log\n")?;
        let read = AuditLog::new(dir.join("audit.log")).read()?;
        std::fs::remove_dir_all(&dir)?;
        assert_eq!(read.files, 2);
        assert_eq!(read.skipped, 0);
        assert_eq!(read.events.len(), 2);
        Ok(())
    }

    #[test]
    fn names_the_pod_a_token_is_bound_to() {
        let bound = LINE.replace(
            r#""groups":["system:serviceaccounts"]"#,
            r#""groups":["system:serviceaccounts"],"extra":{"authentication.kubernetes.io/pod-name":["nop-0-1"]}"#,
        );
        let read = parse(&format!("{bound}\n{LINE}\n"), true);
        assert_eq!(read.events[0].pod_name.as_deref(), Some("nop-0-1"));
        assert_eq!(read.events[1].pod_name, None);
    }
}
