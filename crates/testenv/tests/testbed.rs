//! The test bed's own guarantees, checked on the real control plane (issue 2's "must show").

use std::{collections::BTreeMap, time::Duration};

use anyhow::{Context, Result, bail, ensure};
use k8s_openapi::{
    api::{
        coordination::v1::{Lease, LeaseSpec},
        core::v1::{ConfigMap, Namespace},
        rbac::v1::{PolicyRule, Role, RoleBinding, RoleRef, Subject},
    },
    apimachinery::pkg::apis::meta::v1::OwnerReference,
};
use kube::{
    Api, Client,
    api::{DeleteParams, ObjectMeta, PostParams},
};
use testenv::{
    CandidateOptions, ControlPlane, GoCandidate, client_from,
    support::{cluster, eventually},
};

fn meta(name: &str) -> ObjectMeta {
    ObjectMeta {
        name: Some(name.to_string()),
        ..Default::default()
    }
}

#[tokio::test]
async fn stale_resource_version_gets_409() -> Result<()> {
    let c = cluster();
    let ns = c.namespace("conflict").await?;
    let leases: Api<Lease> = Api::namespaced(c.client().await?, &ns);
    let created = leases
        .create(
            &PostParams::default(),
            &Lease {
                metadata: meta("l"),
                spec: Some(LeaseSpec {
                    holder_identity: Some("a".into()),
                    ..Default::default()
                }),
            },
        )
        .await?;
    let mut first = created.clone();
    first.spec.as_mut().context("spec")?.holder_identity = Some("b".into());
    leases.replace("l", &PostParams::default(), &first).await?;
    // `created` still carries the old resourceVersion.
    let mut stale = created;
    stale.spec.as_mut().context("spec")?.holder_identity = Some("c".into());
    match leases.replace("l", &PostParams::default(), &stale).await {
        Err(kube::Error::Api(s)) => ensure!(s.code == 409, "expected 409 Conflict, got {}", s.code),
        other => bail!("expected 409 Conflict, got {other:?}"),
    }
    Ok(())
}

#[tokio::test]
async fn rbac_denies_then_allows_and_the_audit_log_records_it() -> Result<()> {
    let c = cluster();
    let ns = c.namespace("rbac").await?;
    let kubeconfig = c.service_account_kubeconfig(&ns, "limited").await?;
    let limited: Api<Lease> = Api::namespaced(client_from(&kubeconfig).await?, &ns);
    let user = format!("system:serviceaccount:{ns}:limited");

    match limited.list(&Default::default()).await {
        Err(kube::Error::Api(s)) => ensure!(s.code == 403, "expected 403 Forbidden, got {}", s.code),
        other => bail!("expected 403 Forbidden, got {other:?}"),
    }

    let admin = c.client().await?;
    Api::<Role>::namespaced(admin.clone(), &ns)
        .create(
            &PostParams::default(),
            &Role {
                metadata: meta("leases"),
                rules: Some(vec![PolicyRule {
                    api_groups: Some(vec!["coordination.k8s.io".into()]),
                    resources: Some(vec!["leases".into()]),
                    verbs: ["get", "list", "create", "update"].map(String::from).to_vec(),
                    ..Default::default()
                }]),
            },
        )
        .await?;
    Api::<RoleBinding>::namespaced(admin, &ns)
        .create(
            &PostParams::default(),
            &RoleBinding {
                metadata: meta("leases"),
                role_ref: RoleRef {
                    api_group: Some("rbac.authorization.k8s.io".into()),
                    kind: "Role".into(),
                    name: "leases".into(),
                },
                subjects: Some(vec![Subject {
                    kind: "ServiceAccount".into(),
                    name: "limited".into(),
                    namespace: Some(ns.clone()),
                    ..Default::default()
                }]),
            },
        )
        .await?;
    // RBAC takes effect once the apiserver's informers see the binding.
    eventually(
        "the RoleBinding to take effect",
        Duration::from_secs(10),
        || async { Ok(limited.list(&Default::default()).await.is_ok()) },
    )
    .await?;
    limited
        .create(
            &PostParams::default(),
            &Lease {
                metadata: meta("mine"),
                spec: Some(LeaseSpec::default()),
            },
        )
        .await?;

    // The audit log holds both outcomes, attributed to the ServiceAccount.
    let events = c.audit().by_user(&user)?;
    let leases: Vec<_> = events
        .iter()
        .filter(|e| e.resource == "leases" && e.namespace == ns)
        .collect();
    ensure!(
        leases.iter().any(|e| e.verb == "list" && e.code == 403),
        "no 403 list in the audit log for {user}: {leases:#?}"
    );
    ensure!(
        leases.iter().any(|e| e.verb == "list" && e.code == 200),
        "no 200 list for {user}"
    );
    ensure!(
        leases
            .iter()
            .any(|e| e.verb == "create" && e.name == "mine" && e.code == 201),
        "no 201 create for {user}"
    );
    Ok(())
}

