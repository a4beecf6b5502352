//! The core binary as the fault schedule runs it: `crossplane::cli::main`, exactly what
//! `crates/crossplane/src/main.rs` calls, built in this package so that its tests get its path. It reports
//! the package version; `e2e-crossplane-next` is the second build of a rolling update.
#![forbid(unsafe_code)]

fn main() -> std::process::ExitCode {
    crossplane::cli::main(manager::BinaryInfo {
        name: "crossplane",
        version: env!("CARGO_PKG_VERSION"),
    })
}
