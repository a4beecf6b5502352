//! Packages pushed to the test bed's real OCI registry (go-containerregistry) with this crate's own
//! client, then fetched back: the happy path, the cache, an index, and each bad input with its error.

use std::time::Instant;

use serde_json::{Value, json};
use xpkg::{
    Cache, Error, Fetcher, Image, Package, PullPolicy, Reference,
    registry::{Client, PullSecrets},
};

fn registry() -> String {
    let cluster = testenv::support::cluster();
    match cluster.registry() {
        Ok(r) => r.host().to_string(),
        Err(e) => panic!("{e}"),
    }
}

/// A repository of its own per test, so tests run in parallel.
fn repo(name: &str) -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or_default();
    format!("{}/xpkg-test-{nanos}/{name}", registry())
}

fn fetcher() -> Fetcher {
    Fetcher::new(client(), Cache::in_memory())
}

fn client() -> Client {
    Client::new("xpkg-tests/0.1.0").expect("a registry client")
}

fn provider_meta(name: &str) -> Value {
    json!({
        "apiVersion": "meta.pkg.crossplane.io/v1",
        "kind": "Provider",
        "metadata": {"name": name},
        "spec": {"crossplane": {"version": ">=v1.20.0"}},
    })
}

fn crd() -> Value {
    json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "nopresources.nop.crossplane.io"},
        "spec": {"group": "nop.crossplane.io", "names": {"kind": "NopResource", "plural": "nopresources"}, "scope": "Cluster", "versions": []},
    })
}

async fn push(image: &Image, reference: &str) -> String {
    let r = Reference::parse(reference).expect("a reference");
    client().push(image, &r, None).await.expect("push")
}

#[tokio::test]
async fn a_pushed_provider_package_is_fetched_parsed_and_cached_by_digest() {
    let package = Package::new(provider_meta("provider-nop"), vec![crd()]).expect("a package");
    // On a "runtime image" of its own, as a provider's package is built on its binary's image.
    let runtime = Image::from_files(&[("usr/local/bin/provider-nop", b"#!binary")]).expect("runtime");
    let image = Image::xpkg(&package, Some(&runtime)).expect("an xpkg");
    let reference = format!("{}:v1", repo("provider-nop"));
    let pushed = push(&image, &reference).await;
    assert_eq!(pushed, image.digest().expect("digest"));

    let f = fetcher();
    let start = Instant::now();
    let first = f
        .fetch(&reference, PullPolicy::IfNotPresent, &PullSecrets::default())
        .await
        .expect("fetch");
    let cold = start.elapsed();
    assert_eq!(first.digest, pushed);
    assert!(!first.cached);
    assert_eq!(*first.package, package);
    assert_eq!(first.package.objects_of("CustomResourceDefinition").count(), 1);
    assert_eq!(
        first.resolved(),
        format!("{}@{pushed}", reference.trim_end_matches(":v1"))
    );

    let start = Instant::now();
    let again = f
        .fetch(&reference, PullPolicy::IfNotPresent, &PullSecrets::default())
        .await
        .expect("fetch");
    let warm = start.elapsed();
    assert!(
        again.cached,
        "the second fetch of the same digest comes from the cache"
    );
    let never = f
        .fetch(&reference, PullPolicy::Never, &PullSecrets::default())
        .await
        .expect("cached");
    assert!(never.cached);
    let always = f
        .fetch(&reference, PullPolicy::Always, &PullSecrets::default())
        .await
        .expect("fetch");
    assert!(!always.cached, "Always fetches again");
    let by_digest = fetcher()
        .fetch(
            &first.resolved(),
            PullPolicy::IfNotPresent,
            &PullSecrets::default(),
        )
        .await
        .expect("fetch by digest");
    assert_eq!(*by_digest.package, package);
    eprintln!("fetch from the registry {cold:?}, from the cache {warm:?}");
}

