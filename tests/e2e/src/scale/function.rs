//! One composition function for both cores, served as each core requires of a packaged Function: the
//! Python SDK function of the conformance suite (`crates/crossplane/tests/functions/python.py`) on a
//! loopback port with mutual TLS, its server certificate signed by the core's CA (Secret
//! `crossplane-root-ca`, which upstream's `core init` makes and ours makes on first use; the bench makes
//! it first for ours), and a Function with an active FunctionRevision whose `status.endpoint` names that
//! port: both cores dial that endpoint with their client certificates.

use std::{
    collections::BTreeMap,
    path::Path,
    process::Stdio,
    time::{Duration, Instant},
};

use anyhow::{Context, bail};
use k8s_openapi::api::core::v1::Secret;
use kube::{
    Api,
    api::{ApiResource, DynamicObject, GroupVersionKind, Patch, PatchParams, PostParams},
};
use serde_json::json;
use tokio::process::{Child, Command};

/// The Function's name.
pub const NAME: &str = "function-scale";
/// The core's CA Secret.
const CA_SECRET: &str = "crossplane-root-ca";

/// The running function, killed when dropped.
pub struct Function {
    _child: Child,
    /// Its endpoint, as a FunctionRevision's status gives it.
    pub endpoint: String,
}

/// The CA in `crossplane-root-ca` of `ns` (certificate and key, PEM), created there first if it is not.
async fn ca(client: &kube::Client, ns: &str) -> anyhow::Result<(String, String)> {
    let api: Api<Secret> = Api::namespaced(client.clone(), ns);
    if api.get_opt(CA_SECRET).await?.is_none() {
        let ca = pki::Ca::generate(CA_SECRET)?;
        let data = BTreeMap::from([
            ("tls.crt".to_owned(), ca.cert_pem().as_bytes().to_vec()),
            ("tls.key".to_owned(), ca.key_pem().into_bytes()),
        ]);
        api.create(&PostParams::default(), &pki::secret::tls(ns, CA_SECRET, data))
            .await?;
    }
    let secret = api.get(CA_SECRET).await?;
    let text =
        |key: &str| pki::secret::text(&secret, key).with_context(|| format!("{CA_SECRET} has no {key}"));
    Ok((text("tls.crt")?, text("tls.key")?))
}

/// Issues `tls.crt` and `tls.key` in `tls` for 127.0.0.1 and localhost, signed by the CA there
/// (`ca.crt`, `ca.key`), with the openssl command: upstream's CA key is RSA in PKCS#1, which rcgen
/// cannot sign with.
fn issue(tls: &Path) -> anyhow::Result<()> {
    std::fs::write(
        tls.join("ext.cnf"),
        "subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n",
    )?;
    let steps: [&[&str]; 2] = [
        &[
            "req",
            "-new",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-keyout",
            "tls.key",
            "-subj",
            "/CN=function-scale",
            "-out",
            "tls.csr",
        ],
        &[
            "x509",
            "-req",
            "-in",
            "tls.csr",
            "-CA",
            "ca.crt",
            "-CAkey",
            "ca.key",
            "-CAcreateserial",
            "-days",
            "2",
            "-out",
            "tls.crt",
            "-extfile",
            "ext.cnf",
        ],
    ];
    for args in steps {
        let out = std::process::Command::new("openssl")
            .args(args)
            .current_dir(tls)
            .output()
            .context("running openssl (is it installed?)")?;
        if !out.status.success() {
            bail!(
                "openssl {} failed: {}",
                args[0],
                String::from_utf8_lossy(&out.stderr).trim()
            );
        }
    }
    Ok(())
}

/// Starts the function with a server certificate of the core's CA, for 127.0.0.1.
pub async fn serve(client: &kube::Client, ns: &str, dir: &Path) -> anyhow::Result<Function> {
    let (ca_crt, ca_key) = ca(client, ns).await?;
    let tls = dir.join("function-tls");
    std::fs::create_dir_all(&tls)?;
    std::fs::write(tls.join("ca.crt"), ca_crt)?;
    std::fs::write(tls.join("ca.key"), ca_key)?;
    issue(&tls)?;
    let root = testenv::harness::repo_root();
    let python = release::target_dir()
        .join("function-venv")
        .join("bin")
        .join("python");
    let port = testenv::free_port()?;
    let log = std::fs::File::create(dir.join("function.log"))?;
    let child = Command::new(&python)
        .arg(root.join("crates/crossplane/tests/functions/python.py"))
        .args(["--address", &format!("127.0.0.1:{port}"), "--tls-certs-dir"])
        .arg(&tls)
        .stdin(Stdio::null())
        .stdout(log.try_clone()?)
        .stderr(log)
        .kill_on_drop(true)
        .spawn()
        .with_context(|| {
            format!(
                "starting {} (cargo xtask test sets up the venv)",
                python.display()
            )
        })?;
    let deadline = Instant::now() + Duration::from_secs(60);
    while tokio::net::TcpStream::connect(("127.0.0.1", port)).await.is_err() {
        if Instant::now() > deadline {
            bail!(
                "the function does not listen on 127.0.0.1:{port} after 60 s; see {}",
                dir.join("function.log").display()
            );
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    Ok(Function {
        _child: child,
        endpoint: format!("dns:///127.0.0.1:{port}"),
    })
}

fn api(client: &kube::Client, kind: &str) -> Api<DynamicObject> {
    let gvk = GroupVersionKind::gvk("pkg.crossplane.io", "v1", kind);
    Api::all_with(client.clone(), &ApiResource::from_gvk(&gvk))
}

/// The Function (its package on an address where nothing answers, so that neither package manager
/// runs anything: the revision below is the one that serves) and its active FunctionRevision at
/// `endpoint`, with the capability upstream's core checks before it calls (`composition`).
pub async fn install(client: &kube::Client, endpoint: &str) -> anyhow::Result<()> {
    let package = "127.0.0.1:1/crossplane-rs/function-scale:v0.0.0";
    let function: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "pkg.crossplane.io/v1", "kind": "Function", "metadata": {"name": NAME},
        "spec": {"package": package, "revisionActivationPolicy": "Manual"},
    }))?;
    api(client, "Function")
        .create(&PostParams::default(), &function)
        .await?;
    let name = format!("{NAME}-serving");
    let revision: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "pkg.crossplane.io/v1", "kind": "FunctionRevision",
        "metadata": {"name": name, "labels": {"pkg.crossplane.io/package": NAME}},
        "spec": {"desiredState": "Active", "image": package, "revision": 1,
                 "ignoreCrossplaneConstraints": true, "skipDependencyResolution": true},
    }))?;
    let revisions = api(client, "FunctionRevision");
    revisions.create(&PostParams::default(), &revision).await?;
    revisions
        .patch_status(
            &name,
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"endpoint": endpoint, "capabilities": ["composition"]}})),
        )
        .await?;
    Ok(())
}
