//! Usages: deletion protection (upstream's `internal/controller/protection/usage`,
//! `internal/webhook/protection/usage` and `internal/protection`). A Usage, ClusterUsage or legacy
//! `apiextensions.crossplane.io` Usage says that a resource is used by another, or protected for a
//! reason; the core labels the used resource `crossplane.io/in-use`, and its admission webhook refuses
//! deleting it while the Usage exists.
//!
//! Modules, one concept each: [`model`] (the three kinds read as one), [`selector`] (a
//! `resourceSelector` resolved to one object), [`finder`] (which Usages protect an object),
//! [`message`] (the refusal and the details annotation in words), [`controller`] (the reconciler,
//! gated by the Lease) and [`webhook`] (the admission webhook, on every replica).

pub mod controller;
pub mod finder;
pub mod message;
pub mod model;
pub mod selector;
pub mod webhook;

/// The name of the gated runnable that runs the three usage controllers.
pub const CONTROLLER_NAME: &str = "usage";

/// What the usage controllers and webhook need: the three Usage kinds read and written (status and
/// finalizers too), and any resource they name read, labelled and deleted (`replayDeletion`) — which
/// for a kind beyond upstream's base rules comes from a ClusterRole aggregated to the core, as a
/// provider's kinds do; the webhook's configuration and its certificate's Secret.
pub fn rbac_needs() -> Vec<manager::controller::rbac::Rule> {
    use manager::controller::rbac::Rule;
    let usage = &["get", "list", "watch", "update", "patch"];
    vec![
        Rule::kind::<apis::protection::Usage>(&["", "status", "finalizers"], usage),
        Rule::kind::<apis::protection::ClusterUsage>(&["", "status", "finalizers"], usage),
        Rule::plural(
            apis::apiextensions::GROUP,
            apis::apiextensions::usage::PLURAL,
            &["", "status", "finalizers"],
            usage,
        ),
        Rule::new(
            "admissionregistration.k8s.io",
            &["validatingwebhookconfigurations"],
            &["get", "list", "watch", "create", "update", "patch"],
        ),
        Rule::new("", &["secrets"], &["get", "create"]),
    ]
}

/// How `core start` runs Usages, from its flags.
#[derive(Debug, Clone)]
pub struct Wiring {
    /// Upstream's `--enable-usages` and `--enable-webhooks` (both default true): without either, no
    /// usage controller and no webhook, as upstream.
    pub enabled: bool,
    /// Where the webhook serves.
    pub webhook: webhook::Options,
    /// The Secret of the webhook's certificate (`--tls-server-secret-name`).
    pub secret: String,
    /// How often a Ready Usage is checked again (`--poll-interval`).
    pub poll: std::time::Duration,
}

impl Wiring {
    /// From upstream's flags as given, the core's namespace and label selector, and the hidden
    /// `--webhook-url`. A `--webhook-port` that is not a port number is refused in words.
    pub fn from_flags(
        given: &[manager::config::compat::Given],
        namespace: &str,
        selector: Option<String>,
        url: Option<String>,
        poll: std::time::Duration,
    ) -> Result<Self, String> {
        let value = |name: &str| given.iter().find(|g| g.name == name).map(|g| g.value.as_str());
        let on = |name: &str| value(name) != Some("false");
        let port = match value("webhook-port") {
            None => webhook::PORT,
            Some(p) => p
                .parse()
                .map_err(|_| format!("--webhook-port {p:?} is not a port number (0-65535)"))?,
        };
        Ok(Self {
            enabled: on("enable-usages") && on("enable-webhooks"),
            webhook: webhook::Options {
                port,
                url,
                namespace: namespace.to_owned(),
                selector,
            },
            secret: value("tls-server-secret-name")
                .filter(|s| !s.is_empty())
                .unwrap_or(webhook::SECRET)
                .to_owned(),
            poll,
        })
    }
}

/// Adds the usage controllers (gated) and the webhook (on every replica) to `mgr`, if enabled.
pub fn register(mgr: &mut manager::Manager, wiring: Wiring, metrics: manager::ReconcileMetrics) {
    if !wiring.enabled {
        tracing::info!("usages are off (--enable-usages=false or --enable-webhooks=false)");
        return;
    }
    let selector = wiring.webhook.selector.clone();
    let poll = wiring.poll;
    mgr.add_gated(CONTROLLER_NAME, move |ctx: manager::TermContext| {
        controller::run(ctx, selector.clone(), poll, metrics.clone())
    });
    webhook::register(mgr, wiring.webhook, wiring.secret);
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use manager::config::compat::Given;

    use super::*;

    fn given(name: &'static str, value: &str) -> Given {
        Given {
            name,
            value: value.into(),
            ignored: None,
        }
    }

    #[test]
    fn upstreams_flags_turn_usages_off_and_move_the_port() {
        let w = Wiring::from_flags(&[], "ns", None, None, Duration::from_secs(60)).expect("defaults");
        assert!(w.enabled);
        assert_eq!(
            (w.webhook.port, w.secret.as_str()),
            (9443, "crossplane-tls-server")
        );
        for off in ["enable-usages", "enable-webhooks"] {
            let w =
                Wiring::from_flags(&[given(off, "false")], "ns", None, None, Duration::ZERO).expect("off");
            assert!(!w.enabled, "{off}=false");
        }
        let w = Wiring::from_flags(&[given("webhook-port", "9999")], "ns", None, None, Duration::ZERO)
            .expect("port");
        assert_eq!(w.webhook.port, 9999);
        let e = Wiring::from_flags(&[given("webhook-port", "nine")], "ns", None, None, Duration::ZERO)
            .expect_err("bad");
        assert!(e.contains("--webhook-port"), "{e}");
    }
}
