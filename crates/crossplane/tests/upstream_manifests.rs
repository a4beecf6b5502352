//! Drop-in: CRD versions as upstream serves them.
//! - Upstream-shaped `apiextensions.crossplane.io/v1` manifests (an XRD with `claimNames`, a Pipeline
//!   Composition naming function-patch-and-transform) apply unchanged with `kubectl apply
//!   --validate=strict`; the apiserver warns that XRD v1 is deprecated, as upstream's does; the real core
//!   establishes the XRD and revises the Composition.
//! - Our CRDs install over a cluster whose XRD CRD has `v1` in `status.storedVersions` (an upstream
//!   install), and the XRDs stored there stay readable as `v2` (private control plane: the CRD change
//!   must not reach the other tests).

mod support;

use std::process::Stdio;
use std::time::Duration;

use anyhow::{Context, ensure};
use apis::apiextensions::CompositeResourceDefinition;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{ListParams, Patch, PatchParams};
use kube::{Api, ResourceExt};
use support::*;
use tokio::io::AsyncWriteExt;

/// `kubectl apply --server-side --validate=strict -f -` of `yaml`: its stdout and stderr.
async fn kubectl_apply(kubeconfig: &std::path::Path, yaml: &str) -> anyhow::Result<(String, String)> {
    let mut child = tokio::process::Command::new("kubectl")
        .arg(format!("--kubeconfig={}", kubeconfig.display()))
        .args(["apply", "--server-side", "--validate=strict", "-f", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .context("running kubectl (is it installed? cargo xtask test installs it)")?;
    let mut stdin = child.stdin.take().context("kubectl stdin")?;
    stdin.write_all(yaml.as_bytes()).await?;
    drop(stdin);
    let out = child.wait_with_output().await?;
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    );
    ensure!(out.status.success(), "kubectl apply failed:\n{stdout}\n{stderr}");
    Ok((stdout, stderr))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn upstream_v1_manifests_apply_unchanged() -> anyhow::Result<()> {
    let cluster = testenv::Cluster::shared()?;
    let client = cluster.client().await?;
    install_crds(&client).await?;
    let id = unique();
    let group = format!("{id}.upstream.example.org");
    let selector = format!("crossplane-rs.io/test={id}");
    let _core = Process::start(
        cluster.kubeconfig(),
        &["core", "start", "--watch-label-selector", &selector],
        &format!("upstream-{id}"),
    )?;
    // As in upstream's docs and users' GitOps repositories (only the test label added).
    let manifests = format!(
        r#"
apiVersion: apiextensions.crossplane.io/v1
kind: CompositeResourceDefinition
metadata:
  name: xpostgresqlinstances.{group}
  labels:
    crossplane-rs.io/test: {id}
spec:
  group: {group}
  names:
    kind: XPostgreSQLInstance
    plural: xpostgresqlinstances
  claimNames:
    kind: PostgreSQLInstance
    plural: postgresqlinstances
  connectionSecretKeys:
  - username
  - password
  defaultCompositeDeletePolicy: Background
  defaultCompositionRef:
    name: xpostgresqlinstances.{group}
  versions:
  - name: v1alpha1
    served: true
    referenceable: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            properties:
              parameters:
                type: object
                properties:
                  storageGB:
                    type: integer
                required:
                - storageGB
            required:
            - parameters
---
apiVersion: apiextensions.crossplane.io/v1
kind: Composition
metadata:
  name: xpostgresqlinstances.{group}
  labels:
    crossplane-rs.io/test: {id}
spec:
  writeConnectionSecretsToNamespace: crossplane-system
  compositeTypeRef:
    apiVersion: {group}/v1alpha1
    kind: XPostgreSQLInstance
  mode: Pipeline
  pipeline:
  - step: patch-and-transform
    functionRef:
      name: function-patch-and-transform
    input:
      apiVersion: pt.fn.crossplane.io/v1beta1
      kind: Resources
      resources:
      - name: instance
        base:
          apiVersion: nop.crossplane.io/v1alpha1
          kind: NopResource
          spec:
            forProvider:
              conditionAfter:
              - conditionType: Ready
                conditionStatus: "True"
                time: 1s
        patches:
        - type: FromCompositeFieldPath
          fromFieldPath: spec.parameters.storageGB
          toFieldPath: spec.forProvider.fields.storageGB
"#
    );
    let (stdout, stderr) = kubectl_apply(cluster.kubeconfig(), &manifests).await?;
    ensure!(
        stdout.contains("serverside-applied"),
        "kubectl did not apply both: {stdout}"
    );
    ensure!(
        stderr.contains("CompositeResourceDefinition v1 is deprecated"),
        "no deprecation warning for XRD v1: {stderr}"
    );

    // The core reads the v1 XRD as v2: the XR CRD is established, the XRD says so.
    let xrds: Api<CompositeResourceDefinition> = Api::all(client.clone());
    let name = format!("xpostgresqlinstances.{group}");
    let xrd = wait_for("the v1 XRD to be established", Duration::from_secs(60), || {
        let (xrds, name) = (xrds.clone(), name.clone());
        async move {
            let xrd = xrds.get(&name).await?;
            let established = xrd
                .status
                .as_ref()
                .is_some_and(|s| apis::condition::is_true(&s.conditions, "Established"));
            Ok(established.then_some(xrd))
        }
    })
    .await?;
    ensure!(
        xrd.spec.scope.is_legacy(),
        "a v1 XRD defaults to LegacyCluster, got {:?}",
        xrd.spec.scope
    );
    ensure!(xrd.spec.default_composite_delete_policy.as_deref() == Some("Background"));
    // `claimNames` offers the claim: a namespaced CRD named by them, established, `Offered=True`.
    let offered = xrd
        .status
        .as_ref()
        .is_some_and(|s| apis::condition::is_true(&s.conditions, "Offered"));
    ensure!(offered, "the XRD does not say it offers claims: {:?}", xrd.status);
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let claim_crd_name = format!("postgresqlinstances.{group}");
    let claim_crd = crds.get(&claim_crd_name).await?;
    ensure!(crd_established(&claim_crd), "the claim CRD is not established");
    ensure!(claim_crd.spec.scope == "Namespaced");
    ensure!(claim_crd.spec.names.kind == "PostgreSQLInstance");
    ensure!(
        claim_crd.spec.names.categories == Some(vec!["claim".to_owned()]),
        "claim category: {:?}",
        claim_crd.spec.names.categories
    );
    let xr_crd = crds.get(&name).await?;
    ensure!(crd_established(&xr_crd), "the XR CRD {name} is not established");
    let revs = dynamic(
        &client,
        "apiextensions.crossplane.io",
        "v1",
        "CompositionRevision",
        "compositionrevisions",
    );
    wait_for(
        "a revision of the v1 Composition",
        Duration::from_secs(60),
        || {
            let revs = revs.clone();
            let label = format!("crossplane.io/composition-name=xpostgresqlinstances.{group}");
            async move {
                Ok(revs
                    .list(&ListParams::default().labels(&label))
                    .await?
                    .items
                    .first()
                    .map(|_| ()))
            }
        },
    )
    .await?;
    xrds.delete(&name, &Default::default()).await?;
    // The XRD takes its claim CRD with it.
    wait_for("the claim CRD to be deleted", Duration::from_secs(60), || {
        let (crds, n) = (crds.clone(), claim_crd_name.clone());
        async move { Ok(crds.get_opt(&n).await?.is_none().then_some(())) }
    })
    .await?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn our_crds_install_over_an_upstream_install_that_stored_v1() -> anyhow::Result<()> {
    let mut cp = testenv::ControlPlane::private().await?;
    let client = cp.cluster().client().await?;
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let pp = PatchParams::apply("upstream-crossplane").force();

    // Upstream's XRD CRD as Crossplane 1.x shipped it: v1 only, the storage version.
    let mut old = apis::apiextensions::xrd::crd();
    old.spec.versions.retain(|v| v.name == "v1");
    old.spec.versions[0].deprecated = None;
    old.spec.versions[0].deprecation_warning = None;
    let name = old.name_any();
    crds.patch(&name, &pp, &Patch::Apply(&old)).await?;
    wait_for("the old XRD CRD", Duration::from_secs(30), || {
        let crds = crds.clone();
        let name = name.clone();
        async move { Ok(crds.get(&name).await.ok().filter(crd_established)) }
    })
    .await?;
    let v1 = dynamic(
        &client,
        "apiextensions.crossplane.io",
        "v1",
        "CompositeResourceDefinition",
        "compositeresourcedefinitions",
    );
    apply(
        &v1,
        serde_json::json!({
            "apiVersion": "apiextensions.crossplane.io/v1", "kind": "CompositeResourceDefinition",
            "metadata": {"name": "xbuckets.old.example.org"},
            "spec": {"group": "old.example.org", "names": {"kind": "XBucket", "plural": "xbuckets"},
                     "claimNames": {"kind": "Bucket", "plural": "buckets"},
                     "versions": [{"name": "v1", "referenceable": true, "served": true}]}
        }),
    )
    .await?;

    // Installing ours over it (what `kubectl apply -k deploy/` and `crossplane core init` do).
    for crd in crossplane::crds() {
        crds.patch(
            &crd.name_any(),
            &PatchParams::apply("crossplane-init").force(),
            &Patch::Apply(&crd),
        )
        .await
        .with_context(|| format!("applying our {} over upstream's", crd.name_any()))?;
    }
    let now = crds.get(&name).await?;
    let stored = now
        .status
        .as_ref()
        .and_then(|s| s.stored_versions.clone())
        .unwrap_or_default();
    ensure!(stored.contains(&"v1".to_owned()), "storedVersions {stored:?}");
    let served: Vec<&str> = now
        .spec
        .versions
        .iter()
        .filter(|v| v.served)
        .map(|v| v.name.as_str())
        .collect();
    ensure!(served == ["v1", "v2"], "served {served:?}");

    // The XRD stored as v1 reads as v2, with its legacy scope.
    let xrds: Api<CompositeResourceDefinition> = Api::all(client.clone());
    let xrd = wait_for("the stored XRD as v2", Duration::from_secs(30), || {
        let xrds = xrds.clone();
        async move { Ok(xrds.get("xbuckets.old.example.org").await.ok()) }
    })
    .await?;
    ensure!(xrd.spec.scope.is_legacy(), "scope {:?}", xrd.spec.scope);
    ensure!(xrd.spec.claim_names.is_some(), "claimNames lost");
    cp.stop()?;
    Ok(())
}

/// Starts provider-nop, built from this workspace now (a failed build fails the test), polling every
/// second.
fn start_provider_nop(kubeconfig: &std::path::Path, id: &str) -> anyhow::Result<tokio::process::Child> {
    let bin = testenv::cargo::binary("provider-nop", "provider-nop")?;
    let log = std::env::temp_dir().join(format!("provider-nop-{id}.log"));
    let out = std::fs::File::create(&log)?;
    Ok(tokio::process::Command::new(&bin)
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .args(["--poll", "1s", "--max-reconcile-rate", "100"])
        .args(["--metrics-bind-address", "0", "--health-probe-bind-address", "0"])
        .env_remove("LEADER_ELECTION")
        .stdout(out.try_clone()?)
        .stderr(out)
        .kill_on_drop(true)
        .spawn()?)
}

/// Claims as upstream's v1 users write them: an XRD with `claimNames`, a Pipeline Composition with
/// function-patch-and-transform composing a NopResource and publishing connection details, and a claim
/// in a namespace, all applied unchanged. The claim binds an XR (`<claim>-<suffix>`, `claimRef`, claim
/// labels, the claim's parameters), becomes Ready with its XR, gets the XR's connection Secret in its
/// namespace, and deleting it (`compositeDeletePolicy: Foreground`, or the default `Background`)
/// deletes the XR and what it composed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn upstream_v1_claim_binds_becomes_ready_and_deletes_its_xr() -> anyhow::Result<()> {
    let cluster = testenv::Cluster::shared()?;
    let client = cluster.client().await?;
    install_crds(&client).await?;
    let id = unique();
    let start = std::time::Instant::now();
    let phase = |what: &str| eprintln!("[claims] {what} after {:?}", start.elapsed());
    let group = format!("{id}.claims.example.org");
    let selector = format!("crossplane-rs.io/test={id}");
    let _core = Process::start(
        cluster.kubeconfig(),
        &["core", "start", "--watch-label-selector", &selector],
        &format!("claims-{id}"),
    )?;
    let (claim_ns, secret_ns) = (format!("{id}-team"), format!("{id}-secrets"));
    let namespaces: Api<k8s_openapi::api::core::v1::Namespace> = Api::all(client.clone());
    for ns in [&claim_ns, &secret_ns] {
        let obj = serde_json::from_value(serde_json::json!({"metadata": {"name": ns}}))?;
        namespaces.create(&Default::default(), &obj).await?;
    }
    let manifests = format!(
        r#"
apiVersion: apiextensions.crossplane.io/v1
kind: CompositeResourceDefinition
metadata:
  name: xdatabases.{group}
  labels:
    crossplane-rs.io/test: {id}
spec:
  group: {group}
  names:
    kind: XDatabase
    plural: xdatabases
  claimNames:
    kind: Database
    plural: databases
  connectionSecretKeys:
  - username
  versions:
  - name: v1alpha1
    served: true
    referenceable: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            properties:
              parameters:
                type: object
                properties:
                  storageGB:
                    type: integer
                required:
                - storageGB
            required:
            - parameters
---
apiVersion: apiextensions.crossplane.io/v1
kind: Composition
metadata:
  name: xdatabases.{group}
  labels:
    crossplane-rs.io/test: {id}
    provider: nop
spec:
  writeConnectionSecretsToNamespace: {secret_ns}
  compositeTypeRef:
    apiVersion: {group}/v1alpha1
    kind: XDatabase
  mode: Pipeline
  pipeline:
  - step: patch-and-transform
    functionRef:
      name: function-patch-and-transform
    input:
      apiVersion: pt.fn.crossplane.io/v1beta1
      kind: Resources
      resources:
      - name: instance
        base:
          apiVersion: nop.crossplane.io/v1alpha1
          kind: NopResource
          spec:
            forProvider:
              conditionAfter:
              - conditionType: Ready
                conditionStatus: "True"
                time: 1s
        patches:
        - type: FromCompositeFieldPath
          fromFieldPath: spec.parameters.storageGB
          toFieldPath: spec.forProvider.fields.storageGB
        connectionDetails:
        - name: username
          type: FromValue
          value: admin
"#
    );
    kubectl_apply(cluster.kubeconfig(), &manifests).await?;
    let xrds: Api<CompositeResourceDefinition> = Api::all(client.clone());
    let xrd_name = format!("xdatabases.{group}");
    wait_for("the XRD to offer its claim", Duration::from_secs(60), || {
        let (xrds, name) = (xrds.clone(), xrd_name.clone());
        async move {
            let xrd = xrds.get(&name).await?;
            Ok(xrd
                .status
                .as_ref()
                .is_some_and(|s| apis::condition::is_true(&s.conditions, "Offered"))
                .then_some(()))
        }
    })
    .await?;

    let claim = format!(
        r#"
apiVersion: {group}/v1alpha1
kind: Database
metadata:
  name: my-db
  namespace: {claim_ns}
  labels:
    team: blue
spec:
  parameters:
    storageGB: 20
  compositionSelector:
    matchLabels:
      provider: nop
  compositeDeletePolicy: Foreground
  writeConnectionSecretToRef:
    name: my-db-conn
"#
    );
    kubectl_apply(cluster.kubeconfig(), &claim).await?;
    let claims = kube::Api::<kube::api::DynamicObject>::namespaced_with(
        client.clone(),
        &claim_ns,
        &kube::core::ApiResource {
            group: group.clone(),
            version: "v1alpha1".into(),
            api_version: format!("{group}/v1alpha1"),
            kind: "Database".into(),
            plural: "databases".into(),
        },
    );
    let xrs = dynamic(&client, &group, "v1alpha1", "XDatabase", "xdatabases");
    let nops = dynamic(
        &client,
        "nop.crossplane.io",
        "v1alpha1",
        "NopResource",
        "nopresources",
    );

    // The claim is bound to an XR named after it, which carries the claim's parameters and labels.
    let xr_name = wait_for("the claim's resourceRef", Duration::from_secs(60), || async {
        let c = json(&claims.get("my-db").await?);
        Ok(c.pointer("/spec/resourceRef/name")
            .and_then(|n| n.as_str())
            .map(str::to_owned))
    })
    .await?;
    ensure!(xr_name.starts_with("my-db-"), "XR name {xr_name}");
    // The claim records the reference before the XR is applied.
    let xr = wait_for("the claim's XR", Duration::from_secs(60), || async {
        Ok(xrs.get_opt(&xr_name).await?.map(|x| json(&x)))
    })
    .await?;
    ensure!(xr["spec"]["parameters"]["storageGB"] == 20, "parameters: {xr}");
    ensure!(
        xr["spec"]["claimRef"]
            == serde_json::json!({"apiVersion": format!("{group}/v1alpha1"), "kind": "Database",
                                  "name": "my-db", "namespace": claim_ns}),
        "claimRef: {}",
        xr["spec"]["claimRef"]
    );
    ensure!(xr["metadata"]["labels"]["crossplane.io/claim-name"] == "my-db");
    ensure!(xr["metadata"]["labels"]["crossplane.io/claim-namespace"] == claim_ns.as_str());
    ensure!(xr["metadata"]["labels"]["team"] == "blue");
    ensure!(
        xr["spec"]["compositionSelector"]["matchLabels"]["provider"] == "nop",
        "composition selection is passed through: {xr}"
    );
    ensure!(xr["spec"].get("compositeDeletePolicy").is_none());
    ensure!(
        xr["spec"]["writeConnectionSecretToRef"]
            .get("namespace")
            .is_none()
            || xr["spec"]["writeConnectionSecretToRef"]["namespace"] == secret_ns.as_str()
    );

    // provider-nop makes the NopResource Ready; the claim follows.
    let by_xr = ListParams::default().labels(&format!("crossplane.io/composite={xr_name}"));
    let composed = wait_for("the composed NopResource", Duration::from_secs(60), || async {
        let l = nops.list(&by_xr).await?;
        Ok((!l.items.is_empty()).then_some(l.items))
    })
    .await?;
    ensure!(
        composed[0]
            .labels()
            .get("crossplane.io/claim-name")
            .map(String::as_str)
            == Some("my-db"),
        "composed resources carry the claim labels"
    );
    let _provider = start_provider_nop(cluster.kubeconfig(), &id)?;
    let ready = wait_for("the claim to be Ready", Duration::from_secs(90), || async {
        let c = json(&claims.get("my-db").await?);
        let ready = condition(&c, "Ready").is_some_and(|r| r["status"] == "True");
        let synced = condition(&c, "Synced").is_some_and(|r| r["status"] == "True");
        Ok((ready && synced).then_some(c))
    })
    .await?;
    ensure!(
        ready
            .pointer("/spec/compositionRef/name")
            .and_then(|n| n.as_str())
            == Some(xrd_name.as_str()),
        "the XR's compositionRef is handed back to the claim: {ready}"
    );

    phase("claim Ready");
    // The XR's connection Secret, copied into the claim's namespace.
    let secrets: Api<k8s_openapi::api::core::v1::Secret> = Api::namespaced(client.clone(), &claim_ns);
    let secret = wait_for(
        "the claim's connection Secret",
        Duration::from_secs(60),
        || async { Ok(secrets.get_opt("my-db-conn").await?) },
    )
    .await?;
    let username = secret
        .data
        .as_ref()
        .and_then(|d| d.get("username"))
        .map(|b| String::from_utf8_lossy(&b.0).into_owned());
    ensure!(
        username.as_deref() == Some("admin"),
        "connection Secret data: {:?}",
        secret.data
    );
    ensure!(secret.type_.as_deref() == Some("connection.crossplane.io/v1alpha1"));

    phase("connection Secret");
    // A second claim with the XRD's default policy (Background): deleting it deletes its XR too.
    let other = format!(
        r#"
apiVersion: {group}/v1alpha1
kind: Database
metadata:
  name: other-db
  namespace: {claim_ns}
spec:
  parameters:
    storageGB: 1
"#
    );
    kubectl_apply(cluster.kubeconfig(), &other).await?;
    let other_xr = wait_for("the second claim's XR", Duration::from_secs(60), || async {
        let c = json(&claims.get("other-db").await?);
        let Some(n) = c.pointer("/spec/resourceRef/name").and_then(|n| n.as_str()) else {
            return Ok(None);
        };
        Ok(xrs.get_opt(n).await?.map(|_| n.to_owned()))
    })
    .await?;
    phase("second claim bound");
    ensure!(other_xr != xr_name, "two claims share an XR");
    claims.delete("other-db", &Default::default()).await?;
    wait_for(
        "the second claim and its XR gone",
        Duration::from_secs(90),
        || async {
            let gone = claims.get_opt("other-db").await?.is_none() && xrs.get_opt(&other_xr).await?.is_none();
            Ok(gone.then_some(()))
        },
    )
    .await?;

    phase("second claim deleted");
    // Deleting the claim deletes its XR (foreground) and what the XR composed. Foreground deletion is
    // the garbage collector's, which learns a new kind only at its next discovery resync (30 s).
    claims.delete("my-db", &Default::default()).await?;
    wait_for(
        "claim, XR and NopResource gone",
        Duration::from_secs(150),
        || async {
            let gone = claims.get_opt("my-db").await?.is_none()
                && xrs.get_opt(&xr_name).await?.is_none()
                && nops.list(&by_xr).await?.items.is_empty();
            Ok(gone.then_some(()))
        },
    )
    .await?;

    phase("first claim deleted");
    xrds.delete(&xrd_name, &Default::default()).await?;
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    wait_for("the claim CRD to be deleted", Duration::from_secs(60), || {
        let (crds, n) = (crds.clone(), format!("databases.{group}"));
        async move { Ok(crds.get_opt(&n).await?.is_none().then_some(())) }
    })
    .await?;
    for ns in [&claim_ns, &secret_ns] {
        namespaces.delete(ns, &Default::default()).await?;
    }
    Ok(())
}

/// Upstream-shaped package manifests (a Provider, a Function, a Configuration, a
/// DeploymentRuntimeConfig and an ImageConfig, as upstream's docs write them) apply unchanged with
/// `kubectl apply --validate=strict` onto our `pkg.crossplane.io` CRDs; the apiserver fills in
/// upstream's defaults; a package reference without a registry host is refused with upstream's rule.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn upstream_package_manifests_apply_with_upstreams_defaults() -> anyhow::Result<()> {
    let cluster = testenv::Cluster::shared()?;
    let client = cluster.client().await?;
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let pp = PatchParams::apply("crossplane-rs-tests").force();
    for crd in apis::pkg::crds() {
        let name = crd.metadata.name.clone().context("crd name")?;
        crds.patch(&name, &pp, &Patch::Apply(&crd)).await?;
        let api = crds.clone();
        wait_for(
            &format!("CRD {name} established"),
            Duration::from_secs(30),
            || {
                let api = api.clone();
                let name = name.clone();
                async move { Ok(api.get(&name).await.ok().filter(crd_established)) }
            },
        )
        .await?;
    }
    let id = unique();
    let manifests = format!(
        r#"
apiVersion: pkg.crossplane.io/v1
kind: Provider
metadata:
  name: provider-nop-{id}
spec:
  package: xpkg.crossplane.io/crossplane-contrib/provider-nop:v0.4.0
---
apiVersion: pkg.crossplane.io/v1
kind: Provider
metadata:
  name: provider-tuned-{id}
spec:
  package: 127.0.0.1:5000/crossplane-rs/provider-nop:v0.1.0
  packagePullPolicy: Always
  revisionActivationPolicy: Manual
  revisionHistoryLimit: 3
  packagePullSecrets:
  - name: registry-creds
  runtimeConfigRef:
    name: tuned-{id}
---
apiVersion: pkg.crossplane.io/v1beta1
kind: Function
metadata:
  name: function-patch-and-transform-{id}
spec:
  package: xpkg.crossplane.io/crossplane-contrib/function-patch-and-transform:v0.8.2
---
apiVersion: pkg.crossplane.io/v1
kind: Configuration
metadata:
  name: platform-ref-{id}
spec:
  package: xpkg.crossplane.io/crossplane-contrib/configuration-quickstart@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef
---
apiVersion: pkg.crossplane.io/v1beta1
kind: DeploymentRuntimeConfig
metadata:
  name: tuned-{id}
spec:
  deploymentTemplate:
    spec:
      replicas: 2
      selector: {{}}
      template:
        spec:
          containers:
          - name: package-runtime
            args: ["--debug", "--leader-election"]
  serviceAccountTemplate:
    metadata:
      name: provider-nop
---
apiVersion: pkg.crossplane.io/v1beta1
kind: ImageConfig
metadata:
  name: local-{id}
spec:
  matchImages:
  - type: Prefix
    prefix: 127.0.0.1:5000/crossplane-rs
  registry:
    authentication:
      pullSecretRef:
        name: registry-creds
"#
    );
    kubectl_apply(cluster.kubeconfig(), &manifests).await?;

    let providers: Api<apis::pkg::Provider> = Api::all(client.clone());
    let p = providers.get(&format!("provider-nop-{id}")).await?;
    assert_eq!(p.spec.package_pull_policy.as_deref(), Some("IfNotPresent"));
    assert_eq!(p.spec.revision_activation_policy.as_deref(), Some("Automatic"));
    assert_eq!(p.spec.revision_history_limit, Some(1));
    assert_eq!(p.spec.ignore_crossplane_constraints, Some(false));
    assert_eq!(p.spec.skip_dependency_resolution, Some(false));
    let rc = p.spec.runtime_config_ref.context("runtimeConfigRef defaulted")?;
    assert_eq!(
        (rc.api_version.as_deref(), rc.kind.as_deref(), rc.name.as_str()),
        (
            Some("pkg.crossplane.io/v1beta1"),
            Some("DeploymentRuntimeConfig"),
            "default"
        )
    );
    let tuned = providers.get(&format!("provider-tuned-{id}")).await?;
    assert_eq!(tuned.spec.revision_history_limit, Some(3));
    assert_eq!(tuned.spec.package_pull_secrets[0].name, "registry-creds");
    // Written as v1beta1, read as v1 (the storage version).
    let functions: Api<apis::pkg::Function> = Api::all(client.clone());
    let f = functions
        .get(&format!("function-patch-and-transform-{id}"))
        .await?;
    assert_eq!(f.spec.package_pull_policy.as_deref(), Some("IfNotPresent"));
    let drcs: Api<apis::pkg::DeploymentRuntimeConfig> = Api::all(client.clone());
    let drc = drcs.get(&format!("tuned-{id}")).await?;
    let replicas = drc
        .spec
        .deployment_template
        .and_then(|t| t.spec)
        .and_then(|s| s.replicas);
    assert_eq!(replicas, Some(2));

    // Upstream's rule: the package must name its registry.
    let bad = format!(
        "apiVersion: pkg.crossplane.io/v1\nkind: Provider\nmetadata:\n  name: unqualified-{id}\nspec:\n  package: crossplane-contrib/provider-nop:v0.4.0\n"
    );
    let e = kubectl_apply(cluster.kubeconfig(), &bad)
        .await
        .expect_err("an unqualified package is refused");
    assert!(
        e.to_string().contains("must be a fully qualified image name"),
        "the apiserver's message names the rule: {e}"
    );

    for (kind, name) in [
        ("provider", format!("provider-nop-{id}")),
        ("provider", format!("provider-tuned-{id}")),
        ("function", format!("function-patch-and-transform-{id}")),
        ("configuration", format!("platform-ref-{id}")),
        ("deploymentruntimeconfig", format!("tuned-{id}")),
        ("imageconfig", format!("local-{id}")),
    ] {
        let out = tokio::process::Command::new("kubectl")
            .arg(format!("--kubeconfig={}", cluster.kubeconfig().display()))
            .args(["delete", kind, &name, "--wait=false"])
            .output()
            .await?;
        ensure!(
            out.status.success(),
            "kubectl delete {kind} {name}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    Ok(())
}
