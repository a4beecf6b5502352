//! Building an xpkg image in memory, and finding the package in an image's layers.
//!
//! [`Image::xpkg`] puts `package.yaml` in a layer of its own on top of a runtime image's layers (or
//! alone, for a Configuration), annotates that layer's descriptor `io.crossplane.xpkg: base`, and also
//! records the annotation as the config label `io.crossplane.xpkg:<layer digest>` = `base`, as
//! upstream's builder does, so tools that read only the config find it too. Timestamps and modes are
//! fixed, so the same inputs always give the same digests.

use std::io::{Read, Write};

use flate2::{Compression, read::GzDecoder, write::GzEncoder};
use oci_spec::image::{
    Descriptor, DescriptorBuilder, ImageManifest, ImageManifestBuilder, MediaType, Sha256Digest,
};
use serde_json::{Value, json};
use sha2::{Digest as _, Sha256};

use crate::{ANNOTATION_KEY, BASE_ANNOTATION, Error, MAX_PACKAGE_BYTES, PACKAGE_FILE, Package, Result};

/// A blob as a registry stores it: its media type, bytes and digest.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Blob {
    /// The descriptor's media type.
    pub media_type: MediaType,
    /// The content.
    pub bytes: Vec<u8>,
}

impl Blob {
    /// The blob's digest, `sha256:<hex>`.
    pub fn digest(&self) -> String {
        digest_of(&self.bytes)
    }
}

/// An image in memory: its manifest, config and layers (in manifest order).
#[derive(Debug, Clone)]
pub struct Image {
    /// The manifest.
    pub manifest: ImageManifest,
    /// The config blob.
    pub config: Vec<u8>,
    /// The layer blobs, in the manifest's order.
    pub layers: Vec<Vec<u8>>,
}

impl Image {
    /// An xpkg of `package`: `package.yaml` as a gzipped layer annotated as the package's base layer,
    /// on top of `runtime`'s layers when given (a Provider or Function, whose image is its runtime),
    /// else alone in an image of its own (a Configuration).
    pub fn xpkg(package: &Package, runtime: Option<&Image>) -> Result<Image> {
        Image::with_package_yaml(package.to_yaml()?.as_bytes(), runtime)
    }

    /// [`Image::xpkg`] with `package.yaml` as given, unchecked (tests build bad packages with it).
    pub fn with_package_yaml(yaml: &[u8], runtime: Option<&Image>) -> Result<Image> {
        let layer = tar_layer(&[(PACKAGE_FILE, yaml)])?;
        let layer_digest = digest_of(&layer.gzipped);
        let (mut config, mut layers, mut descriptors, annotations) = match runtime {
            Some(r) => (
                serde_json::from_slice::<Value>(&r.config)
                    .map_err(|e| Error::Build(format!("the runtime image's config is not JSON: {e}")))?,
                r.layers.clone(),
                r.manifest.layers().clone(),
                r.manifest.annotations().clone(),
            ),
            None => (
                json!({
                    "architecture": "amd64",
                    "os": "linux",
                    "created": "1970-01-01T00:00:00Z",
                    "config": {},
                    "rootfs": {"type": "layers", "diff_ids": []},
                }),
                Vec::new(),
                Vec::new(),
                None,
            ),
        };
        let diff_ids = config
            .pointer_mut("/rootfs/diff_ids")
            .and_then(Value::as_array_mut)
            .ok_or_else(|| Error::Build("the runtime image's config has no rootfs.diff_ids".into()))?;
        diff_ids.push(Value::String(digest_of(&layer.tar)));
        let labels = config
            .as_object_mut()
            .ok_or_else(|| Error::Build("the runtime image's config is not an object".into()))?
            .entry("config")
            .or_insert_with(|| json!({}))
            .as_object_mut()
            .ok_or_else(|| Error::Build("the runtime image's config.config is not an object".into()))?
            .entry("Labels")
            .or_insert_with(|| json!({}));
        if labels.is_null() {
            *labels = json!({});
        }
        if let Some(l) = labels.as_object_mut() {
            l.insert(format!("{ANNOTATION_KEY}:{layer_digest}"), json!(BASE_ANNOTATION));
        }
        let config = serde_json::to_vec(&config).map_err(|e| Error::Build(e.to_string()))?;
        let mut base = descriptor(MediaType::ImageLayerGzip, &layer.gzipped)?;
        base.set_annotations(Some(
            [(ANNOTATION_KEY.to_string(), BASE_ANNOTATION.to_string())].into(),
        ));
        descriptors.push(base);
        layers.push(layer.gzipped);
        let mut builder = ImageManifestBuilder::default()
            .schema_version(2u32)
            .media_type(MediaType::ImageManifest)
            .config(descriptor(MediaType::ImageConfig, &config)?)
            .layers(descriptors);
        if let Some(a) = annotations {
            builder = builder.annotations(a);
        }
        let manifest = builder.build().map_err(|e| Error::Build(e.to_string()))?;
        Ok(Image {
            manifest,
            config,
            layers,
        })
    }

