//! The Go peers (`tests/peers`), built once and cached under `target/peers/<key>/`, as [`crate::harness`]
//! caches the harness:
//!
//! - `provider-nop-go`: a NopResource provider of our own on crossplane-runtime's managed reconciler and
//!   controller-runtime's leader election (Lease `crossplane-leader-election-provider-nop`), serving the
//!   CRD that `cargo xtask generate` writes to `deploy/crds`;
//! - `function-go`: a composition function on the official Go SDK (`function-sdk-go`
//!   [`FUNCTION_SDK_VERSION`]), which the package scenarios install as a Function package: it composes a
//!   ConfigMap naming the XR and the FunctionRevision that served it, and marks observed resources ready;
//! - `crossplane`: upstream's core, `go build` of `github.com/crossplane/crossplane/v2/cmd/crossplane` at
//!   [`CROSSPLANE_VERSION`] from the Go module proxy, required by the peers' module (a `tool` line in its
//!   go.mod), and beside it upstream's own CRDs (`cluster/crds` of that module), for `core init` (pass
//!   them as env `CRDS_PATH`: kong spells the flag `--cr-ds-path`).
//!
//! The cache key hashes go.mod, go.sum, every Go source of the module (by relative path), the output of
//! `go version` and the build flags. Both binaries are built as upstream releases them: `CGO_ENABLED=0`,
//! `-trimpath -ldflags "-s -w"`, and the core's version stamped into crossplane-runtime's version package.
//!
//! Upstream's core takes its Lease namespace from the file a Pod has at
//! `/var/run/secrets/kubernetes.io/serviceaccount/namespace` and its Lease identity from its hostname;
//! [`in_pod_command`] gives a local process both (a private mount and UTS namespace, so nothing on the
//! host changes).

use std::{
    path::{Path, PathBuf},
    process::{Command, Stdio},
};

use sha2::{Digest, Sha256};

use crate::{Error, Result};

/// Upstream Crossplane's version the core is built at (`tests/peers/go.mod`).
pub const CROSSPLANE_VERSION: &str = "v2.3.4";

/// crossplane-runtime's version both peers link (the one Crossplane v2.3.4's go.mod requires).
pub const CROSSPLANE_RUNTIME_VERSION: &str = "v2.3.3";

/// The official Go function SDK's version `function-go` is built on.
pub const FUNCTION_SDK_VERSION: &str = "v0.7.0";

/// The core's package in upstream's module.
pub const CROSSPLANE_PACKAGE: &str = "github.com/crossplane/crossplane/v2/cmd/crossplane";

/// The Lease of provider-nop, upstream's and ours.
pub const PROVIDER_NOP_LEASE: &str = "crossplane-leader-election-provider-nop";

/// The Lease of upstream's core.
pub const CORE_LEASE: &str = "crossplane-leader-election-core";

/// The built peers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Peers {
    /// The crossplane-runtime NopResource provider.
    pub provider_nop: PathBuf,
    /// A composition function on the official Go SDK (static, serves gRPC on :9443).
    pub function: PathBuf,
    /// Upstream's `crossplane` binary (`core start`, `core init`, `rbac start`, ...).
    pub crossplane: PathBuf,
    /// Upstream's core CRDs, one YAML file each, for `crossplane core init --crds-path`.
    pub crossplane_crds: PathBuf,
}

/// The Go module of the peers.
pub fn source_dir() -> PathBuf {
    crate::harness::repo_root().join("tests").join("peers")
}

/// The environment of every Go command here. GONOSUMDB lets a crossplane-runtime pseudo-version that the
/// checksum database does not know resolve (go.sum already pins every hash the build uses).
const GO_ENV: [(&str, &str); 2] = [
    ("CGO_ENABLED", "0"),
    ("GONOSUMDB", "github.com/crossplane/crossplane-runtime"),
];

/// The ldflags of our own peers (provider-nop-go, function-go).
fn provider_ldflags() -> String {
    "-s -w".to_string()
}

/// The core's ldflags, as upstream's release stamps them.
fn core_ldflags() -> String {
    format!("-s -w -X github.com/crossplane/crossplane-runtime/v2/pkg/version.version={CROSSPLANE_VERSION}")
}

