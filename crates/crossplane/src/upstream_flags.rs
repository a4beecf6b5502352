//! Upstream Crossplane's flags for `crossplane core start`, `core init`, `rbac start` and `rbac init`
//! (`cmd/crossplane/{core,rbac}`), with their names, short forms, environment variables and defaults, and
//! what this binary does with each. Every one of them is accepted, so an operator's existing `args:` and
//! environment run unchanged; the README lists the ignored ones.

use manager::config::compat::Flag;

/// The help heading of the compatibility flags.
pub const HEADING: &str = "Upstream compatibility";

const NO_PACKAGES: &str = "crossplane-rs's package manager does not implement this";
const NO_WEBHOOKS: &str = "crossplane-rs's core start keeps its webhook configuration and certificate itself";
const NO_PROFILER: &str = "crossplane-rs serves no pprof endpoint";
const NOT_YET: &str = "crossplane-rs does not have this feature yet";

/// `crossplane core start` (`--namespace`/`-n` is one of its own flags). `--metrics-port` and `--health-probe-port` are applied by the binary: they
/// set `--metrics-bind-address` and `--health-probe-bind-address` to `:<port>`. `--enable-usages`,
/// `--enable-webhooks`, `--webhook-port` and `--tls-server-secret-name` are applied by the usage
/// webhook ([`crate::usage::Wiring`]); `--enable-operations` turns the ops controllers on ([`crate::ops::enabled`]);
/// `--enable-ssa-claims=false` syncs claims client-side ([`crate::claim::ssa_enabled`]).
pub const CORE_START: &[Flag] = &[
    Flag::ignored("profile", NO_PROFILER),
    Flag::ignored("service-account", NO_PACKAGES)
        .env("POD_SERVICE_ACCOUNT")
        .default("crossplane"),
    Flag::ignored("ca-bundle-path", NO_PACKAGES).env("CA_BUNDLE_PATH"),
    Flag::ignored("user-agent", NO_PACKAGES).env("USER_AGENT"),
    Flag::ignored("xpkg-cache-dir", NO_PACKAGES)
        .short('c')
        .aliases(&["cache-dir"])
        .env("XPKG_CACHE_DIR")
        .default("/cache/xpkg"),
    Flag::ignored(
        "sync-interval",
        "watches keep the caches current; there is no periodic resync",
    )
    .short('s')
    .default("1h"),
    Flag::ignored(
        "min-poll-interval",
        "the crossplane.io/poll-interval annotation is not read on XRs",
    )
    .default("1s"),
    Flag::ignored(
        "max-concurrent-reconciles",
        "composite controllers use kube-runtime's default concurrency",
    )
    .aliases(&["max-reconcile-rate"])
    .default("100"),
    Flag::ignored("max-concurrent-package-establishers", NO_PACKAGES).default("10"),
    Flag::ignored("circuit-breaker-burst", "")
        .default("100.0")
        .applied(),
    Flag::ignored("circuit-breaker-refill-rate", "")
        .default("1.0")
        .applied(),
    Flag::ignored("circuit-breaker-cooldown", "")
        .default("5m")
        .applied(),
    Flag::ignored_switch("enable-webhooks", "")
        .aliases(&["webhook-enabled"])
        .env("ENABLE_WEBHOOKS")
        .default("true")
        .applied(),
    Flag::ignored("webhook-port", "")
        .env("WEBHOOK_PORT")
        .default("9443")
        .applied(),
    Flag::ignored("metrics-port", "")
        .env("METRICS_PORT")
        .default("8080")
        .applied(),
    Flag::ignored("health-probe-port", "")
        .env("HEALTH_PROBE_PORT")
        .default("8081")
        .applied(),
    Flag::ignored("tls-server-secret-name", "")
        .env("TLS_SERVER_SECRET_NAME")
        .applied(),
    Flag::ignored("tls-server-certs-dir", NO_WEBHOOKS).env("TLS_SERVER_CERTS_DIR"),
    Flag::ignored("tls-client-secret-name", NOT_YET).env("TLS_CLIENT_SECRET_NAME"),
    Flag::ignored("tls-client-certs-dir", NOT_YET).env("TLS_CLIENT_CERTS_DIR"),
    Flag::ignored_switch("enable-dependency-version-upgrades", NO_PACKAGES),
    Flag::ignored_switch("enable-dependency-version-downgrades", NO_PACKAGES),
    Flag::ignored_switch("enable-signature-verification", NO_PACKAGES),
    Flag::ignored_switch("enable-function-response-cache", NOT_YET),
    Flag::ignored_switch("enable-operations", "").applied(),
    Flag::ignored_switch("enable-pipeline-inspector", NOT_YET),
    Flag::ignored_switch("enable-provider-deletion-protection", NO_PACKAGES),
    Flag::ignored("xfn-cache-dir", NOT_YET)
        .env("XFN_CACHE_DIR")
        .default("/cache/xfn"),
    Flag::ignored("xfn-cache-max-ttl", NOT_YET)
        .env("XFN_CACHE_MAX_TTL")
        .default("24h"),
    Flag::ignored("pipeline-inspector-socket", NOT_YET)
        .env("PIPELINE_INSPECTOR_SOCKET")
        .default("/var/run/pipeline-inspector/socket"),
    Flag::ignored_switch("enable-deployment-runtime-configs", NO_PACKAGES).default("true"),
    Flag::ignored_switch("enable-usages", "")
        .default("true")
        .applied(),
    Flag::ignored_switch("enable-ssa-claims", "")
        .default("true")
        .applied(),
    Flag::ignored_switch(
        "enable-realtime-compositions",
        "composed resources are always watched",
    )
    .default("true"),
    Flag::ignored_switch("enable-custom-to-managed-resource-conversion", "")
        .default("true")
        .applied(),
    Flag::ignored_switch("restrict-namespaced-events", NOT_YET).default("false"),
    Flag::ignored_switch("watch-cache-namespaced", NOT_YET).default("false"),
    Flag::refused(
        "enable-composition-webhook-schema-validation",
        true,
        "Crossplane now uses CEL to validate Compositions; this flag was removed upstream too",
    ),
    Flag::refused(
        "enable-external-secret-stores",
        true,
        "Crossplane removed support for external secret stores; this flag was removed upstream too",
    ),
    Flag::refused(
        "registry",
        false,
        "the --registry flag is no longer supported: give every package a fully qualified name that states its registry",
    ),
];

