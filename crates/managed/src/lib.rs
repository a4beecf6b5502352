//! The managed-resource reconciler shared by providers (crossplane-runtime's role).
//!
//! This crate starts empty: the reconciler arrives with the providers issue.
#![forbid(unsafe_code)]
