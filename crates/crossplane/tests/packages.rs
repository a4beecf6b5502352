//! The package manager on the real apiserver and the test bed's real OCI registry (no node): packages
//! built with `xpkg`'s builder and pushed to `Cluster::registry()`, installed through upstream-shaped
//! `Provider` and `Configuration` manifests (only `spec.package` names the local registry) by the real
//! `crossplane core start` process.
//!
//! The provider package is provider-nop's: its meta Provider and its NopResource CRD, whose group is
//! made unique per test so tests sharing the apiserver never fight over one CRD.

mod support;

#[path = "packages/mrd.rs"]
mod mrd;

#[path = "packages/image_config.rs"]
mod image_config;

#[path = "packages/registry_auth.rs"]
mod registry_auth;

use std::time::Duration;

use anyhow::Context;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{DynamicObject, ListParams, Patch, PatchParams};
use kube::{Api, Client, CustomResourceExt, ResourceExt};
use serde_json::{Value, json};
use support::*;
use xpkg::{Image, Package, Reference};

const WAIT: Duration = Duration::from_secs(90);

struct Bed {
    client: Client,
    registry: String,
    id: String,
    /// The core's namespace (where runtimes run).
    ns: String,
    _core: Process,
}

impl Bed {
    /// The core without package runtimes (`--package-runtime=External`): these tests are about
    /// revisions, and without a node no runtime ever becomes Available.
    async fn start() -> anyhow::Result<Bed> {
        Self::start_with(false).await
    }

    /// The core running package runtimes in a namespace of the test's own.
    async fn with_runtime() -> anyhow::Result<Bed> {
        Self::start_with(true).await
    }

    async fn start_with(runtime: bool) -> anyhow::Result<Bed> {
        Self::start_args(runtime, &[]).await
    }

    /// The core with `extra` arguments.
    async fn start_args(runtime: bool, extra: &[&str]) -> anyhow::Result<Bed> {
        let cluster = testenv::Cluster::shared()?;
        let client = cluster.client().await?;
        let registry = cluster
            .registry()
            .map_err(|e| anyhow::anyhow!("{e}"))?
            .host()
            .to_string();
        install_core_crds(&client).await?;
        let id = unique();
        let selector = format!("crossplane-rs.io/test={id}");
        let (ns, kubeconfig) = if runtime {
            let nss: Api<k8s_openapi::api::core::v1::Namespace> = Api::all(client.clone());
            nss.create(
                &Default::default(),
                &serde_json::from_value(json!({"metadata": {"name": id}}))?,
            )
            .await?;
            let kubeconfig = core_service_account(&cluster, &client, &id).await?;
            (id.clone(), kubeconfig)
        } else {
            (
                "crossplane-system".to_string(),
                cluster.kubeconfig().to_path_buf(),
            )
        };
        let package_runtime = if runtime { "Deployment" } else { "External" };
        let mut args = vec![
            "core",
            "start",
            "--watch-label-selector",
            &selector,
            "--package-runtime",
            package_runtime,
            "-n",
            &ns,
        ];
        args.extend_from_slice(extra);
        let core = Process::start(&kubeconfig, &args, &format!("pkg-{id}"))?;
        Ok(Bed {
            client,
            registry,
            id,
            ns,
            _core: core,
        })
    }

    /// `<registry>/<id>/<name>`.
    fn source(&self, name: &str) -> String {
        format!("{}/{}/{name}", self.registry, self.id)
    }

    fn api(&self, kind: &str) -> Api<DynamicObject> {
        let plural = format!("{}s", kind.to_lowercase());
        dynamic(&self.client, "pkg.crossplane.io", "v1", kind, &plural)
    }

    async fn push(&self, package: &Package, reference: &str) -> anyhow::Result<()> {
        let image = Image::xpkg(package, None)?;
        self.push_image(&image, reference).await
    }

    async fn push_image(&self, image: &Image, reference: &str) -> anyhow::Result<()> {
        let client = xpkg::registry::Client::new("crossplane-rs-tests")?;
        client.push(image, &Reference::parse(reference)?, None).await?;
        Ok(())
    }

    /// Applies an upstream-shaped package manifest of `kind`.
    async fn install(&self, kind: &str, name: &str, package: &str) -> anyhow::Result<()> {
        apply(
            &self.api(kind),
            json!({
                "apiVersion": "pkg.crossplane.io/v1", "kind": kind,
                "metadata": {"name": name, "labels": {"crossplane-rs.io/test": self.id}},
                "spec": {"package": package},
            }),
        )
        .await?;
        Ok(())
    }

    async fn set_package(&self, kind: &str, name: &str, package: &str) -> anyhow::Result<()> {
        self.api(kind)
            .patch(
                name,
                &PatchParams::default(),
                &Patch::Merge(&json!({"spec": {"package": package}})),
            )
            .await?;
        Ok(())
    }

    /// The revisions of package `name`, lowest number first.
    async fn revisions(&self, kind: &str, name: &str) -> anyhow::Result<Vec<Value>> {
        let lp = ListParams::default().labels(&format!("pkg.crossplane.io/package={name}"));
        let mut revs: Vec<Value> = self
            .api(&format!("{kind}Revision"))
            .list(&lp)
            .await?
            .items
            .iter()
            .map(json)
            .collect();
        revs.sort_by_key(|r| r["spec"]["revision"].as_i64().unwrap_or(0));
        Ok(revs)
    }

    /// Waits until package `name` has condition `type_` with `status`; returns the package.
    async fn wait_condition(
        &self,
        kind: &str,
        name: &str,
        type_: &str,
        status: &str,
    ) -> anyhow::Result<Value> {
        let api = self.api(kind);
        wait_for(&format!("{kind} {name} {type_}={status}"), WAIT, || {
            let api = api.clone();
            async move {
                let obj = json(&api.get(name).await?);
                Ok(condition(&obj, type_)
                    .filter(|c| c["status"] == status)
                    .map(|_| obj))
            }
        })
        .await
    }

    /// Waits until the package's current revision has `RevisionHealthy` with `status`.
    async fn wait_revision(&self, kind: &str, name: &str, status: &str) -> anyhow::Result<Value> {
        let api = self.api(kind);
        let revs = self.api(&format!("{kind}Revision"));
        wait_for(
            &format!("the current {kind}Revision of {name} RevisionHealthy={status}"),
            WAIT,
            || {
                let (api, revs) = (api.clone(), revs.clone());
                async move {
                    let pkg = json(&api.get(name).await?);
                    let Some(current) = pkg["status"]["currentRevision"].as_str() else {
                        return Ok(None);
                    };
                    let rev = json(&revs.get(current).await?);
                    Ok(condition(&rev, "RevisionHealthy")
                        .filter(|c| c["status"] == status)
                        .map(|_| rev))
                }
            },
        )
        .await
    }

