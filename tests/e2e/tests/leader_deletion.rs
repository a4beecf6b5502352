//! The node bench's instrument (`testenv::workload::LeaderDeletion`), against the real control plane:
//! its delete goes out on a connection that `prepare` made ready, so a TCP and TLS handshake never lands
//! inside the handover it times.
//!
//! kube's client speaks HTTP/1.1, one request per connection at a time. `prepare` reads the Lease, watches
//! it (the watch keeps that connection), and reads the holder's Pod, which opens a second connection that
//! goes back to the pool idle. `delete` then finds it there. A relay in front of the apiserver counts the
//! connections the client makes: two for `prepare`, none for `delete`. The positive control takes the
//! ready connection away (another request holds it) before the delete: then the count shows the delete's
//! new connection.

use std::net::SocketAddr;
use std::time::Duration;

use anyhow::{Context, ensure};
use e2e::relay::Relay;
use futures::StreamExt;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::api::PostParams;
use serde_json::json;
use testenv::workload::LeaderDeletion;

const TIMEOUT: Duration = Duration::from_secs(30);

/// An admin client whose connections all go through a new relay.
async fn relayed_client(cluster: &testenv::Cluster) -> anyhow::Result<(kube::Client, Relay)> {
    let upstream: SocketAddr = cluster
        .server
        .trim_start_matches("https://")
        .parse()
        .context("the apiserver's address")?;
    let relay = Relay::start(upstream).await?;
    let kubeconfig = kube::config::Kubeconfig::read_from(cluster.kubeconfig())?;
    let mut config =
        kube::Config::from_custom_kubeconfig(kubeconfig, &kube::config::KubeConfigOptions::default()).await?;
    // The same host (the serving certificate names it), the relay's port.
    config.cluster_url = format!("https://{}:{}", upstream.ip(), relay.port()).parse()?;
    Ok((kube::Client::try_from(config)?, relay))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_delete_goes_out_on_the_connection_prepare_made_ready() -> anyhow::Result<()> {
    let new = connections_made_by_the_delete(false).await?;
    ensure!(
        new == 0,
        "the delete and the watch's wait made {new} new connections: the handshake was inside the timed window"
    );
    Ok(())
}

/// Positive control: with the ready connection held by another request (a second watch) when the delete
/// goes out, the relay counts the connection the delete has to make.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn positive_control_a_delete_without_a_ready_connection_is_counted() -> anyhow::Result<()> {
    let new = connections_made_by_the_delete(true).await?;
    ensure!(
        new >= 1,
        "with its ready connection taken, the delete made {new} new connections: the count is blind"
    );
    Ok(())
}

/// Deletes a Lease holder's Pod with [`LeaderDeletion`] through a relay, and returns how many connections
/// the client made from just before the delete until the watch saw the next holder. With `take_ready`,
/// another watch holds the idle connection first.
async fn connections_made_by_the_delete(take_ready: bool) -> anyhow::Result<usize> {
    let cluster = testenv::support::cluster();
    let admin = cluster.client().await?;
    let ns = cluster.namespace("leader-deletion").await?;
    // A Pod holding a Lease. The shared control plane has no node, so the Pod is never scheduled, and
    // the apiserver deletes an unscheduled Pod at once.
    let pods: Api<Pod> = Api::namespaced(admin.clone(), &ns);
    let leases: Api<Lease> = Api::namespaced(admin.clone(), &ns);
    let pod: Pod = serde_json::from_value(json!({
        "metadata": { "name": "leader" },
        "spec": { "containers": [{ "name": "c", "image": "example.invalid/never-pulled" }] }
    }))?;
    pods.create(&PostParams::default(), &pod).await?;
    let lease: Lease = serde_json::from_value(json!({
        "metadata": { "name": "the-lease" },
        "spec": { "holderIdentity": "leader_1", "leaseDurationSeconds": 15 }
    }))?;
    leases.create(&PostParams::default(), &lease).await?;

    let (client, relay) = relayed_client(&cluster).await?;
    let deletion = LeaderDeletion::prepare(&client, &ns, "the-lease", TIMEOUT).await?;
    let prepared = relay.accepted();
    ensure!(
        prepared == 2,
        "prepare made {prepared} connections through the relay, where the Lease's watch and the Pod's read \
         need 2; if kube's client now multiplexes (HTTP/2), LeaderDeletion's account of its connections is \
         out of date"
    );
    ensure!(
        deletion.leader_pod() == "leader",
        "prepare read the holder {:?}",
        deletion.leader_pod()
    );

    // A watch of the Pods, on the idle connection the delete would have used (kept open until the end).
    let _held = if take_ready {
        let pods: Api<Pod> = Api::namespaced(client.clone(), &ns);
        let mut watch = pods
            .watch(&kube::api::WatchParams::default().timeout(60), "0")
            .await?
            .boxed();
        // Its first event (the Pod, ADDED) shows it is established.
        tokio::time::timeout(TIMEOUT, watch.next())
            .await
            .context("the second watch stayed silent")?;
        Some(watch)
    } else {
        None
    };
    let before = relay.accepted();
    // Another holder takes the Lease once the Pod is gone, as a standby would.
    let successor = {
        let (pods, leases) = (pods.clone(), leases.clone());
        tokio::spawn(async move {
            let deadline = tokio::time::Instant::now() + TIMEOUT;
            while pods.get_opt("leader").await?.is_some() {
                ensure!(tokio::time::Instant::now() < deadline, "the Pod was not deleted");
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            let mut lease = leases.get("the-lease").await?;
            if let Some(spec) = lease.spec.as_mut() {
                spec.holder_identity = Some("successor_2".to_owned());
            }
            leases
                .replace("the-lease", &PostParams::default(), &lease)
                .await?;
            anyhow::Ok(())
        })
    };
    let handover = deletion.delete().await?;
    successor.await??;
    ensure!(
        handover.new_holder == "successor_2",
        "the watch saw {:?} take the Lease",
        handover.new_holder
    );
    Ok(relay.accepted() - before)
}
