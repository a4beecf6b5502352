//! Upstream provider-kubernetes' own flags (`cmd/provider/main.go`), accepted for compatibility: why
//! each is ignored here, or that it is applied (`--webhook-port`, `--sanitize-secrets`).

use managed::cli::Flag;

/// The flags beyond crossplane-runtime's common set.
pub const UPSTREAM_FLAGS: &[Flag] = &[
    Flag::ignored("poll-jitter-percentage", "the poll jitter is fixed at 10 %").default("10"),
    // Applied: an observed Secret's values are redacted in `status.atProvider.manifest`
    // (`client::redact_secret`).
    Flag::ignored_switch("sanitize-secrets", "")
        .env("SANITIZE_SECRETS")
        .default("false")
        .applied(),
    // Applied: the port of the Object v1alpha1 ⇄ v1alpha2 conversion webhook (`crate::webhook`).
    Flag::ignored("webhook-port", "")
        .env("WEBHOOK_PORT")
        .default("9443")
        .applied(),
    Flag::ignored("changelogs-socket-path", "change logs are not implemented")
        .env("CHANGELOGS_SOCKET_PATH")
        .default("/var/run/changelogs/changelogs.sock"),
    Flag::ignored_switch("enable-watches", "not implemented yet: Objects are polled")
        .env("ENABLE_WATCHES")
        .default("false"),
    Flag::ignored_switch(
        "enable-server-side-apply",
        "manifests are always applied server-side",
    )
    .env("ENABLE_SERVER_SIDE_APPLY")
    .default("true"),
    Flag::ignored_switch("enable-changelogs", "change logs are not implemented")
        .env("ENABLE_CHANGE_LOGS")
        .default("false"),
    Flag::ignored_switch("remove-managed-fields", "not implemented yet")
        .env("REMOVE_MANAGED_FIELDS")
        .default("false"),
    Flag::ignored(
        "legacy-csa-field-managers",
        "there is no client-side-apply migration",
    )
    .repeatable(),
];
