//! ImageConfigs through the package manager, on the test bed's real registry: a prefix rewrite sends
//! a package whose registry does not exist to the local registry, and the runtime runs the rewritten
//! image; a pull secret an ImageConfig names is read from the core's namespace, a missing or malformed
//! one is one condition in words that deletes nothing, and a good one reaches the runtime's Pods.
//!
//! The registry these tests use requires no authentication, so they show the secret is read (a missing
//! or malformed one fails the fetch) and passed on (`appliedImageConfigRefs`, the Deployment's
//! `imagePullSecrets`); that a registry asking for credentials accepts them is shown in
//! `registry_auth.rs`, on the test bed's registry behind Basic authentication.
//!
//! Every prefix is unique to the test (`<registry>/<id>/`, `xpkg-<id>.invalid/`): ImageConfigs are
//! cluster-scoped, and one matching another test's packages would change that test.

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Secret;

use super::*;

pub(crate) fn image_configs(bed: &Bed) -> Api<DynamicObject> {
    dynamic(
        &bed.client,
        "pkg.crossplane.io",
        "v1beta1",
        "ImageConfig",
        "imageconfigs",
    )
}

/// Applies ImageConfig `name` matching `prefix`, rewriting it to `rewrite` and/or naming pull secret
/// `secret`.
pub(crate) async fn image_config(
    bed: &Bed,
    name: &str,
    prefix: &str,
    rewrite: Option<&str>,
    secret: Option<&str>,
) -> anyhow::Result<()> {
    let mut spec = json!({"matchImages": [{"type": "Prefix", "prefix": prefix}]});
    if let Some(r) = rewrite {
        spec["rewriteImage"] = json!({"prefix": r});
    }
    if let Some(s) = secret {
        spec["registry"] = json!({"authentication": {"pullSecretRef": {"name": s}}});
    }
    apply(
        &image_configs(bed),
        json!({
            "apiVersion": "pkg.crossplane.io/v1beta1", "kind": "ImageConfig",
            "metadata": {"name": name}, "spec": spec,
        }),
    )
    .await?;
    Ok(())
}

/// Writes Secret `name` in the core's namespace: a dockerconfigjson one for the registry when `good`,
/// else an Opaque one without `.dockerconfigjson`.
async fn pull_secret(bed: &Bed, name: &str, good: bool) -> anyhow::Result<()> {
    let secret = if good {
        let mut auths = serde_json::Map::new();
        auths.insert(
            bed.registry.clone(),
            json!({"username": "robot", "password": "token"}),
        );
        let config = json!({"auths": auths}).to_string();
        json!({"type": "kubernetes.io/dockerconfigjson", "stringData": {".dockerconfigjson": config}})
    } else {
        json!({"type": "Opaque", "stringData": {"token": "not a docker config"}})
    };
    let api: Api<Secret> = Api::namespaced(bed.client.clone(), &bed.ns);
    if api.get_opt(name).await?.is_some() {
        api.delete(name, &Default::default()).await?;
    }
    let mut obj = secret;
    obj["apiVersion"] = json!("v1");
    obj["kind"] = json!("Secret");
    obj["metadata"] = json!({"name": name, "namespace": bed.ns});
    api.create(&Default::default(), &serde_json::from_value(obj)?)
        .await?;
    Ok(())
}

/// Waits until the Provider's `Installed` is `status` with a message containing `want`.
pub(crate) async fn wait_installed(bed: &Bed, name: &str, status: &str, want: &str) -> anyhow::Result<Value> {
    let api = bed.api("Provider");
    wait_for(
        &format!("Provider {name} Installed={status} mentioning {want:?}"),
        WAIT,
        || {
            let api = api.clone();
            async move {
                let p = json(&api.get(name).await?);
                Ok(condition(&p, "Installed")
                    .filter(|c| {
                        c["status"] == status && c["message"].as_str().unwrap_or_default().contains(want)
                    })
                    .map(|_| p))
            }
        },
    )
    .await
}

