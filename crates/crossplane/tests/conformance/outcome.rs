//! What each scenario records: when `CONFORMANCE_OUT` names a directory, `<UpstreamTestName>.json` with
//! the upstream test's name and file, `pass`, `fail` or `cannot-run`, the seconds it took and a detail
//! (the error of a failure, the reason a scenario cannot run). `cargo xtask conformance` collects them.

use std::future::Future;
use std::path::PathBuf;
use std::time::Instant;

use anyhow::Context;
use serde_json::json;

/// The environment variable naming the directory outcomes are written to.
pub const ENV_OUT: &str = "CONFORMANCE_OUT";

/// Upstream's test file of the composition scenarios.
pub const COMPOSITIONS: &str = "apiextensions_compositions_test.go";
/// Upstream's test file of the legacy composition scenarios.
pub const LEGACY: &str = "apiextensions_compositions_legacy_test.go";
/// Upstream's test file of the XRD scenarios.
pub const XRDS: &str = "apiextensions_xrds_test.go";

/// Every upstream scenario named in issue 22 that this suite cannot run yet: name, upstream file, why.
pub const CANNOT_RUN: &[(&str, &str, &str)] = &[(
    "TestEnvironmentResolveIfNotPresent",
    "environmentconfig_test.go (removed in v2; manifests/apiextensions/environment remain)",
    "has no v2 equivalent: upstream v2 dropped policy.resolve with native EnvironmentConfig selection, and \
         function-environment-configs keeps nothing on the XR, so it resolves on every call as if Always (its \
         input says so); with a second matching EnvironmentConfig the v1 scenario's Single selector fails as \
         upstream's function does, instead of keeping the first match",
)];

/// Writes one outcome, if `CONFORMANCE_OUT` is set.
pub fn write(upstream: &str, file: &str, result: &str, seconds: f64, detail: &str) -> anyhow::Result<()> {
    let Some(dir) = std::env::var_os(ENV_OUT).map(PathBuf::from) else {
        return Ok(());
    };
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    let path = dir.join(format!("{upstream}.json"));
    let doc = json!({"upstream": upstream, "file": file, "result": result,
                     "seconds": (seconds * 10.0).round() / 10.0, "detail": detail});
    std::fs::write(&path, serde_json::to_string_pretty(&doc)? + "\n")
        .with_context(|| format!("writing {}", path.display()))
}

/// Runs scenario `upstream` of upstream's `file` and records its outcome ("fail" with the error before
/// it propagates).
pub async fn record<F>(upstream: &str, file: &str, scenario: F) -> anyhow::Result<()>
where
    F: Future<Output = anyhow::Result<String>>,
{
    let start = Instant::now();
    let result = scenario.await;
    let seconds = start.elapsed().as_secs_f64();
    match &result {
        Ok(detail) => write(upstream, file, "pass", seconds, detail)?,
        Err(e) => write(upstream, file, "fail", seconds, &format!("{e:#}"))?,
    }
    result.map(|_| ())
}
