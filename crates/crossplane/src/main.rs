//! `crossplane`: `crossplane core start` and `crossplane rbac start`. Only wiring lives here; see the
//! library's [`crossplane::cli`].
#![forbid(unsafe_code)]

use std::process::ExitCode;

use manager::BinaryInfo;

fn main() -> ExitCode {
    crossplane::cli::main(BinaryInfo {
        name: env!("CARGO_BIN_NAME"),
        version: env!("CARGO_PKG_VERSION"),
    })
}
