//! Crossplane v2's ManagedResourceDefinitions through the package manager: a Provider's
//! managed-resource CRDs become MRDs, Active without `safe-start` (so the CRDs appear as before) and
//! Inactive with it (no CRD, the runtime at 0 replicas) until a ManagedResourceActivationPolicy
//! activates them.

use super::*;

fn mrds(bed: &Bed) -> Api<DynamicObject> {
    dynamic(
        &bed.client,
        "apiextensions.crossplane.io",
        "v1alpha1",
        "ManagedResourceDefinition",
        "managedresourcedefinitions",
    )
}

fn mraps(bed: &Bed) -> Api<DynamicObject> {
    dynamic(
        &bed.client,
        "apiextensions.crossplane.io",
        "v1alpha1",
        "ManagedResourceActivationPolicy",
        "managedresourceactivationpolicies",
    )
}

/// A ProviderConfig CRD in group `<group>`: not a managed resource, so it stays a CRD.
fn provider_config_crd(group: &str) -> Value {
    let mut crd = nop_crd(group);
    crd["metadata"]["name"] = json!(format!("providerconfigs.{group}"));
    crd["spec"]["names"] = json!({
        "kind": "ProviderConfig", "listKind": "ProviderConfigList",
        "plural": "providerconfigs", "singular": "providerconfig",
    });
    crd
}

/// Waits until MRD `name` has `Established` with `status`; returns it.
async fn wait_mrd(bed: &Bed, name: &str, status: &str) -> anyhow::Result<Value> {
    let api = mrds(bed);
    wait_for(&format!("MRD {name} Established={status}"), WAIT, || {
        let api = api.clone();
        async move {
            let Some(m) = api.get_opt(name).await? else {
                return Ok(None);
            };
            let m = json(&m);
            Ok(condition(&m, "Established")
                .filter(|c| c["status"] == status)
                .map(|_| m))
        }
    })
    .await
}

async fn crd_opt(bed: &Bed, name: &str) -> anyhow::Result<Option<CustomResourceDefinition>> {
    let api: Api<CustomResourceDefinition> = Api::all(bed.client.clone());
    Ok(api.get_opt(name).await?)
}

