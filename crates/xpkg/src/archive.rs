//! OCI image layouts in a tar (`oci-archive:` for skopeo, `ctr images import`): what
//! `cargo xtask image` writes, read back to build a package on a binary's image.

use std::{collections::HashMap, io::Read, path::Path};

use oci_spec::image::{ImageIndex, ImageIndexBuilder, ImageManifest, MediaType};

use crate::{Error, Image, Result, image::descriptor};

/// The annotation on an index entry that names the image.
pub const REF_NAME: &str = "org.opencontainers.image.ref.name";

/// Reads the first image of the OCI archive at `path`.
pub fn read(path: &Path) -> Result<Image> {
    let bad = |reason: String| Error::Archive {
        path: path.display().to_string(),
        reason,
    };
    let file = std::fs::File::open(path).map_err(Error::io("opening", path.display()))?;
    let mut files: HashMap<String, Vec<u8>> = HashMap::new();
    let mut archive = tar::Archive::new(file);
    for entry in archive.entries().map_err(|e| bad(format!("not a tar ({e})")))? {
        let mut entry = entry.map_err(|e| bad(format!("not a readable tar ({e})")))?;
        if !entry.header().entry_type().is_file() {
            continue;
        }
        let name = entry
            .path()
            .map_err(|e| bad(format!("an unreadable path ({e})")))?
            .to_string_lossy()
            .trim_start_matches("./")
            .to_string();
        let mut data = Vec::new();
        entry
            .read_to_end(&mut data)
            .map_err(|e| bad(format!("reading {name} ({e})")))?;
        files.insert(name, data);
    }
    let index: ImageIndex = serde_json::from_slice(&take_file(&mut files, "index.json").map_err(bad)?)
        .map_err(|e| bad(format!("index.json is not an OCI index ({e})")))?;
    let mut take = |digest: &str| -> Result<Vec<u8>> {
        let name = blob_path(digest);
        files
            .remove(&name)
            .ok_or_else(|| bad(format!("it has no blob {name}")))
    };
    let first = index
        .manifests()
        .first()
        .ok_or_else(|| bad("its index names no image".into()))?;
    let manifest_bytes = take(first.digest().as_ref())?;
    let manifest: ImageManifest = serde_json::from_slice(&manifest_bytes)
        .map_err(|e| bad(format!("its manifest is not an OCI image manifest ({e})")))?;
    let config = take(manifest.config().digest().as_ref())?;
    let layers = manifest
        .layers()
        .iter()
        .map(|l| take(l.digest().as_ref()))
        .collect::<Result<Vec<_>>>()?;
    Ok(Image {
        manifest,
        config,
        layers,
    })
}

fn take_file(files: &mut HashMap<String, Vec<u8>>, name: &str) -> std::result::Result<Vec<u8>, String> {
    files.remove(name).ok_or_else(|| format!("it has no {name}"))
}

/// Writes `image` as an OCI archive at `path`, its index entry named `reference` (the full reference
/// a container runtime stores it under).
pub fn write(image: &Image, reference: &str, path: &Path) -> Result<()> {
    let bad = |e: std::io::Error| Error::Archive {
        path: path.display().to_string(),
        reason: e.to_string(),
    };
    let manifest = image.manifest_bytes()?;
    let mut entry = descriptor(MediaType::ImageManifest, &manifest)?;
    entry.set_annotations(Some([(REF_NAME.to_string(), reference.to_string())].into()));
    let index = ImageIndexBuilder::default()
        .schema_version(2u32)
        .media_type(MediaType::ImageIndex)
        .manifests(vec![entry])
        .build()
        .map_err(|e| Error::Build(e.to_string()))?;
    let index = serde_json::to_vec(&index).map_err(|e| Error::Build(e.to_string()))?;
    let file = std::fs::File::create(path).map_err(Error::io("creating", path.display()))?;
    let mut out = tar::Builder::new(file);
    let mut add = |name: &str, data: &[u8]| -> Result<()> {
        let mut h = tar::Header::new_gnu();
        h.set_size(data.len() as u64);
        h.set_mode(0o644);
        h.set_mtime(0);
        h.set_entry_type(tar::EntryType::Regular);
        out.append_data(&mut h, name, data).map_err(bad)
    };
    add("oci-layout", br#"{"imageLayoutVersion":"1.0.0"}"#)?;
    add("index.json", &index)?;
    add(&blob_path(&crate::image::digest_of(&manifest)), &manifest)?;
    let mut written = std::collections::HashSet::new();
    for (d, bytes) in image.blobs() {
        let digest = d.digest().to_string();
        if written.insert(digest.clone()) {
            add(&blob_path(&digest), bytes)?;
        }
    }
    out.finish().map_err(bad)
}

fn blob_path(digest: &str) -> String {
    format!("blobs/{}", digest.replacen(':', "/", 1))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::Package;

    #[test]
    fn round_trips_an_xpkg() {
        let package = Package::new(
            json!({"apiVersion": "meta.pkg.crossplane.io/v1", "kind": "Function", "metadata": {"name": "f"}}),
            Vec::new(),
        )
        .expect("package");
        let image = Image::xpkg(&package, None).expect("image");
        let dir = std::env::temp_dir().join(format!("xpkg-archive-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("tmp dir");
        let path = dir.join("f.oci.tar");
        write(&image, "example.org/f:v1", &path).expect("writes");
        let back = read(&path).expect("reads");
        assert_eq!(back.digest().expect("digest"), image.digest().expect("digest"));
        assert_eq!(back.package("f").expect("package"), package);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