#[tokio::test]
async fn legacy_packages_and_single_manifest_indexes_are_read() {
    let package = Package::new(provider_meta("legacy"), Vec::new()).expect("a package");
    // No base annotation: the flattened layers hold package.yaml.
    let legacy =
        Image::from_files(&[("package.yaml", package.to_yaml().expect("yaml").as_bytes())]).expect("image");
    let base = repo("legacy");
    push(&legacy, &format!("{base}:v1")).await;
    let fetched = fetcher()
        .fetch(
            &format!("{base}:v1"),
            PullPolicy::IfNotPresent,
            &PullSecrets::default(),
        )
        .await
        .expect("a legacy package");
    assert_eq!(*fetched.package, package);

    // An index naming the one manifest, pushed under another tag.
    let manifest = legacy.manifest_bytes().expect("manifest");
    let index = json!({
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.index.v1+json",
        "manifests": [{
            "mediaType": "application/vnd.oci.image.manifest.v1+json",
            "digest": legacy.digest().expect("digest"),
            "size": manifest.len(),
            "platform": {"os": "linux", "architecture": "amd64"},
        }],
    });
    let r = Reference::parse(&format!("{base}:index")).expect("reference");
    let index_digest = client()
        .push_manifest(
            &r,
            "application/vnd.oci.image.index.v1+json",
            serde_json::to_vec(&index).expect("json").into(),
            None,
        )
        .await
        .expect("push index");
    let through_index = fetcher()
        .fetch(
            &format!("{base}:index"),
            PullPolicy::IfNotPresent,
            &PullSecrets::default(),
        )
        .await
        .expect("through the index");
    assert_eq!(through_index.digest, index_digest);
    assert_eq!(*through_index.package, package);
}

#[tokio::test]
async fn an_unreachable_registry_is_one_clear_error() {
    let port = testenv::free_port().expect("a free port");
    let reference = format!("127.0.0.1:{port}/org/provider-nop:v1");
    let e = fetcher()
        .fetch(&reference, PullPolicy::IfNotPresent, &PullSecrets::default())
        .await
        .expect_err("nothing listens there");
    assert!(matches!(e, Error::Unreachable { .. }), "{e:?}");
    let msg = e.to_string();
    assert!(
        msg.contains(&format!("cannot reach the registry 127.0.0.1:{port}")),
        "{msg}"
    );
    assert!(msg.to_lowercase().contains("connection refused"), "{msg}");
}

#[tokio::test]
async fn a_missing_tag_or_digest_is_not_found() {
    let package = Package::new(provider_meta("p"), Vec::new()).expect("a package");
    let base = repo("missing");
    push(&Image::xpkg(&package, None).expect("xpkg"), &format!("{base}:v1")).await;
    for reference in [
        format!("{base}:v2"),
        format!("{base}@sha256:{}", "0".repeat(64)),
        format!("{}:v1", repo("never-pushed")),
    ] {
        let e = fetcher()
            .fetch(&reference, PullPolicy::IfNotPresent, &PullSecrets::default())
            .await
            .expect_err("missing");
        assert!(matches!(e, Error::NotFound { .. }), "{reference}: {e:?}");
        assert!(
            e.to_string()
                .contains(&format!("{reference} does not exist in the registry")),
            "{e}"
        );
    }
}

#[tokio::test]
async fn an_image_that_is_not_an_xpkg_is_refused() {
    let image = Image::from_files(&[("hello.txt", b"not a package")]).expect("image");
    let reference = format!("{}:v1", repo("plain"));
    push(&image, &reference).await;
    let e = fetcher()
        .fetch(&reference, PullPolicy::IfNotPresent, &PullSecrets::default())
        .await
        .expect_err("not an xpkg");
    assert!(matches!(e, Error::NotAnXpkg { .. }), "{e:?}");
    let msg = e.to_string();
    assert!(msg.contains("is not a Crossplane package"), "{msg}");
    assert!(
        msg.contains("none of its 1 layer(s) has a package.yaml at its root"),
        "{msg}"
    );
}

#[tokio::test]
async fn zero_or_two_meta_objects_are_refused() {
    let crd_yaml = serde_saphyr::to_string(&crd()).expect("yaml");
    let meta_yaml = serde_saphyr::to_string(&provider_meta("one")).expect("yaml");
    let two = format!(
        "{meta_yaml}---\n{}",
        serde_saphyr::to_string(&provider_meta("two")).expect("yaml")
    );
    for (name, yaml, want) in [
        ("zero", crd_yaml, "no meta object"),
        ("two", two, "2 meta objects"),
    ] {
        let image = Image::with_package_yaml(yaml.as_bytes(), None).expect("image");
        let reference = format!("{}:v1", repo(name));
        push(&image, &reference).await;
        let e = fetcher()
            .fetch(&reference, PullPolicy::IfNotPresent, &PullSecrets::default())
            .await
            .expect_err("bad meta");
        assert!(
            matches!(e, Error::NoMeta | Error::TooManyMeta { count: 2, .. }),
            "{name}: {e:?}"
        );
        assert!(e.to_string().contains(want), "{name}: {e}");
    }
}

