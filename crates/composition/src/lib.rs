//! The patch-and-transform engine: Crossplane's `function-patch-and-transform`, built
//! into the core as pure functions (no I/O, no Kubernetes client).
//!
//! A Composition pipeline step whose function is `function-patch-and-transform` carries
//! an input of `apiVersion: pt.fn.crossplane.io/v1beta1, kind: Resources`
//! ([`input::Resources`]). [`compose()`] (or [`run()`], with state from previous steps)
//! turns that input, the observed composite resource and the observed composed resources
//! into the desired composed resources, the desired composite overlay (To* patches),
//! readiness and connection details.
//!
//! ```
//! use std::collections::BTreeMap;
//! use composition::{compose, input::Resources};
//! use serde_json::json;
//!
//! let input = Resources::from_value(&json!({
//!     "apiVersion": "pt.fn.crossplane.io/v1beta1",
//!     "kind": "Resources",
//!     "resources": [{
//!         "name": "bucket",
//!         "base": {"apiVersion": "s3.aws.upbound.io/v1beta1", "kind": "Bucket",
//!                  "spec": {"forProvider": {"region": "us-east-2"}}},
//!         "patches": [{
//!             "type": "FromCompositeFieldPath",
//!             "fromFieldPath": "spec.location",
//!             "toFieldPath": "spec.forProvider.region",
//!             "transforms": [{"type": "map", "map": {"EU": "eu-north-1", "US": "us-east-2"}}]
//!         }]
//!     }]
//! }))
//! .expect("valid input");
//! let xr = json!({"apiVersion": "example.org/v1", "kind": "XBucket", "spec": {"location": "EU"}});
//! let out = compose(&input, &xr, &BTreeMap::new()).expect("composes");
//! assert_eq!(out.resources["bucket"].resource["spec"]["forProvider"]["region"], "eu-north-1");
//! ```
//!
//! Modules, one concept each: [`input`] (wire types), [`validate`], [`fieldpath`],
//! [`transform`] (one module per transform type), [`patch`] (application, merge
//! policies, patch sets), [`readiness`], [`connection`], [`mod@compose`] (the run), and the
//! Go emulation upstream's output depends on: [`gofmt`] (`fmt.Sprintf`) and [`gojson`]
//! (`json.Marshal` and the JSON round trip of patched values).
#![forbid(unsafe_code)]

pub mod compose;
pub mod connection;
pub mod fieldpath;
pub mod gofmt;
pub mod gojson;
pub mod input;
pub mod patch;
pub mod readiness;
pub mod transform;
pub mod validate;

pub use compose::{Composed, DesiredComposed, Error, ObservedComposed, Ready, Request, compose, run};
pub use connection::ConnectionDetails;
