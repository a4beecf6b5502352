//! Crossplane API types as Rust types: common conditions, the managed-resource spec,
//! ProviderConfig, XRDs and Compositions.
//!
//! This crate starts empty: the types arrive with the providers and core issues.
#![forbid(unsafe_code)]