/// The module's files that go into the key, as (path relative to `dir`, contents), sorted by path: go.mod,
/// go.sum and every `.go` file below `dir`.
fn key_inputs(dir: &Path) -> Result<Vec<(String, Vec<u8>)>> {
    fn walk(root: &Path, dir: &Path, out: &mut Vec<(String, Vec<u8>)>) -> Result<()> {
        let entries = std::fs::read_dir(dir).map_err(Error::io("listing the Go peers' sources", dir))?;
        for entry in entries {
            let entry = entry.map_err(Error::io("listing the Go peers' sources", dir))?;
            let path = entry.path();
            let file_type = entry
                .file_type()
                .map_err(Error::io("reading a Go peers' source", &path))?;
            if file_type.is_dir() {
                walk(root, &path, out)?;
                continue;
            }
            let name = entry.file_name();
            let name = name.to_string_lossy();
            if name == "go.mod" || name == "go.sum" || name.ends_with(".go") {
                let bytes = std::fs::read(&path).map_err(Error::io("reading a Go peers' source", &path))?;
                let rel = path
                    .strip_prefix(root)
                    .unwrap_or(&path)
                    .to_string_lossy()
                    .into_owned();
                out.push((rel, bytes));
            }
        }
        Ok(())
    }
    let mut out = Vec::new();
    walk(dir, dir, &mut out)?;
    out.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(out)
}

/// The cache key of the module in `dir` built by the Go toolchain that printed `go_version`.
pub fn cache_key_of(dir: &Path, go_version: &[u8]) -> Result<String> {
    let mut hasher = Sha256::new();
    for (path, bytes) in key_inputs(dir)? {
        // Lengths first, so that no two different file lists hash alike.
        hasher.update((path.len() as u64).to_le_bytes());
        hasher.update(path.as_bytes());
        hasher.update((bytes.len() as u64).to_le_bytes());
        hasher.update(&bytes);
    }
    hasher.update(go_version);
    hasher.update(provider_ldflags().as_bytes());
    hasher.update(core_ldflags().as_bytes());
    for (k, v) in GO_ENV {
        hasher.update(k.as_bytes());
        hasher.update(v.as_bytes());
    }
    let digest = hasher.finalize();
    Ok(digest.iter().take(8).map(|b| format!("{b:02x}")).collect())
}

/// The output of `go version`.
fn go_version() -> Result<Vec<u8>> {
    let out = Command::new("go")
        .arg("version")
        .output()
        .map_err(|e| Error::PeerBuild {
            peer: "the Go peers",
            message: format!(
                "cannot run `go version` ({e}): Go 1.26 must be installed and on PATH, as for the harness"
            ),
        })?;
    if !out.status.success() {
        return Err(Error::PeerBuild {
            peer: "the Go peers",
            message: format!(
                "`go version` failed ({}): {}",
                out.status,
                String::from_utf8_lossy(&out.stderr).trim()
            ),
        });
    }
    Ok(out.stdout)
}

/// The cache key for the current sources and Go toolchain.
pub fn cache_key() -> Result<String> {
    cache_key_of(&source_dir(), &go_version()?)
}

/// The cache directory `target_dir/peers/<key>/` for the current key, created, and its build lock held:
/// one builder at a time (tests run in parallel, and a cold core build takes 1.2 GB). The lock is
/// released when the returned file closes, also if this process dies.
fn locked_cache(target_dir: &Path) -> Result<(PathBuf, std::fs::File)> {
    let out_dir = target_dir.join("peers").join(cache_key()?);
    std::fs::create_dir_all(&out_dir).map_err(Error::io("creating the Go peers' cache", &out_dir))?;
    let lock_path = out_dir.join(".lock");
    let lock = std::fs::File::create(&lock_path)
        .map_err(Error::io("creating the Go peers' build lock", &lock_path))?;
    lock.lock()
        .map_err(Error::io("waiting for the Go peers' build lock", &lock_path))?;
    Ok((out_dir, lock))
}

/// Returns function-go alone, building it into `target_dir/peers/<key>/` if the cache lacks it (under
/// the same lock as [`ensure_built`]): the package scenarios need it and not upstream's core.
pub fn ensure_function(target_dir: &Path, mut progress: impl FnMut(&str)) -> Result<PathBuf> {
    let (out_dir, lock) = locked_cache(target_dir)?;
    let function = out_dir.join("function-go");
    build_function(&function, &mut progress)?;
    drop(lock);
    Ok(function)
}

