//! `cargo xtask image [BINARY|--all]`: each binary as an OCI image archive under `target/images/`, built
//! without a Docker daemon.
//!
//! The image has one layer: a base made of Debian's own packages (`libc6`, `libgcc-s1`,
//! `ca-certificates`, fetched with `apt-get download` and unpacked with `dpkg-deb`, each recorded under
//! `/var/lib/dpkg/status.d/` as distroless does, so that scanners see them; nothing is copied out of
//! the build host), the CA bundle made from `ca-certificates`, the release binary at
//! `/usr/local/bin/<binary>`, `/etc/passwd` and `/etc/group` with the non-root user 65532, and a
//! world-writable `/tmp`. The config runs as `65532:65532` with the binary as entrypoint, and carries
//! the `org.opencontainers.image.*` labels. The archive is an OCI image layout in a tar (`oci-archive:`
//! for skopeo) whose index names the image by its full reference ([`reference`], the name its
//! Deployment uses), so that `ctr images import` stores it under that name. Timestamps are fixed, so
//! the same binary and packages always give the same digests.
//!
//! Each provider's image is also written as an xpkg package, `<binary>.xpkg.oci.tar`: the same image
//! with a last layer, annotated `io.crossplane.xpkg: base`, holding its `package.yaml` (see
//! [`crate::package`]). It carries the image's name (a package's image is its runtime image), so push
//! or import one of the two, not both.
//!
//! `--pause` also packs the node's sandbox image (`pause`, a static Go binary from the harness module,
//! no base layer), which the test bed's containerd runs in every Pod instead of pulling one.

use std::{
    collections::{BTreeSet, HashMap},
    io::Write,
    path::{Path, PathBuf},
    process::Command,
    sync::LazyLock,
};

use anyhow::{Context, bail};
use flate2::{Compression, write::GzEncoder};
use oci_spec::image::{
    Arch, ConfigBuilder, DescriptorBuilder, ImageConfigurationBuilder, ImageIndexBuilder,
    ImageManifestBuilder, MediaType, Os, RootFsBuilder, Sha256Digest,
};
use sha2::{Digest, Sha256};

use crate::registry::Registry;
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

/// Every image that ships: [`images_of`] [`crate::binaries::deployed`].
pub static BINARIES: LazyLock<Vec<Binary>> = LazyLock::new(|| images_of(&crate::binaries::deployed()));

/// The images of `deployed`, one per distinct image, in its order; an image's default arguments are
/// those of the first Deployment that runs it.
pub fn images_of(deployed: &[crate::binaries::Deployed]) -> Vec<Binary> {
    let mut images: Vec<Binary> = Vec::new();
    for d in deployed {
        if images.iter().all(|b| b.name != d.image) {
            images.push(Binary {
                package: d.package,
                name: d.image,
                description: d.description,
                cmd: d.args,
            });
        }
    }
    images
}

/// The non-root user and group the images run as.
pub const USER: &str = "65532:65532";

/// The repository the images are named under by default ([`crate::registry::DEFAULT`]).
pub const REPOSITORY: &str = crate::registry::DEFAULT;

/// The Debian packages the base layer is made of: the C library and libgcc (which a Rust binary on
/// the gnu target links), and the CA certificates.
const BASE_PACKAGES: &[&str] = &["libc6", "libgcc-s1", "ca-certificates"];

/// The tag of the images: the workspace version.
pub const TAG: &str = env!("CARGO_PKG_VERSION");

/// The tag of the second builds ([`NEXT`]).
pub const NEXT_TAG: &str = concat!(env!("CARGO_PKG_VERSION"), "-next");

/// Second builds of provider-nop, reporting the version `<version>+next`: packed by `--next` as the
/// image `crossplane-rs/provider-nop:<version>-next`, for a rolling update between two builds on the
/// node (the binary is named for the image inside it).
pub const NEXT: &[(&str, Binary)] = &[(
    "provider-nop",
    Binary {
        package: "e2e",
        name: "e2e-provider-nop-next",
        description: "Crossplane provider-nop, in Rust (second build, version <version>+next)",
        cmd: &[],
    },
)];

/// The second build of the core (and the RBAC manager, from the same image), reporting `<version>+next`:
/// `cargo xtask node-bench` packs it as `crossplane-rs/crossplane:<version>-next` to roll the core too.
pub const NEXT_CORE: &[(&str, Binary)] = &[(
    "crossplane",
    Binary {
        package: "e2e",
        name: "e2e-crossplane-next",
        description: "Crossplane core and RBAC manager, in Rust (second build, version <version>+next)",
        cmd: &["core", "start"],
    },
)];

