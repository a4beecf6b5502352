//! Kubeconfig files for the test bed, written as JSON (which kubectl and kube-rs read as YAML).

use std::path::Path;

use serde_json::json;

use crate::{Error, Result};

/// How a kubeconfig authenticates.
pub(crate) enum Credentials<'a> {
    /// A client certificate and key, by path.
    Cert { cert: &'a Path, key: &'a Path },
    /// A bearer token.
    Token(&'a str),
}

/// Writes a kubeconfig with one cluster, one user and one current context.
pub(crate) fn write(path: &Path, server: &str, ca: &Path, user: &str, creds: Credentials<'_>) -> Result<()> {
    let user_entry = match creds {
        Credentials::Cert { cert, key } => json!({
            "client-certificate": cert,
            "client-key": key,
        }),
        Credentials::Token(token) => json!({ "token": token }),
    };
    let doc = json!({
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{ "name": "testbed", "cluster": { "server": server, "certificate-authority": ca } }],
        "users": [{ "name": user, "user": user_entry }],
        "contexts": [{ "name": "testbed", "context": { "cluster": "testbed", "user": user } }],
        "current-context": "testbed",
    });
    let text = serde_json::to_string_pretty(&doc).map_err(|source| Error::Parse {
        context: "serializing a kubeconfig",
        path: path.to_path_buf(),
        source,
    })?;
    std::fs::write(path, text).map_err(Error::io("writing a kubeconfig", path))
}
