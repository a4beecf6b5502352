//! The usage webhook serves on every replica, the standby too (the apiserver may call any replica
//! behind the Service): two cores share one Lease, each with its own webhook port; the leader alone
//! writes the webhook configuration (pointing at itself) and the certificate's Secret, and both answer
//! an AdmissionReview for deleting a protected ConfigMap with the Usage's refusal.

mod support;

use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use k8s_openapi::api::admissionregistration::v1::ValidatingWebhookConfiguration;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::Api;
use kube::api::DynamicObject;
use kube::core::{ApiResource, GroupVersionKind};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName};
use serde_json::{Value, json};
use support::*;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// Posts `body` to `https://127.0.0.1:<port><path>`, trusting `ca`; returns the response body.
async fn post(port: u16, ca: &str, path: &str, body: &str) -> anyhow::Result<String> {
    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(ca.as_bytes()) {
        roots.add(cert?)?;
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()?
        .with_root_certificates(roots)
        .with_no_client_auth();
    let tcp = tokio::net::TcpStream::connect(("127.0.0.1", port)).await?;
    let mut tls = tokio_rustls::TlsConnector::from(Arc::new(config))
        .connect(ServerName::try_from("127.0.0.1")?, tcp)
        .await
        .context("TLS handshake with the webhook's certificate")?;
    let req = format!(
        "POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\
         Connection: close\r\n\r\n{body}",
        body.len()
    );
    tls.write_all(req.as_bytes()).await?;
    let mut out = String::new();
    tls.read_to_string(&mut out).await?;
    let (head, body) = out.split_once("\r\n\r\n").context("an HTTP response")?;
    anyhow::ensure!(head.starts_with("HTTP/1.1 200"), "the webhook answered {head}");
    Ok(body.to_owned())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_standby_answers_the_usage_webhook_too() -> anyhow::Result<()> {
    let cluster = testenv::Cluster::shared()?;
    let client = cluster.client().await?;
    install_crds(&client).await?;
    let id = unique();
    let ns = cluster.namespace("usage-webhook").await?;
    let selector = format!("crossplane-rs.io/test={id}");
    let lease = format!("core-{id}");
    let ports = [testenv::free_port()?, testenv::free_port()?];
    let mut cores = Vec::new();
    for (i, port) in ports.iter().enumerate() {
        let (port, url) = (port.to_string(), format!("https://127.0.0.1:{port}"));
        let name = format!("core-{i}-{id}");
        let args = [
            "core",
            "start",
            "--watch-label-selector",
            &selector,
            "--namespace",
            &ns,
            "-l",
            "--leader-election-namespace",
            &ns,
            "--leader-election-id",
            &lease,
            "--webhook-port",
            &port,
            "--webhook-url",
            &url,
        ];
        cores.push(Process::start_env(
            cluster.kubeconfig(),
            &args,
            &name,
            &[("POD_NAME", &name)],
        )?);
    }
    let leases: Api<Lease> = Api::namespaced(client.clone(), &ns);
    let holder = wait_for("a leader", Duration::from_secs(60), || async {
        Ok(leases
            .get_opt(&lease)
            .await?
            .and_then(|l| l.spec?.holder_identity)
            .filter(|h| !h.is_empty()))
    })
    .await?;
    let leader = if holder.starts_with(&format!("core-0-{id}")) {
        0
    } else {
        1
    };
    let standby = 1 - leader;

    // The leader's configuration points at the leader.
    let vwcs: Api<ValidatingWebhookConfiguration> = Api::all(client.clone());
    let vwc_name = crossplane::usage::webhook::configuration_name(Some(&selector));
    let vwc = wait_for("the webhook configuration", Duration::from_secs(60), || async {
        Ok(vwcs.get_opt(&vwc_name).await?)
    })
    .await?;
    let url = vwc
        .webhooks
        .as_ref()
        .and_then(|w| w.first())
        .and_then(|w| w.client_config.url.clone())
        .unwrap_or_default();
    anyhow::ensure!(
        url == format!("https://127.0.0.1:{}/validate-no-usages", ports[leader]),
        "the configuration does not point at the leader: {url}"
    );

    // A protected ConfigMap.
    let labels = json!({"crossplane-rs.io/test": id});
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), &ns);
    let cm: ConfigMap = serde_json::from_value(json!({"metadata": {"name": "protected", "labels": labels}}))?;
    cms.create(&Default::default(), &cm).await?;
    let ar = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("protection.crossplane.io", "v1beta1", "Usage"),
        "usages",
    );
    let usages: Api<DynamicObject> = Api::namespaced_with(client.clone(), &ns, &ar);
    apply(
        &usages,
        json!({"apiVersion": "protection.crossplane.io/v1beta1", "kind": "Usage",
               "metadata": {"name": "keep", "namespace": ns, "labels": labels},
               "spec": {"of": {"apiVersion": "v1", "kind": "ConfigMap", "resourceRef": {"name": "protected"}},
                        "reason": "kept for the test"}}),
    )
    .await?;
    wait_for("the Usage Ready", Duration::from_secs(60), || async {
        let u = json(&usages.get("keep").await?);
        Ok(condition(&u, "Ready").filter(|c| c["status"] == "True"))
    })
    .await?;

    // Both replicas refuse the deletion, the standby too.
    let secrets: Api<Secret> = Api::namespaced(client.clone(), &ns);
    let secret = secrets.get(crossplane::usage::webhook::SECRET).await?;
    let ca = secret
        .data
        .as_ref()
        .and_then(|d| d.get("ca.crt"))
        .map(|b| String::from_utf8_lossy(&b.0).into_owned())
        .context("the certificate's Secret has no ca.crt")?;
    let old = json(&cms.get("protected").await?);
    let review = json!({
        "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
        "request": {"uid": "r-1", "kind": {"group": "", "version": "v1", "kind": "ConfigMap"},
                    "resource": {"group": "", "version": "v1", "resource": "configmaps"},
                    "name": "protected", "namespace": ns, "operation": "DELETE", "userInfo": {},
                    "oldObject": old, "options": {"apiVersion": "meta.k8s.io/v1", "kind": "DeleteOptions"}},
    });
    for (who, i) in [("standby", standby), ("leader", leader)] {
        let answer: Value = serde_json::from_str(
            &wait_for(
                &format!("the {who}'s webhook"),
                Duration::from_secs(30),
                || async {
                    Ok(post(ports[i], &ca, "/validate-no-usages", &review.to_string())
                        .await
                        .ok())
                },
            )
            .await?,
        )?;
        let r = &answer["response"];
        anyhow::ensure!(
            r["uid"] == "r-1" && r["allowed"] == false && r["status"]["code"] == 409,
            "the {who} did not refuse: {answer}"
        );
        let message = r["status"]["message"].as_str().unwrap_or_default();
        let expected = format!(
            "This resource is in-use by 1 usage(s), including the *v1beta1.Usage \"keep\" (in namespace \
             {ns:?}) with reason: \"kept for the test\"."
        );
        anyhow::ensure!(message == expected, "the {who}'s refusal: {message}");
    }

    // Cleanup: the Usage goes (its finalizer released), and the configuration.
    usages.delete("keep", &Default::default()).await?;
    wait_for("the Usage deleted", Duration::from_secs(30), || async {
        Ok(usages.get_opt("keep").await?.is_none().then_some(()))
    })
    .await?;
    for core in &mut cores {
        anyhow::ensure!(core.is_running(), "a core exited; see {}", core.log.display());
        core.kill();
    }
    vwcs.delete(&vwc_name, &Default::default()).await?;
    Ok(())
}
