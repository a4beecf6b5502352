//! provider-kubernetes: `Object`s that create, update and delete arbitrary Kubernetes objects, in both
//! Crossplane v2's namespaced `kubernetes.m.crossplane.io` and the cluster-scoped
//! `kubernetes.crossplane.io` groups, with ProviderConfigs that point at this cluster
//! (`InjectedIdentity`) or at any cluster through a kubeconfig Secret.
//!
//! Modules: [`types`] (the API), [`object`] (what both Object kinds share), [`manifest`] (pure manifest
//! rules), [`connector`] (credentials), [`client`] (the external client). [`setup`] registers the two
//! managed controllers and the three ProviderConfig controllers; `main.rs` hands it to
//! [`managed::cli::main`].
//!
//! As upstream (`WithDeterministicExternalName(true)`), the safe-create stop of crossplane-runtime is
//! off: the target object is named by its manifest (the name defaults to the Object's), and create is a
//! server-side apply of that name, so a replica that takes over after a leader died mid-create applies
//! the same object again instead of making a second one.
//!
//! With the default readiness policy (`SuccessfulCreate`), an update keeps the Object Ready: the forced
//! apply made the object match the manifest. Upstream writes Ready=False from the observe that saw the
//! change until a later observe, so composites built on Objects flap on every change.
//!
//! The cluster-scoped Object serves v1alpha1 (deprecated) next to v1alpha2 (storage), as upstream,
//! through a conversion webhook every replica serves ([`webhook`], [`conversion`]).
//!
//! Not implemented: readiness `DeriveFromCelQuery`, `watch` and the referenced-object finalizers.
#![forbid(unsafe_code)]

pub mod client;
pub mod connector;
pub mod conversion;
pub mod flags;
pub mod manifest;
pub mod object;
pub mod types;
pub mod webhook;

use std::time::Duration;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::CustomResourceExt;
use managed::provider::{Kinds, Provider};
use managed::{
    Options, ProviderConfigController, ProviderConfigKind, ProviderDefaults, ProviderGroups, ProviderInfo,
};
use manager::{BinaryInfo, Defaults, Manager};

use crate::connector::ObjectConnector;
use crate::types::{cluster, namespaced};

/// The provider's name, Lease and flag defaults (`--poll 10m`, `--max-reconcile-rate 100`, Lease
/// 60 s/50 s).
pub const INFO: ProviderInfo = ProviderInfo {
    description: "Crossplane provider-kubernetes, in Rust",
    binary: BinaryInfo {
        name: "provider-kubernetes",
        version: env!("CARGO_PKG_VERSION"),
    },
    lease: Defaults::new("crossplane-leader-election-provider-kubernetes").timings(
        Duration::from_secs(60),
        Duration::from_secs(50),
        Duration::from_secs(2),
    ),
    defaults: ProviderDefaults {
        poll: Duration::from_secs(600),
        max_reconcile_rate: 100,
    },
    upstream_flags: flags::UPSTREAM_FLAGS,
};

/// The provider's two API groups.
pub const GROUPS: ProviderGroups = ProviderGroups {
    cluster: cluster::GROUP,
    namespaced: namespaced::GROUP,
    usage_version: "v1alpha1",
    category: "kubernetes",
};

/// The provider: its binary and `cargo xtask generate` take everything from here.
pub const PROVIDER: Provider = Provider {
    info: INFO,
    setup,
    crds,
    rbac_needs,
};

/// The one list of the provider's managed kinds, both groups.
fn kinds() -> Kinds<ObjectConnector> {
    Kinds::tracked()
        .kind::<cluster::Object>()
        .kind::<namespaced::Object>()
}

/// Every CRD of the provider: the managed kinds, the ProviderConfig kinds and the usage kinds.
pub fn crds() -> Vec<CustomResourceDefinition> {
    let [cluster_usage, namespaced_usage] = GROUPS.usage_crds();
    let mut crds = kinds().crds();
    for crd in &mut crds {
        if crd.metadata.name.as_deref() == Some(webhook::CRD) {
            webhook::serve_v1alpha1(crd);
        }
    }
    crds.extend([
        cluster::ProviderConfig::crd(),
        cluster_usage,
        namespaced::ProviderConfig::crd(),
        namespaced::ClusterProviderConfig::crd(),
        namespaced_usage,
    ]);
    crds
}

/// Registers the Object controllers (both groups), the ProviderConfig controllers and the conversion
/// webhook.
pub fn setup(mgr: &mut Manager, options: &Options) {
    webhook::register(mgr, options);
    let ua = manager::config::client::user_agent(&INFO.binary, mgr.identity());
    // The identity is checked to be a valid header value when the settings are parsed.
    let connector = match ObjectConnector::new().with_user_agent(&ua) {
        Ok(c) => c,
        Err(e) => {
            tracing::error!(user_agent = %ua, error = %e, "kubeconfig clients fall back to kube's user agent");
            ObjectConnector::new()
        }
    };
    let sanitize = options
        .compat
        .iter()
        .any(|g| g.name == "sanitize-secrets" && g.value == "true");
    let connector = connector.with_sanitized_secrets(sanitize);
    let mut options = options.clone();
    options.deterministic_external_name = true;
    let (legacy, modern) = GROUPS.options(&options);
    kinds().register(mgr, &connector, |group| {
        if group == cluster::GROUP {
            legacy.clone()
        } else {
            modern.clone()
        }
    });
    for kind in provider_config_kinds() {
        ProviderConfigController::new(kind).register(mgr);
    }
}

/// The ProviderConfig kinds: legacy `ProviderConfig`, v2 namespaced `ProviderConfig` and
/// `ClusterProviderConfig`, each with the usage kind that counts for it.
pub fn provider_config_kinds() -> Vec<ProviderConfigKind> {
    GROUPS.provider_config_kinds::<cluster::ProviderConfig, namespaced::ProviderConfig, namespaced::ClusterProviderConfig>()
}

/// The API access [`setup`]'s controllers need (rendered into the provider's ClusterRole by
/// `cargo xtask generate`): the managed kinds, the ProviderConfig kinds and their usages, the
/// credentials Secrets the connector reads, the runtime's connection Secrets and Events, and for the
/// conversion webhook its certificate Secret and `get`/`patch` on the one CRD whose `caBundle` it keeps.
///
/// The objects an `Object` manages are not included: they are whatever users ask for. With
/// `InjectedIdentity`, the operator grants the provider's ServiceAccount access to them (upstream binds
/// `cluster-admin`); with a kubeconfig Secret, the credentials in it decide.
pub fn rbac_needs() -> Vec<manager::controller::rbac::Rule> {
    let mut needs = managed::groups::provider_needs(kinds().needs(), &provider_config_kinds());
    needs.push(manager::controller::rbac::Rule::new(
        "",
        &["secrets"],
        &["get", "create"],
    ));
    needs.push(
        manager::controller::rbac::Rule::new(
            "apiextensions.k8s.io",
            &["customresourcedefinitions"],
            &["get", "patch"],
        )
        .named(&[webhook::CRD]),
    );
    needs
}
