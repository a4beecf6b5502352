//! Building the Go harness (`tests/control-plane`) once, cached under `target/harness/<key>/harness`.
//!
//! The cache key hashes go.mod, go.sum, the harness's Go sources and the output of `go version`, so a
//! change to any of them builds again and nothing else does. The build pins the version ldflags so
//! that `/version` reports the real Kubernetes version.

use std::{
    io::{BufRead, BufReader},
    path::{Path, PathBuf},
    process::{Command, Stdio},
};

use sha2::{Digest, Sha256};

use crate::{Error, KUBERNETES_VERSION, Result};

/// The repository root, as seen from this crate's sources.
pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .ancestors()
        .nth(2)
        .map(Path::to_path_buf)
        .unwrap_or_else(|| PathBuf::from("."))
}

/// The Go module of the harness.
pub fn source_dir() -> PathBuf {
    repo_root().join("tests").join("control-plane")
}

/// The ldflags that stamp the pinned version into the binary.
fn ldflags() -> String {
    let v = KUBERNETES_VERSION;
    let (major, minor) = {
        let mut parts = v.trim_start_matches('v').split('.');
        (
            parts.next().unwrap_or("1").to_string(),
            parts.next().unwrap_or("0").to_string(),
        )
    };
    let mut flags = vec!["-s".to_string(), "-w".to_string()];
    for pkg in ["k8s.io/component-base/version", "k8s.io/client-go/pkg/version"] {
        flags.push(format!("-X {pkg}.gitVersion={v}"));
        flags.push(format!("-X {pkg}.gitMajor={major}"));
        flags.push(format!("-X {pkg}.gitMinor={minor}"));
        flags.push(format!("-X {pkg}.gitTreeState=clean"));
    }
    flags.join(" ")
}

/// The cache key for the current sources and Go toolchain.
pub fn cache_key() -> Result<String> {
    let dir = source_dir();
    let mut hasher = Sha256::new();
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .map_err(Error::io("listing the harness sources", &dir))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            let name = p.file_name().and_then(|n| n.to_str()).unwrap_or("");
            name == "go.mod" || name == "go.sum" || name.ends_with(".go")
        })
        .collect();
    files.sort();
    for f in files {
        let bytes = std::fs::read(&f).map_err(Error::io("reading a harness source", &f))?;
        hasher.update(f.file_name().map(|n| n.as_encoded_bytes()).unwrap_or_default());
        hasher.update(&bytes);
    }
    let go = Command::new("go").arg("version").output().map_err(Error::io(
        "running `go version` (is Go installed and on PATH?)",
        "go",
    ))?;
    hasher.update(&go.stdout);
    hasher.update(ldflags().as_bytes());
    let digest = hasher.finalize();
    Ok(digest.iter().take(8).map(|b| format!("{b:02x}")).collect())
}

/// Returns the cached harness binary, building it first when the cache has none for the current key.
/// `progress` receives one line now and then while Go builds.
pub fn ensure_built(target_dir: &Path, mut progress: impl FnMut(&str)) -> Result<PathBuf> {
    let key = cache_key()?;
    let out_dir = target_dir.join("harness").join(&key);
    let binary = out_dir.join("harness");
    if binary.exists() {
        return Ok(binary);
    }
    std::fs::create_dir_all(&out_dir).map_err(Error::io("creating the harness cache", &out_dir))?;
    let tmp = out_dir.join("harness.partial");
    progress(&format!(
        "building the Go harness (kube-apiserver {KUBERNETES_VERSION}, etcd, kube-controller-manager, \
         kube-scheduler, kubelet, client-go candidate) into {}; a cold build takes 10-20 minutes on 2 cores",
        binary.display()
    ));
    let mut child = Command::new("go")
        .args(["build", "-v", "-trimpath", "-ldflags", &ldflags(), "-o"])
        .arg(&tmp)
        .arg(".")
        .current_dir(source_dir())
        .env("CGO_ENABLED", "0")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(Error::io("starting `go build`", source_dir()))?;
    let (packages, errors) = follow_go_build(child.stderr.take(), |n, line| {
        progress(&format!("compiled {n} packages, now {line}"));
    });
    let status = child
        .wait()
        .map_err(Error::io("waiting for `go build`", source_dir()))?;
    if !status.success() {
        return Err(Error::Build(format!(
            "`go build` failed ({status}):\n{}",
            errors.join("\n")
        )));
    }
    std::fs::rename(&tmp, &binary).map_err(Error::io("installing the harness binary", &binary))?;
    progress(&format!("built the harness ({packages} packages compiled)"));
    Ok(binary)
}