/// The name containerd's CRI looks a Deployment's image up by: the name in deploy/ generated with the
/// default prefix (`crossplane-rs/<name>:<version>`) with the registry that a name without one means
/// (`docker.io`). `ctr images import` stores the name in the index verbatim.
pub fn full_reference(name: &str) -> String {
    Registry::default().full_reference(name, TAG)
}

/// What one image holds.
struct Spec<'a> {
    name: &'a str,
    description: &'a str,
    cmd: &'a [&'a str],
    /// Whether the image has the Debian base layer (a dynamically linked binary needs it).
    base: bool,
    /// Its tag.
    tag: &'a str,
    /// The prefix it is named under.
    registry: &'a Registry,
}

/// How `cargo xtask image` builds.
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// Pack debug builds instead of release builds (fast; for tests and trying things out).
    pub debug: bool,
    /// Where the archives go (default `target/images`, or `target/images/debug` with `debug`).
    pub out: Option<PathBuf>,
    /// gzip level of the layer (default 6; the image test uses 1 to stay quick).
    pub compression: Option<u32>,
    /// Also pack the node's sandbox image, `pause.oci.tar`.
    pub pause: bool,
    /// Also pack the second builds ([`NEXT`]) as `<name>-next.oci.tar`.
    pub next: bool,
    /// The prefix the images are named under (as deploy/ was generated with).
    pub registry: Registry,
}

