//! Packages on a registry that asks for credentials: the test bed's registry behind HTTP Basic
//! authentication ([`testenv::Authenticated`]: 401 with `WWW-Authenticate: Basic realm=...` without its
//! user and password, as a distribution registry with an htpasswd file). Packages are pushed to it with
//! its credentials; the core fetches them with the pull secrets a Provider names in
//! `spec.packagePullSecrets`, or an ImageConfig in `spec.registry.authentication.pullSecretRef`
//! (`kubernetes.io/dockerconfigjson` Secrets in the core's namespace). Without credentials, or with a
//! wrong password, the Provider gets one condition in words and nothing running is deleted.

use k8s_openapi::api::core::v1::{Namespace, Secret};
use testenv::Authenticated;
use xpkg::registry::Credentials;

use super::image_config::{applied, delete_image_configs, image_config, wait_installed};
use super::*;

/// The test bed's registry behind Basic authentication.
fn auth_registry() -> anyhow::Result<Authenticated> {
    let cluster = testenv::Cluster::shared()?;
    let auth = cluster
        .authenticated_registry()
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    Ok(auth.clone())
}

/// `<auth registry>/<id>/<name>`.
fn private_source(bed: &Bed, auth: &Authenticated, name: &str) -> String {
    format!("{}/{}/{name}", auth.host(), bed.id)
}

/// Pushes `package` as `reference` with the registry's credentials.
async fn push_private(package: &Package, reference: &str, auth: &Authenticated) -> anyhow::Result<()> {
    let client = xpkg::registry::Client::new("crossplane-rs-tests")?;
    let creds = Credentials::new(&auth.username, &auth.password);
    client
        .push(
            &Image::xpkg(package, None)?,
            &Reference::parse(reference)?,
            Some(&creds),
        )
        .await?;
    Ok(())
}

/// Writes the `kubernetes.io/dockerconfigjson` Secret `name` in the core's namespace with the
/// registry's user and `password`.
async fn docker_secret(bed: &Bed, name: &str, auth: &Authenticated, password: &str) -> anyhow::Result<()> {
    let nss: Api<Namespace> = Api::all(bed.client.clone());
    if nss.get_opt(&bed.ns).await?.is_none() {
        match nss
            .create(
                &Default::default(),
                &serde_json::from_value(json!({"metadata": {"name": bed.ns}}))?,
            )
            .await
        {
            Err(kube::Error::Api(s)) if s.code == 409 => {}
            other => {
                other?;
            }
        }
    }
    let secrets: Api<Secret> = Api::namespaced(bed.client.clone(), &bed.ns);
    let secret = json!({
        "apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": name, "namespace": bed.ns},
        "type": "kubernetes.io/dockerconfigjson",
        "stringData": {".dockerconfigjson": auth.docker_config_json(&auth.username, password)},
    });
    secrets
        .patch(
            name,
            &PatchParams::apply("crossplane-rs-tests").force(),
            &Patch::Apply(&secret),
        )
        .await?;
    Ok(())
}

/// Sets the Provider's `spec.packagePullSecrets` to `names` (and its package to `package`, if given).
async fn set_pull_secrets(
    bed: &Bed,
    name: &str,
    package: Option<&str>,
    names: &[&str],
) -> anyhow::Result<()> {
    let secrets: Vec<Value> = names.iter().map(|n| json!({"name": n})).collect();
    let mut spec = json!({"packagePullSecrets": secrets});
    if let Some(p) = package {
        spec["package"] = json!(p);
    }
    bed.api("Provider")
        .patch(
            name,
            &PatchParams::default(),
            &Patch::Merge(&json!({"spec": spec})),
        )
        .await?;
    Ok(())
}

/// The Provider's `Installed` condition, checked for the words a user needs and for no Debug dump or
/// password; returns its message.
fn refused(pkg: &Value, auth: &Authenticated, parts: &[&str]) -> anyhow::Result<String> {
    let c = condition(pkg, "Installed").context("Installed")?;
    assert_eq!(c["reason"], "UnpackingPackage", "{c}");
    let message = c["message"].as_str().unwrap_or_default().to_string();
    for part in parts {
        assert!(message.contains(part), "{part:?} in {message}");
    }
    assert!(
        !message.contains("{ ") && !message.contains("Error {"),
        "no Debug dump: {message}"
    );
    assert!(!message.contains(&auth.password), "no password: {message}");
    Ok(message)
}

/// Without a pull secret the registry refuses the fetch, and the condition says it asks for
/// credentials and to name a pull secret (the control: authentication is enforced); with
/// `spec.packagePullSecrets` naming a dockerconfigjson Secret with its credentials the Provider
/// installs, and its CRD is controlled by its revision.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_provider_on_a_registry_that_asks_for_credentials_installs_with_its_pull_secret()
-> anyhow::Result<()> {
    let bed = Bed::start().await?;
    let auth = auth_registry()?;
    let name = format!("{}-provider-private", bed.id);
    let group = format!("{}.private.example.org", bed.id);
    let package = format!("{}:v1.0.0", private_source(&bed, &auth, &name));
    push_private(&provider_package(&group, json!({}), &[])?, &package, &auth).await?;

    bed.install("Provider", &name, &package).await?;
    let pkg = wait_installed(&bed, &name, "False", "asks for credentials").await?;
    let message = refused(
        &pkg,
        &auth,
        &[
            &format!("the registry {} refused access to {}/{name}", auth.host(), bed.id),
            "no pull secret has any for it",
            "packagePullSecrets",
        ],
    )?;
    eprintln!("without a pull secret: {message}");
    assert!(
        bed.revisions("Provider", &name).await?.is_empty(),
        "no revision without the package"
    );

    let secret = format!("{}-pull", bed.id);
    docker_secret(&bed, &secret, &auth, &auth.password).await?;
    set_pull_secrets(&bed, &name, None, &[&secret]).await?;
    let pkg = bed.wait_condition("Provider", &name, "Installed", "True").await?;
    let rev = bed.wait_revision("Provider", &name, "True").await?;
    assert_eq!(pkg["status"]["currentIdentifier"], package.as_str(), "{pkg}");
    assert_eq!(
        rev["spec"]["packagePullSecrets"],
        json!([{"name": secret}]),
        "the revision carries the pull secret: {rev}"
    );
    let crd = json(&bed.crd(&format!("nopresources.{group}")).await?);
    assert_eq!(
        controller(&crd).map(|c| c.1),
        rev["metadata"]["name"].as_str().map(String::from)
    );
    Ok(())
}

