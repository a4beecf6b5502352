//! The command behind `cargo xtask package-bench`: builds the images, starts a node test bed, runs
//! the scenario and writes docs/packages.md and docs/packages.json.

use anyhow::Context;

use release::{image, target_dir};

use super::{Archives, Outcome};

/// Builds the debug images the scenario pushes (the core, provider-nop's package and its second build)
/// and the pause image, under `target/images/packages`.
pub fn build_archives() -> anyhow::Result<(Archives, std::path::PathBuf)> {
    let out = target_dir().join("images").join("packages");
    let options = image::Options {
        debug: true,
        out: Some(out.clone()),
        compression: Some(1),
        pause: true,
        next: true,
        registry: Default::default(),
    };
    image::run(
        &[
            "crossplane".to_string(),
            super::PROVIDER.to_string(),
            "provider-kubernetes".to_string(),
        ],
        &options,
    )?;
    image::pack_function(&out, options.compression, &options.registry)?;
    let archives = Archives {
        core: out.join("crossplane.oci.tar"),
        package: out.join("provider-nop.xpkg.oci.tar"),
        next: out.join("provider-nop-next.oci.tar"),
        function: out.join("function-go.xpkg.oci.tar"),
        dependency: out.join("provider-kubernetes.xpkg.oci.tar"),
        pause: out.join("pause.oci.tar"),
    };
    for a in [
        &archives.core,
        &archives.package,
        &archives.next,
        &archives.function,
        &archives.dependency,
        &archives.pause,
    ] {
        anyhow::ensure!(a.exists(), "cargo xtask image did not write {}", a.display());
    }
    Ok((archives, out.join("pause.oci.tar")))
}

/// Runs the scenario with `upgrades` upgrades each way on a fresh node test bed in `name` (under
/// target/testbed); returns what it showed.
pub fn run_on_node(name: &str, upgrades: usize) -> anyhow::Result<Outcome> {
    release::prereq::ensure()?;
    let harness = release::harness()?;
    let (archives, pause) = build_archives()?;
    let dir = target_dir().join("testbed").join(name);
    if dir.exists() {
        std::fs::remove_dir_all(&dir).with_context(|| format!("removing {}", dir.display()))?;
    }
    let rt = release::runtime()?;
    rt.block_on(async {
        let mut bed = testenv::NodeTestBed::start(&dir, &harness, &pause)
            .await
            .context("starting a test bed with a node")?;
        let outcome = super::run(&mut bed, &dir, &archives, upgrades).await;
        bed.stop().context("stopping the node test bed")?;
        outcome
    })
}

/// `cargo xtask package-bench --upgrades N`: the scenario, then docs/packages.{md,json}; fails (after
/// writing them) on any violation, a NopResource not Ready, or an upgrade our way that left the Lease
/// without a holder for longer than upstream's order did at its best.
pub fn run(upgrades: usize) -> anyhow::Result<i32> {
    if upgrades == 0 {
        eprintln!("xtask: --upgrades must be at least 1");
        return Ok(2);
    }
    let command = format!("cargo xtask package-bench --upgrades {upgrades}");
    let provenance = release::provenance::for_artifact("packages.json", &command)?;
    let o = run_on_node("package-bench", upgrades)?;
    let docs = testenv::harness::repo_root().join("docs");
    let md = docs.join("packages.md");
    std::fs::write(&md, super::report::markdown(&o, &provenance))
        .with_context(|| format!("writing {}", md.display()))?;
    let json = docs.join("packages.json");
    std::fs::write(
        &json,
        serde_json::to_string_pretty(&super::report::json(&o, &provenance))? + "\n",
    )
    .with_context(|| format!("writing {}", json.display()))?;
    eprintln!("[packages] wrote {} and {}", md.display(), json.display());
    o.check()?;
    Ok(0)
}

impl Outcome {
    /// Fails unless the run was safe and complete: the Provider's kinds defined (a CRD, or an MRD whose
    /// CRD exists), writes checked and no violation, no request of the
    /// package runtimes or the core refused (403), every NopResource
    /// Ready, every upgrade handed the Lease over, upstream's order showing a gap (the measure's
    /// positive control) and ours none longer than upstream's shortest.
    pub fn check(&self) -> anyhow::Result<()> {
        anyhow::ensure!(self.writes > 0, "no write of the provider was checked");
        anyhow::ensure!(
            super::defines_a_kind(&self.crds),
            "the Provider's first revision installed no definition whose CRD exists: {:?}",
            self.crds
        );
        anyhow::ensure!(self.violations.is_empty(), "violations: {:#?}", self.violations);
        anyhow::ensure!(
            self.refused.is_empty(),
            "requests of crossplane-system's ServiceAccounts were refused (403); the core's and the \
             revisions' RBAC must cover normal operation: {:#?}",
            self.refused
        );
        anyhow::ensure!(
            self.nops_ready == super::NOPS,
            "{} of {} NopResources Ready",
            self.nops_ready,
            super::NOPS
        );
        for u in &self.upgrades {
            anyhow::ensure!(
                u.handovers > 0,
                "{:?} {}: the audit log shows no handover of the Lease",
                u.way,
                u.change
            );
        }
        // The gap measure's positive control: upstream's order must show a gap, and ours must not be
        // longer than upstream's shortest.
        let gaps = |way| {
            self.upgrades
                .iter()
                .filter(move |u| u.way == way)
                .map(|u| u.gap_ms)
        };
        let ours = gaps(super::Way::Ours).fold(0.0, f64::max);
        let upstream = gaps(super::Way::Upstream).fold(f64::INFINITY, f64::min);
        anyhow::ensure!(
            upstream.is_finite() && upstream > 0.0,
            "upstream's order showed no time without a leader: the gap measure is blind"
        );
        anyhow::ensure!(
            ours <= upstream,
            "an upgrade our way left the Lease without a holder for {ours:.0} ms, longer than upstream's \
             order at its best ({upstream:.0} ms)"
        );
        anyhow::ensure!(
            self.bad_inputs.len() == 3,
            "{} of the 3 bad inputs were tried on the node",
            self.bad_inputs.len()
        );
        anyhow::ensure!(
            self.terms.iter().all(|(_, v)| !v.contains(',')),
            "a term with two versions: {:?}",
            self.terms
        );
        Ok(())
    }
}