    async fn crd(&self, name: &str) -> anyhow::Result<CustomResourceDefinition> {
        let api: Api<CustomResourceDefinition> = Api::all(self.client.clone());
        Ok(api.get(name).await?)
    }
}

/// The ServiceAccount `crossplane` in `ns`, bound to the core's ClusterRoles as `cargo xtask generate`
/// writes them (deploy/crossplane): a core running with its kubeconfig may do only what the shipped
/// RBAC allows, which includes granting each runtime's Role (RBAC refuses to grant what one lacks).
async fn core_service_account(
    cluster: &testenv::Cluster,
    client: &Client,
    ns: &str,
) -> anyhow::Result<std::path::PathBuf> {
    use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding};
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../deploy/crossplane");
    let roles: Api<ClusterRole> = Api::all(client.clone());
    let pp = PatchParams::apply("crossplane-rs-tests").force();
    for f in ["clusterrole.yaml", "clusterrole-system.yaml"] {
        let path = dir.join(f);
        let text = std::fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))?;
        let role: ClusterRole =
            serde_saphyr::from_str(&text).with_context(|| format!("parsing {}", path.display()))?;
        roles.patch(&role.name_any(), &pp, &Patch::Apply(&role)).await?;
    }
    let kubeconfig = cluster.service_account_kubeconfig(ns, "crossplane").await?;
    let bindings: Api<ClusterRoleBinding> = Api::all(client.clone());
    let binding: ClusterRoleBinding = serde_json::from_value(json!({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
        "metadata": {"name": format!("crossplane-{ns}")},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "crossplane"},
        "subjects": [{"kind": "ServiceAccount", "name": "crossplane", "namespace": ns}],
    }))?;
    bindings
        .patch(&binding.name_any(), &pp, &Patch::Apply(&binding))
        .await?;
    wait_for("the aggregated ClusterRole crossplane", WAIT, || {
        let roles = roles.clone();
        async move {
            let role = roles.get("crossplane").await?;
            let filled = role.rules.unwrap_or_default().iter().any(|r| {
                r.resources
                    .as_ref()
                    .is_some_and(|rs| rs.iter().any(|x| x == "poddisruptionbudgets"))
            });
            Ok(filled.then_some(()))
        }
    })
    .await?;
    Ok(kubeconfig)
}

async fn install_core_crds(client: &Client) -> anyhow::Result<()> {
    let api: Api<CustomResourceDefinition> = Api::all(client.clone());
    let pp = PatchParams::apply("crossplane-rs-tests").force();
    let crds = crossplane::crds();
    for crd in &crds {
        api.patch(&crd.name_any(), &pp, &Patch::Apply(crd)).await?;
    }
    for crd in &crds {
        let name = crd.name_any();
        let api = api.clone();
        wait_for(&format!("CRD {name} established"), WAIT, || {
            let (api, name) = (api.clone(), name.clone());
            async move { Ok(api.get(&name).await.ok().filter(crd_established)) }
        })
        .await?;
    }
    Ok(())
}

/// provider-nop's NopResource CRD in group `<group>`.
fn nop_crd(group: &str) -> Value {
    let mut crd = json(&provider_nop::types::NopResource::crd());
    crd["metadata"] = json!({"name": format!("nopresources.{group}")});
    crd["spec"]["group"] = json!(group);
    crd.as_object_mut().map(|o| o.remove("status"));
    crd
}

fn meta(kind: &str, name: &str, spec: Value) -> Value {
    json!({"apiVersion": "meta.pkg.crossplane.io/v1", "kind": kind, "metadata": {"name": name}, "spec": spec})
}

/// provider-nop's package with its CRD in group `<group>` (and `extra` CRDs).
fn provider_package(group: &str, spec: Value, extra: &[&str]) -> anyhow::Result<Package> {
    let mut objects = vec![nop_crd(group)];
    for g in extra {
        objects.push(nop_crd(g));
    }
    Ok(Package::new(meta("Provider", "provider-nop", spec), objects)?)
}

fn controller(obj: &Value) -> Option<(String, String)> {
    obj["metadata"]["ownerReferences"]
        .as_array()?
        .iter()
        .find(|o| o["controller"] == true)
        .map(|o| {
            (
                o["kind"].as_str().unwrap_or_default().to_string(),
                o["name"].as_str().unwrap_or_default().to_string(),
            )
        })
}

/// Installs provider-nop v1 as `name` and waits until it is Installed with a healthy revision.
async fn install_good_provider(bed: &Bed, name: &str, group: &str) -> anyhow::Result<Value> {
    let source = bed.source(name);
    bed.push(
        &provider_package(group, json!({"crossplane": {"version": ">=v1.20.0"}}), &[])?,
        &format!("{source}:v1.0.0"),
    )
    .await?;
    bed.install("Provider", name, &format!("{source}:v1.0.0")).await?;
    bed.wait_condition("Provider", name, "Installed", "True").await?;
    bed.wait_revision("Provider", name, "True").await
}

