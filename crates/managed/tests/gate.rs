//! The CRD gate on the real apiserver: a controller waits for its kind's CRD, starts once it is
//! established, stops cleanly when it is deleted and starts again when it is back.

use std::time::{Duration, Instant};

use anyhow::Context;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::Api;
use kube::api::DeleteParams;
use testenv::support::{cluster, install_crds};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

const WAIT: Duration = Duration::from_secs(30);

/// What the gated "controller" reports.
#[derive(Debug, PartialEq)]
enum Seen {
    Started(Instant),
    Stopped,
}

fn crd(group: &str) -> anyhow::Result<CustomResourceDefinition> {
    Ok(serde_json::from_value(serde_json::json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": format!("widgets.{group}")},
        "spec": {"group": group, "scope": "Cluster",
            "names": {"kind": "Widget", "plural": "widgets", "singular": "widget", "listKind": "WidgetList"},
            "versions": [{"name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}]},
    }))?)
}

async fn next(rx: &mut mpsc::UnboundedReceiver<Seen>, what: &str) -> anyhow::Result<Seen> {
    tokio::time::timeout(WAIT, rx.recv())
        .await
        .with_context(|| format!("{what}: nothing within {WAIT:?}"))?
        .with_context(|| format!("{what}: the gate ended"))
}

#[tokio::test]
async fn a_controller_waits_for_its_crd_starts_when_it_appears_and_stops_when_it_goes() -> anyhow::Result<()>
{
    let c = cluster();
    let client = c.client().await?;
    let group = format!(
        "g{}.gate.example.org",
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)?
            .as_nanos()
    );
    let crd = crd(&group)?;
    let name = format!("widgets.{group}");
    let (tx, mut rx) = mpsc::unbounded_channel();
    let token = CancellationToken::new();
    let gate = {
        let (client, name, token) = (client.clone(), name.clone(), token.clone());
        tokio::spawn(async move {
            managed::gate::while_established(client, &name, "managed/widget.test", &token, move |stop| {
                let tx = tx.clone();
                async move {
                    let _ = tx.send(Seen::Started(Instant::now()));
                    stop.cancelled().await;
                    let _ = tx.send(Seen::Stopped);
                }
            })
            .await;
        })
    };

    // No CRD: nothing starts before the CRD is created (the start comes after `created`).
    let created = Instant::now();
    install_crds(&client, std::slice::from_ref(&crd)).await?;
    match next(&mut rx, "the start once the CRD is established").await? {
        Seen::Started(at) => assert!(at >= created, "started before its CRD existed"),
        other => anyhow::bail!("expected a start, got {other:?}"),
    }

    // The CRD goes: the controller is stopped (its token cancelled, the run returned).
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    crds.delete(&name, &DeleteParams::default()).await?;
    assert_eq!(
        next(&mut rx, "the stop once the CRD is deleted").await?,
        Seen::Stopped
    );

    // It comes back (once the deletion has finished): the controller starts again.
    testenv::support::eventually("the CRD gone", WAIT, || {
        let (crds, name) = (crds.clone(), name.clone());
        async move { Ok(crds.get_opt(&name).await?.is_none()) }
    })
    .await?;
    install_crds(&client, std::slice::from_ref(&crd)).await?;
    assert!(matches!(next(&mut rx, "the restart").await?, Seen::Started(_)));

    // The term ends: the controller stops and the gate returns.
    token.cancel();
    assert_eq!(
        next(&mut rx, "the stop at the end of the term").await?,
        Seen::Stopped
    );
    tokio::time::timeout(WAIT, gate)
        .await
        .context("the gate returned")??;
    crds.delete(&name, &DeleteParams::default()).await?;
    Ok(())
}
