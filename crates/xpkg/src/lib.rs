//! Crossplane's package format, xpkg, and how packages travel through an OCI registry.
//!
//! An xpkg is an ordinary OCI image. One layer, annotated `io.crossplane.xpkg: base`, holds
//! `package.yaml` at its root: a YAML stream of exactly one meta object (`meta.pkg.crossplane.io`
//! Provider, Function or Configuration) and the objects the package installs (CRDs, webhook
//! configurations, XRDs, Compositions). A provider's or function's package is built on the image of
//! its binary, so the package image is the runtime image too. An image without the annotation is read
//! the legacy way: from its flattened layers.
//!
//! - [`package`]: parsing and writing `package.yaml` streams ([`Package`], [`MetaKind`]);
//! - [`image`]: building an xpkg image in memory from `package.yaml` and an optional runtime image, and
//!   finding the package in an image's layers ([`Image`]);
//! - [`archive`]: reading and writing OCI image layouts in a tar (`oci-archive:`), what
//!   `cargo xtask image` writes;
//! - [`reference`]: image references (`registry/repo:tag`, `…@sha256:…`);
//! - [`registry`]: the OCI distribution protocol's few requests (resolve, pull, push), pull secrets
//!   and plain HTTP for loopback registries;
//! - [`fetch`]: the package manager's fetch: tag to digest, a cache by digest, the base layer, the
//!   parsed package ([`Fetcher`]).
//!
//! Errors ([`Error`]) say in words what was wrong and what to do; each bad input (an unreachable
//! registry, a missing tag or digest, an image that is not an xpkg, a `package.yaml` with zero or two
//! meta objects) has one variant of its own.
#![forbid(unsafe_code)]

pub mod archive;
mod error;
pub mod fetch;
pub mod image;
pub mod package;
pub mod reference;
pub mod registry;

pub use error::{Error, Result};
pub use fetch::{Cache, Fetched, Fetcher, PullPolicy};
pub use image::{Blob, Image};
pub use package::{MetaKind, Package};
pub use reference::Reference;

/// The annotation (on a layer descriptor) that marks the layer holding `package.yaml`.
pub const ANNOTATION_KEY: &str = "io.crossplane.xpkg";
/// The value of [`ANNOTATION_KEY`] on the base layer.
pub const BASE_ANNOTATION: &str = "base";
/// The file in the base layer's root that holds the package.
pub const PACKAGE_FILE: &str = "package.yaml";
/// The largest `package.yaml` read (upstream's limit, 200 MB).
pub const MAX_PACKAGE_BYTES: u64 = 200 * 1024 * 1024;
