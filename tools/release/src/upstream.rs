//! The README's drop-in tables (upstream Crossplane beside crossplane-rs: flags and CRD versions),
//! rendered from the code (the compatibility flag tables and the CRDs) between two markers in README.md.
//! `cargo xtask generate` rewrites them and `--check` fails when they drift, so the tables stay true.

use std::fmt::Write as _;

use anyhow::Context;
use manager::config::compat::{Effect, Flag};

const BEGIN: &str = "<!-- upstream-tables:begin (cargo xtask generate) -->";
const END: &str = "<!-- upstream-tables:end -->";

/// Upstream flags that crossplane-rs implements itself, per command: (flag, env, upstream default, ours).
const NATIVE: &[(&str, &str, &str, &str, &str)] = &[
    (
        "crossplane",
        "`--debug`, `-d`",
        "",
        "false",
        "debug for crossplane-rs's crates",
    ),
    ("crossplane", "`--version`, `-v`", "", "", "same"),
    (
        "core start",
        "`--leader-election`, `-l`",
        "LEADER_ELECTION",
        "false",
        "same",
    ),
    ("core start", "`--poll-interval`", "", "1m", "same"),
    (
        "core start",
        "`--namespace`, `-n`",
        "POD_NAMESPACE",
        "crossplane-system",
        "same (where the function CA lives)",
    ),
    (
        "rbac start",
        "`--leader-election`, `-l`",
        "LEADER_ELECTION",
        "false",
        "same",
    ),
    (
        "rbac start",
        "`--provider-clusterrole`",
        "",
        "",
        "accepted, no effect (v2 appends no provider permissions)",
    ),
    (
        "providers",
        "`--debug`, `-d`",
        "",
        "false",
        "debug for crossplane-rs's crates",
    ),
    (
        "providers",
        "`--leader-election`, `-l`",
        "LEADER_ELECTION",
        "false",
        "same",
    ),
    ("providers", "`--sync`, `-s`", "", "1h", "same"),
    ("providers", "`--poll`", "", "per provider", "same defaults"),
    (
        "providers",
        "`--max-reconcile-rate`",
        "",
        "per provider",
        "same defaults",
    ),
    (
        "providers",
        "`--metrics-bind-address`",
        "METRICS_BIND_ADDRESS",
        ":8080",
        "same",
    ),
    (
        "providers",
        "`--health-probe-bind-addr`",
        "HEALTH_PROBE_BIND_ADDRESS",
        ":8081",
        "same (alias of `--health-probe-bind-address`)",
    ),
    (
        "provider-kubernetes",
        "(environment only)",
        "WEBHOOK_TLS_CERT_DIR`, `TLS_SERVER_CERTS_DIR",
        "/tls/server",
        "same; with neither set and no `/tls/server/tls.crt`, a self-signed certificate kept in a Secret",
    ),
];

/// Upstream's served versions of the CRDs crossplane-rs also ships (storage version marked).
const UPSTREAM_CRDS: &[(&str, &str)] = &[
    (
        "compositeresourcedefinitions.apiextensions.crossplane.io",
        "v1 (storage, deprecated), v2",
    ),
    ("compositions.apiextensions.crossplane.io", "v1 (storage)"),
    ("compositionrevisions.apiextensions.crossplane.io", "v1 (storage)"),
    (
        "objects.kubernetes.crossplane.io",
        "v1alpha1 (deprecated, conversion webhook), v1alpha2 (storage)",
    ),
    ("nopresources.nop.crossplane.io", "v1alpha1 (storage)"),
    ("functions.pkg.crossplane.io", "v1 (storage), v1beta1"),
    ("functionrevisions.pkg.crossplane.io", "v1 (storage), v1beta1"),
];

fn flag_name(f: &Flag) -> String {
    let mut names = vec![format!("`--{}`", f.name)];
    names.extend(f.aliases.iter().map(|a| format!("`--{a}`")));
    if let Some(s) = f.short {
        names.push(format!("`-{s}`"));
    }
    names.join(", ")
}

fn ours(f: &Flag) -> String {
    match f.effect {
        Effect::Ignored(reason) => format!("accepted, ignored: {reason}"),
        Effect::Applied => "applied".to_owned(),
        Effect::Refused(_) => "refused with upstream's message (exit 2), as upstream".to_owned(),
    }
}

/// The tables, as markdown.
pub fn tables() -> String {
    let mut out = String::new();
    out.push_str(
        "| command | upstream flag | env | upstream default | crossplane-rs |\n|---|---|---|---|---|\n",
    );
    for (cmd, flag, env, default, ours) in NATIVE {
        let env = if env.is_empty() {
            String::new()
        } else {
            format!("`{env}`")
        };
        let _ = writeln!(out, "| {cmd} | {flag} | {env} | {default} | {ours} |");
    }
    let mut tables: Vec<(&str, &[Flag])> = vec![
        ("core start", crossplane::upstream_flags::CORE_START),
        ("core init", crossplane::upstream_flags::CORE_INIT),
        ("rbac start", crossplane::upstream_flags::RBAC_START),
        ("providers", managed::cli::UPSTREAM_FLAGS),
    ];
    // Each provider's own, from its descriptor.
    let deployed = crate::binaries::deployed();
    tables.extend(
        deployed
            .iter()
            .filter(|d| d.provider && !d.upstream_flags.is_empty())
            .map(|d| (d.name, d.upstream_flags)),
    );
    for (cmd, flags) in tables {
        for f in flags {
            let env = f.env.map(|e| format!("`{e}`")).unwrap_or_default();
            let default = f.default.unwrap_or_default();
            let _ = writeln!(
                out,
                "| {cmd} | {} | {env} | {default} | {} |",
                flag_name(f),
                ours(f)
            );
        }
    }
    out.push('\n');
    out.push_str("| CRD | upstream serves | crossplane-rs serves |\n|---|---|---|\n");
    let mut crds: Vec<_> = crate::generate::deployed()
        .iter()
        .flat_map(|b| (b.crds)())
        .collect();
    crds.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
    for crd in crds {
        let name = crd.metadata.name.clone().unwrap_or_default();
        let Some((_, upstream)) = UPSTREAM_CRDS.iter().find(|(n, _)| *n == name) else {
            continue;
        };
        let webhook = crd
            .spec
            .conversion
            .as_ref()
            .is_some_and(|c| c.strategy == "Webhook");
        let versions: Vec<String> = crd
            .spec
            .versions
            .iter()
            .filter(|v| v.served)
            .map(|v| {
                let mut notes = Vec::new();
                if v.storage {
                    notes.push("storage");
                }
                if v.deprecated == Some(true) {
                    notes.push("deprecated");
                }
                if webhook && !v.storage {
                    notes.push("conversion webhook");
                }
                if notes.is_empty() {
                    v.name.clone()
                } else {
                    format!("{} ({})", v.name, notes.join(", "))
                }
            })
            .collect();
        let _ = writeln!(out, "| `{name}` | {upstream} | {} |", versions.join(", "));
    }
    out
}

/// README.md with its tables replaced by [`tables`].
pub fn readme(current: &str) -> anyhow::Result<String> {
    let start = current
        .find(BEGIN)
        .context("README.md lacks the marker of the upstream tables")?;
    let end = current
        .find(END)
        .context("README.md lacks the end marker of the upstream tables")?;
    Ok(format!(
        "{}{BEGIN}\n{}{}",
        &current[..start],
        tables(),
        &current[end..]
    ))
}