/// After a bad input: the first revision is still Active and still controls its CRD.
async fn still_running(bed: &Bed, name: &str, first: &Value, group: &str) -> anyhow::Result<()> {
    let revs = bed.revisions("Provider", name).await?;
    let old = revs
        .iter()
        .find(|r| r["metadata"]["name"] == first["metadata"]["name"])
        .context("the first revision is gone")?;
    assert_eq!(old["spec"]["desiredState"], "Active", "{old}");
    let crd = json(&bed.crd(&format!("nopresources.{group}")).await?);
    assert_eq!(
        controller(&crd).map(|c| c.1),
        first["metadata"]["name"].as_str().map(String::from),
        "the CRD is still controlled by the first revision"
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_provider_package_installs_its_crds_and_upgrades_to_a_new_revision() -> anyhow::Result<()> {
    let bed = Bed::start().await?;
    let name = format!("{}-provider-nop", bed.id);
    let group = format!("{}.nop.example.org", bed.id);
    let rev1 = install_good_provider(&bed, &name, &group).await?;
    let rev1_name = rev1["metadata"]["name"].as_str().context("name")?.to_string();
    assert!(
        rev1_name.starts_with(&format!("{name}-")) && rev1_name.len() == name.len() + 13,
        "{rev1_name}"
    );
    assert_eq!(rev1["metadata"]["labels"]["pkg.crossplane.io/package"], name);
    assert_eq!(rev1["spec"]["revision"], 1);
    assert_eq!(rev1["spec"]["desiredState"], "Active");
    assert_eq!(rev1["spec"]["tlsServerSecretName"], format!("{name}-tls-server"));
    assert_eq!(controller(&rev1), Some(("Provider".into(), name.clone())));
    let crd = json(&bed.crd(&format!("nopresources.{group}")).await?);
    assert_eq!(
        controller(&crd),
        Some(("ProviderRevision".into(), rev1_name.clone()))
    );
    let owners: Vec<&str> = crd["metadata"]["ownerReferences"]
        .as_array()
        .context("owners")?
        .iter()
        .filter_map(|o| o["kind"].as_str())
        .collect();
    assert!(
        owners.contains(&"Provider"),
        "the package owns its CRD too: {owners:?}"
    );
    assert_eq!(
        rev1["status"]["objectRefs"][0]["name"],
        format!("nopresources.{group}")
    );
    let pkg = json(&bed.api("Provider").get(&name).await?);
    assert_eq!(pkg["status"]["currentRevision"], rev1_name.as_str());
    assert_eq!(
        condition(&pkg, "Installed").context("Installed")?["reason"],
        "ActivePackageRevision"
    );
    let lock = dynamic(&bed.client, "pkg.crossplane.io", "v1beta1", "Lock", "locks")
        .get("lock")
        .await?;
    let lock = json(&lock);
    assert!(
        lock["packages"]
            .as_array()
            .is_some_and(|p| p.iter().any(|p| p["name"] == rev1_name.as_str()
                && p["source"] == bed.source(&name)
                && p["version"] == "v1.0.0")),
        "the Lock records the revision: {lock}"
    );

    // v2 adds a CRD: a second revision takes over, the first goes Inactive and keeps nothing.
    let group2 = format!("{}.nop2.example.org", bed.id);
    let source = bed.source(&name);
    bed.push(
        &provider_package(&group, json!({}), &[&group2])?,
        &format!("{source}:v2.0.0"),
    )
    .await?;
    bed.set_package("Provider", &name, &format!("{source}:v2.0.0"))
        .await?;
    let rev2 = wait_for("the second revision healthy and the first inactive", WAIT, || {
        let bed = &bed;
        let name = name.clone();
        async move {
            let revs = bed.revisions("Provider", &name).await?;
            Ok((revs.len() == 2
                && revs[0]["spec"]["desiredState"] == "Inactive"
                && revs[1]["spec"]["desiredState"] == "Active"
                && condition(&revs[1], "RevisionHealthy").is_some_and(|c| c["status"] == "True"))
            .then(|| revs[1].clone()))
        }
    })
    .await?;
    let rev2_name = rev2["metadata"]["name"].as_str().context("name")?.to_string();
    assert_eq!(rev2["spec"]["revision"], 2);
    let crd = json(&bed.crd(&format!("nopresources.{group}")).await?);
    assert_eq!(
        controller(&crd),
        Some(("ProviderRevision".into(), rev2_name.clone()))
    );
    assert!(bed.crd(&format!("nopresources.{group2}")).await.is_ok());
    wait_for("the package on the second revision", WAIT, || {
        let api = bed.api("Provider");
        let (name, rev2_name) = (name.clone(), rev2_name.clone());
        async move {
            let p = json(&api.get(&name).await?);
            Ok((p["status"]["currentRevision"] == rev2_name.as_str()
                && condition(&p, "Healthy").is_some_and(|c| c["status"] == "True"))
            .then_some(()))
        }
    })
    .await?;

    // v3: revisionHistoryLimit 1 keeps the current and one inactive revision.
    bed.push(
        &provider_package(&group, json!({}), &[&group2])?,
        &format!("{source}:v3.0.0"),
    )
    .await?;
    bed.set_package("Provider", &name, &format!("{source}:v3.0.0"))
        .await?;
    wait_for("the oldest revision garbage-collected", WAIT, || {
        let bed = &bed;
        let name = name.clone();
        let rev1_name = rev1_name.clone();
        async move {
            let revs = bed.revisions("Provider", &name).await?;
            Ok((revs.len() == 2
                && revs.iter().all(|r| r["metadata"]["name"] != rev1_name.as_str())
                && revs[1]["spec"]["revision"] == 3
                && revs[0]["spec"]["desiredState"] == "Inactive")
                .then_some(()))
        }
    })
    .await?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_configuration_installs_its_xrd_composition_and_missing_provider_dependency() -> anyhow::Result<()>
{
    let bed = Bed::start().await?;
    let group = format!("{}.nop.example.org", bed.id);
    let provider_source = bed.source("provider-dep");
    bed.push(
        &provider_package(&group, json!({}), &[])?,
        &format!("{provider_source}:v1.0.0"),
    )
    .await?;
    bed.push(
        &provider_package(&group, json!({}), &[])?,
        &format!("{provider_source}:v1.1.0"),
    )
    .await?;
    let xgroup = format!("{}.example.org", bed.id);
    let xrd = json!({
        "apiVersion": "apiextensions.crossplane.io/v2", "kind": "CompositeResourceDefinition",
        "metadata": {"name": format!("xnops.{xgroup}")},
        "spec": {"group": xgroup, "scope": "Cluster", "names": {"kind": "XNop", "plural": "xnops"},
                 "versions": [{"name": "v1", "referenceable": true, "served": true,
                     "schema": {"openAPIV3Schema": {"type": "object"}}}]},
    });
    let comp = json!({
        "apiVersion": "apiextensions.crossplane.io/v1", "kind": "Composition",
        "metadata": {"name": format!("xnops-{}", bed.id)},
        "spec": {"compositeTypeRef": {"apiVersion": format!("{xgroup}/v1"), "kind": "XNop"},
                 "mode": "Pipeline", "pipeline": [{"step": "nothing", "functionRef": {"name": "function-x"}}]},
    });
    let cfg = Package::new(
        meta(
            "Configuration",
            "platform",
            json!({"dependsOn": [{"apiVersion": "pkg.crossplane.io/v1", "kind": "Provider",
                                  "package": provider_source, "version": ">=v1.0.0"}]}),
        ),
        vec![xrd, comp],
    )?;
    let cfg_source = bed.source("platform");
    bed.push(&cfg, &format!("{cfg_source}:v1.0.0")).await?;
    let name = format!("{}-platform", bed.id);
    bed.install("Configuration", &name, &format!("{cfg_source}:v1.0.0"))
        .await?;
    let rev = bed.wait_revision("Configuration", &name, "True").await?;
    bed.wait_condition("Configuration", &name, "Healthy", "True")
        .await?;
    assert_eq!(rev["status"]["foundDependencies"], 1);
    assert_eq!(rev["status"]["installedDependencies"], 1);
    let dep_name = format!("{}-provider-dep", bed.id);
    let provider = json(&bed.api("Provider").get(&dep_name).await?);
    assert_eq!(
        provider["spec"]["package"],
        format!("{provider_source}:v1.1.0"),
        "the highest tag satisfying the constraint"
    );
    bed.wait_revision("Provider", &dep_name, "True").await?;
    let xrds = dynamic(
        &bed.client,
        "apiextensions.crossplane.io",
        "v2",
        "CompositeResourceDefinition",
        "compositeresourcedefinitions",
    );
    let xrd = json(&xrds.get(&format!("xnops.{xgroup}")).await?);
    assert_eq!(
        controller(&xrd).map(|c| c.0),
        Some("ConfigurationRevision".into())
    );
    let comps = dynamic(
        &bed.client,
        "apiextensions.crossplane.io",
        "v1",
        "Composition",
        "compositions",
    );
    let comp = json(&comps.get(&format!("xnops-{}", bed.id)).await?);
    assert_eq!(
        controller(&comp).map(|c| c.1),
        rev["metadata"]["name"].as_str().map(String::from)
    );
    Ok(())
}

/// A fetch-level bad input as an upgrade of a running provider: one condition, nothing deleted.
async fn bad_upgrade(
    bed: &Bed,
    tag_or_ref: impl FnOnce(&str) -> String,
    want: &str,
) -> anyhow::Result<String> {
    let name = format!("{}-provider-nop", bed.id);
    let group = format!("{}.nop.example.org", bed.id);
    let first = install_good_provider(bed, &name, &group).await?;
    let bad = tag_or_ref(&bed.source(&name));
    bed.set_package("Provider", &name, &bad).await?;
    let pkg = wait_for(&format!("Installed=False mentioning {want:?}"), WAIT, || {
        let api = bed.api("Provider");
        let name = name.clone();
        async move {
            let p = json(&api.get(&name).await?);
            Ok(condition(&p, "Installed")
                .filter(|c| c["status"] == "False" && c["message"].as_str().is_some_and(|m| m.contains(want)))
                .map(|_| p))
        }
    })
    .await?;
    let c = condition(&pkg, "Installed").context("Installed")?;
    assert_eq!(c["reason"], "UnpackingPackage");
    still_running(bed, &name, &first, &group).await?;
    let message = c["message"].as_str().unwrap_or_default().to_string();
    assert!(
        !message.contains("{ ") && !message.contains("Error {"),
        "no Debug dump: {message}"
    );
    eprintln!("condition: {message}");
    Ok(message)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_input_an_unreachable_registry() -> anyhow::Result<()> {
    let bed = Bed::start().await?;
    bad_upgrade(
        &bed,
        |_| "127.0.0.1:1/nowhere/provider-nop:v1.0.0".into(),
        "cannot reach the registry",
    )
    .await?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_input_a_missing_tag() -> anyhow::Result<()> {
    let bed = Bed::start().await?;
    bad_upgrade(&bed, |s| format!("{s}:v9.9.9"), "does not exist in the registry").await?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_input_an_image_that_is_not_an_xpkg() -> anyhow::Result<()> {
    let bed = Bed::start().await?;
    let image = Image::from_files(&[("usr/local/bin/provider-nop", b"#!binary")])?;
    let name = format!("{}-provider-nop", bed.id);
    bed.push_image(&image, &format!("{}:plain", bed.source(&name)))
        .await?;
    bad_upgrade(&bed, |s| format!("{s}:plain"), "is not a Crossplane package").await?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_input_zero_or_two_meta_objects() -> anyhow::Result<()> {
    let bed = Bed::start().await?;
    let name = format!("{}-provider-nop", bed.id);
    let group = format!("{}.nop.example.org", bed.id);
    let crd = serde_saphyr::to_string(&nop_crd(&group))?;
    let zero = Image::with_package_yaml(crd.as_bytes(), None)?;
    bed.push_image(&zero, &format!("{}:zero", bed.source(&name)))
        .await?;
    let m = serde_saphyr::to_string(&meta("Provider", "provider-nop", json!({})))?;
    let two = Image::with_package_yaml(format!("{m}---\n{m}").as_bytes(), None)?;
    bed.push_image(&two, &format!("{}:two", bed.source(&name)))
        .await?;
    bad_upgrade(&bed, |s| format!("{s}:zero"), "has no meta object").await?;
    bed.set_package("Provider", &name, &format!("{}:two", bed.source(&name)))
        .await?;
    wait_for("two meta objects reported", WAIT, || {
        let api = bed.api("Provider");
        let name = name.clone();
        async move {
            let p = json(&api.get(&name).await?);
            Ok(condition(&p, "Installed")
                .filter(|c| {
                    c["message"]
                        .as_str()
                        .is_some_and(|m| m.contains("has 2 meta objects"))
                })
                .map(|c| eprintln!("condition: {}", c["message"])))
        }
    })
    .await?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_input_a_crd_that_another_package_controls() -> anyhow::Result<()> {
    let bed = Bed::start().await?;
    let name = format!("{}-provider-nop", bed.id);
    let group = format!("{}.nop.example.org", bed.id);
    let first = install_good_provider(&bed, &name, &group).await?;
    let other = format!("{}-provider-other", bed.id);
    let source = bed.source(&other);
    bed.push(
        &provider_package(&group, json!({}), &[])?,
        &format!("{source}:v1.0.0"),
    )
    .await?;
    bed.install("Provider", &other, &format!("{source}:v1.0.0"))
        .await?;
    let rev = bed.wait_revision("Provider", &other, "False").await?;
    let message = condition(&rev, "RevisionHealthy").context("condition")?["message"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert!(
        message.contains(&format!(
            "CustomResourceDefinition nopresources.{group} is already controlled by ProviderRevision"
        )) && message.contains(&format!("of package {name}")),
        "{message}"
    );
    let pkg = bed.wait_condition("Provider", &other, "Healthy", "False").await?;
    assert!(condition(&pkg, "Healthy").is_some_and(|c| {
        c["message"]
            .as_str()
            .is_some_and(|m| m.contains("already controlled"))
    }));
    still_running(&bed, &name, &first, &group).await?;
    eprintln!("condition: {message}");
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_input_an_unmet_crossplane_version() -> anyhow::Result<()> {
    let bed = Bed::start().await?;
    let name = format!("{}-provider-nop", bed.id);
    let group = format!("{}.nop.example.org", bed.id);
    let first = install_good_provider(&bed, &name, &group).await?;
    let source = bed.source(&name);
    let future = provider_package(&group, json!({"crossplane": {"version": ">=v9.0.0"}}), &[])?;
    bed.push(&future, &format!("{source}:v2.0.0")).await?;
    bed.set_package("Provider", &name, &format!("{source}:v2.0.0"))
        .await?;
    let rev = bed.wait_revision("Provider", &name, "False").await?;
    let message = condition(&rev, "RevisionHealthy").context("condition")?["message"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert!(message.contains("needs Crossplane >=v9.0.0"), "{message}");
    still_running(&bed, &name, &first, &group).await?;
    eprintln!("condition: {message}");
    Ok(())
}

async fn configuration_condition(bed: &Bed, name: &str, want: &str) -> anyhow::Result<String> {
    let rev = bed.wait_revision("Configuration", name, "False").await?;
    let rev = wait_for(&format!("{want:?} on {name}'s revision"), WAIT, || {
        let revs = bed.api("ConfigurationRevision");
        let rev_name = rev["metadata"]["name"].as_str().unwrap_or_default().to_string();
        async move {
            let r = json(&revs.get(&rev_name).await?);
            Ok(condition(&r, "RevisionHealthy")
                .filter(|c| c["message"].as_str().is_some_and(|m| m.contains(want)))
                .map(|c| c["message"].as_str().unwrap_or_default().to_string()))
        }
    })
    .await?;
    eprintln!("condition: {rev}");
    Ok(rev)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_input_an_unsatisfiable_dependency() -> anyhow::Result<()> {
    let bed = Bed::start().await?;
    let group = format!("{}.nop.example.org", bed.id);
    let provider_source = bed.source("provider-dep");
    bed.push(
        &provider_package(&group, json!({}), &[])?,
        &format!("{provider_source}:v1.0.0"),
    )
    .await?;
    let cfg = Package::new(
        meta(
            "Configuration",
            "platform",
            json!({"dependsOn": [{"provider": provider_source, "version": ">=v9.0.0"}]}),
        ),
        Vec::new(),
    )?;
    let source = bed.source("platform");
    bed.push(&cfg, &format!("{source}:v1.0.0")).await?;
    let name = format!("{}-platform", bed.id);
    bed.install("Configuration", &name, &format!("{source}:v1.0.0"))
        .await?;
    let m = configuration_condition(&bed, &name, "cannot be satisfied").await?;
    assert!(m.contains("the tags v1.0.0"), "{m}");
    let provider = bed
        .api("Provider")
        .get_opt(&format!("{}-provider-dep", bed.id))
        .await?;
    assert!(
        provider.is_none(),
        "no provider is installed for an unsatisfiable dependency"
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_input_a_dependency_cycle() -> anyhow::Result<()> {
    let bed = Bed::start().await?;
    let a = bed.source("cfg-a");
    let b = bed.source("cfg-b");
    let dep = |on: &str| json!({"dependsOn": [{"configuration": on, "version": ">=v1.0.0"}]});
    bed.push(
        &Package::new(meta("Configuration", "cfg-a", dep(&b)), Vec::new())?,
        &format!("{a}:v1.0.0"),
    )
    .await?;
    bed.push(
        &Package::new(meta("Configuration", "cfg-b", dep(&a)), Vec::new())?,
        &format!("{b}:v1.0.0"),
    )
    .await?;
    let name = format!("{}-cfg-a", bed.id);
    bed.install("Configuration", &name, &format!("{a}:v1.0.0"))
        .await?;
    let m = configuration_condition(&bed, &name, "form a cycle").await?;
    assert!(m.contains(&format!("{a} → {b} → {a}")), "{m}");
    Ok(())
}

// ---------------------------------------------------------------------------------------------------
// The package runtime (`--package-runtime=Deployment`). The envtest has no node: Pods are created by
// the real ReplicaSet controller but never run. Where a test needs a Pod Ready, it writes the Pod's
// status itself, as a kubelet would; nothing else is faked.

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Pod, Secret, Service, ServiceAccount};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::api::rbac::v1::{Role, RoleBinding};

impl Bed {
    fn ns_api<K>(&self) -> Api<K>
    where
        K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope, DynamicType = ()>,
    {
        Api::namespaced(self.client.clone(), &self.ns)
    }

    /// Waits until the Deployment `name` exists.
    async fn wait_deployment(&self, name: &str) -> anyhow::Result<Deployment> {
        self.wait_object(name).await
    }

    /// Waits until the object `name` of kind `K` exists in the test's namespace.
    async fn wait_object<K>(&self, name: &str) -> anyhow::Result<K>
    where
        K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope, DynamicType = ()>
            + Clone
            + std::fmt::Debug
            + serde::de::DeserializeOwned,
    {
        let api: Api<K> = self.ns_api();
        wait_for(&format!("{} {}/{name}", K::kind(&()), self.ns), WAIT, || {
            let api = api.clone();
            async move { Ok(api.get_opt(name).await?) }
        })
        .await
    }

    /// Waits until revision `rev` of `kind` has `RuntimeHealthy` with `status`; returns the revision.
    async fn wait_runtime(&self, kind: &str, rev: &str, status: &str) -> anyhow::Result<Value> {
        let revs = self.api(&format!("{kind}Revision"));
        wait_for(
            &format!("{kind}Revision {rev} RuntimeHealthy={status}"),
            WAIT,
            || {
                let revs = revs.clone();
                async move {
                    let r = json(&revs.get(rev).await?);
                    Ok(condition(&r, "RuntimeHealthy")
                        .filter(|c| c["status"] == status)
                        .map(|_| r))
                }
            },
        )
        .await
    }

    /// Marks every Pod of revision `rev` Running and Ready, as a kubelet would once its probes pass;
    /// waits until there are `want` of them first. Returns their names.
    async fn make_ready(&self, rev: &str, want: usize) -> anyhow::Result<Vec<String>> {
        let pods: Api<Pod> = self.ns_api();
        let lp = ListParams::default().labels(&format!("pkg.crossplane.io/revision={rev}"));
        let names =
            wait_for(&format!("{want} Pods of {rev}"), WAIT, || {
                let (pods, lp) = (pods.clone(), lp.clone());
                async move {
                    let items = pods.list(&lp).await?.items;
                    Ok((items.len() == want)
                        .then(|| items.iter().map(ResourceExt::name_any).collect::<Vec<_>>()))
                }
            })
            .await?;
        let now = jiff::Timestamp::now().to_string();
        for name in &names {
            let ready = |t: &str| json!({"type": t, "status": "True", "lastTransitionTime": now});
            pods.patch_status(
                name,
                &PatchParams::default(),
                &Patch::Merge(&json!({"status": {
                    "phase": "Running",
                    "conditions": [ready("PodScheduled"), ready("Initialized"), ready("ContainersReady"), ready("Ready")],
                }})),
            )
            .await?;
        }
        Ok(names)
    }

    /// Writes the package's Lease as held by `holder` (what a leading replica's elector writes).
    async fn hold_lease(&self, package: &str, holder: &str) -> anyhow::Result<()> {
        let leases: Api<k8s_openapi::api::coordination::v1::Lease> = self.ns_api();
        let name = format!("crossplane-leader-election-{package}");
        // A MicroTime: six fractional digits.
        let now = jiff::Timestamp::now()
            .strftime("%Y-%m-%dT%H:%M:%S%.6fZ")
            .to_string();
        let lease = json!({
            "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
            "metadata": {"name": name, "namespace": self.ns},
            "spec": {"holderIdentity": holder, "leaseDurationSeconds": 60, "acquireTime": now, "renewTime": now},
        });
        leases
            .patch(
                &name,
                &PatchParams::apply("crossplane-rs-tests").force(),
                &Patch::Apply(&lease),
            )
            .await?;
        Ok(())
    }
}

fn container_env(d: &Value) -> std::collections::BTreeMap<String, Value> {
    d["spec"]["template"]["spec"]["containers"][0]["env"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|e| Some((e["name"].as_str()?.to_string(), e.clone())))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_provider_runs_ha_by_default_and_is_unhealthy_while_not_available() -> anyhow::Result<()> {
    let bed = Bed::with_runtime().await?;
    let started = std::time::Instant::now();
    let name = format!("{}-provider-nop", bed.id);
    let group = format!("{}.nop.example.org", bed.id);
    let rev = install_good_provider(&bed, &name, &group).await?;
    let rev_name = rev["metadata"]["name"].as_str().context("name")?.to_string();
    let uid = rev["metadata"]["uid"].as_str().context("uid")?.to_string();
    let d = json(&bed.wait_deployment(&rev_name).await?);
    eprintln!("Provider applied → Deployment created: {:?}", started.elapsed());

    // Upstream's shape.
    assert_eq!(
        controller(&d),
        Some(("ProviderRevision".into(), rev_name.clone()))
    );
    let spec = &d["spec"];
    assert_eq!(
        spec["selector"]["matchLabels"],
        json!({"pkg.crossplane.io/revision": rev_name, "pkg.crossplane.io/provider": name})
    );
    let pod = &spec["template"]["spec"];
    let c = &pod["containers"][0];
    assert_eq!(c["name"], "package-runtime");
    assert_eq!(c["image"], format!("{}:v1.0.0", bed.source(&name)));
    let env = container_env(&d);
    assert_eq!(env["REVISION_UID"]["value"], uid.as_str());
    assert_eq!(
        env["POD_NAMESPACE"]["valueFrom"]["fieldRef"]["fieldPath"],
        "metadata.namespace"
    );
    assert_eq!(
        env["PROVIDER_NAME"]["valueFrom"]["fieldRef"]["fieldPath"],
        "metadata.labels['pkg.crossplane.io/provider']"
    );
    assert_eq!(
        env["REVISION_NAME"]["valueFrom"]["fieldRef"]["fieldPath"],
        "metadata.labels['pkg.crossplane.io/revision']"
    );
    assert_eq!(env["TLS_SERVER_CERTS_DIR"]["value"], "/tls/server");
    assert_eq!(env["TLS_CLIENT_CERTS_DIR"]["value"], "/tls/client");
    // HA by default.
    assert_eq!(spec["replicas"], 2);
    assert_eq!(env["LEADER_ELECTION"]["value"], "true");
    assert_eq!(
        env["LEADER_ELECTION_ID"]["value"],
        format!("crossplane-leader-election-{name}")
    );
    assert_eq!(
        env["POD_NAME"]["valueFrom"]["fieldRef"]["fieldPath"],
        "metadata.name"
    );
    assert_eq!(c["livenessProbe"]["httpGet"]["path"], "/healthz");
    assert_eq!(c["readinessProbe"]["httpGet"]["path"], "/readyz");
    assert!(pod["terminationGracePeriodSeconds"].as_i64() > Some(80), "{pod}");
    assert!(pod["affinity"]["podAntiAffinity"].is_object(), "{pod}");
    assert_eq!(pod["topologySpreadConstraints"].as_array().map(Vec::len), Some(2));
    let volumes: Vec<&str> = pod["volumes"]
        .as_array()
        .context("volumes")?
        .iter()
        .filter_map(|v| v["secret"]["secretName"].as_str())
        .collect();
    let (server, client) = (format!("{name}-tls-server"), format!("{name}-tls-client"));
    assert_eq!(volumes, [server.as_str(), client.as_str()]);

    // What the Deployment needs around it. The runtime applies the PodDisruptionBudget right after
    // the Deployment, so it may not exist yet; the rest was applied before the Deployment.
    let pdb = json(&bed.wait_object::<PodDisruptionBudget>(&rev_name).await?);
    assert_eq!(pdb["spec"]["maxUnavailable"], 1);
    let sa = json(&bed.ns_api::<ServiceAccount>().get(&rev_name).await?);
    assert_eq!(
        controller(&sa),
        Some(("ProviderRevision".into(), rev_name.clone()))
    );
    assert_eq!(pod["serviceAccountName"], rev_name.as_str());
    let role = json(&bed.ns_api::<Role>().get(&rev_name).await?);
    let rules = role["rules"].to_string();
    assert!(
        rules.contains("leases") && rules.contains("events") && rules.contains("pods"),
        "{rules}"
    );
    let binding = json(&bed.ns_api::<RoleBinding>().get(&rev_name).await?);
    assert_eq!(binding["subjects"][0]["name"], rev_name.as_str());
    let svc = json(&bed.ns_api::<Service>().get(&name).await?);
    assert_eq!(svc["spec"]["ports"][0]["port"], 9443);
    assert_eq!(
        svc["spec"]["selector"],
        json!({"pkg.crossplane.io/provider": name})
    );
    let secrets: Api<Secret> = bed.ns_api();
    let ca = secrets.get("crossplane-root-ca").await?;
    let ca_pem = pki::secret::text(&ca, "tls.crt").context("CA tls.crt")?;
    for s in [&server, &client] {
        let secret = secrets.get(s).await?;
        assert_eq!(
            pki::secret::text(&secret, "ca.crt").as_deref(),
            Some(ca_pem.as_str()),
            "{s}"
        );
        assert!(pki::secret::text(&secret, "tls.crt").is_some_and(|c| c.contains("BEGIN CERTIFICATE")));
        assert!(pki::secret::text(&secret, "tls.key").is_some());
    }

    // No node: the Pods never run, so the runtime is not healthy, and it says so.
    let rev = bed.wait_runtime("Provider", &rev_name, "False").await?;
    let msg = condition(&rev, "RuntimeHealthy").context("RuntimeHealthy")?["message"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert!(
        msg.contains(&format!("Deployment {}/{rev_name} is not Available", bed.ns)),
        "{msg}"
    );
    // The package follows its revision: its first Healthy=False may still say it waits for the
    // revision, so wait for the one that names the Deployment.
    let why = wait_for(
        "the Provider's Healthy=False to say its Deployment is not Available",
        WAIT,
        || async {
            let pkg = bed.wait_condition("Provider", &name, "Healthy", "False").await?;
            let why = condition(&pkg, "Healthy").context("Healthy")?["message"].to_string();
            Ok(why.contains("is not Available").then_some(why))
        },
    )
    .await?;
    assert!(why.contains(&rev_name), "{why}");
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_function_gets_a_headless_service_and_its_endpoint() -> anyhow::Result<()> {
    let bed = Bed::with_runtime().await?;
    let name = format!("{}-function-x", bed.id);
    let source = bed.source(&name);
    bed.push(
        &Package::new(meta("Function", "function-x", json!({})), vec![])?,
        &format!("{source}:v0.1.0"),
    )
    .await?;
    bed.install("Function", &name, &format!("{source}:v0.1.0"))
        .await?;
    let revs = bed.api("FunctionRevision");
    let rev = wait_for("a FunctionRevision with an endpoint", WAIT, || {
        let (bed, revs, name) = (&bed, revs.clone(), name.clone());
        async move {
            let Some(r) = bed.revisions("Function", &name).await?.into_iter().next() else {
                return Ok(None);
            };
            let r = json(
                &revs
                    .get(r["metadata"]["name"].as_str().unwrap_or_default())
                    .await?,
            );
            Ok(r["status"]["endpoint"].is_string().then_some(r))
        }
    })
    .await?;
    assert_eq!(
        rev["status"]["endpoint"],
        format!("dns:///{name}.{}:9443", bed.ns)
    );
    let svc = json(&bed.ns_api::<Service>().get(&name).await?);
    assert_eq!(svc["spec"]["clusterIP"], "None");
    assert_eq!(svc["spec"]["ports"][0]["name"], "grpc");
    assert_eq!(svc["spec"]["ports"][0]["port"], 9443);
    let rev_name = rev["metadata"]["name"].as_str().context("name")?.to_string();
    let d = json(&bed.wait_deployment(&rev_name).await?);
    let env = container_env(&d);
    assert!(
        env.contains_key("FUNCTION_NAME") && !env.contains_key("LEADER_ELECTION"),
        "{env:?}"
    );
    assert_eq!(d["spec"]["replicas"], 2);
    let secret = bed.ns_api::<Secret>().get(&format!("{name}-tls-server")).await?;
    assert!(pki::secret::text(&secret, "tls.crt").is_some());
    bed.wait_runtime("Function", &rev_name, "False").await?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_runtime_config_can_say_one_replica() -> anyhow::Result<()> {
    let bed = Bed::with_runtime().await?;
    let name = format!("{}-provider-nop", bed.id);
    let group = format!("{}.nop.example.org", bed.id);
    let drc = format!("{}-single", bed.id);
    apply(
        &dynamic(
            &bed.client,
            "pkg.crossplane.io",
            "v1beta1",
            "DeploymentRuntimeConfig",
            "deploymentruntimeconfigs",
        ),
        json!({
            "apiVersion": "pkg.crossplane.io/v1beta1", "kind": "DeploymentRuntimeConfig",
            "metadata": {"name": drc},
            "spec": {"deploymentTemplate": {"spec": {"replicas": 1, "selector": {}, "template": {"spec": {
                "containers": [{"name": "package-runtime", "args": ["--debug"]}],
            }}}}},
        }),
    )
    .await?;
    let source = bed.source(&name);
    bed.push(
        &provider_package(&group, json!({}), &[])?,
        &format!("{source}:v1.0.0"),
    )
    .await?;
    apply(
        &bed.api("Provider"),
        json!({
            "apiVersion": "pkg.crossplane.io/v1", "kind": "Provider",
            "metadata": {"name": name, "labels": {"crossplane-rs.io/test": bed.id}},
            "spec": {"package": format!("{source}:v1.0.0"), "runtimeConfigRef": {"name": drc}},
        }),
    )
    .await?;
    let rev = bed.wait_revision("Provider", &name, "True").await?;
    let rev_name = rev["metadata"]["name"].as_str().context("name")?.to_string();
    let d = json(&bed.wait_deployment(&rev_name).await?);
    assert_eq!(d["spec"]["replicas"], 1);
    assert_eq!(
        d["spec"]["template"]["spec"]["containers"][0]["args"],
        json!(["--debug"])
    );
    assert_eq!(container_env(&d)["LEADER_ELECTION"]["value"], "true");

    // A change to the config reaches the running Deployment.
    dynamic(
        &bed.client,
        "pkg.crossplane.io",
        "v1beta1",
        "DeploymentRuntimeConfig",
        "deploymentruntimeconfigs",
    )
    .patch(
        &drc,
        &PatchParams::default(),
        &Patch::Merge(&json!({"spec": {"deploymentTemplate": {"spec": {"replicas": 3}}}})),
    )
    .await?;
    let deployments: Api<Deployment> = bed.ns_api();
    wait_for("the Deployment at the config's 3 replicas", WAIT, || {
        let (deployments, rev_name) = (deployments.clone(), rev_name.clone());
        async move {
            let d = deployments.get(&rev_name).await?;
            Ok((d.spec.and_then(|s| s.replicas) == Some(3)).then_some(()))
        }
    })
    .await?;
    Ok(())
}

/// The upgrade on the real apiserver and the real Deployment and ReplicaSet controllers: the old
/// Deployment stays, scaled as it was, while the new one is not Available; once it is (its Pods made
/// Ready) and a Pod of it holds the Lease, the old one goes, and never before.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upgrade_keeps_the_old_deployment_until_the_new_one_is_available_and_leads() -> anyhow::Result<()>
{
    let bed = Bed::with_runtime().await?;
    let name = format!("{}-provider-nop", bed.id);
    let group = format!("{}.nop.example.org", bed.id);
    let rev1 = install_good_provider(&bed, &name, &group).await?;
    let rev1_name = rev1["metadata"]["name"].as_str().context("name")?.to_string();
    bed.wait_deployment(&rev1_name).await?;
    let pods1 = bed.make_ready(&rev1_name, 2).await?;
    bed.hold_lease(&name, &pods1[0]).await?;
    bed.wait_runtime("Provider", &rev1_name, "True").await?;
    bed.wait_condition("Provider", &name, "Healthy", "True").await?;

    // v2: its Deployment starts beside the old one and is not Available.
    let source = bed.source(&name);
    bed.push(
        &provider_package(&group, json!({}), &[])?,
        &format!("{source}:v2.0.0"),
    )
    .await?;
    bed.set_package("Provider", &name, &format!("{source}:v2.0.0"))
        .await?;
    let rev2 = wait_for("the second revision", WAIT, || {
        let (bed, name) = (&bed, name.clone());
        async move {
            let revs = bed.revisions("Provider", &name).await?;
            Ok((revs.len() == 2).then(|| revs[1].clone()))
        }
    })
    .await?;
    let rev2_name = rev2["metadata"]["name"].as_str().context("name")?.to_string();
    bed.wait_deployment(&rev2_name).await?;
    let rev2 = bed.wait_runtime("Provider", &rev2_name, "False").await?;
    let deployments: Api<Deployment> = bed.ns_api();
    let old = deployments.get(&rev1_name).await?;
    assert_eq!(
        old.spec.as_ref().and_then(|s| s.replicas),
        Some(2),
        "the old Deployment runs on"
    );
    let revs = bed.revisions("Provider", &name).await?;
    assert_eq!(
        revs[0]["spec"]["desiredState"], "Active",
        "the old revision stays active"
    );
    assert_eq!(rev2["spec"]["desiredState"], "Active");
    let pkg = json(&bed.api("Provider").get(&name).await?);
    assert_eq!(pkg["status"]["currentRevision"], rev2_name.as_str());

    // v2's Pods become Ready: the old Deployment is scaled away first, and deleted only after a Pod of
    // v2 holds the Lease.
    let pods2 = bed.make_ready(&rev2_name, 2).await?;
    let deadline = std::time::Instant::now() + WAIT;
    let mut scaled_down = false;
    let mut handed = false;
    loop {
        let old = deployments.get_opt(&rev1_name).await?;
        let new_available = deployments
            .get(&rev2_name)
            .await?
            .status
            .and_then(|s| s.conditions)
            .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Available" && c.status == "True"));
        match old {
            Some(d) if d.spec.as_ref().and_then(|s| s.replicas) == Some(0) => {
                assert!(
                    new_available,
                    "the old Deployment was scaled down before the new one was Available"
                );
                if !scaled_down {
                    scaled_down = true;
                    // The old leader released the Lease on its Pod's deletion; a standby of v2 takes it.
                    bed.hold_lease(&name, &pods2[1]).await?;
                    handed = true;
                }
            }
            Some(_) => {}
            None => {
                assert!(
                    new_available,
                    "the old Deployment was deleted before the new one was Available"
                );
                break;
            }
        }
        anyhow::ensure!(
            std::time::Instant::now() < deadline,
            "timed out waiting for the old Deployment to go (scaled down: {scaled_down})"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(
        scaled_down && handed,
        "the old Deployment went through 0 replicas"
    );
    let revs = bed.revisions("Provider", &name).await?;
    assert_eq!(revs[0]["spec"]["desiredState"], "Inactive");
    assert!(deployments.get_opt(&rev2_name).await?.is_some());
    bed.wait_condition("Provider", &name, "Healthy", "True").await?;
    Ok(())
}

/// A Provider package's webhooks, a CRD that converts through one and a ValidatingWebhookConfiguration,
/// are pointed at the revision's runtime Service (named after the package, port 9443, the package's
/// path kept, `/convert` for a conversion without one) with the core's CA as `caBundle`, as upstream's
/// establisher does; the configuration is controlled by the revision. The core runs with the generated
/// RBAC.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_providers_webhooks_point_at_its_runtime_with_the_core_ca() -> anyhow::Result<()> {
    let bed = Bed::with_runtime().await?;
    let name = format!("{}-provider-hooks", bed.id);
    let group = format!("{}.hooks.example.org", bed.id);
    let mut crd = nop_crd(&group);
    crd["spec"]["conversion"] = json!({"strategy": "Webhook", "webhook": {
        "conversionReviewVersions": ["v1"],
        "clientConfig": {"service": {"name": "provider-nop", "namespace": "crossplane-system"}}}});
    let configuration = format!("{name}-validation");
    let vwc = json!({
        "apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration",
        "metadata": {"name": configuration},
        "webhooks": [{
            "name": format!("nopresources.{group}"), "admissionReviewVersions": ["v1"],
            "sideEffects": "None", "failurePolicy": "Ignore",
            "clientConfig": {"service": {"name": "x", "namespace": "y", "path": "/validate"}},
            "rules": [{"apiGroups": [group], "apiVersions": ["*"], "operations": ["CREATE"],
                       "resources": ["nopresources"]}],
        }],
    });
    let package = Package::new(meta("Provider", "provider-nop", json!({})), vec![crd, vwc])?;
    let source = bed.source(&name);
    bed.push(&package, &format!("{source}:v1.0.0")).await?;
    bed.install("Provider", &name, &format!("{source}:v1.0.0"))
        .await?;
    let rev = bed.wait_revision("Provider", &name, "True").await?;
    let rev_name = rev["metadata"]["name"].as_str().context("name")?.to_string();

    let secrets: Api<k8s_openapi::api::core::v1::Secret> = Api::namespaced(bed.client.clone(), &bed.ns);
    let ca = secrets
        .get("crossplane-root-ca")
        .await?
        .data
        .and_then(|d| d.get("tls.crt").cloned())
        .context("the core's CA Secret has no tls.crt")?;
    let ca = json!(ca);
    let expect = |config: &Value, path: &str| {
        assert_eq!(config["service"]["name"], name.as_str(), "{config}");
        assert_eq!(config["service"]["namespace"], bed.ns.as_str(), "{config}");
        assert_eq!(config["service"]["port"], 9443, "{config}");
        assert_eq!(config["service"]["path"], path, "{config}");
        assert_eq!(config["caBundle"], ca, "the caBundle is the core's CA");
    };
    let crd = json(&bed.crd(&format!("nopresources.{group}")).await?);
    expect(&crd["spec"]["conversion"]["webhook"]["clientConfig"], "/convert");

    let vwcs: Api<k8s_openapi::api::admissionregistration::v1::ValidatingWebhookConfiguration> =
        Api::all(bed.client.clone());
    let installed = json(&vwcs.get(&configuration).await?);
    assert_eq!(
        controller(&installed),
        Some(("ProviderRevision".into(), rev_name.clone())),
        "{installed}"
    );
    expect(&installed["webhooks"][0]["clientConfig"], "/validate");
    assert!(
        rev["status"]["objectRefs"]
            .as_array()
            .is_some_and(|refs| refs.iter().any(|r| r["kind"] == "ValidatingWebhookConfiguration")),
        "the revision lists the configuration among its objects: {rev}"
    );
    vwcs.delete(&configuration, &Default::default()).await?;
    Ok(())
}