    /// A plain image (no package) of one layer holding `files` (path, content), for tests and tools.
    pub fn from_files(files: &[(&str, &[u8])]) -> Result<Image> {
        let layer = tar_layer(files)?;
        let config = serde_json::to_vec(&json!({
            "architecture": "amd64",
            "os": "linux",
            "created": "1970-01-01T00:00:00Z",
            "config": {},
            "rootfs": {"type": "layers", "diff_ids": [digest_of(&layer.tar)]},
        }))
        .map_err(|e| Error::Build(e.to_string()))?;
        let manifest = ImageManifestBuilder::default()
            .schema_version(2u32)
            .media_type(MediaType::ImageManifest)
            .config(descriptor(MediaType::ImageConfig, &config)?)
            .layers(vec![descriptor(MediaType::ImageLayerGzip, &layer.gzipped)?])
            .build()
            .map_err(|e| Error::Build(e.to_string()))?;
        Ok(Image {
            manifest,
            config,
            layers: vec![layer.gzipped],
        })
    }

    /// The manifest as the registry stores it.
    pub fn manifest_bytes(&self) -> Result<Vec<u8>> {
        serde_json::to_vec(&self.manifest).map_err(|e| Error::Build(format!("writing the manifest: {e}")))
    }

    /// The manifest's digest, which names the image.
    pub fn digest(&self) -> Result<String> {
        Ok(digest_of(&self.manifest_bytes()?))
    }

    /// Every blob of the image (config first, then the layers) with its descriptor.
    pub fn blobs(&self) -> Vec<(&Descriptor, &[u8])> {
        std::iter::once((self.manifest.config(), self.config.as_slice()))
            .chain(
                self.manifest
                    .layers()
                    .iter()
                    .zip(self.layers.iter().map(Vec::as_slice)),
            )
            .collect()
    }

    /// The package in this image, read as [`package_layers`] says.
    pub fn package(&self, reference: &str) -> Result<Package> {
        let wanted = package_layers(&self.manifest, reference)?;
        let layers: Vec<&[u8]> = wanted.iter().map(|i| self.layers[*i].as_slice()).collect();
        Package::parse(&package_yaml(&layers, has_base_layer(&self.manifest), reference)?)
    }
}

/// Which layers (indices into the manifest's layers) hold the package: the one annotated
/// `io.crossplane.xpkg: base`, or, when none is, all of them, flattened in order (legacy packages).
/// Two base layers make the image no xpkg.
pub fn package_layers(manifest: &ImageManifest, reference: &str) -> Result<Vec<usize>> {
    let base: Vec<usize> = manifest
        .layers()
        .iter()
        .enumerate()
        .filter(|(_, d)| {
            d.annotations()
                .as_ref()
                .and_then(|a| a.get(ANNOTATION_KEY))
                .is_some_and(|v| v == BASE_ANNOTATION)
        })
        .map(|(i, _)| i)
        .collect();
    match base.len() {
        0 if manifest.layers().is_empty() => Err(Error::NotAnXpkg {
            reference: reference.to_string(),
            reason: "the image has no layers".into(),
        }),
        0 => Ok((0..manifest.layers().len()).collect()),
        1 => Ok(base),
        n => Err(Error::NotAnXpkg {
            reference: reference.to_string(),
            reason: format!(
                "{n} layers are annotated `{ANNOTATION_KEY}: {BASE_ANNOTATION}`, at most one may be"
            ),
        }),
    }
}