/// Returns provider-nop-go alone, building it into `target_dir/peers/<key>/` if the cache lacks it (under
/// the same lock as [`ensure_built`]): the node's live migration runs its image, and needs neither
/// function-go nor upstream's core.
pub fn ensure_provider_nop(target_dir: &Path, mut progress: impl FnMut(&str)) -> Result<PathBuf> {
    let (out_dir, lock) = locked_cache(target_dir)?;
    let binary = out_dir.join("provider-nop-go");
    build_provider_nop(&binary, &mut progress)?;
    drop(lock);
    Ok(binary)
}

/// Builds provider-nop-go into `binary` unless it is there.
fn build_provider_nop(binary: &Path, progress: &mut impl FnMut(&str)) -> Result<()> {
    if binary.exists() {
        return Ok(());
    }
    progress(&format!(
        "building provider-nop-go (crossplane-runtime {CROSSPLANE_RUNTIME_VERSION}) into {}",
        binary.display()
    ));
    go_build(
        "provider-nop-go",
        binary,
        &provider_ldflags(),
        "./provider-nop-go",
        progress,
    )
}

/// Builds function-go into `binary` unless it is there.
fn build_function(binary: &Path, progress: &mut impl FnMut(&str)) -> Result<()> {
    if binary.exists() {
        return Ok(());
    }
    progress(&format!(
        "building function-go (function-sdk-go {FUNCTION_SDK_VERSION}) into {}",
        binary.display()
    ));
    go_build(
        "function-go",
        binary,
        &provider_ldflags(),
        "./function-go",
        progress,
    )
}

/// Returns the cached peers, building what the cache lacks for the current key into
/// `target_dir/peers/<key>/`, one caller at a time (a file lock). `progress` receives one line now and then while Go builds. A cold build of
/// the core takes about 6 minutes on 2 cores and 1.2 GB of memory; provider-nop-go then takes seconds.
pub fn ensure_built(target_dir: &Path, mut progress: impl FnMut(&str)) -> Result<Peers> {
    let (out_dir, lock) = locked_cache(target_dir)?;
    let peers = Peers {
        provider_nop: out_dir.join("provider-nop-go"),
        function: out_dir.join("function-go"),
        crossplane: out_dir.join("crossplane"),
        crossplane_crds: out_dir.join("crossplane-crds"),
    };
    build_provider_nop(&peers.provider_nop, &mut progress)?;
    build_function(&peers.function, &mut progress)?;
    if !peers.crossplane.exists() {
        progress(&format!(
            "building upstream's core (crossplane {CROSSPLANE_VERSION}) into {}; a cold build takes about \
             6 minutes on 2 cores",
            peers.crossplane.display()
        ));
        go_build(
            "upstream's core",
            &peers.crossplane,
            &core_ldflags(),
            CROSSPLANE_PACKAGE,
            &mut progress,
        )?;
    }
    if !peers.crossplane_crds.exists() {
        copy_core_crds(&peers.crossplane_crds)?;
    }
    drop(lock);
    Ok(peers)
}

/// The last lines of a failed Go command's messages, and what to check.
fn build_failure(what: &str, status: std::process::ExitStatus, errors: &[String]) -> String {
    let tail: Vec<&str> = errors.iter().rev().take(30).rev().map(String::as_str).collect();
    let text = tail.join("\n");
    let hint = if text.contains("proxy.golang.org") || text.contains("410 Gone") || text.contains("403") {
        "\nThe Go module proxy must serve the exact versions tests/peers/go.mod pins (it refuses version \
         lists, so never ask it for @latest); see ../shared/reference/upstream-build.md."
    } else if text.contains("verifying") || text.contains("SECURITY ERROR") {
        "\nA checksum did not verify: go.sum must list every module's hash (run `go mod tidy` in tests/peers \
         with GONOSUMDB=github.com/crossplane/crossplane-runtime)."
    } else {
        ""
    };
    format!("{what} exited with {status}:\n{text}{hint}")
}

