//! The xpkg packages `cargo xtask image` writes: provider-nop's package goes through the test bed's
//! real OCI registry. It is packed (debug build), read back from its archive and pushed with the
//! `xpkg` crate's client; skopeo reads the pushed manifest (the image's layer plus a last layer
//! annotated `io.crossplane.xpkg: base`); the package manager's fetch gets its `package.yaml` back:
//! one meta Provider and provider-nop's CRDs.

use std::path::PathBuf;
use std::process::Command;

use anyhow::{Context, Result, ensure};
use serde_json::Value;

#[tokio::test]
async fn provider_nop_is_packed_pushed_and_fetched_as_an_xpkg() -> Result<()> {
    let cluster = testenv::Cluster::shared()?;
    let registry = cluster.registry()?.clone();
    let out = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("package-test");
    let xtask = Command::new(env!("CARGO_BIN_EXE_xtask"))
        .args(["image", "--debug", "--compression", "1", "--out"])
        .arg(&out)
        .arg("provider-nop")
        .output()
        .context("running cargo xtask image --debug provider-nop")?;
    let log = String::from_utf8_lossy(&xtask.stderr);
    ensure!(xtask.status.success(), "cargo xtask image failed:\n{log}");
    let archive = out.join("provider-nop.xpkg.oci.tar");
    let image = xpkg::archive::read(&archive)?;
    ensure!(
        image.manifest.layers().len() == 2,
        "the image's layer and the package layer"
    );

    let tag = format!("t{}", std::process::id());
    let reference = registry.reference("crossplane-rs/provider-nop", &tag);
    let client = xpkg::registry::Client::new("xtask-tests")?;
    let digest = client
        .push(&image, &xpkg::Reference::parse(&reference)?, None)
        .await?;

    let raw = Command::new("skopeo")
        .args(["inspect", "--raw", "--tls-verify=false"])
        .arg(format!("docker://{reference}"))
        .output()
        .context("running skopeo (cargo xtask test installs it)")?;
    ensure!(
        raw.status.success(),
        "skopeo inspect: {}",
        String::from_utf8_lossy(&raw.stderr)
    );
    let manifest: Value = serde_json::from_slice(&raw.stdout)?;
    let layers = manifest["layers"].as_array().context("layers")?;
    assert_eq!(layers.len(), 2);
    assert_eq!(layers[1]["annotations"]["io.crossplane.xpkg"], "base");
    assert!(layers[0]["annotations"].get("io.crossplane.xpkg").is_none());

    let fetcher = xpkg::Fetcher::new(client, xpkg::Cache::in_memory());
    let fetched = fetcher
        .fetch(&reference, xpkg::PullPolicy::IfNotPresent, &Default::default())
        .await?;
    assert_eq!(fetched.digest, digest);
    let package = &fetched.package;
    assert_eq!(package.kind, xpkg::MetaKind::Provider);
    assert_eq!(package.name(), "provider-nop");
    let crds: Vec<&str> = package
        .objects_of("CustomResourceDefinition")
        .filter_map(|c| c.pointer("/metadata/name").and_then(Value::as_str))
        .collect();
    assert!(crds.contains(&"nopresources.nop.crossplane.io"), "{crds:?}");
    std::fs::remove_dir_all(&out)?;
    Ok(())
}