#[tokio::test]
async fn garbage_collector_and_namespace_controller_run() -> Result<()> {
    let c = cluster();
    let client = c.client().await?;
    let ns = c.namespace("gc").await?;
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), &ns);
    let owner = cms
        .create(
            &PostParams::default(),
            &ConfigMap {
                metadata: meta("owner"),
                ..Default::default()
            },
        )
        .await?;
    let mut child = ConfigMap {
        metadata: meta("child"),
        ..Default::default()
    };
    child.metadata.owner_references = Some(vec![OwnerReference {
        api_version: "v1".into(),
        kind: "ConfigMap".into(),
        name: "owner".into(),
        uid: owner.metadata.uid.clone().context("owner uid")?,
        ..Default::default()
    }]);
    cms.create(&PostParams::default(), &child).await?;
    cms.delete("owner", &DeleteParams::default()).await?;
    eventually(
        "the garbage collector to delete the child",
        Duration::from_secs(60),
        || async { Ok(cms.get_opt("child").await?.is_none()) },
    )
    .await?;

    let namespaces: Api<Namespace> = Api::all(client);
    namespaces.delete(&ns, &DeleteParams::default()).await?;
    eventually(
        "the namespace controller to finish deleting the namespace",
        Duration::from_secs(60),
        || async { Ok(namespaces.get_opt(&ns).await?.is_none()) },
    )
    .await?;
    Ok(())
}

#[tokio::test]
async fn apiserver_restart_keeps_data_and_paused_etcd_fails_requests() -> Result<()> {
    // Disruptive: a private control plane, so the shared one stays healthy for the other tests.
    let mut cp = ControlPlane::private().await?;
    let client = cp.cluster().client().await?;
    let cms: Api<ConfigMap> = Api::namespaced(client, "default");
    let mut cm = ConfigMap {
        metadata: meta("survivor"),
        ..Default::default()
    };
    cm.data = Some(BTreeMap::from([("k".to_string(), "v".to_string())]));
    cms.create(&PostParams::default(), &cm).await?;

    cp.restart_apiserver().await?;
    let client = cp.cluster().client().await?;
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    let got = cms.get("survivor").await?;
    ensure!(
        got.data == cm.data,
        "data changed across the restart: {:?}",
        got.data
    );

    cp.etcd().pause()?;
    let short = short_timeout_client(&cp).await?;
    let failed = Api::<ConfigMap>::namespaced(short.clone(), "default")
        .get("survivor")
        .await;
    // Reads may be served from the watch cache; a write must reach etcd.
    let write = Api::<ConfigMap>::namespaced(short, "default")
        .create(
            &PostParams::default(),
            &ConfigMap {
                metadata: meta("during-pause"),
                ..Default::default()
            },
        )
        .await;
    ensure!(
        write.is_err(),
        "a write succeeded while etcd was paused (read: {failed:?})"
    );
    cp.etcd().resume()?;
    eventually(
        "writes to succeed after etcd resumed",
        Duration::from_secs(30),
        || async {
            Ok(cms
                .create(
                    &PostParams::default(),
                    &ConfigMap {
                        metadata: meta("after-resume"),
                        ..Default::default()
                    },
                )
                .await
                .is_ok())
        },
    )
    .await?;
    cp.stop()?;
    Ok(())
}

/// A client whose requests give up after 3 s, so a hung apiserver fails the request quickly.
async fn short_timeout_client(cp: &ControlPlane) -> Result<Client> {
    let kc = kube::config::Kubeconfig::read_from(cp.cluster().kubeconfig())?;
    let mut config = kube::Config::from_custom_kubeconfig(kc, &Default::default()).await?;
    config.read_timeout = Some(Duration::from_secs(3));
    config.write_timeout = Some(Duration::from_secs(3));
    Ok(Client::try_from(config)?)
}