/// `go build` of `package` in the peers' module into `binary` (through a `.partial` file, so a broken
/// build never looks cached).
fn go_build(
    peer: &'static str,
    binary: &Path,
    ldflags: &str,
    package: &str,
    progress: &mut impl FnMut(&str),
) -> Result<()> {
    let tmp = binary.with_extension("partial");
    let dir = source_dir();
    let mut child = Command::new("nice")
        .args([
            "-n",
            "10",
            "go",
            "build",
            "-v",
            "-trimpath",
            "-ldflags",
            ldflags,
            "-o",
        ])
        .arg(&tmp)
        .arg(package)
        .current_dir(&dir)
        .envs(GO_ENV)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| Error::PeerBuild {
            peer,
            message: format!(
                "cannot start `go build` in {} ({e}); is Go on PATH?",
                dir.display()
            ),
        })?;
    let (packages, errors) = crate::harness::follow_go_build(child.stderr.take(), |n, line| {
        progress(&format!("{peer}: compiled {n} packages, now {line}"));
    });
    let status = child.wait().map_err(|e| Error::PeerBuild {
        peer,
        message: format!("waiting for `go build`: {e}"),
    })?;
    if !status.success() {
        return Err(Error::PeerBuild {
            peer,
            message: build_failure(&format!("`go build {package}`"), status, &errors),
        });
    }
    std::fs::rename(&tmp, binary).map_err(Error::io("installing a Go peer", binary))?;
    progress(&format!("{peer}: built ({packages} packages compiled)"));
    Ok(())
}

/// Copies `cluster/crds/*.yaml` of upstream's module (from Go's module cache) into `dest`.
fn copy_core_crds(dest: &Path) -> Result<()> {
    let peer = "upstream's core CRDs";
    let out = Command::new("go")
        .args([
            "list",
            "-m",
            "-f",
            "{{.Dir}}",
            "github.com/crossplane/crossplane/v2",
        ])
        .current_dir(source_dir())
        .envs(GO_ENV)
        .output()
        .map_err(|e| Error::PeerBuild {
            peer,
            message: format!("cannot run `go list -m` ({e}); is Go on PATH?"),
        })?;
    if !out.status.success() {
        let errors: Vec<String> = String::from_utf8_lossy(&out.stderr)
            .lines()
            .map(String::from)
            .collect();
        return Err(Error::PeerBuild {
            peer,
            message: build_failure(
                "`go list -m github.com/crossplane/crossplane/v2`",
                out.status,
                &errors,
            ),
        });
    }
    let module = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
    let src = module.join("cluster").join("crds");
    let tmp = dest.with_extension("partial");
    if tmp.exists() {
        std::fs::remove_dir_all(&tmp).map_err(Error::io("clearing a half-copied CRD directory", &tmp))?;
    }
    std::fs::create_dir_all(&tmp).map_err(Error::io("creating the core CRD directory", &tmp))?;
    let mut copied = 0usize;
    for entry in std::fs::read_dir(&src).map_err(Error::io(
        "listing upstream's CRDs in Go's module cache (run `go mod download` in tests/peers)",
        &src,
    ))? {
        let path = entry.map_err(Error::io("listing upstream's CRDs", &src))?.path();
        if path.extension().is_some_and(|e| e == "yaml")
            && let Some(name) = path.file_name()
        {
            std::fs::copy(&path, tmp.join(name)).map_err(Error::io("copying an upstream CRD", &path))?;
            copied += 1;
        }
    }
    if copied == 0 {
        return Err(Error::PeerBuild {
            peer,
            message: format!("{} holds no CRD", src.display()),
        });
    }
    std::fs::rename(&tmp, dest).map_err(Error::io("installing the core CRD directory", dest))?;
    Ok(())
}

