//! Reading the apiserver's audit log: requests and denials per ServiceAccount of the demo's namespace.

use std::collections::BTreeMap;
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

use super::NS;

/// Requests per ServiceAccount of the demo's namespace, read incrementally from the audit log.
pub(super) struct AuditTail {
    path: PathBuf,
    offset: u64,
    pending: Vec<u8>,
    since: jiff::Timestamp,
    pub(super) users: BTreeMap<String, UserStats>,
}

#[derive(Debug, Clone, Default)]
pub(super) struct UserStats {
    pub(super) requests: u64,
    pub(super) denied: u64,
    pub(super) examples: Vec<String>,
}

impl AuditTail {
    pub(super) fn new(path: &Path) -> Self {
        AuditTail {
            path: path.to_path_buf(),
            offset: std::fs::metadata(path).map(|m| m.len()).unwrap_or(0),
            pending: Vec::new(),
            since: jiff::Timestamp::now(),
            users: BTreeMap::new(),
        }
    }

    pub(super) fn poll(&mut self) -> Result<()> {
        let mut f = std::fs::File::open(&self.path)
            .with_context(|| format!("opening the audit log {}", self.path.display()))?;
        f.seek(SeekFrom::Start(self.offset))?;
        let n = f.read_to_end(&mut self.pending)?;
        self.offset += n as u64;
        let Some(end) = self.pending.iter().rposition(|b| *b == b'\n') else {
            return Ok(());
        };
        let complete: Vec<u8> = self.pending.drain(..=end).collect();
        let prefix = format!("system:serviceaccount:{NS}:");
        for e in testenv::audit::parse(&String::from_utf8_lossy(&complete), false).events {
            if e.received < self.since {
                continue;
            }
            let Some(sa) = e.user.strip_prefix(&prefix) else {
                continue;
            };
            let s = self.users.entry(sa.to_owned()).or_default();
            s.requests += 1;
            if e.code == 403 {
                s.denied += 1;
                if s.examples.len() < 5 {
                    let res = if e.subresource.is_empty() {
                        e.resource.clone()
                    } else {
                        format!("{}/{}", e.resource, e.subresource)
                    };
                    s.examples.push(format!(
                        "{} {}.{} ns={:?} name={:?}",
                        e.verb, res, e.api_group, e.namespace, e.name
                    ));
                }
            }
        }
        Ok(())
    }
}
