//! Issue 7, must-show 4: the images, checked by real OCI tools from Debian.
//!
//! `cargo xtask image --debug` packs each binary through the same code path as the release images (only
//! the binaries are debug builds, to keep the test quick); then, per image:
//! - `skopeo inspect --config` reads the config: user 65532, the entrypoint, the OCI labels, linux/amd64,
//!   one layer in `rootfs.diff_ids`;
//! - `skopeo inspect` reads the manifest: one layer, the same labels;
//! - `umoci unpack` unpacks it into a runtime bundle, whose `config.json` runs the entrypoint as
//!   65532:65532;
//! - the index names the image by the full reference its Deployment uses
//!   (`docker.io/crossplane-rs/<binary>:<version>`), which is what `ctr images import` stores it under;
//! - the base layer is Debian's packages, each recorded under `/var/lib/dpkg/status.d/`;
//! - the unpacked binary runs `--version` inside the unpacked root file system (`chroot`, as user 65532),
//!   so the libraries the image's Debian packages carry are enough.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use anyhow::{Context, Result, ensure};
use serde_json::Value;

fn run(cmd: &mut Command) -> Result<String> {
    let shown = format!("{cmd:?}");
    let out = cmd.output().with_context(|| {
        format!("running {shown} (skopeo and umoci come from Debian; .ci/run installs them)")
    })?;
    ensure!(
        out.status.success(),
        "{shown} failed:\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

fn json(text: &str) -> Result<Value> {
    serde_json::from_str(text).with_context(|| format!("parsing {text}"))
}

fn check_labels(labels: &Value, binary: &str) -> Result<()> {
    ensure!(
        labels["org.opencontainers.image.title"] == binary,
        "title label: {labels}"
    );
    ensure!(
        labels["org.opencontainers.image.version"] == env!("CARGO_PKG_VERSION"),
        "version label: {labels}"
    );
    for key in [
        "org.opencontainers.image.description",
        "org.opencontainers.image.source",
        "org.opencontainers.image.licenses",
        "org.opencontainers.image.revision",
    ] {
        ensure!(
            labels[key].as_str().is_some_and(|v| !v.is_empty()),
            "label {key} missing: {labels}"
        );
    }
    Ok(())
}

fn check_image(archive: &Path, binary: &str, work: &Path) -> Result<()> {
    let reference = format!("oci-archive:{}", archive.display());
    let entrypoint = format!("/usr/local/bin/{binary}");

    // The config, as skopeo reads it.
    let config = json(&run(
        Command::new("skopeo").args(["inspect", "--config", &reference])
    )?)?;
    ensure!(
        config["architecture"] == "amd64" && config["os"] == "linux",
        "{config}"
    );
    ensure!(config["config"]["User"] == "65532:65532", "user: {config}");
    ensure!(
        config["config"]["Entrypoint"] == serde_json::json!([entrypoint]),
        "entrypoint: {config}"
    );
    check_labels(&config["config"]["Labels"], binary)?;
    let diff_ids = config["rootfs"]["diff_ids"].as_array().context("diff_ids")?;
    ensure!(diff_ids.len() == 1, "one layer expected: {config}");

    // The manifest: one gzip layer, the labels again.
    let manifest = json(&run(Command::new("skopeo").args(["inspect", &reference]))?)?;
    let layers = manifest["Layers"].as_array().context("Layers")?;
    ensure!(layers.len() == 1, "one layer expected: {manifest}");
    check_labels(&manifest["Labels"], binary)?;

    // umoci unpacks the OCI layout into a runtime bundle.
    let layout = work.join(format!("{binary}-layout"));
    let bundle = work.join(format!("{binary}-bundle"));
    for dir in [&layout, &bundle] {
        if dir.exists() {
            std::fs::remove_dir_all(dir)?;
        }
    }
    std::fs::create_dir_all(&layout)?;
    tar::Archive::new(std::fs::File::open(archive)?)
        .unpack(&layout)
        .with_context(|| format!("extracting {}", archive.display()))?;
    let full_name = format!("docker.io/crossplane-rs/{binary}:{}", env!("CARGO_PKG_VERSION"));
    let index = json(&std::fs::read_to_string(layout.join("index.json"))?)?;
    ensure!(
        index["manifests"][0]["annotations"]["org.opencontainers.image.ref.name"] == full_name.as_str(),
        "the index must name the image {full_name}: {index}"
    );
    run(Command::new("umoci").args([
        "unpack",
        "--image",
        &format!("{}:{full_name}", layout.display()),
        &bundle.display().to_string(),
    ]))?;
    let runtime = json(&std::fs::read_to_string(bundle.join("config.json"))?)?;
    ensure!(
        runtime["process"]["user"]["uid"] == 65532 && runtime["process"]["user"]["gid"] == 65532,
        "runtime user: {}",
        runtime["process"]["user"]
    );
    ensure!(
        runtime["process"]["args"][0] == entrypoint.as_str(),
        "runtime args: {}",
        runtime["process"]["args"]
    );
    let rootfs = bundle.join("rootfs");
    let passwd = std::fs::read_to_string(rootfs.join("etc/passwd"))?;
    ensure!(
        passwd.contains(":65532:65532:"),
        "no user 65532 in /etc/passwd:\n{passwd}"
    );

    for package in ["libc6", "libgcc-s1", "ca-certificates"] {
        let status = std::fs::read_to_string(rootfs.join("var/lib/dpkg/status.d").join(package))
            .with_context(|| format!("no dpkg status for {package}"))?;
        ensure!(
            status.contains(&format!("Package: {package}")) && status.contains("Version: "),
            "dpkg status of {package}:\n{status}"
        );
    }
    let bundle = std::fs::read_to_string(rootfs.join("etc/ssl/certs/ca-certificates.crt"))?;
    ensure!(
        bundle.matches("BEGIN CERTIFICATE").count() > 50,
        "the CA bundle from ca-certificates is too small"
    );

    // The unpacked binary runs in the unpacked root file system, as the image's user.
    let version = run(Command::new("chroot").args([
        "--userspec=65532:65532",
        &rootfs.display().to_string(),
        &entrypoint,
        "--version",
    ]))?;
    ensure!(
        version.contains(env!("CARGO_PKG_VERSION")),
        "{binary} --version printed {version:?}"
    );
    eprintln!("{binary}: {}", version.trim());
    Ok(())
}

#[test]
fn images_pass_skopeo_and_umoci_and_run() -> Result<()> {
    let work = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("image-test");
    let out = work.join("archives");
    let start = Instant::now();
    let xtask = Command::new(env!("CARGO_BIN_EXE_xtask"))
        .args([
            "image",
            "--debug",
            "--compression",
            "1",
            "--out",
            &out.display().to_string(),
        ])
        .output()
        .context("running cargo xtask image --debug")?;
    let log = String::from_utf8_lossy(&xtask.stderr);
    ensure!(xtask.status.success(), "cargo xtask image --debug failed:\n{log}");
    for line in log.lines().filter(|l| l.starts_with('[')) {
        eprintln!("{line}");
    }
    let packed = start.elapsed();
    for binary in release::image::BINARIES.iter().map(|b| b.name) {
        let archive = out.join(format!("{binary}.oci.tar"));
        check_image(&archive, binary, &work).with_context(|| format!("image {binary}"))?;
    }
    eprintln!(
        "built and packed in {:.1}s, checked in {:.1}s",
        packed.as_secs_f64(),
        (start.elapsed() - packed).as_secs_f64()
    );
    std::fs::remove_dir_all(&work)?;
    Ok(())
}
