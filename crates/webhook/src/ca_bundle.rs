//! Keeps a CA in a CRD's conversion webhook `caBundle`, so the apiserver trusts the webhook's
//! self-signed certificate. Checked at start and then periodically, because re-applying the CRD from a
//! manifest without a `caBundle` may clear it (as Crossplane's package manager re-injects it).

use std::time::Duration;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::Api;
use kube::api::{Patch, PatchParams};
use serde_json::json;
use tokio_util::sync::CancellationToken;

use crate::Error;

/// The field manager of the patch.
const MANAGER: &str = "webhook-ca-bundle";

/// Sets `caBundle` of CRD `crd`'s conversion webhook to `ca_pem` unless it already is. Returns whether it
/// patched. A CRD without a webhook conversion is left alone (`Ok(false)`).
pub async fn ensure(client: &kube::Client, crd: &str, ca_pem: &str) -> Result<bool, Error> {
    let api: Api<CustomResourceDefinition> = Api::all(client.clone());
    let current = api.get(crd).await.map_err(|source| Error::Kube {
        action: format!("cannot read CustomResourceDefinition {crd}"),
        source,
    })?;
    let Some(webhook) = current
        .spec
        .conversion
        .as_ref()
        .filter(|c| c.strategy == "Webhook")
        .and_then(|c| c.webhook.as_ref())
    else {
        return Ok(false);
    };
    let bundle = webhook.client_config.as_ref().and_then(|c| c.ca_bundle.as_ref());
    if bundle.is_some_and(|b| b.0 == ca_pem.as_bytes()) {
        return Ok(false);
    }
    let patch = json!({"spec": {"conversion": {"webhook": {"clientConfig": {
        "caBundle": k8s_openapi::ByteString(ca_pem.as_bytes().to_vec()),
    }}}}});
    let params = PatchParams {
        field_manager: Some(MANAGER.to_owned()),
        ..Default::default()
    };
    api.patch(crd, &params, &Patch::Merge(&patch))
        .await
        .map_err(|source| Error::Kube {
            action: format!("cannot set the caBundle of CustomResourceDefinition {crd}"),
            source,
        })?;
    Ok(true)
}

/// Runs [`ensure`] now and every `every` until `cancel`. Failures are retried, not fatal (the webhook
/// keeps serving), and logged once each ([`crate::Quiet`]).
pub async fn keep(
    client: kube::Client,
    crd: String,
    ca_pem: String,
    every: Duration,
    cancel: CancellationToken,
) {
    let mut quiet = crate::Quiet::default();
    loop {
        match ensure(&client, &crd, &ca_pem).await {
            Ok(patched) => {
                quiet.clear();
                if patched {
                    tracing::info!(crd = %crd, "conversion webhook caBundle set");
                }
            }
            Err(e) => quiet.report("cannot keep the conversion webhook caBundle", &e),
        }
        tokio::select! {
            () = cancel.cancelled() => return,
            () = tokio::time::sleep(every) => {}
        }
    }
}
