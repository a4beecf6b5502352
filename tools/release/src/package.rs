//! The xpkg packages `cargo xtask image` builds beside the images: for each provider, its image with
//! one more layer, annotated `io.crossplane.xpkg: base`, holding `package.yaml` (a
//! `meta.pkg.crossplane.io/v1` Provider and the provider's CRDs, from the same Rust types as deploy/).
//! With `--function`, function-go (our composition function on the official Go SDK) is packed the same
//! way, as a meta Function. The packing and parsing live in the `xpkg` crate; this module only says
//! what goes in.

use std::path::{Path, PathBuf};

use anyhow::Context;
use serde_json::json;

use crate::{generate, image::Binary, registry::Registry};

/// The package of `b`, if it is a provider: its meta object and CRDs.
pub fn package_of(b: &Binary) -> anyhow::Result<Option<xpkg::Package>> {
    let Some(deployed) = generate::deployed()
        .into_iter()
        .find(|d| d.provider && d.image == b.name)
    else {
        return Ok(None);
    };
    let meta = json!({
        "apiVersion": "meta.pkg.crossplane.io/v1",
        "kind": "Provider",
        "metadata": {
            "name": b.name,
            "annotations": {
                "meta.crossplane.io/maintainer": "crossplane-rs",
                "meta.crossplane.io/source": env!("CARGO_PKG_REPOSITORY"),
                "meta.crossplane.io/description": b.description,
            },
        },
        "spec": {},
    });
    let crds = (deployed.crds)()
        .into_iter()
        .map(serde_json::to_value)
        .collect::<Result<Vec<_>, _>>()
        .context("serializing a CRD")?;
    Ok(Some(xpkg::Package::new(meta, crds)?))
}

/// Writes the xpkg of `b` next to its image archive `image` (as `<name>.xpkg.oci.tar`), named like the
/// image: the package image is the runtime image. Returns its path, or `None` when `b` is no provider.
pub fn pack(b: &Binary, image: &Path, registry: &Registry, tag: &str) -> anyhow::Result<Option<PathBuf>> {
    let Some(package) = package_of(b)? else {
        return Ok(None);
    };
    let runtime = xpkg::archive::read(image)?;
    let xpkg = xpkg::Image::xpkg(&package, Some(&runtime))?;
    let out = image.with_file_name(format!("{}.xpkg.oci.tar", b.name));
    xpkg::archive::write(&xpkg, &registry.full_reference(b.name, tag), &out)?;
    Ok(Some(out))
}

/// The function `cargo xtask image --function` packs: our composition function on the official Go SDK.
pub const FUNCTION: &str = "function-go";
/// One line on what it is.
pub const FUNCTION_DESCRIPTION: &str = "A composition function on the official Go SDK (function-sdk-go): composes a ConfigMap naming its revision";

/// function-go's package: a meta Function with the `composition` capability, and no CRDs.
pub fn function_package() -> anyhow::Result<xpkg::Package> {
    let meta = json!({
        "apiVersion": "meta.pkg.crossplane.io/v1",
        "kind": "Function",
        "metadata": {
            "name": FUNCTION,
            "annotations": {
                "meta.crossplane.io/maintainer": "crossplane-rs",
                "meta.crossplane.io/source": env!("CARGO_PKG_REPOSITORY"),
                "meta.crossplane.io/description": FUNCTION_DESCRIPTION,
            },
        },
        "spec": {"capabilities": ["composition"]},
    });
    Ok(xpkg::Package::new(meta, Vec::new())?)
}

/// Writes function-go's xpkg next to its image archive `image` (as `function-go.xpkg.oci.tar`).
pub fn pack_function(image: &Path, registry: &Registry, tag: &str) -> anyhow::Result<PathBuf> {
    let runtime = xpkg::archive::read(image)?;
    let xpkg = xpkg::Image::xpkg(&function_package()?, Some(&runtime))?;
    let out = image.with_file_name(format!("{FUNCTION}.xpkg.oci.tar"));
    xpkg::archive::write(&xpkg, &registry.full_reference(FUNCTION, tag), &out)?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_provider_has_a_package_with_its_crds_and_the_core_none() {
        for b in crate::image::BINARIES.iter() {
            let package = package_of(b).expect("a package");
            if b.name == "crossplane" {
                assert!(package.is_none());
                continue;
            }
            let p = package.unwrap_or_else(|| panic!("{} has no package", b.name));
            assert_eq!(p.kind, xpkg::MetaKind::Provider);
            assert_eq!(p.name(), b.name);
            assert!(p.objects_of("CustomResourceDefinition").count() > 0, "{}", b.name);
            let again = xpkg::Package::parse(p.to_yaml().expect("yaml").as_bytes()).expect("parses");
            assert_eq!(again, p);
        }
    }

    #[test]
    fn the_function_package_is_one_meta_function() {
        let p = function_package().expect("a package");
        assert_eq!(p.kind, xpkg::MetaKind::Function);
        assert_eq!(p.name(), FUNCTION);
        assert_eq!(p.objects_of("CustomResourceDefinition").count(), 0);
    }
}
