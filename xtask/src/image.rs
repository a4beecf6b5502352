//! `cargo xtask image [BINARY|--all]`: each binary as an OCI image archive under `target/images/`, built
//! without a Docker daemon.
//!
//! The image has one layer: the release binary at `/usr/local/bin/<binary>`, the shared libraries it
//! links (found with `ldd`, as a distroless base would ship them), `/etc/passwd` and `/etc/group` with
//! the non-root user 65532, the CA bundle, and a world-writable `/tmp`. The config runs as
//! `65532:65532` with the binary as entrypoint, and carries the `org.opencontainers.image.*` labels.
//! The archive is an OCI image layout in a tar (`oci-archive:` for skopeo). Timestamps are fixed, so
//! the same binary always gives the same digests.

use std::{
    collections::{BTreeSet, HashMap},
    io::Write,
    path::{Path, PathBuf},
    process::Command,
};

use anyhow::{Context, bail};
use flate2::{Compression, write::GzEncoder};
use oci_spec::image::{
    Arch, ConfigBuilder, DescriptorBuilder, ImageConfigurationBuilder, ImageIndexBuilder,
    ImageManifestBuilder, MediaType, Os, RootFsBuilder, Sha256Digest,
};
use sha2::{Digest, Sha256};

use crate::target_dir;

/// A binary that ships as an image.
pub struct Binary {
    /// The cargo package.
    pub package: &'static str,
    /// The binary's name.
    pub name: &'static str,
    /// One line on what it is.
    pub description: &'static str,
    /// Default arguments after the entrypoint.
    pub cmd: &'static [&'static str],
}

/// Every binary that ships.
pub const BINARIES: &[Binary] = &[
    Binary {
        package: "crossplane",
        name: "crossplane",
        description: "Crossplane core and RBAC manager, in Rust",
        cmd: &["core", "start"],
    },
    Binary {
        package: "provider-nop",
        name: "provider-nop",
        description: "Crossplane provider-nop, in Rust",
        cmd: &[],
    },
    Binary {
        package: "provider-kubernetes",
        name: "provider-kubernetes",
        description: "Crossplane provider-kubernetes, in Rust",
        cmd: &[],
    },
    Binary {
        package: "provider-sql",
        name: "provider-sql",
        description: "Crossplane provider-sql (PostgreSQL), in Rust",
        cmd: &[],
    },
];

/// The non-root user and group the images run as.
pub const USER: &str = "65532:65532";

/// How `cargo xtask image` builds.
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// Pack debug builds instead of release builds (fast; for tests and trying things out).
    pub debug: bool,
    /// Where the archives go (default `target/images`, or `target/images/debug` with `debug`).
    pub out: Option<PathBuf>,
    /// gzip level of the layer (default 6; the image test uses 1 to stay quick).
    pub compression: Option<u32>,
}

/// Looks the binaries up by name (all when `names` is empty).
pub fn select(names: &[String]) -> anyhow::Result<Vec<&'static Binary>> {
    if names.is_empty() {
        return Ok(BINARIES.iter().collect());
    }
    names
        .iter()
        .map(|n| {
            BINARIES.iter().find(|b| b.name == n).with_context(|| {
                let known: Vec<_> = BINARIES.iter().map(|b| b.name).collect();
                format!("unknown binary {n:?}; known: {}", known.join(", "))
            })
        })
        .collect()
}

/// `cargo build [--release]` of `binaries`, with cargo's own progress on stderr; returns the directory
/// the binaries are in. `cargo xtask demo` and `cargo xtask image --debug` (and so the demo and image
/// tests) build through here, and share the artifacts of `cargo xtask`'s own build.
pub fn cargo_build(binaries: &[&Binary], release: bool) -> anyhow::Result<PathBuf> {
    let profile = if release { "release" } else { "debug" };
    eprintln!(
        "[build] cargo build{} ({})",
        if release { " --release" } else { "" },
        binaries.iter().map(|b| b.name).collect::<Vec<_>>().join(", ")
    );
    let start = std::time::Instant::now();
    let mut cargo = crate::cargo();
    cargo.arg("build");
    if release {
        cargo.arg("--release");
    } else {
        // Selecting xtask too (its binary is not built: only the named ones are) resolves features as
        // `cargo xtask` itself does, whose build already compiled every library of these binaries: only
        // their `main.rs` is left to compile, instead of a second copy of the dependency tree.
        cargo.args(["-p", "xtask"]);
    }
    for b in binaries {
        cargo.args(["-p", b.package, "--bin", b.name]);
    }
    if !cargo.status().context("running cargo build")?.success() {
        bail!("cargo build failed");
    }
    eprintln!("[build] done in {:.1}s", start.elapsed().as_secs_f64());
    Ok(target_dir().join(profile))
}

