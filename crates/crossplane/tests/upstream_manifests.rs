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