/// Whether one of the manifest's layers is annotated as the package's base layer.
pub fn has_base_layer(manifest: &ImageManifest) -> bool {
    manifest.layers().iter().any(|d| {
        d.annotations()
            .as_ref()
            .and_then(|a| a.get(ANNOTATION_KEY))
            .is_some_and(|v| v == BASE_ANNOTATION)
    })
}

/// `package.yaml` from `layers` (gzipped or plain tars; the annotated base layer when `base`, else
/// every layer), the last layer that has one winning, as in a flattened file system.
pub fn package_yaml(layers: &[&[u8]], base: bool, reference: &str) -> Result<Vec<u8>> {
    let mut found = None;
    for layer in layers {
        if let Some(yaml) = file_in_layer(layer, PACKAGE_FILE).map_err(|reason| Error::NotAnXpkg {
            reference: reference.to_string(),
            reason,
        })? {
            found = Some(yaml);
        }
    }
    found.ok_or_else(|| Error::NotAnXpkg {
        reference: reference.to_string(),
        reason: if base {
            format!("its base layer has no {PACKAGE_FILE} at its root")
        } else {
            format!(
                "no layer is annotated `{ANNOTATION_KEY}: {BASE_ANNOTATION}` and none of its {} layer(s) has a \
                 {PACKAGE_FILE} at its root",
                layers.len()
            )
        },
    })
}

/// The file `name` at the root of the tar `layer` (gzipped or not), capped at [`MAX_PACKAGE_BYTES`].
fn file_in_layer(layer: &[u8], name: &str) -> std::result::Result<Option<Vec<u8>>, String> {
    let reader: Box<dyn Read + '_> = if layer.starts_with(&[0x1f, 0x8b]) {
        Box::new(GzDecoder::new(layer))
    } else {
        Box::new(layer)
    };
    let mut archive = tar::Archive::new(reader);
    let entries = archive
        .entries()
        .map_err(|e| format!("a layer is not a tar archive ({e})"))?;
    for entry in entries {
        let entry = entry.map_err(|e| format!("a layer is not a readable tar archive ({e})"))?;
        let path = entry
            .path()
            .map_err(|e| format!("a layer has an unreadable path ({e})"))?
            .to_string_lossy()
            .trim_start_matches("./")
            .trim_start_matches('/')
            .to_string();
        if path != name || !entry.header().entry_type().is_file() {
            continue;
        }
        if entry.header().size().unwrap_or(0) > MAX_PACKAGE_BYTES {
            return Err(format!("its {name} is larger than {MAX_PACKAGE_BYTES} bytes"));
        }
        let mut data = Vec::new();
        entry
            .take(MAX_PACKAGE_BYTES + 1)
            .read_to_end(&mut data)
            .map_err(|e| format!("its {name} cannot be read ({e})"))?;
        return Ok(Some(data));
    }
    Ok(None)
}

/// A layer as a plain tar (whose digest is the diff ID) and gzipped (the blob).
struct Layer {
    tar: Vec<u8>,
    gzipped: Vec<u8>,
}

/// A layer holding `files` (path, content) at its root, with fixed modes and times.
fn tar_layer(files: &[(&str, &[u8])]) -> Result<Layer> {
    let build = |e: std::io::Error| Error::Build(format!("packing a layer: {e}"));
    let mut t = tar::Builder::new(Vec::new());
    for (path, data) in files {
        let mut h = tar::Header::new_gnu();
        h.set_size(data.len() as u64);
        h.set_mode(0o644);
        h.set_mtime(0);
        h.set_uid(0);
        h.set_gid(0);
        h.set_entry_type(tar::EntryType::Regular);
        t.append_data(&mut h, path, *data).map_err(build)?;
    }
    let tar = t.into_inner().map_err(build)?;
    let mut gz = GzEncoder::new(Vec::new(), Compression::default());
    gz.write_all(&tar).map_err(build)?;
    let gzipped = gz.finish().map_err(build)?;
    Ok(Layer { tar, gzipped })
}