impl Options {
    /// Where the archives go: [`Options::out`], else `target/images` (`target/images/debug` with
    /// [`Options::debug`]).
    pub fn out_dir(&self) -> PathBuf {
        self.out.clone().unwrap_or_else(|| {
            let dir = target_dir().join("images");
            if self.debug { dir.join("debug") } else { dir }
        })
    }
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

/// Builds and packs the second builds `next` (each `(image name, binary)`) as `<name>-next.oci.tar` in
/// `out_dir`, tagged [`NEXT_TAG`]; returns the archive paths.
pub fn pack_next(next: &[(&str, Binary)], out_dir: &Path, options: &Options) -> anyhow::Result<Vec<PathBuf>> {
    let level = Compression::new(options.compression.unwrap_or(6).min(9));
    let builds: Vec<&Binary> = next.iter().map(|(_, b)| b).collect();
    let next_dir = cargo_build(&builds, !options.debug)?;
    let mut archives = Vec::new();
    for (name, b) in next {
        let archive = out_dir.join(format!("{name}-next.oci.tar"));
        let spec = Spec {
            name,
            description: b.description,
            cmd: b.cmd,
            base: true,
            tag: NEXT_TAG,
            registry: &options.registry,
        };
        pack(&spec, &next_dir.join(b.name), &archive, level)?;
        eprintln!("[image] {}", archive.display());
        archives.push(archive);
    }
    Ok(archives)
}

/// Builds the images of `names` (all when empty) and returns the archive paths.
pub fn run(names: &[String], options: &Options) -> anyhow::Result<Vec<PathBuf>> {
    let selected = select(names)?;
    let bin_dir = cargo_build(&selected, !options.debug)?;
    let out_dir = options.out_dir();
    std::fs::create_dir_all(&out_dir).with_context(|| format!("creating {}", out_dir.display()))?;
    let level = Compression::new(options.compression.unwrap_or(6).min(9));
    let mut archives = Vec::new();
    for b in selected {
        let start = std::time::Instant::now();
        let archive = out_dir.join(format!("{}.oci.tar", b.name));
        build_image(b, &bin_dir.join(b.name), &archive, level, &options.registry)?;
        eprintln!(
            "[image] {} ({:.1} MB, {:.1}s)",
            archive.display(),
            std::fs::metadata(&archive).map(|m| m.len()).unwrap_or(0) as f64 / 1e6,
            start.elapsed().as_secs_f64()
        );
        if let Some(xpkg) = crate::package::pack(b, &archive, &options.registry, TAG)? {
            eprintln!("[image] {} (the image with its package layer)", xpkg.display());
        }
        archives.push(archive);
    }
    if options.next {
        archives.extend(pack_next(NEXT, &out_dir, options)?);
    }
    if options.pause {
        let binary =
            testenv::harness::ensure_pause_built(&target_dir()).context("building the pause binary (Go)")?;
        let archive = out_dir.join("pause.oci.tar");
        pack_static(
            "pause",
            "The sandbox (pause) process of the test bed's node: waits for SIGTERM",
            &binary,
            &archive,
            level,
        )?;
        eprintln!("[image] {}", archive.display());
        archives.push(archive);
    }
    Ok(archives)
}

/// Packs function-go (our composition function on the official Go SDK, built from `tests/peers`) into
/// `out_dir` as `function-go.oci.tar`, and its Function package as `function-go.xpkg.oci.tar` (gzip
/// level `compression`, default 6); returns the two paths.
pub fn pack_function(
    out_dir: &Path,
    compression: Option<u32>,
    registry: &Registry,
) -> anyhow::Result<(PathBuf, PathBuf)> {
    std::fs::create_dir_all(out_dir).with_context(|| format!("creating {}", out_dir.display()))?;
    let binary = testenv::peers::ensure_function(&target_dir(), |line| eprintln!("[peers] {line}"))
        .context("building function-go (Go)")?;
    let archive = out_dir.join(format!("{}.oci.tar", crate::package::FUNCTION));
    let level = Compression::new(compression.unwrap_or(6).min(9));
    pack_static(
        crate::package::FUNCTION,
        crate::package::FUNCTION_DESCRIPTION,
        &binary,
        &archive,
        level,
    )?;
    eprintln!("[image] {}", archive.display());
    let xpkg = crate::package::pack_function(&archive, registry, TAG)?;
    eprintln!("[image] {} (the image with its package layer)", xpkg.display());
    Ok((archive, xpkg))
}

/// Packs `binary` as the image of `b`, named under `registry`, into the OCI archive `archive`.
pub fn build_image(
    b: &Binary,
    binary: &Path,
    archive: &Path,
    level: Compression,
    registry: &Registry,
) -> anyhow::Result<()> {
    let spec = Spec {
        name: b.name,
        description: b.description,
        cmd: b.cmd,
        base: true,
        tag: TAG,
        registry,
    };
    pack(&spec, binary, archive, level)
}

/// Packs the static `binary` as the image `docker.io/crossplane-rs/<name>:<TAG>` (default registry), without the Debian base
/// layer (it needs no library), into the OCI archive `archive`.
pub fn pack_static(
    name: &str,
    description: &str,
    binary: &Path,
    archive: &Path,
    level: Compression,
) -> anyhow::Result<()> {
    let spec = Spec {
        name,
        description,
        cmd: &[],
        base: false,
        tag: TAG,
        // The node's own images (the sandbox, client-go's candidate) keep their names (testenv's
        // `PAUSE_IMAGE`, the bench's candidate Deployment) whatever registry deploy/ uses.
        registry: &Registry::default(),
    };
    pack(&spec, binary, archive, level)
}

/// Packs `binary` as the image `b` describes into the OCI archive `archive`.
fn pack(b: &Spec, binary: &Path, archive: &Path, level: Compression) -> anyhow::Result<()> {
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
            b.registry.full_reference(b.name, b.tag),
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
fn rootfs_layer(b: &Spec, binary: &Path) -> anyhow::Result<Vec<u8>> {
    let mut layer = Layer::default();
    if b.base {
        let mut bundle = Vec::new();
        for package in BASE_PACKAGES {
            layer.add_package(&deb_archive(package)?, &mut bundle)?;
        }
        layer.file("etc/ssl/certs/ca-certificates.crt", &bundle, 0o644)?;
    }
    for dir in ["etc", "usr/local/bin", "home/nonroot"] {
        layer.dir(dir, 0o755)?;
    }
    layer.dir("tmp", 0o1777)?;
    let passwd =
        "root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n";
    layer.file("etc/passwd", passwd.as_bytes(), 0o644)?;
    layer.file("etc/group", b"root:x:0:\nnonroot:x:65532:\n", 0o644)?;
    let bytes = std::fs::read(binary).with_context(|| format!("reading {}", binary.display()))?;
    layer.file(&format!("usr/local/bin/{}", b.name), &bytes, 0o755)?;
    Ok(layer.tar.into_inner()?)
}

/// A layer being written: each directory once, parents before children.
struct Layer {
    tar: tar::Builder<Vec<u8>>,
    dirs: BTreeSet<String>,
}

impl Default for Layer {
    fn default() -> Self {
        Layer {
            tar: tar::Builder::new(Vec::new()),
            dirs: BTreeSet::new(),
        }
    }
}

impl Layer {
    /// Adds `path` (and its missing parents) as a directory.
    fn dir(&mut self, path: &str, mode: u32) -> anyhow::Result<()> {
        let path = path.trim_end_matches('/');
        if path.is_empty() || self.dirs.contains(path) {
            return Ok(());
        }
        if let Some((parent, _)) = path.rsplit_once('/') {
            self.dir(parent, 0o755)?;
        }
        append_dir(&mut self.tar, path, mode)?;
        self.dirs.insert(path.to_string());
        Ok(())
    }

    fn parent(&mut self, path: &str) -> anyhow::Result<()> {
        match path.rsplit_once('/') {
            Some((parent, _)) => self.dir(parent, 0o755),
            None => Ok(()),
        }
    }

    /// Adds a regular file.
    fn file(&mut self, path: &str, data: &[u8], mode: u32) -> anyhow::Result<()> {
        self.parent(path)?;
        append(&mut self.tar, path, data, mode)
    }

    /// Adds the files of the Debian package `deb` (without its manuals and documentation, but with its
    /// copyright), its control record as `/var/lib/dpkg/status.d/<package>`, and appends every CA
    /// certificate it ships to `bundle`.
    fn add_package(&mut self, deb: &Path, bundle: &mut Vec<u8>) -> anyhow::Result<()> {
        let control = dpkg_deb(&["--field"], deb)?;
        let control = String::from_utf8(control).context("dpkg-deb --field printed non-UTF-8")?;
        let package = control
            .lines()
            .find_map(|l| l.strip_prefix("Package: "))
            .with_context(|| format!("{} has no Package field", deb.display()))?
            .trim()
            .to_string();
        let data = dpkg_deb(&["--fsys-tarfile"], deb)?;
        let mut archive = tar::Archive::new(data.as_slice());
        let mut certs = Vec::new();
        for entry in archive.entries()? {
            let mut entry = entry?;
            let path = entry
                .path()?
                .to_string_lossy()
                .trim_start_matches("./")
                .to_string();
            if path.is_empty() || !keep_from_package(&path) {
                continue;
            }
            let mode = entry.header().mode()?;
            match entry.header().entry_type() {
                tar::EntryType::Directory => self.dir(&path, mode)?,
                tar::EntryType::Symlink => {
                    let target = entry
                        .link_name()?
                        .with_context(|| format!("symlink {path} without a target in {}", deb.display()))?
                        .into_owned();
                    self.parent(&path)?;
                    let mut h = header(0, mode, tar::EntryType::Symlink);
                    self.tar.append_link(&mut h, &path, target)?;
                }
                tar::EntryType::Regular => {
                    let mut data = Vec::new();
                    std::io::Read::read_to_end(&mut entry, &mut data)?;
                    if path.starts_with("usr/share/ca-certificates/") && path.ends_with(".crt") {
                        certs.push((path.clone(), data.clone()));
                    }
                    self.file(&path, &data, mode)?;
                }
                other => bail!("{}: unexpected entry {path} of type {other:?}", deb.display()),
            }
        }
        certs.sort();
        for (_, pem) in certs {
            bundle.extend_from_slice(&pem);
            if !pem.ends_with(b"\n") {
                bundle.push(b'\n');
            }
        }
        self.file(
            &format!("var/lib/dpkg/status.d/{package}"),
            control.as_bytes(),
            0o644,
        )
    }
}

/// Whether a package's file goes into the image: not its manuals, translations or documentation
/// (except the copyright).
fn keep_from_package(path: &str) -> bool {
    let dropped = [
        "usr/share/man/",
        "usr/share/locale/",
        "usr/share/info/",
        "usr/share/lintian/",
    ];
    if dropped.iter().any(|d| path.starts_with(d)) {
        return false;
    }
    match path.strip_prefix("usr/share/doc/") {
        Some(rest) => !rest.contains('/') || rest.ends_with("/copyright"),
        None => true,
    }
}

/// `dpkg-deb <args> <deb>`'s output.
fn dpkg_deb(args: &[&str], deb: &Path) -> anyhow::Result<Vec<u8>> {
    let out = Command::new("dpkg-deb")
        .args(args)
        .arg(deb)
        .output()
        .context("running dpkg-deb (the images' base layer is made of Debian packages; run on Debian)")?;
    if !out.status.success() {
        bail!(
            "dpkg-deb {} {} failed: {}",
            args.join(" "),
            deb.display(),
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(out.stdout)
}

/// The `.deb` of `package`, downloaded once with `apt-get download` into `target/images/debs/`.
fn deb_archive(package: &str) -> anyhow::Result<PathBuf> {
    let dir = target_dir().join("images").join("debs");
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    let find = || -> anyhow::Result<Option<PathBuf>> {
        let prefix = format!("{package}_");
        let mut found: Vec<PathBuf> = std::fs::read_dir(&dir)?
            .flatten()
            .map(|e| e.path())
            .filter(|p| {
                p.file_name()
                    .and_then(|n| n.to_str())
                    .is_some_and(|n| n.starts_with(&prefix) && n.ends_with(".deb"))
            })
            .collect();
        found.sort();
        Ok(found.pop())
    };
    if let Some(deb) = find()? {
        return Ok(deb);
    }
    eprintln!("[image] apt-get download {package} (base layer)");
    let out = Command::new("apt-get")
        .args(["download", "-qq", package])
        .current_dir(&dir)
        .output()
        .context("running apt-get download (the images' base layer is made of Debian packages)")?;
    if !out.status.success() {
        bail!(
            "apt-get download {package} failed: {}. The images' base layer is made of Debian packages; \
             run on Debian with working apt sources (apt-get update)",
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    find()?.with_context(|| {
        format!(
            "apt-get download {package} left no {package}_*.deb in {}",
            dir.display()
        )
    })
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