#[tokio::test]
async fn never_with_an_empty_cache_is_not_cached() {
    let package = Package::new(provider_meta("p"), Vec::new()).expect("a package");
    let reference = format!("{}:v1", repo("never"));
    push(&Image::xpkg(&package, None).expect("xpkg"), &reference).await;
    let e = fetcher()
        .fetch(&reference, PullPolicy::Never, &PullSecrets::default())
        .await
        .expect_err("not cached");
    assert!(matches!(e, Error::NotCached { .. }), "{e:?}");
    assert!(e.to_string().contains("pull policy is Never"), "{e}");
}

/// The test bed's registry behind HTTP Basic authentication (401 with a Basic challenge without its
/// user and password): a push and a fetch without credentials are refused, saying it asks for some; a
/// pull secret with a wrong password is refused, naming the secret; the right one fetches the package,
/// and its tags are listed with it.
#[tokio::test]
async fn a_registry_that_asks_for_credentials_is_read_with_a_pull_secret() {
    let cluster = testenv::support::cluster();
    let auth = match cluster.authenticated_registry() {
        Ok(a) => a.clone(),
        Err(e) => panic!("{e}"),
    };
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or_default();
    let repository = format!("xpkg-test-{nanos}/private");
    let reference = auth.reference(&repository, "v1");
    let r = Reference::parse(&reference).expect("a reference");
    let package = Package::new(provider_meta("private"), vec![crd()]).expect("a package");
    let image = Image::xpkg(&package, None).expect("an xpkg");

    // Control: the registry enforces authentication.
    let e = client()
        .push(&image, &r, None)
        .await
        .expect_err("an anonymous push is refused");
    assert!(matches!(e, Error::Unauthorized { .. }), "{e:?}");
    let creds = xpkg::registry::Credentials::new(&auth.username, &auth.password);
    client()
        .push(&image, &r, Some(&creds))
        .await
        .expect("a push with the registry's credentials");

    let e = fetcher()
        .fetch(&reference, PullPolicy::IfNotPresent, &PullSecrets::default())
        .await
        .expect_err("no credentials");
    assert!(matches!(e, Error::Unauthorized { .. }), "{e:?}");
    let msg = e.to_string();
    eprintln!("without credentials: {msg}");
    for part in [
        format!("the registry {} refused access to {repository}", auth.host()),
        "it asks for credentials and no pull secret has any for it".to_string(),
        "packagePullSecrets".to_string(),
    ] {
        assert!(msg.contains(&part), "{part:?} in {msg}");
    }

    let mut wrong = PullSecrets::default();
    wrong
        .add_dockerconfigjson(
            "wrong",
            auth.docker_config_json(&auth.username, "wrong").as_bytes(),
        )
        .expect("a docker config");
    let e = fetcher()
        .fetch(&reference, PullPolicy::IfNotPresent, &wrong)
        .await
        .expect_err("a wrong password");
    assert!(matches!(e, Error::Unauthorized { .. }), "{e:?}");
    let msg = e.to_string();
    eprintln!("with a wrong password: {msg}");
    assert!(
        msg.contains(&format!(
            "it refused the credentials of user {} of pull secret wrong",
            auth.username
        )),
        "{msg}"
    );
    assert!(!msg.contains(&auth.password), "no password in a message: {msg}");

    let mut good = PullSecrets::default();
    good.add_dockerconfigjson(
        "good",
        auth.docker_config_json(&auth.username, &auth.password).as_bytes(),
    )
    .expect("a docker config");
    let fetched = fetcher()
        .fetch(&reference, PullPolicy::IfNotPresent, &good)
        .await
        .expect("a fetch with the registry's credentials");
    assert_eq!(*fetched.package, package);
    let tags = client()
        .tags(&r, good.for_registry(auth.host()))
        .await
        .expect("tags");
    assert_eq!(tags, ["v1"]);
}