/// A command that runs `binary args...` as if in a Pod of `namespace` on a host named `hostname`:
/// `unshare` gives it private mount and UTS namespaces, in which a small tmpfs over `/run` holds the
/// service-account namespace file controller-runtime reads for its Lease namespace, and the hostname
/// (the prefix of controller-runtime's Lease identity) is set. `unshare` and the shell `exec`, so the
/// process id is the peer's own. Needs root (or CAP_SYS_ADMIN), as the test bed already does.
pub fn in_pod_command(binary: &Path, namespace: &str, hostname: &str) -> Command {
    const SCRIPT: &str = r#"set -e
mount -t tmpfs -o size=1m,mode=0755 peers-run /run
mkdir -p /run/secrets/kubernetes.io/serviceaccount
printf %s "$1" > /run/secrets/kubernetes.io/serviceaccount/namespace
hostname "$2"
shift 2
exec "$@""#;
    let mut cmd = Command::new("unshare");
    cmd.args([
        "--mount",
        "--uts",
        "--propagation",
        "private",
        "--",
        "sh",
        "-c",
        SCRIPT,
        "sh",
    ])
    .arg(namespace)
    .arg(hostname)
    .arg(binary);
    cmd
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch() -> PathBuf {
        let dir = std::env::temp_dir().join(format!("peers-key-{}", uuid::Uuid::new_v4().simple()));
        std::fs::create_dir_all(dir.join("provider-nop-go")).expect("scratch dir");
        std::fs::write(dir.join("go.mod"), "module x\n").expect("go.mod");
        std::fs::write(dir.join("go.sum"), "").expect("go.sum");
        std::fs::write(dir.join("provider-nop-go").join("main.go"), "package main\n").expect("main.go");
        dir
    }

    #[test]
    fn cache_key_follows_sources_and_toolchain_only() {
        let dir = scratch();
        let go = b"go version go1.26.8 linux/amd64\n";
        let key = cache_key_of(&dir, go).expect("key");
        assert_eq!(key.len(), 16);
        assert_eq!(key, cache_key_of(&dir, go).expect("key"), "the key is stable");

        // Files that are not Go sources, go.mod or go.sum do not count.
        std::fs::write(dir.join("README.md"), "notes").expect("readme");
        std::fs::write(dir.join("provider-nop-go").join("notes.txt"), "x").expect("notes");
        assert_eq!(key, cache_key_of(&dir, go).expect("key"));

        // Another toolchain, another key.
        assert_ne!(
            key,
            cache_key_of(&dir, b"go version go1.26.9 linux/amd64\n").expect("key")
        );

        // A source below the module root counts, by content...
        let main = dir.join("provider-nop-go").join("main.go");
        std::fs::write(&main, "package main\n\nfunc main() {}\n").expect("main.go");
        let changed = cache_key_of(&dir, go).expect("key");
        assert_ne!(key, changed);
        // ...and by path: the same file moved is another module.
        std::fs::create_dir_all(dir.join("other")).expect("dir");
        std::fs::rename(&main, dir.join("other").join("main.go")).expect("move");
        assert_ne!(changed, cache_key_of(&dir, go).expect("key"));

        // go.sum counts.
        std::fs::write(dir.join("go.sum"), "x v1.0.0 h1:abc=\n").expect("go.sum");
        let with_sum = cache_key_of(&dir, go).expect("key");
        std::fs::write(dir.join("go.sum"), "x v1.0.1 h1:abc=\n").expect("go.sum");
        assert_ne!(with_sum, cache_key_of(&dir, go).expect("key"));

        std::fs::remove_dir_all(&dir).expect("cleanup");
    }

    #[test]
    fn go_mod_pins_the_versions_this_module_names() {
        let go_mod = std::fs::read_to_string(source_dir().join("go.mod")).expect("tests/peers/go.mod");
        for (module, version) in [
            ("github.com/crossplane/crossplane/v2", CROSSPLANE_VERSION),
            ("github.com/crossplane/crossplane/apis/v2", CROSSPLANE_VERSION),
            (
                "github.com/crossplane/crossplane-runtime/v2",
                CROSSPLANE_RUNTIME_VERSION,
            ),
        ] {
            assert!(
                go_mod.lines().any(|l| {
                    let mut words = l.split_whitespace();
                    words.next() == Some(module) && words.next() == Some(version)
                }),
                "tests/peers/go.mod must require {module} {version}"
            );
        }
        assert!(
            go_mod
                .lines()
                .any(|l| l.trim() == format!("tool {CROSSPLANE_PACKAGE}")),
            "tests/peers/go.mod must name the core as a tool, so `go mod tidy` keeps it"
        );
    }

    #[test]
    fn a_proxy_refusal_says_what_to_do() {
        let status = Command::new("false").status().expect("false");
        let msg = build_failure(
            "`go build x`",
            status,
            &["go: example.com/x@v1.0.0: reading https://proxy.golang.org/...: 403 Forbidden".into()],
        );
        assert!(msg.contains("exact versions"), "{msg}");
    }
}