/// An upgrade whose pull secret has a wrong password: one condition naming the secret the registry
/// refused, the running revision stays active with its CRD; the right secret then upgrades.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_input_a_pull_secret_with_a_wrong_password() -> anyhow::Result<()> {
    let bed = Bed::start().await?;
    let auth = auth_registry()?;
    let name = format!("{}-provider-private", bed.id);
    let group = format!("{}.private.example.org", bed.id);
    let source = private_source(&bed, &auth, &name);
    for tag in ["v1.0.0", "v2.0.0"] {
        push_private(
            &provider_package(&group, json!({}), &[])?,
            &format!("{source}:{tag}"),
            &auth,
        )
        .await?;
    }
    let (good, wrong) = (format!("{}-pull", bed.id), format!("{}-wrong", bed.id));
    docker_secret(&bed, &good, &auth, &auth.password).await?;
    docker_secret(&bed, &wrong, &auth, "not-the-password").await?;
    apply(
        &bed.api("Provider"),
        json!({
            "apiVersion": "pkg.crossplane.io/v1", "kind": "Provider",
            "metadata": {"name": name, "labels": {"crossplane-rs.io/test": bed.id}},
            "spec": {"package": format!("{source}:v1.0.0"), "packagePullSecrets": [{"name": good}]},
        }),
    )
    .await?;
    bed.wait_condition("Provider", &name, "Installed", "True").await?;
    let first = bed.wait_revision("Provider", &name, "True").await?;

    set_pull_secrets(&bed, &name, Some(&format!("{source}:v2.0.0")), &[&wrong]).await?;
    let pkg = wait_installed(&bed, &name, "False", "refused the credentials").await?;
    let message = refused(
        &pkg,
        &auth,
        &[
            &format!("the registry {} refused access to {}/{name}", auth.host(), bed.id),
            &format!(
                "it refused the credentials of user {} of pull secret {wrong}",
                auth.username
            ),
            "give a pull secret",
        ],
    )?;
    eprintln!("with a wrong password: {message}");
    still_running(&bed, &name, &first, &group).await?;
    assert_eq!(
        bed.revisions("Provider", &name).await?.len(),
        1,
        "no revision for a package that was not fetched"
    );

    // Fixed: the upgrade goes through.
    set_pull_secrets(&bed, &name, None, &[&good]).await?;
    let v2 = format!("{source}:v2.0.0");
    wait_for("the upgrade to v2.0.0 installed", WAIT, || {
        let (api, name, v2) = (bed.api("Provider"), name.clone(), v2.clone());
        async move {
            let p = json(&api.get(&name).await?);
            Ok((p["status"]["currentIdentifier"] == v2.as_str()
                && condition(&p, "Installed").is_some_and(|c| c["status"] == "True"))
            .then_some(()))
        }
    })
    .await?;
    let rev = bed.wait_revision("Provider", &name, "True").await?;
    assert_eq!(rev["spec"]["revision"], 2, "{rev}");
    assert_eq!(rev["spec"]["image"], v2.as_str());
    Ok(())
}

/// An ImageConfig's `pullSecretRef` gives the credentials for a prefix of the registry: before it
/// exists the fetch is refused, with it the Provider (naming no pull secret) installs, and the
/// ImageConfig is reported as applied.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_image_configs_pull_secret_reads_a_registry_that_asks_for_credentials() -> anyhow::Result<()> {
    let bed = Bed::start().await?;
    let auth = auth_registry()?;
    let id = bed.id.clone();
    let name = format!("{id}-provider-private");
    let group = format!("{id}.private.example.org");
    let package = format!("{}:v1.0.0", private_source(&bed, &auth, &name));
    push_private(&provider_package(&group, json!({}), &[])?, &package, &auth).await?;

    bed.install("Provider", &name, &package).await?;
    let pkg = wait_installed(&bed, &name, "False", "asks for credentials").await?;
    refused(&pkg, &auth, &["no pull secret has any for it"])?;

    let (config, secret) = (format!("{id}-creds"), format!("{id}-creds"));
    docker_secret(&bed, &secret, &auth, &auth.password).await?;
    image_config(
        &bed,
        &config,
        &format!("{}/{id}/", auth.host()),
        None,
        Some(&secret),
    )
    .await?;
    let pkg = bed.wait_condition("Provider", &name, "Installed", "True").await?;
    bed.wait_revision("Provider", &name, "True").await?;
    assert_eq!(
        applied(&pkg),
        [(config.clone(), "SetImagePullSecret".to_string())],
        "{pkg}"
    );
    bed.crd(&format!("nopresources.{group}")).await?;
    delete_image_configs(&bed, &[&config]).await?;
    Ok(())
}