/// Reads the stderr of `go build -v`: it names each package as it compiles it, and anything else (a
/// line with `: `, one starting with `#` or `go: `) is a message. Calls `every_hundred` with the count
/// and the package at every hundredth package; returns the count and the messages, for an error.
pub(crate) fn follow_go_build(
    stderr: Option<impl std::io::Read>,
    mut every_hundred: impl FnMut(usize, &str),
) -> (usize, Vec<String>) {
    let mut errors = Vec::new();
    let mut packages = 0usize;
    let Some(stderr) = stderr else {
        return (packages, errors);
    };
    for line in BufReader::new(stderr).lines().map_while(|l| l.ok()) {
        if line.starts_with('#') || line.contains(": ") || line.starts_with("go: ") {
            errors.push(line);
            continue;
        }
        packages += 1;
        if packages.is_multiple_of(100) {
            every_hundred(packages, &line);
        }
    }
    (packages, errors)
}

/// Returns client-go's lease candidate built on its own (`-tags candidateonly`): the code of
/// `harness lease-candidate` without kube-apiserver, etcd and kube-controller-manager linked in, so its
/// memory is client-go's own. It sits next to the harness binary of the same cache key and, once the
/// harness is built, takes seconds (Go's build cache already holds every package).
pub fn ensure_candidate_built(target_dir: &Path) -> Result<PathBuf> {
    let harness = ensure_built(target_dir, |_| {})?;
    build_tagged(&harness.with_file_name("lease-candidate"), "candidateonly")
}

/// Returns the test bed node's sandbox ("pause") process, built on its own (`-tags pauseonly`,
/// `CGO_ENABLED=0`, so a static binary of a few MB) next to where the harness binary of the same cache
/// key goes. It takes a second and needs no other package of the module.
pub fn ensure_pause_built(target_dir: &Path) -> Result<PathBuf> {
    let dir = target_dir.join("harness").join(cache_key()?);
    std::fs::create_dir_all(&dir).map_err(Error::io("creating the harness cache", &dir))?;
    build_tagged(&dir.join("pause"), "pauseonly")
}

/// `go build -tags <tag>` of the harness module into `binary`, unless it is there already.
fn build_tagged(binary: &Path, tag: &str) -> Result<PathBuf> {
    if binary.exists() {
        return Ok(binary.to_path_buf());
    }
    // Test binaries run in parallel and may build the same binary at once: each writes a file of its
    // own, and the rename makes one of them the binary whole.
    let tmp = binary.with_extension(format!("partial-{}", std::process::id()));
    let out = Command::new("go")
        .args(["build", "-tags", tag, "-trimpath", "-ldflags", &ldflags(), "-o"])
        .arg(&tmp)
        .arg(".")
        .current_dir(source_dir())
        .env("CGO_ENABLED", "0")
        .output()
        .map_err(Error::io("starting `go build -tags`", source_dir()))?;
    if !out.status.success() {
        let _ = std::fs::remove_file(&tmp);
        return Err(Error::Build(format!(
            "`go build -tags {tag}` failed ({}):\n{}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        )));
    }
    std::fs::rename(&tmp, binary).map_err(Error::io("installing a harness binary", binary))?;
    Ok(binary.to_path_buf())
}

#[cfg(test)]
mod tests {
    use super::follow_go_build;

    #[test]
    fn go_build_output_counts_packages_and_keeps_the_messages() {
        let mut out = String::new();
        for i in 0..250 {
            out.push_str(&format!("example.org/pkg{i}\n"));
        }
        out.push_str("# example.org/broken\n./main.go:3:1: syntax error\ngo: downloading x v1\n");
        let mut ticks = Vec::new();
        let (packages, errors) = follow_go_build(Some(out.as_bytes()), |n, line| {
            ticks.push((n, line.to_owned()));
        });
        assert_eq!(packages, 250);
        assert_eq!(
            ticks,
            vec![
                (100, "example.org/pkg99".to_owned()),
                (200, "example.org/pkg199".to_owned())
            ]
        );
        assert_eq!(errors.len(), 3, "{errors:?}");
        assert!(errors[1].contains("syntax error"));
        assert_eq!(follow_go_build(None::<&[u8]>, |_, _| {}), (0, Vec::new()));
    }
}