/// A descriptor of `bytes` with `media_type`.
pub fn descriptor(media_type: MediaType, bytes: &[u8]) -> Result<Descriptor> {
    let hex = hex_sha256(bytes);
    DescriptorBuilder::default()
        .media_type(media_type)
        .digest(
            hex.parse::<Sha256Digest>()
                .map_err(|e| Error::Build(format!("a digest: {e}")))?,
        )
        .size(bytes.len() as u64)
        .build()
        .map_err(|e| Error::Build(e.to_string()))
}

/// `sha256:<hex>` of `bytes`.
pub fn digest_of(bytes: &[u8]) -> String {
    format!("sha256:{}", hex_sha256(bytes))
}

fn hex_sha256(bytes: &[u8]) -> String {
    Sha256::digest(bytes).iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn package() -> Package {
        Package::new(
            json!({"apiVersion": "meta.pkg.crossplane.io/v1", "kind": "Configuration", "metadata": {"name": "c"}}),
            vec![json!({"apiVersion": "apiextensions.crossplane.io/v2", "kind": "CompositeResourceDefinition", "metadata": {"name": "xs.example.org"}})],
        )
        .expect("a package")
    }

    #[test]
    fn an_xpkg_has_one_annotated_base_layer_and_reads_back() {
        let image = Image::xpkg(&package(), None).expect("builds");
        assert_eq!(image.manifest.layers().len(), 1);
        assert_eq!(package_layers(&image.manifest, "x").expect("base"), vec![0]);
        assert_eq!(image.package("x").expect("reads"), package());
        let config: Value = serde_json::from_slice(&image.config).expect("json");
        let label = format!("{ANNOTATION_KEY}:{}", image.manifest.layers()[0].digest());
        assert_eq!(config["config"]["Labels"][&label], "base");
        // Same inputs, same digest.
        let again = Image::xpkg(&package(), None).expect("builds");
        assert_eq!(again.digest().expect("digest"), image.digest().expect("digest"));
    }

    #[test]
    fn on_a_runtime_image_the_base_layer_comes_last() {
        let runtime = Image::xpkg(&package(), None).expect("builds");
        let mut plain = runtime.clone();
        let mut layers = plain.manifest.layers().clone();
        layers[0].set_annotations(None);
        plain.manifest.set_layers(layers);
        let xpkg = Image::xpkg(&package(), Some(&plain)).expect("builds");
        assert_eq!(xpkg.manifest.layers().len(), 2);
        assert_eq!(package_layers(&xpkg.manifest, "x").expect("base"), vec![1]);
        let config: Value = serde_json::from_slice(&xpkg.config).expect("json");
        assert_eq!(config["rootfs"]["diff_ids"].as_array().map(Vec::len), Some(2));
        // Without the annotation, the flattened layers are read.
        assert_eq!(package_layers(&plain.manifest, "x").expect("legacy"), vec![0]);
        assert_eq!(plain.package("x").expect("legacy read"), package());
    }

    #[test]
    fn layers_without_a_package_are_not_an_xpkg() {
        let e = package_yaml(&[b"not a tar".as_slice()], false, "r").expect_err("no package");
        assert!(matches!(e, Error::NotAnXpkg { .. }), "{e}");
        let mut two = Image::xpkg(&package(), None).expect("builds");
        let mut layers = two.manifest.layers().clone();
        layers.push(layers[0].clone());
        two.manifest.set_layers(layers);
        let e = package_layers(&two.manifest, "r").expect_err("two bases");
        assert!(e.to_string().contains("2 layers are annotated"), "{e}");
    }
}