fn owner_kinds(obj: &Value) -> Vec<String> {
    obj["metadata"]["ownerReferences"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|o| o["kind"].as_str().map(String::from))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_safe_start_a_providers_mrds_are_active_and_their_crds_established() -> anyhow::Result<()> {
    let bed = Bed::start().await?;
    let name = format!("{}-provider-nop", bed.id);
    let group = format!("{}.nop.example.org", bed.id);
    let source = bed.source(&name);
    let package = Package::new(
        meta("Provider", "provider-nop", json!({})),
        vec![nop_crd(&group), provider_config_crd(&group)],
    )?;
    bed.push(&package, &format!("{source}:v1.0.0")).await?;
    bed.install("Provider", &name, &format!("{source}:v1.0.0"))
        .await?;
    let started = std::time::Instant::now();
    let rev = bed.wait_revision("Provider", &name, "True").await?;
    eprintln!("Provider applied → revision healthy: {:?}", started.elapsed());
    let rev_name = rev["metadata"]["name"].as_str().context("name")?.to_string();

    let mrd_name = format!("nopresources.{group}");
    let mrd = wait_mrd(&bed, &mrd_name, "True").await?;
    assert_eq!(mrd["spec"]["state"], "Active", "{mrd}");
    assert_eq!(
        condition(&mrd, "Established").context("Established")?["reason"],
        "EstablishedManagedResource"
    );
    assert_eq!(
        controller(&mrd),
        Some(("ProviderRevision".into(), rev_name.clone()))
    );
    assert_eq!(mrd["spec"]["group"], group.as_str());
    let crd = crd_opt(&bed, &mrd_name).await?.context("the MRD's CRD")?;
    assert!(crd_established(&crd));
    let crd = json(&crd);
    assert_eq!(
        controller(&crd),
        Some(("ProviderRevision".into(), rev_name.clone())),
        "the revision still controls the CRD"
    );
    let kinds = owner_kinds(&crd);
    assert!(
        kinds.iter().any(|k| k == "ManagedResourceDefinition") && kinds.iter().any(|k| k == "Provider"),
        "{kinds:?}"
    );

    // The ProviderConfig stays a CRD (positive control: the conversion is selective).
    let pc = format!("providerconfigs.{group}");
    assert!(mrds(&bed).get_opt(&pc).await?.is_none(), "no MRD for {pc}");
    let pc_crd = json(&crd_opt(&bed, &pc).await?.context("the ProviderConfig CRD")?);
    assert_eq!(
        controller(&pc_crd),
        Some(("ProviderRevision".into(), rev_name.clone()))
    );
    let refs: Vec<(String, String)> = rev["status"]["objectRefs"]
        .as_array()
        .context("objectRefs")?
        .iter()
        .map(|r| {
            (
                r["kind"].as_str().unwrap_or_default().to_string(),
                r["name"].as_str().unwrap_or_default().to_string(),
            )
        })
        .collect();
    assert_eq!(
        refs,
        [
            ("CustomResourceDefinition".to_string(), pc.clone()),
            ("ManagedResourceDefinition".to_string(), mrd_name.clone())
        ]
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_safe_start_provider_waits_at_zero_replicas_until_a_policy_activates_an_mrd() -> anyhow::Result<()>
{
    let bed = Bed::with_runtime().await?;
    let name = format!("{}-provider-nop", bed.id);
    let group = format!("{}.nop.example.org", bed.id);
    let group2 = format!("{}.nop2.example.org", bed.id);
    let source = bed.source(&name);
    bed.push(
        &provider_package(&group, json!({"capabilities": ["safe-start"]}), &[&group2])?,
        &format!("{source}:v1.0.0"),
    )
    .await?;
    bed.install("Provider", &name, &format!("{source}:v1.0.0"))
        .await?;
    let rev = bed.wait_revision("Provider", &name, "True").await?;
    let rev_name = rev["metadata"]["name"].as_str().context("name")?.to_string();
    let (first, second) = (format!("nopresources.{group}"), format!("nopresources.{group2}"));

    // Inactive MRDs, no CRDs, a Deployment at 0 replicas, healthy and awaiting activation.
    for m in [&first, &second] {
        let mrd = wait_mrd(&bed, m, "False").await?;
        assert_eq!(mrd["spec"]["state"], "Inactive", "{mrd}");
        assert_eq!(
            condition(&mrd, "Established").context("Established")?["reason"],
            "InactiveManagedResource"
        );
        assert!(crd_opt(&bed, m).await?.is_none(), "no CRD for the Inactive {m}");
    }
    let d = json(&bed.wait_deployment(&rev_name).await?);
    assert_eq!(d["spec"]["replicas"], 0, "{}", d["spec"]);
    let rev = bed.wait_runtime("Provider", &rev_name, "True").await?;
    let active = condition(&rev, "RuntimeActive").context("RuntimeActive")?;
    assert_eq!(
        (active["status"].as_str(), active["reason"].as_str()),
        (Some("False"), Some("AwaitingActivation")),
        "{active}"
    );
    let pkg = bed.wait_condition("Provider", &name, "Healthy", "True").await?;
    assert_eq!(
        condition(&pkg, "Healthy").context("Healthy")?["reason"],
        "AwaitingActivation"
    );

    // Positive control: a policy that matches none of them activates nothing.
    let label = json!({"crossplane-rs.io/test": bed.id});
    apply(
        &mraps(&bed),
        json!({
            "apiVersion": "apiextensions.crossplane.io/v1alpha1", "kind": "ManagedResourceActivationPolicy",
            "metadata": {"name": format!("{}-none", bed.id), "labels": label},
            "spec": {"activate": [format!("*.{}.elsewhere.example.org", bed.id)]},
        }),
    )
    .await?;
    let none = wait_for("the non-matching policy reconciled", WAIT, || {
        let api = mraps(&bed);
        let n = format!("{}-none", bed.id);
        async move {
            let p = json(&api.get(&n).await?);
            Ok(condition(&p, "Healthy")
                .filter(|c| c["status"] == "True")
                .map(|_| p))
        }
    })
    .await?;
    assert!(
        none["status"]["activated"].as_array().is_none_or(Vec::is_empty),
        "{none}"
    );
    for m in [&first, &second] {
        assert_eq!(json(&mrds(&bed).get(m).await?)["spec"]["state"], "Inactive");
    }
    let d = json(&bed.wait_deployment(&rev_name).await?);
    assert_eq!(d["spec"]["replicas"], 0);

    // A policy matching the first MRD: it goes Active, its CRD is established, the runtime scales up.
    let started = std::time::Instant::now();
    apply(
        &mraps(&bed),
        json!({
            "apiVersion": "apiextensions.crossplane.io/v1alpha1", "kind": "ManagedResourceActivationPolicy",
            "metadata": {"name": format!("{}-nop", bed.id), "labels": label},
            "spec": {"activate": [format!("*.{group}")]},
        }),
    )
    .await?;
    let mrd = wait_mrd(&bed, &first, "True").await?;
    eprintln!("policy applied → MRD established: {:?}", started.elapsed());
    assert_eq!(mrd["spec"]["state"], "Active");
    let crd = crd_opt(&bed, &first).await?.context("the activated MRD's CRD")?;
    assert!(crd_established(&crd));
    assert_eq!(
        controller(&json(&crd)),
        Some(("ProviderRevision".into(), rev_name.clone()))
    );
    let d = wait_for("the runtime scaled to its default replicas", WAIT, || {
        let api: Api<Deployment> = bed.ns_api();
        let n = rev_name.clone();
        async move {
            let d = api.get(&n).await?;
            Ok((d.spec.as_ref().and_then(|s| s.replicas) == Some(2)).then_some(d))
        }
    })
    .await?;
    eprintln!(
        "policy applied → Deployment at 2 replicas: {:?}",
        started.elapsed()
    );
    assert_eq!(d.spec.and_then(|s| s.replicas), Some(2));
    let rev = wait_for("RuntimeActive=True", WAIT, || {
        let revs = bed.api("ProviderRevision");
        let n = rev_name.clone();
        async move {
            let r = json(&revs.get(&n).await?);
            Ok(condition(&r, "RuntimeActive")
                .filter(|c| c["status"] == "True")
                .map(|_| r))
        }
    })
    .await?;
    assert_eq!(
        condition(&rev, "RuntimeActive").context("RuntimeActive")?["reason"],
        "ActiveRuntime"
    );
    let policy = wait_for("the policy's status lists the MRD", WAIT, || {
        let api = mraps(&bed);
        let n = format!("{}-nop", bed.id);
        async move {
            let p = json(&api.get(&n).await?);
            Ok(p["status"]["activated"].is_array().then_some(p))
        }
    })
    .await?;
    assert_eq!(policy["status"]["activated"], json!([first]));
    // The other MRD is untouched.
    let other = json(&mrds(&bed).get(&second).await?);
    assert_eq!(other["spec"]["state"], "Inactive");
    assert!(crd_opt(&bed, &second).await?.is_none());
    // An MRD never goes back to Inactive.
    let back = mrds(&bed)
        .patch(
            &first,
            &PatchParams::default(),
            &Patch::Merge(&json!({"spec": {"state": "Inactive"}})),
        )
        .await;
    assert!(
        back.as_ref().is_err_and(|e| e
            .to_string()
            .contains("state cannot be changed once it becomes Active")),
        "{back:?}"
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_the_conversion_off_a_providers_crds_are_installed_as_crds() -> anyhow::Result<()> {
    let bed = Bed::start_args(false, &["--enable-custom-to-managed-resource-conversion=false"]).await?;
    let name = format!("{}-provider-nop", bed.id);
    let group = format!("{}.nop.example.org", bed.id);
    // Even with safe-start: without MRDs there is nothing to wait for.
    let source = bed.source(&name);
    bed.push(
        &provider_package(&group, json!({"capabilities": ["safe-start"]}), &[])?,
        &format!("{source}:v1.0.0"),
    )
    .await?;
    bed.install("Provider", &name, &format!("{source}:v1.0.0"))
        .await?;
    let rev = bed.wait_revision("Provider", &name, "True").await?;
    let crd_name = format!("nopresources.{group}");
    assert_eq!(rev["status"]["objectRefs"][0]["kind"], "CustomResourceDefinition");
    assert_eq!(rev["status"]["objectRefs"][0]["name"], crd_name.as_str());
    let crd = crd_opt(&bed, &crd_name).await?.context("the CRD")?;
    assert!(crd_established(&crd));
    assert!(
        !owner_kinds(&json(&crd))
            .iter()
            .any(|k| k == "ManagedResourceDefinition"),
        "installed directly"
    );
    assert!(mrds(&bed).get_opt(&crd_name).await?.is_none(), "no MRD");
    Ok(())
}
