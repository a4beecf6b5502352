//! A new provider is its crate plus one line: `examples/provider-file`, registered with the one line
//! `docs/writing-a-provider.md` names (`Deployed::provider(&provider_file::PROVIDER)`), gets everything
//! the shipped providers get, derived from its descriptor and nothing else: its kustomize base under
//! deploy/ (Deployment, ServiceAccount, Lease Role, ClusterRole with its kinds, PodDisruptionBudget), its
//! CRDs, its fence, its Dockerfile and image, its keys in the Helm chart, and its kinds aggregated into
//! the core's role. Pure: no cluster.

use std::path::PathBuf;

use anyhow::{Context, Result, ensure};
use release::binaries::{Deployed, deployed};
use release::generate::render_binaries;
use release::image::images_of;
use release::registry::Registry;

fn with_provider_file() -> Vec<Deployed> {
    let mut binaries = deployed();
    binaries.push(Deployed::provider(&provider_file::PROVIDER));
    binaries
}

#[test]
fn one_line_gives_a_provider_everything_the_shipped_ones_get() -> Result<()> {
    let before = render_binaries(&deployed(), &Registry::default())?;
    let after = render_binaries(&with_provider_file(), &Registry::default())?;
    let added: Vec<&PathBuf> = after.keys().filter(|p| !before.contains_key(*p)).collect();
    eprintln!("files the one line adds under deploy/:");
    for p in &added {
        eprintln!("  {}", p.display());
    }
    // The same kinds of files provider-nop has, under provider-file/.
    let nop: Vec<String> = before
        .keys()
        .filter_map(|p| p.strip_prefix("provider-nop").ok())
        .map(|p| p.display().to_string())
        .collect();
    for file in &nop {
        let path = PathBuf::from("provider-file").join(file);
        ensure!(
            after.contains_key(&path),
            "no {} for the new provider",
            path.display()
        );
    }
    ensure!(!nop.is_empty(), "provider-nop has no base to compare with");
    // Its CRDs, and its fence.
    for crd in provider_file::crds() {
        let name = crd.metadata.name.clone().context("a CRD without a name")?;
        ensure!(
            added
                .iter()
                .any(|p| p.starts_with("crds") && p.display().to_string().contains(&name)),
            "no CRD file for {name}: {added:?}"
        );
    }
    ensure!(
        added
            .iter()
            .any(|p| p.starts_with("fencing") && p.display().to_string().contains("provider-file")),
        "no fence for the new provider: {added:?}"
    );
    // Its image.
    ensure!(
        images_of(&with_provider_file())
            .iter()
            .any(|i| i.name == "provider-file"
                && i.package == "provider-file"
                && i.description == provider_file::INFO.description),
        "no image for the new provider"
    );
    // Its keys in the chart: `providers.file.*`, and a Deployment template.
    let values = after
        .iter()
        .find(|(p, _)| p.ends_with("values.yaml"))
        .map(|(_, v)| v.clone())
        .context("no chart values")?;
    ensure!(
        values.contains("\n  file:\n"),
        "no `providers.file` in the chart's values:\n{values}"
    );
    ensure!(
        added
            .iter()
            .any(|p| p.starts_with("charts") && p.display().to_string().contains("provider-file")),
        "no chart template for the new provider: {added:?}"
    );
    // Nothing else changed but the lists that name every binary (kustomizations, the chart's values):
    // the core's role takes a provider's kinds by aggregation, so no existing ClusterRole changes.
    let changed: Vec<&PathBuf> = before
        .iter()
        .filter(|(p, t)| after.get(*p) != Some(t))
        .map(|(p, _)| p)
        .collect();
    for p in &changed {
        let name = p.display().to_string();
        ensure!(
            name.ends_with("kustomization.yaml") || name.ends_with("values.yaml"),
            "the new provider changed {name}, which should not depend on the list of binaries"
        );
    }
    eprintln!("files it changes: {changed:?}");
    Ok(())
}
