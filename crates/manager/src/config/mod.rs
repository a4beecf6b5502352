//! What a binary is started with: its flags, their defaults and validation, listen addresses, the flags
//! it accepts for compatibility, logging, and its two Kubernetes clients.

pub mod args;
pub mod bind;
pub mod client;
pub mod compat;
pub mod logging;
pub mod settings;