/// Builds the images of `names` (all when empty) and returns the archive paths.
pub fn run(names: &[String], options: &Options) -> anyhow::Result<Vec<PathBuf>> {
    let selected = select(names)?;
    let bin_dir = cargo_build(&selected, !options.debug)?;
    let out_dir = options.out.clone().unwrap_or_else(|| {
        let dir = target_dir().join("images");
        if options.debug { dir.join("debug") } else { dir }
    });
    std::fs::create_dir_all(&out_dir).with_context(|| format!("creating {}", out_dir.display()))?;
    let level = Compression::new(options.compression.unwrap_or(6).min(9));
    let mut archives = Vec::new();
    for b in selected {
        let start = std::time::Instant::now();
        let archive = out_dir.join(format!("{}.oci.tar", b.name));
        build_image(b, &bin_dir.join(b.name), &archive, level)?;
        eprintln!(
            "[image] {} ({:.1} MB, {:.1}s)",
            archive.display(),
            std::fs::metadata(&archive).map(|m| m.len()).unwrap_or(0) as f64 / 1e6,
            start.elapsed().as_secs_f64()
        );
        archives.push(archive);
    }
    Ok(archives)
}

/// Packs `binary` as the image of `b` into the OCI archive `archive`.
pub fn build_image(b: &Binary, binary: &Path, archive: &Path, level: Compression) -> anyhow::Result<()> {
    let version = env!("CARGO_PKG_VERSION");
    let layer_tar = rootfs_layer(b, binary)?;
    let diff_id = sha256(&layer_tar);
    let mut gz = GzEncoder::new(Vec::new(), level);
    gz.write_all(&layer_tar)?;
    let layer = gz.finish()?;

    let labels: HashMap<String, String> = [
        ("org.opencontainers.image.title", b.name.to_string()),
        ("org.opencontainers.image.description", b.description.to_string()),
        ("org.opencontainers.image.version", version.to_string()),
        (
            "org.opencontainers.image.source",
            env!("CARGO_PKG_REPOSITORY").to_string(),
        ),
        (
            "org.opencontainers.image.licenses",
            env!("CARGO_PKG_LICENSE").to_string(),
        ),
        ("org.opencontainers.image.revision", git_revision()),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect();
    let config = ImageConfigurationBuilder::default()
        .architecture(Arch::Amd64)
        .os(Os::Linux)
        .created("1970-01-01T00:00:00Z".to_string())
        .config(
            ConfigBuilder::default()
                .user(USER.to_string())
                .entrypoint(vec![format!("/usr/local/bin/{}", b.name)])
                .cmd(b.cmd.iter().map(|s| s.to_string()).collect::<Vec<_>>())
                .env(vec!["PATH=/usr/local/bin:/usr/bin:/bin".to_string()])
                .working_dir("/".to_string())
                .labels(labels.clone())
                .build()?,
        )
        .rootfs(
            RootFsBuilder::default()
                .typ("layers".to_string())
                .diff_ids(vec![format!("sha256:{diff_id}")])
                .build()?,
        )
        .build()?;
    let config_json = serde_json::to_vec(&config)?;
    let descriptor = |media: MediaType, bytes: &[u8]| -> anyhow::Result<_> {
        Ok(DescriptorBuilder::default()
            .media_type(media)
            .digest(sha256(bytes).parse::<Sha256Digest>()?)
            .size(bytes.len() as u64)
            .build()?)
    };
    let manifest = ImageManifestBuilder::default()
        .schema_version(2u32)
        .media_type(MediaType::ImageManifest)
        .config(descriptor(MediaType::ImageConfig, &config_json)?)
        .layers(vec![descriptor(MediaType::ImageLayerGzip, &layer)?])
        .annotations(labels)
        .build()?;
    let manifest_json = serde_json::to_vec(&manifest)?;
    let mut manifest_desc = descriptor(MediaType::ImageManifest, &manifest_json)?;
    manifest_desc.set_annotations(Some(
        [(
            "org.opencontainers.image.ref.name".to_string(),
            version.to_string(),
        )]
        .into(),
    ));
    let index = ImageIndexBuilder::default()
        .schema_version(2u32)
        .media_type(MediaType::ImageIndex)
        .manifests(vec![manifest_desc])
        .build()?;

    let mut out = tar::Builder::new(std::fs::File::create(archive)?);
    let blob = |d: &[u8]| format!("blobs/sha256/{}", sha256(d));
    append(
        &mut out,
        "oci-layout",
        br#"{"imageLayoutVersion":"1.0.0"}"#,
        0o644,
    )?;
    append(&mut out, "index.json", &serde_json::to_vec(&index)?, 0o644)?;
    for bytes in [&config_json, &manifest_json, &layer] {
        append(&mut out, &blob(bytes), bytes, 0o644)?;
    }
    out.finish()?;
    Ok(())
}

/// The uncompressed tar of the image's file system.
fn rootfs_layer(b: &Binary, binary: &Path) -> anyhow::Result<Vec<u8>> {
    let mut t = tar::Builder::new(Vec::new());
    for dir in [
        "etc",
        "tmp",
        "usr",
        "usr/local",
        "usr/local/bin",
        "home",
        "home/nonroot",
    ] {
        let mode = if dir == "tmp" { 0o1777 } else { 0o755 };
        append_dir(&mut t, dir, mode)?;
    }
    let passwd =
        "root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n";
    append(&mut t, "etc/passwd", passwd.as_bytes(), 0o644)?;
    append(&mut t, "etc/group", b"root:x:0:\nnonroot:x:65532:\n", 0o644)?;
    if let Ok(ca) = std::fs::read("/etc/ssl/certs/ca-certificates.crt") {
        append_dir(&mut t, "etc/ssl", 0o755)?;
        append_dir(&mut t, "etc/ssl/certs", 0o755)?;
        append(&mut t, "etc/ssl/certs/ca-certificates.crt", &ca, 0o644)?;
    }
    let bytes = std::fs::read(binary).with_context(|| format!("reading {}", binary.display()))?;
    append(&mut t, &format!("usr/local/bin/{}", b.name), &bytes, 0o755)?;
    let mut dirs = BTreeSet::new();
    for lib in shared_libraries(binary)? {
        let rel = lib.strip_prefix("/").unwrap_or(&lib).to_path_buf();
        for parent in rel.ancestors().skip(1).collect::<Vec<_>>().into_iter().rev() {
            if !parent.as_os_str().is_empty() && dirs.insert(parent.to_path_buf()) {
                append_dir(&mut t, &parent.to_string_lossy(), 0o755)?;
            }
        }
        let content = std::fs::read(&lib).with_context(|| format!("reading {}", lib.display()))?;
        append(&mut t, &rel.to_string_lossy(), &content, 0o755)?;
    }
    Ok(t.into_inner()?)
}

/// The shared libraries `ldd` resolves for `binary`, including the dynamic loader.
fn shared_libraries(binary: &Path) -> anyhow::Result<Vec<PathBuf>> {
    let out = Command::new("ldd").arg(binary).output().context("running ldd")?;
    let text = String::from_utf8_lossy(&out.stdout);
    let mut libs = Vec::new();
    for line in text.lines() {
        // "libc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x...)" or "/lib64/ld-linux-x86-64.so.2 (0x...)"
        let path = match line.split_once("=>") {
            Some((_, rhs)) => rhs.split_whitespace().next(),
            None => line.split_whitespace().next().filter(|p| p.starts_with('/')),
        };
        if let Some(p) = path.filter(|p| p.starts_with('/')) {
            libs.push(PathBuf::from(p));
        }
    }
    Ok(libs)
}

fn header(size: u64, mode: u32, kind: tar::EntryType) -> tar::Header {
    let mut h = tar::Header::new_gnu();
    h.set_size(size);
    h.set_mode(mode);
    h.set_uid(0);
    h.set_gid(0);
    h.set_mtime(0);
    h.set_entry_type(kind);
    h
}

fn append<W: Write>(t: &mut tar::Builder<W>, path: &str, data: &[u8], mode: u32) -> anyhow::Result<()> {
    let mut h = header(data.len() as u64, mode, tar::EntryType::Regular);
    t.append_data(&mut h, path, data)?;
    Ok(())
}

fn append_dir<W: Write>(t: &mut tar::Builder<W>, path: &str, mode: u32) -> anyhow::Result<()> {
    let mut h = header(0, mode, tar::EntryType::Directory);
    t.append_data(&mut h, format!("{path}/"), std::io::empty())?;
    Ok(())
}

fn sha256(bytes: &[u8]) -> String {
    Sha256::digest(bytes).iter().map(|b| format!("{b:02x}")).collect()
}

fn git_revision() -> String {
    Command::new("git")
        .args(["rev-parse", "HEAD"])
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_else(|| "unknown".into())
}