/// `crossplane core init`: what applies to us (the CRDs, `--activation`'s default
/// ManagedResourceActivationPolicy) is done; the rest is accepted and ignored.
pub const CORE_INIT: &[Flag] = &[
    Flag::ignored("provider", NO_PACKAGES),
    Flag::ignored("configuration", NO_PACKAGES),
    Flag::ignored("function", NO_PACKAGES),
    Flag::ignored("activation", "").repeatable().applied(),
    Flag::ignored("namespace", "init needs no namespace here")
        .short('n')
        .env("POD_NAMESPACE")
        .default("crossplane-system"),
    Flag::ignored("service-account", NO_PACKAGES)
        .env("POD_SERVICE_ACCOUNT")
        .default("crossplane"),
    Flag::ignored("crds-path", "the CRDs are built into the binary")
        .env("CRDS_PATH")
        .default("/crds"),
    Flag::ignored("webhook-configurations-path", NO_WEBHOOKS)
        .env("WEBHOOK_CONFIGS_PATH")
        .default("/webhookconfigurations"),
    Flag::ignored_switch("enable-webhooks", NO_WEBHOOKS)
        .aliases(&["webhook-enabled"])
        .env("ENABLE_WEBHOOKS")
        .default("true"),
    Flag::ignored("webhook-service-name", NO_WEBHOOKS).env("WEBHOOK_SERVICE_NAME"),
    Flag::ignored("webhook-service-namespace", NO_WEBHOOKS).env("WEBHOOK_SERVICE_NAMESPACE"),
    Flag::ignored("webhook-service-port", NO_WEBHOOKS).env("WEBHOOK_SERVICE_PORT"),
    Flag::ignored("tls-ca-secret-name", NOT_YET).env("TLS_CA_SECRET_NAME"),
    Flag::ignored("tls-server-secret-name", NO_WEBHOOKS).env("TLS_SERVER_SECRET_NAME"),
    Flag::ignored("tls-client-secret-name", NOT_YET).env("TLS_CLIENT_SECRET_NAME"),
];

/// `crossplane rbac start`.
pub const RBAC_START: &[Flag] = &[
    Flag::ignored("profile", NO_PROFILER),
    Flag::ignored(
        "sync-interval",
        "watches keep the caches current; there is no periodic resync",
    )
    .short('s')
    .default("1h"),
    Flag::ignored("poll-interval", "the RBAC manager reacts to XRD changes only").default("1m"),
    Flag::ignored(
        "max-concurrent-reconciles",
        "the RBAC manager uses kube-runtime's default concurrency",
    )
    .aliases(&["max-reconcile-rate"])
    .default("10"),
    Flag::refused(
        "registry",
        false,
        "the --registry flag is no longer supported: give every package a fully qualified name that states its registry",
    ),
];

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;

    #[test]
    fn names_and_short_forms_are_unique_per_command() {
        for (what, flags) in [
            ("core start", CORE_START),
            ("core init", CORE_INIT),
            ("rbac start", RBAC_START),
        ] {
            let mut seen = BTreeSet::new();
            for f in flags {
                for n in std::iter::once(&f.name).chain(f.aliases) {
                    assert!(seen.insert(*n), "{what}: --{n} twice");
                }
            }
        }
    }
}