#[tokio::test]
async fn two_client_go_candidates_hand_over_on_release() -> Result<()> {
    let c = cluster();
    let ns = c.namespace("gocand").await?;
    let a = GoCandidate::spawn(&c, &CandidateOptions::new(&ns, "lock", "go-a"))?;
    a.wait_for("to lead", Duration::from_secs(20), |e| {
        e.event == "started_leading"
    })
    .await?;
    let b = GoCandidate::spawn(&c, &CandidateOptions::new(&ns, "lock", "go-b"))?;
    b.wait_for("to see go-a lead", Duration::from_secs(20), |e| {
        e.event == "new_leader" && e.leader == "go-a"
    })
    .await?;
    ensure!(a.is_leading() && !b.is_leading(), "exactly one must lead");

    a.terminate()?;
    let released = a
        .wait_for("to stop leading", Duration::from_secs(10), |e| {
            e.event == "stopped_leading"
        })
        .await?;
    let took = b
        .wait_for("to lead", Duration::from_secs(10), |e| {
            e.event == "started_leading"
        })
        .await?;
    ensure!(took.mono_ns >= released.mono_ns, "go-b led before go-a stopped");
    ensure!(
        b.is_leading() && !a.is_leading(),
        "exactly one must lead after the handover"
    );
    Ok(())
}

#[tokio::test]
async fn kubectl_reports_the_pinned_version() -> Result<()> {
    let c = cluster();
    let out = std::process::Command::new("kubectl")
        .arg(format!("--kubeconfig={}", c.kubeconfig().display()))
        .args(["get", "--raw", "/version"])
        .output()
        .context("running kubectl (is it installed? .ci/run installs it)")?;
    ensure!(
        out.status.success(),
        "kubectl failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout)?;
    ensure!(
        v["gitVersion"] == testenv::KUBERNETES_VERSION,
        "version is {}",
        v["gitVersion"]
    );
    Ok(())
}

/// `GET /v2/` of the registry at `host` with `authorization`: the status line and the
/// `WWW-Authenticate` header.
async fn registry_v2(host: &str, authorization: Option<String>) -> Result<(String, Option<String>)> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut s = tokio::net::TcpStream::connect(host).await?;
    let auth = authorization
        .map(|a| format!("Authorization: {a}\r\n"))
        .unwrap_or_default();
    let request = format!("GET /v2/ HTTP/1.1\r\nHost: {host}\r\n{auth}Connection: close\r\n\r\n");
    s.write_all(request.as_bytes()).await?;
    let mut buf = String::new();
    s.read_to_string(&mut buf).await?;
    let head = buf.split("\r\n\r\n").next().unwrap_or_default();
    let status = head.lines().next().unwrap_or_default().to_string();
    let challenge = head.lines().find_map(|l| {
        l.split_once(':')
            .filter(|(k, _)| k.eq_ignore_ascii_case("www-authenticate"))
            .map(|(_, v)| v.trim().to_string())
    });
    Ok((status, challenge))
}

/// The registry behind Basic authentication asks for credentials as a distribution registry does (401
/// with a Basic challenge), refuses a wrong password and serves the right one; the anonymous registry
/// serves anyone.
#[tokio::test]
async fn the_authenticated_registry_challenges_and_accepts_only_its_credentials() -> Result<()> {
    use base64::{Engine, engine::general_purpose::STANDARD};
    let c = cluster();
    let registry = c.registry()?;
    let auth = c.authenticated_registry()?;
    assert_ne!(auth.host(), registry.host());
    let basic =
        |user: &str, password: &str| Some(format!("Basic {}", STANDARD.encode(format!("{user}:{password}"))));

    let (status, _) = registry_v2(registry.host(), None).await?;
    ensure!(status.starts_with("HTTP/1.1 200"), "anonymous registry: {status}");
    let (status, challenge) = registry_v2(auth.host(), None).await?;
    ensure!(
        status.starts_with("HTTP/1.1 401"),
        "without credentials: {status}"
    );
    ensure!(
        challenge
            .as_deref()
            .is_some_and(|c| c.starts_with("Basic realm=")),
        "challenge: {challenge:?}"
    );
    let (status, _) = registry_v2(auth.host(), basic(&auth.username, "wrong")).await?;
    ensure!(
        status.starts_with("HTTP/1.1 401"),
        "with a wrong password: {status}"
    );
    let (status, _) = registry_v2(auth.host(), basic(&auth.username, &auth.password)).await?;
    ensure!(
        status.starts_with("HTTP/1.1 200"),
        "with its credentials: {status}"
    );
    Ok(())
}