pub(crate) fn applied(obj: &Value) -> Vec<(String, String)> {
    let mut refs: Vec<(String, String)> = obj["status"]["appliedImageConfigRefs"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|r| {
            (
                r["name"].as_str().unwrap_or_default().to_string(),
                r["reason"].as_str().unwrap_or_default().to_string(),
            )
        })
        .collect();
    refs.sort();
    refs
}

fn pull_secret_names(d: &Deployment) -> Vec<String> {
    d.spec
        .as_ref()
        .and_then(|s| s.template.spec.as_ref())
        .and_then(|p| p.image_pull_secrets.as_ref())
        .map(|s| s.iter().map(|r| r.name.clone()).collect())
        .unwrap_or_default()
}

pub(crate) async fn delete_image_configs(bed: &Bed, names: &[&str]) -> anyhow::Result<()> {
    for n in names {
        image_configs(bed).delete(n, &Default::default()).await?;
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_image_config_rewrites_a_missing_registry_to_the_local_one_and_the_runtime_runs_it()
-> anyhow::Result<()> {
    let bed = Bed::with_runtime().await?;
    let id = bed.id.clone();
    let name = format!("{id}-provider-nop");
    let group = format!("{id}.nop.example.org");
    let real = format!("{}:v1.0.0", bed.source(&name));
    bed.push(&provider_package(&group, json!({}), &[])?, &real)
        .await?;
    // A registry that does not exist (`.invalid` never resolves).
    let original = format!("xpkg-{id}.invalid/{id}/{name}:v1.0.0");

    // Control: without an ImageConfig the package cannot be fetched.
    bed.install("Provider", &name, &original).await?;
    let pkg = wait_installed(&bed, &name, "False", &format!("xpkg-{id}.invalid")).await?;
    eprintln!(
        "without an ImageConfig: {}",
        condition(&pkg, "Installed").context("Installed")?["message"]
    );

    // The rewrite, a pull secret for the rewritten prefix, and a shorter prefix naming a Secret that
    // does not exist: the longest prefix wins, so the fetch never reads it.
    let secret = format!("{id}-creds");
    pull_secret(&bed, &secret, true).await?;
    let (mirror, creds, decoy) = (
        format!("{id}-mirror"),
        format!("{id}-creds"),
        format!("{id}-decoy"),
    );
    let local = format!("{}/", bed.registry);
    image_config(
        &bed,
        &decoy,
        &format!("{}/{id}", bed.registry),
        None,
        Some("does-not-exist"),
    )
    .await?;
    image_config(
        &bed,
        &creds,
        &format!("{}/{id}/", bed.registry),
        None,
        Some(&secret),
    )
    .await?;
    image_config(&bed, &mirror, &format!("xpkg-{id}.invalid/"), Some(&local), None).await?;

    let pkg = bed.wait_condition("Provider", &name, "Installed", "True").await?;
    let rev = bed.wait_revision("Provider", &name, "True").await?;
    assert_eq!(pkg["status"]["resolvedPackage"], real.as_str(), "{pkg}");
    assert_eq!(pkg["status"]["currentIdentifier"], original.as_str());
    let want = vec![
        (creds.clone(), "SetImagePullSecret".to_string()),
        (mirror.clone(), "RewriteImage".to_string()),
    ];
    assert_eq!(applied(&pkg), want, "{pkg}");
    // The revision keeps the package's own source and records where it fetched from.
    assert_eq!(rev["spec"]["image"], original.as_str());
    assert_eq!(rev["status"]["resolvedImage"], real.as_str(), "{rev}");
    assert_eq!(applied(&rev), want, "{rev}");
    let crd = json(&bed.crd(&format!("nopresources.{group}")).await?);
    assert_eq!(
        controller(&crd).map(|c| c.1),
        rev["metadata"]["name"].as_str().map(String::from)
    );
    // The Lock names the package's own source, as upstream.
    let lock = json(
        &dynamic(&bed.client, "pkg.crossplane.io", "v1beta1", "Lock", "locks")
            .get("lock")
            .await?,
    );
    assert!(
        lock["packages"]
            .as_array()
            .is_some_and(|p| p.iter().any(|p| p["name"] == rev["metadata"]["name"]
                && p["source"] == format!("xpkg-{id}.invalid/{id}/{name}"))),
        "{lock}"
    );

    // The runtime runs the rewritten image with the ImageConfig's pull secret.
    let rev_name = rev["metadata"]["name"].as_str().context("name")?;
    let d = bed.wait_deployment(rev_name).await?;
    let image = d
        .spec
        .as_ref()
        .and_then(|s| s.template.spec.as_ref())
        .and_then(|p| p.containers.first())
        .and_then(|c| c.image.clone());
    assert_eq!(image.as_deref(), Some(real.as_str()));
    assert_eq!(pull_secret_names(&d), [secret]);

    delete_image_configs(&bed, &[&mirror, &creds, &decoy]).await?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_input_an_image_configs_pull_secret_that_is_missing_or_malformed() -> anyhow::Result<()> {
    let bed = Bed::with_runtime().await?;
    let id = bed.id.clone();
    let name = format!("{id}-provider-nop");
    let group = format!("{id}.nop.example.org");
    let first = install_good_provider(&bed, &name, &group).await?;
    let rev_name = first["metadata"]["name"].as_str().context("name")?.to_string();
    let before = bed.wait_deployment(&rev_name).await?;
    assert!(pull_secret_names(&before).is_empty());

    // An ImageConfig for the package's prefix names a Secret that does not exist.
    let (config, secret) = (format!("{id}-creds"), format!("{id}-creds"));
    image_config(
        &bed,
        &config,
        &format!("{}/{id}/", bed.registry),
        None,
        Some(&secret),
    )
    .await?;
    let pkg = wait_installed(&bed, &name, "False", "does not exist").await?;
    let c = condition(&pkg, "Installed").context("Installed")?;
    assert_eq!(c["reason"], "UnpackingPackage");
    let message = c["message"].as_str().unwrap_or_default();
    eprintln!("missing: {message}");
    for part in [
        format!("ImageConfig {config}"),
        format!("{}/{secret}", bed.ns),
        "create it".to_string(),
    ] {
        assert!(message.contains(&part), "{part:?} in {message}");
    }
    assert!(
        !message.contains("{ ") && !message.contains("Error {"),
        "no Debug dump: {message}"
    );
    still_running(&bed, &name, &first, &group).await?;
    let d: Api<Deployment> = bed.ns_api();
    assert!(d.get_opt(&rev_name).await?.is_some(), "the runtime keeps running");

    // A Secret that is not a docker config.
    pull_secret(&bed, &secret, false).await?;
    let pkg = wait_installed(&bed, &name, "False", "cannot be used").await?;
    let message = condition(&pkg, "Installed").context("Installed")?["message"].clone();
    eprintln!("malformed: {message}");
    assert!(
        message
            .as_str()
            .is_some_and(|m| m.contains(".dockerconfigjson") && m.contains("kubernetes.io/dockerconfigjson")),
        "{message}"
    );
    still_running(&bed, &name, &first, &group).await?;
    assert!(d.get_opt(&rev_name).await?.is_some(), "the runtime keeps running");

    // Fixed: the package is installed again, the same revision, and its Pods get the secret.
    pull_secret(&bed, &secret, true).await?;
    let pkg = bed.wait_condition("Provider", &name, "Installed", "True").await?;
    assert_eq!(pkg["status"]["currentRevision"], rev_name.as_str());
    assert_eq!(
        applied(&pkg),
        [(config.clone(), "SetImagePullSecret".to_string())]
    );
    let with_secret = wait_for("the Deployment with the ImageConfig's pull secret", WAIT, || {
        let (d, rev_name, secret) = (d.clone(), rev_name.clone(), secret.clone());
        async move {
            Ok(d.get_opt(&rev_name)
                .await?
                .filter(|d| pull_secret_names(d) == [secret.clone()]))
        }
    })
    .await?;
    assert_eq!(pull_secret_names(&with_secret), [secret]);
    delete_image_configs(&bed, &[&config]).await?;
    Ok(())
}
